//! READ/WRITE(6/10/12/16), VERIFY(10/16) and SYNCHRONIZE CACHE(10/16).

use super::cdb::*;
use super::io::{gather, prefix};
use super::sense::{self, Sense};
use super::{storage_sense, Cmd, Lun};

/// Chunk size for VERIFY's medium compare.
const COMPARE_CHUNK: usize = 64 << 10;

/// The addressing fields of a READ/WRITE/VERIFY CDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Addr {
    pub lba: u64,
    pub blocks: u64,
    /// Byte 1 (protection and caching flags); 0 for the 6-byte forms.
    pub flags: u8,
    /// CDB offset of the transfer length field.
    pub len_field: u16,
}

/// Decodes LBA and transfer length by CDB size (the CDB length was checked already).
pub(crate) fn addr(c: &Cdb) -> Result<Addr, Sense> {
    Ok(match cdb_len(c[0]) {
        Some(6) => {
            reserved_bits(c, 1, 0xe0)?;
            let blocks = match c[4] {
                0 => 256,
                n => n as u64,
            };
            Addr {
                lba: (be24(c, 1) & 0x1f_ffff) as u64,
                blocks,
                flags: 0,
                len_field: 4,
            }
        }
        Some(10) => Addr {
            lba: be32(c, 2) as u64,
            blocks: be16(c, 7) as u64,
            flags: c[1],
            len_field: 7,
        },
        Some(12) => Addr {
            lba: be32(c, 2) as u64,
            blocks: be32(c, 6) as u64,
            flags: c[1],
            len_field: 6,
        },
        _ => Addr {
            lba: be64(c, 2),
            blocks: be32(c, 10) as u64,
            flags: c[1],
            len_field: 10,
        },
    })
}

/// Common checks: no protection information, transfer length within limits, range.
fn checked(lun: &Lun, a: &Addr, max_blocks: u64) -> Result<(u64, u64), Sense> {
    if a.flags & 0xe0 != 0 {
        // RDPROTECT/WRPROTECT/VRPROTECT: no protection information here.
        return Err(Sense::invalid_cdb_field(1, Some(7)));
    }
    if a.blocks > max_blocks {
        return Err(Sense::invalid_cdb_field(a.len_field, None));
    }
    lun.byte_range(a.lba, a.blocks)
}

pub(crate) fn read(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let a = addr(cmd.cdb)?;
    let (off, len) = checked(lun, &a, lun.max_transfer_blocks() as u64)?;
    let n = cmd.need_in(len, a.len_field)?;
    if n > 0 {
        cmd.data_in
            .read_storage(lun.storage(), off, n)
            .map_err(|e| storage_sense(e, false))?;
    }
    Ok(())
}

pub(crate) fn write(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let a = addr(cmd.cdb)?;
    let (off, len) = checked(lun, &a, lun.max_transfer_blocks() as u64)?;
    if lun.read_only() {
        return Err(sense::WRITE_PROTECTED);
    }
    let n = cmd.need_out(len, a.len_field)?;
    if n > 0 {
        let res = if n == cmd.out_len {
            lun.storage().write_vectored_at(cmd.data_out, off)
        } else {
            lun.storage()
                .write_vectored_at(&prefix(cmd.data_out, n), off)
        };
        res.map_err(|e| storage_sense(e, true))?;
        let fua = a.flags & 0x08 != 0;
        if fua || !lun.write_cache() {
            lun.storage().flush().map_err(|e| storage_sense(e, true))?;
        }
    }
    cmd.out_used = n;
    Ok(())
}

pub(crate) fn verify(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let a = addr(cmd.cdb)?;
    let bytchk = (a.flags >> 1) & 0x03;
    let max = match bytchk {
        0 => u64::MAX,
        1 | 3 => lun.max_transfer_blocks() as u64,
        _ => return Err(Sense::invalid_cdb_field(1, Some(2))),
    };
    let (off, len) = checked(lun, &a, max)?;
    let bs = lun.block_size() as usize;
    match bytchk {
        0 => Ok(()),
        1 => {
            let n = cmd.need_out(len, a.len_field)?;
            compare(lun, off, n, |pos, dst| gather(cmd.data_out, pos, dst))?;
            cmd.out_used = n;
            Ok(())
        }
        _ => {
            let need = if len == 0 { 0 } else { bs as u64 };
            let k = cmd.need_out(need, a.len_field)?;
            let mut block = vec![0u8; k];
            gather(cmd.data_out, 0, &mut block);
            compare(lun, off, len as usize, |pos, dst| {
                let src = block.iter().cycle().skip(pos % bs);
                dst.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
                dst.len()
            })?;
            cmd.out_used = k;
            Ok(())
        }
    }
}

/// Compares `len` bytes of the medium at `off` with what `expected(pos, buf)` fills in.
fn compare(
    lun: &Lun,
    off: u64,
    len: usize,
    mut expected: impl FnMut(usize, &mut [u8]) -> usize,
) -> Result<(), Sense> {
    let chunk = len.min(COMPARE_CHUNK);
    let (mut medium, mut want) = (vec![0u8; chunk], vec![0u8; chunk]);
    let mut pos = 0;
    while pos < len {
        // Shorter than `chunk` only for the last piece.
        let k = (len - pos).min(chunk);
        medium.truncate(k);
        want.truncate(k);
        lun.storage()
            .read_at(&mut medium, off + pos as u64)
            .map_err(|e| storage_sense(e, false))?;
        expected(pos, &mut want);
        if medium != want {
            return Err(sense::MISCOMPARE_DURING_VERIFY);
        }
        pos += k;
    }
    Ok(())
}

pub(crate) fn synchronize_cache(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    reserved_bits(c, 1, 0xf9)?;
    let (lba, blocks) = if c[0] == SYNCHRONIZE_CACHE_10 {
        (be32(c, 2) as u64, be16(c, 7) as u64)
    } else {
        (be64(c, 2), be32(c, 10) as u64)
    };
    if blocks == 0 {
        // Zero blocks means "to the end of the medium".
        if lba >= lun.blocks() {
            return Err(sense::LBA_OUT_OF_RANGE);
        }
    } else {
        lun.byte_range(lba, blocks)?;
    }
    lun.storage().flush().map_err(|e| storage_sense(e, true))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::testutil::*;
    use super::super::{LunOptions, SenseKey};
    use super::*;
    use vhost_blk_storage::IoBuf;
    use vhost_blk_storage::StorageSpec;

    /// A READ or WRITE CDB of the given form (6, 10, 12 or 16).
    pub(crate) fn rw_cdb(write: bool, form: usize, lba: u64, blocks: u32) -> Vec<u8> {
        let op = match (write, form) {
            (false, 6) => READ_6,
            (true, 6) => WRITE_6,
            (false, 10) => READ_10,
            (true, 10) => WRITE_10,
            (false, 12) => READ_12,
            (true, 12) => WRITE_12,
            (false, _) => READ_16,
            (true, _) => WRITE_16,
        };
        let mut c = cdb(op, form);
        match form {
            6 => {
                c[1..4].copy_from_slice(&(lba as u32).to_be_bytes()[1..]);
                c[4] = blocks as u8;
            }
            10 => {
                c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
                c[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
            }
            12 => {
                c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
                c[6..10].copy_from_slice(&blocks.to_be_bytes());
            }
            _ => {
                c[2..10].copy_from_slice(&lba.to_be_bytes());
                c[10..14].copy_from_slice(&blocks.to_be_bytes());
            }
        }
        c
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn round_trips_in_every_form_and_block_size() {
        for bs in [512usize, 4096] {
            let t = one_lun(bs as u32);
            for (i, form) in [6usize, 10, 12, 16].into_iter().enumerate() {
                let lba = 3 + i as u64 * 4;
                let data = pattern(2 * bs, i as u8);
                let r = run_out(&t, 0, &rw_cdb(true, form, lba, 2), &data);
                assert_good(&r);
                assert_eq!(r.residual, 0);
                let (r, back) = run_in(&t, 0, &rw_cdb(false, form, lba, 2), 2 * bs);
                assert_good(&r);
                assert_eq!(back, data, "form {form} bs {bs}");
            }
            // Data written with one form reads back with another, at the right place.
            let (_, back) = run_in(&t, 0, &rw_cdb(false, 16, 4, 1), bs);
            assert_eq!(back, pattern(2 * bs, 0)[bs..]);
        }
    }

    #[test]
    fn scattered_buffers() {
        let t = one_lun(512);
        let data = pattern(1024, 9);
        let mut out = data.clone();
        let (a, b) = out.split_at_mut(100);
        let r = t.execute(
            0,
            &rw_cdb(true, 10, 1, 2),
            &[IoBuf::from(a), IoBuf::from(b)],
            &[],
        );
        assert_good(&r);
        let mut x = vec![0u8; 700];
        let mut y = vec![0u8; 324];
        let r = t.execute(
            0,
            &rw_cdb(false, 10, 1, 2),
            &[],
            &[IoBuf::from(&mut x[..]), IoBuf::from(&mut y[..])],
        );
        assert_good(&r);
        assert_eq!(r.data_in_len, 1024);
        assert_eq!([x, y].concat(), data);
    }

    #[test]
    fn read_6_zero_length_means_256_blocks() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &rw_cdb(false, 6, 0, 0), 256 * 512);
        assert_good(&r);
        assert_eq!(d.len(), 256 * 512);
        // READ(10) with length 0 transfers nothing and is not an error.
        let (r, d) = run_in(&t, 0, &rw_cdb(false, 10, 0, 0), 512);
        assert_good(&r);
        assert!(d.is_empty());
        assert_eq!(r.residual, 512);
    }

    #[test]
    fn out_of_range_and_overflow() {
        let t = one_lun(512); // 2048 blocks
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 2047, 2), 1024);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 2047, 1), 512);
        assert_good(&r);
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 16, u64::MAX, 2), 1024);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        let r = run_out(&t, 0, &rw_cdb(true, 16, u64::MAX - 1, 8), &[0; 4096]);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 2048, 0), 0);
        assert_good(&r);
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 2049, 0), 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
    }

    #[test]
    fn transfer_length_versus_buffers() {
        let t = one_lun(512);
        // Buffer larger than the transfer: residual.
        let (r, d) = run_in(&t, 0, &rw_cdb(false, 10, 0, 1), 2048);
        assert_good(&r);
        assert_eq!((d.len(), r.residual, r.overrun), (512, 1536, false));
        // Buffer smaller: overrun, nothing transferred.
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 0, 4), 1000);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        assert!(r.overrun);
        assert_eq!(r.residual, 1000);
        // Write with too little data-out: overrun and the medium is untouched.
        let r = run_out(&t, 0, &rw_cdb(true, 10, 0, 2), &[0xab; 600]);
        assert!(r.overrun);
        assert_eq!(r.status, sense::CHECK_CONDITION);
        let (_, d) = run_in(&t, 0, &rw_cdb(false, 10, 0, 2), 1024);
        assert!(d.iter().all(|&b| b == 0));
        // Write with extra data-out: residual.
        let r = run_out(&t, 0, &rw_cdb(true, 10, 0, 1), &[0xcd; 700]);
        assert_good(&r);
        assert_eq!(r.residual, 188);
        // Transfer longer than the advertised maximum.
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 16, 0, 1 << 20), 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        assert_eq!(r.sense[17], 10);
    }

    #[test]
    fn protection_bits_rejected() {
        let t = one_lun(512);
        let mut c = rw_cdb(false, 10, 0, 1);
        c[1] = 0x20;
        let (r, _) = run_in(&t, 0, &c, 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let mut c = rw_cdb(false, 6, 0, 1);
        c[1] = 0x20; // reserved in READ(6)
        let (r, _) = run_in(&t, 0, &c, 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }

    #[test]
    fn short_cdb_is_rejected() {
        let t = one_lun(512);
        let (r, _) = run_in(&t, 0, &[READ_10, 0, 0], 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let (r, _) = run_in(&t, 0, &[READ_16; 10], 512);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }

    #[test]
    fn read_only_lun_refuses_writes() {
        let t = target(vec![lun_with(
            0,
            StorageSpec::Mem { size: 1 << 20 },
            LunOptions {
                read_only: true,
                ..Default::default()
            },
        )]);
        let r = run_out(&t, 0, &rw_cdb(true, 10, 0, 1), &[1; 512]);
        assert_check(&r, SenseKey::DataProtect, 0x27, 0x00);
        let (r, _) = run_in(&t, 0, &rw_cdb(false, 10, 0, 1), 512);
        assert_good(&r);
    }

    #[test]
    fn fua_and_write_through_flush() {
        let t = target(vec![lun_with(
            0,
            StorageSpec::Mem { size: 1 << 20 },
            LunOptions {
                write_cache: false,
                ..Default::default()
            },
        )]);
        let mut c = rw_cdb(true, 10, 0, 1);
        c[1] = 0x08;
        assert_good(&run_out(&t, 0, &c, &[7; 512]));
        assert_good(&run_out(&t, 0, &rw_cdb(true, 16, 1, 1), &[8; 512]));
        let (_, d) = run_in(&t, 0, &rw_cdb(false, 10, 0, 2), 1024);
        assert_eq!((d[0], d[512]), (7, 8));
    }

    fn verify_cdb(form: usize, bytchk: u8, lba: u64, blocks: u32) -> Vec<u8> {
        let mut c = rw_cdb(false, form, lba, blocks);
        c[0] = if form == 10 { VERIFY_10 } else { VERIFY_16 };
        c[1] = bytchk << 1;
        c
    }

    #[test]
    fn verify_bytchk_modes() {
        let t = one_lun(512);
        let data = pattern(1024, 1);
        assert_good(&run_out(&t, 0, &rw_cdb(true, 10, 10, 2), &data));
        // BYTCHK 0: range check only.
        assert_good(&run_in(&t, 0, &verify_cdb(10, 0, 10, 2), 0).0);
        let (r, _) = run_in(&t, 0, &verify_cdb(16, 0, 2047, 2), 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x21, 0x00);
        // BYTCHK 1: compare with data-out.
        assert_good(&run_out(&t, 0, &verify_cdb(10, 1, 10, 2), &data));
        let mut bad = data.clone();
        bad[700] ^= 1;
        let r = run_out(&t, 0, &verify_cdb(16, 1, 10, 2), &bad);
        assert_check(&r, SenseKey::Miscompare, 0x1d, 0x00);
        let r = run_out(&t, 0, &verify_cdb(10, 1, 10, 2), &data[..512]);
        assert!(r.overrun);
        // BYTCHK 3: one block compared against each.
        let blk = pattern(512, 5);
        for lba in 20..24 {
            assert_good(&run_out(&t, 0, &rw_cdb(true, 10, lba, 1), &blk));
        }
        assert_good(&run_out(&t, 0, &verify_cdb(10, 3, 20, 4), &blk));
        let r = run_out(&t, 0, &verify_cdb(10, 3, 19, 4), &blk);
        assert_check(&r, SenseKey::Miscompare, 0x1d, 0x00);
        // BYTCHK 2 is reserved.
        let (r, _) = run_in(&t, 0, &verify_cdb(10, 2, 0, 1), 0);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }

    #[test]
    fn synchronize_cache_forms() {
        let t = one_lun(512);
        let mut c = cdb(SYNCHRONIZE_CACHE_10, 10);
        assert_good(&run_in(&t, 0, &c, 0).0);
        c[2..6].copy_from_slice(&2047u32.to_be_bytes());
        c[7..9].copy_from_slice(&2u16.to_be_bytes());
        assert_check(
            &run_in(&t, 0, &c, 0).0,
            SenseKey::IllegalRequest,
            0x21,
            0x00,
        );
        let mut c = cdb(SYNCHRONIZE_CACHE_16, 16);
        c[1] = 0x02; // IMMED
        c[2..10].copy_from_slice(&5u64.to_be_bytes());
        c[10..14].copy_from_slice(&100u32.to_be_bytes());
        assert_good(&run_in(&t, 0, &c, 0).0);
        c[2..10].copy_from_slice(&4096u64.to_be_bytes());
        c[10..14].fill(0);
        assert_check(
            &run_in(&t, 0, &c, 0).0,
            SenseKey::IllegalRequest,
            0x21,
            0x00,
        );
    }
}
