//! READ CAPACITY(10) and READ CAPACITY(16).

use super::cdb::{be32, reserved_bits, reserved_zero};
use super::sense::Sense;
use super::{Cmd, Lun};

pub(crate) fn read_capacity_10(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    reserved_bits(c, 1, 0xff)?;
    reserved_zero(c, 6..8)?;
    reserved_bits(c, 8, 0xfe)?;
    let pmi = c[8] & 1 != 0;
    if !pmi && be32(c, 2) != 0 {
        return Err(Sense::invalid_cdb_field(2, Some(7)));
    }
    let last = u32::try_from(lun.blocks() - 1).unwrap_or(u32::MAX);
    let mut d = [0u8; 8];
    d[..4].copy_from_slice(&last.to_be_bytes());
    d[4..].copy_from_slice(&lun.block_size().to_be_bytes());
    cmd.data_in.put(&d, d.len());
    Ok(())
}

pub(crate) fn read_capacity_16(lun: &Lun, cmd: &mut Cmd<'_, '_, '_>) -> Result<(), Sense> {
    let c = cmd.cdb;
    reserved_bits(c, 1, 0xe0)?;
    reserved_bits(c, 14, 0xfe)?;
    let pmi = c[14] & 1 != 0;
    if !pmi && c[2..10].iter().any(|&b| b != 0) {
        return Err(Sense::invalid_cdb_field(2, Some(7)));
    }
    let alloc = be32(c, 10) as usize;
    let mut d = [0u8; 32];
    d[..8].copy_from_slice(&(lun.blocks() - 1).to_be_bytes());
    d[8..12].copy_from_slice(&lun.block_size().to_be_bytes());
    if lun.thin_provisioning() {
        d[14] = 0x80 | 0x40; // LBPME, LBPRZ
    }
    cmd.data_in.put(&d, alloc);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::cdb::*;
    use super::super::testutil::*;
    use super::super::{LunOptions, SenseKey};
    use vhost_blk_storage::StorageSpec;

    fn rc16(alloc: u32) -> Vec<u8> {
        let mut c = cdb(SERVICE_ACTION_IN_16, 16);
        c[1] = SAI_READ_CAPACITY_16;
        c[10..14].copy_from_slice(&alloc.to_be_bytes());
        c
    }

    #[test]
    fn read_capacity_10_and_16_for_both_block_sizes() {
        for bs in [512u32, 4096] {
            let t = one_lun(bs);
            let blocks = (1u64 << 20) / bs as u64;
            let (r, d) = run_in(&t, 0, &cdb(READ_CAPACITY_10, 10), 8);
            assert_good(&r);
            assert_eq!(be32(&d, 0) as u64, blocks - 1);
            assert_eq!(be32(&d, 4), bs);
            let (r, d) = run_in(&t, 0, &rc16(32), 32);
            assert_good(&r);
            assert_eq!(be64(&d, 0), blocks - 1);
            assert_eq!(be32(&d, 8), bs);
            assert_eq!(d[14] & 0x80, 0x80, "LBPME with thin provisioning");
        }
    }

    #[test]
    fn huge_lun_saturates_read_capacity_10() {
        let t = target(vec![lun_with(
            0,
            StorageSpec::Null { size: 4 << 40 },
            LunOptions {
                thin_provisioning: false,
                ..Default::default()
            },
        )]);
        let (_, d) = run_in(&t, 0, &cdb(READ_CAPACITY_10, 10), 8);
        assert_eq!(be32(&d, 0), u32::MAX);
        let (_, d) = run_in(&t, 0, &rc16(32), 32);
        assert_eq!(be64(&d, 0), (4u64 << 40) / 512 - 1);
        assert_eq!(d[14], 0);
    }

    #[test]
    fn read_capacity_16_allocation_and_bad_fields() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &rc16(12), 32);
        assert_good(&r);
        assert_eq!(d.len(), 12);
        let mut c = rc16(32);
        c[1] = 0x11; // unknown service action
        let (r, _) = run_in(&t, 0, &c, 32);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let mut c = cdb(READ_CAPACITY_10, 10);
        c[5] = 1; // LBA without PMI
        let (r, _) = run_in(&t, 0, &c, 8);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }
}
