//! Logical block provisioning: UNMAP and WRITE SAME(10/16) (with the UNMAP and NDOB bits).

use super::cdb::*;
use super::io::gather;
use super::sense::{self, Sense};
use super::{storage_sense, Cmd, Lun, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS};

/// Size of the pattern buffer WRITE SAME writes with.
const PATTERN_CHUNK: u64 = 1 << 20;

pub(crate) fn unmap(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    if c[1] & 0x01 != 0 {
        return Err(Sense::invalid_cdb_field(1, Some(0))); // ANCHOR: not supported
    }
    reserved_bits(c, 1, 0xfe)?;
    reserved_zero(c, 2..6)?;
    let len = be16(c, 7) as usize;
    if lun.read_only() {
        return Err(sense::WRITE_PROTECTED);
    }
    if len == 0 {
        return Ok(());
    }
    if len < 8 {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    }
    let n = cmd.need_out(len as u64, 7)?;
    let mut p = vec![0u8; n];
    gather(cmd.data_out, 0, &mut p);
    let bd_len = be16(&p, 2) as usize;
    if 8 + bd_len > n {
        return Err(sense::PARAMETER_LIST_LENGTH_ERROR);
    }
    // An incomplete last descriptor is ignored (SBC-4).
    let count = bd_len / 16;
    if count > MAX_UNMAP_DESCRIPTORS as usize {
        return Err(Sense::invalid_param_field(2, None));
    }
    let mut ranges = Vec::with_capacity(count);
    for i in 0..count {
        let at = 8 + 16 * i;
        let (lba, blocks) = (be64(&p, at), be32(&p, at + 8));
        if blocks > MAX_UNMAP_BLOCKS {
            return Err(Sense::invalid_param_field((at + 8) as u16, None));
        }
        ranges.push(lun.byte_range(lba, blocks as u64)?);
    }
    for (off, len) in ranges {
        if len > 0 {
            lun.storage()
                .discard(off, len)
                .map_err(|e| storage_sense(e, true))?;
        }
    }
    cmd.out_used = n;
    Ok(())
}

pub(crate) fn write_same(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    let sixteen = c[0] == WRITE_SAME_16;
    let flags = c[1];
    if flags & 0xe0 != 0 {
        return Err(Sense::invalid_cdb_field(1, Some(7))); // WRPROTECT
    }
    if flags & 0x10 != 0 {
        return Err(Sense::invalid_cdb_field(1, Some(4))); // ANCHOR
    }
    // PBDATA/LBDATA (obsolete), and bit 0 unless it is WRITE SAME(16)'s NDOB.
    reserved_bits(c, 1, if sixteen { 0x06 } else { 0x07 })?;
    let unmap = flags & 0x08 != 0;
    let ndob = sixteen && flags & 0x01 != 0;
    let (lba, blocks, len_field) = if sixteen {
        (be64(c, 2), be32(c, 10) as u64, 10)
    } else {
        (be32(c, 2) as u64, be16(c, 7) as u64, 7)
    };
    if blocks == 0 || blocks > lun.max_write_same_blocks() {
        return Err(Sense::invalid_cdb_field(len_field, None)); // WSNZ is set
    }
    let (off, len) = lun.byte_range(lba, blocks)?;
    if lun.read_only() {
        return Err(sense::WRITE_PROTECTED);
    }
    let bs = lun.block_size() as usize;
    let mut block = vec![0u8; bs];
    if !ndob {
        let n = cmd.need_out(bs as u64, len_field)?;
        gather(cmd.data_out, 0, &mut block);
        cmd.out_used = n;
    }
    let st = lun.storage();
    if block.iter().all(|&b| b == 0) {
        st.write_zeroes(off, len, unmap && lun.thin_provisioning())
            .map_err(|e| storage_sense(e, true))?;
    } else {
        let chunk = len.min(PATTERN_CHUNK) as usize;
        let mut pattern: Vec<u8> = block.iter().copied().cycle().take(chunk).collect();
        let mut pos = 0u64;
        while pos < len {
            // Shorter than `chunk` only for the last write.
            pattern.truncate((len - pos).min(chunk as u64) as usize);
            let k = pattern.len();
            st.write_at(&pattern, off + pos)
                .map_err(|e| storage_sense(e, true))?;
            pos += k as u64;
        }
    }
    if !lun.write_cache() {
        st.flush().map_err(|e| storage_sense(e, true))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::testutil::*;
    use super::super::{LunOptions, SenseKey};
    use super::*;
    use vhost_blk_storage::StorageSpec;

    fn read(t: &super::super::Target, lba: u64, blocks: u16) -> Vec<u8> {
        let mut c = cdb(READ_10, 10);
        c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
        c[7..9].copy_from_slice(&blocks.to_be_bytes());
        let (r, d) = run_in(t, 0, &c, blocks as usize * 512);
        assert_good(&r);
        d
    }

    fn fill(t: &super::super::Target, lba: u64, blocks: u16, byte: u8) {
        let mut c = cdb(WRITE_10, 10);
        c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
        c[7..9].copy_from_slice(&blocks.to_be_bytes());
        assert_good(&run_out(t, 0, &c, &vec![byte; blocks as usize * 512]));
    }

    fn unmap_cdb(len: u16) -> Vec<u8> {
        let mut c = cdb(UNMAP, 10);
        c[7..9].copy_from_slice(&len.to_be_bytes());
        c
    }

    fn unmap_list(descs: &[(u64, u32)]) -> Vec<u8> {
        let mut p = vec![0u8; 8];
        p[0..2].copy_from_slice(&((6 + 16 * descs.len()) as u16).to_be_bytes());
        p[2..4].copy_from_slice(&((16 * descs.len()) as u16).to_be_bytes());
        for &(lba, n) in descs {
            p.extend_from_slice(&lba.to_be_bytes());
            p.extend_from_slice(&n.to_be_bytes());
            p.extend_from_slice(&[0; 4]);
        }
        p
    }

    #[test]
    fn unmap_zeroes_the_ranges() {
        let t = one_lun(512);
        fill(&t, 0, 16, 0x5a);
        let p = unmap_list(&[(2, 3), (10, 1)]);
        assert_good(&run_out(&t, 0, &unmap_cdb(p.len() as u16), &p));
        let d = read(&t, 0, 16);
        for blk in 0..16 {
            let zero = matches!(blk, 2..=4 | 10);
            let b = &d[blk * 512..(blk + 1) * 512];
            assert!(
                b.iter().all(|&x| x == if zero { 0 } else { 0x5a }),
                "block {blk}"
            );
        }
    }

    #[test]
    fn unmap_malformed_lists() {
        let t = one_lun(512);
        // Length 0: nothing to do.
        assert_good(&run_out(&t, 0, &unmap_cdb(0), &[]));
        // 1..=7: parameter list length error.
        let r = run_out(&t, 0, &unmap_cdb(4), &[0; 4]);
        assert_check(&r, SenseKey::IllegalRequest, 0x1a, 0x00);
        // Descriptor length beyond the list.
        let mut p = unmap_list(&[(0, 1)]);
        p[2..4].copy_from_slice(&32u16.to_be_bytes());
        let r = run_out(&t, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x1a, 0x00);
        // A partial trailing descriptor is ignored.
        let mut p = unmap_list(&[(0, 1)]);
        p[2..4].copy_from_slice(&20u16.to_be_bytes());
        p.extend_from_slice(&[0xff; 4]);
        assert_good(&run_out(&t, 0, &unmap_cdb(p.len() as u16), &p));
        // Out-of-range descriptor: nothing is unmapped.
        fill(&t, 0, 1, 0x11);
        let p = unmap_list(&[(0, 1), (2047, 2)]);
        let r = run_out(&t, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        assert_eq!(read(&t, 0, 1)[0], 0x11);
        let p = unmap_list(&[(u64::MAX, 2)]);
        let r = run_out(&t, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        // Too many blocks in one descriptor, too many descriptors.
        let p = unmap_list(&[(0, MAX_UNMAP_BLOCKS + 1)]);
        let r = run_out(&t, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        let p = unmap_list(&vec![(0, 1); MAX_UNMAP_DESCRIPTORS as usize + 1]);
        let r = run_out(&t, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x26, 0x00);
        // List length larger than the data-out buffer.
        let p = unmap_list(&[(0, 1)]);
        let r = run_out(&t, 0, &unmap_cdb(64), &p);
        assert!(r.overrun);
        // ANCHOR.
        let mut c = unmap_cdb(p.len() as u16);
        c[1] = 1;
        assert_check(
            &run_out(&t, 0, &c, &p),
            SenseKey::IllegalRequest,
            0x24,
            0x00,
        );
    }

    #[test]
    fn unmap_needs_thin_provisioning_and_write_access() {
        let p = unmap_list(&[(0, 1)]);
        let thick = target(vec![lun_with(
            0,
            StorageSpec::Mem { size: 1 << 20 },
            LunOptions {
                thin_provisioning: false,
                ..Default::default()
            },
        )]);
        let r = run_out(&thick, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::IllegalRequest, 0x20, 0x00);
        let ro = target(vec![lun_with(
            0,
            StorageSpec::Mem { size: 1 << 20 },
            LunOptions {
                read_only: true,
                ..Default::default()
            },
        )]);
        let r = run_out(&ro, 0, &unmap_cdb(p.len() as u16), &p);
        assert_check(&r, SenseKey::DataProtect, 0x27, 0x00);
    }

    fn ws(sixteen: bool, flags: u8, lba: u64, blocks: u32) -> Vec<u8> {
        if sixteen {
            let mut c = cdb(WRITE_SAME_16, 16);
            c[1] = flags;
            c[2..10].copy_from_slice(&lba.to_be_bytes());
            c[10..14].copy_from_slice(&blocks.to_be_bytes());
            c
        } else {
            let mut c = cdb(WRITE_SAME_10, 10);
            c[1] = flags;
            c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
            c[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
            c
        }
    }

    #[test]
    fn write_same_pattern_and_unmap() {
        let t = one_lun(512);
        let block: Vec<u8> = (0..512).map(|i| i as u8).collect();
        assert_good(&run_out(&t, 0, &ws(false, 0, 4, 3), &block));
        let d = read(&t, 3, 5);
        assert!(d[..512].iter().all(|&b| b == 0));
        for i in 1..4 {
            assert_eq!(&d[i * 512..(i + 1) * 512], &block[..]);
        }
        assert!(d[2048..].iter().all(|&b| b == 0));
        // UNMAP bit with a zero block deallocates: reads back zeros.
        let r = run_out(&t, 0, &ws(true, 0x08, 4, 2), &[0; 512]);
        assert_good(&r);
        let d = read(&t, 4, 3);
        assert!(d[..1024].iter().all(|&b| b == 0));
        assert_eq!(&d[1024..], &block[..]);
        // NDOB: no data-out buffer at all.
        fill(&t, 20, 2, 0x33);
        assert_good(&run_in(&t, 0, &ws(true, 0x09, 20, 2), 0).0);
        assert!(read(&t, 20, 2).iter().all(|&b| b == 0));
    }

    #[test]
    fn write_same_bad_requests() {
        let t = one_lun(512);
        let blk = [1u8; 512];
        let r = run_out(&t, 0, &ws(false, 0, 0, 0), &blk);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let r = run_out(&t, 0, &ws(true, 0, 2040, 9), &blk);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        let r = run_out(&t, 0, &ws(true, 0, u64::MAX, 1), &blk);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        let r = run_out(&t, 0, &ws(false, 0x01, 0, 1), &blk);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let r = run_out(&t, 0, &ws(false, 0x10, 0, 1), &blk);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let r = run_out(&t, 0, &ws(false, 0, 0, 1), &blk[..100]);
        assert!(r.overrun);
        assert_eq!(r.status, sense::CHECK_CONDITION);
    }
}
