//! INQUIRY: standard data and the VPD pages 0x00, 0x80, 0x83, 0xB0, 0xB1, 0xB2.

use super::cdb::be16;
use super::identity::{DEFAULT_PRODUCT, DEFAULT_REVISION, DEFAULT_VENDOR};
use super::sense::{self, Sense};
use super::{AbsentQualifier, Cmd, Lun, MAX_UNMAP_BLOCKS, MAX_UNMAP_DESCRIPTORS};

/// Peripheral device type: direct access block device.
const PDT_DISK: u8 = 0x00;
/// Length of the standard INQUIRY data we return.
const STD_LEN: usize = 96;
/// VPD pages we support, ascending.
const VPD_PAGES: [u8; 6] = [0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2];
/// Version descriptors: SAM-5, SPC-4, SBC-3 (no version claimed).
const VERSION_DESCRIPTORS: [u16; 3] = [0x00a0, 0x0460, 0x04c0];

pub(crate) fn inquiry(
    lun: Option<&Lun>,
    absent: AbsentQualifier,
    cmd: &mut Cmd<'_, '_, '_>,
) -> Result<(), Sense> {
    let c = cmd.cdb;
    super::cdb::reserved_bits(c, 1, 0xfe)?;
    let evpd = c[1] & 1 != 0;
    let page = c[2];
    let alloc = be16(c, 3) as usize;
    let data = if !evpd {
        if page != 0 {
            return Err(Sense::invalid_cdb_field(2, Some(7)));
        }
        standard(lun, absent)
    } else {
        let lun = lun.ok_or(sense::LUN_NOT_SUPPORTED)?;
        vpd(lun, page).ok_or(Sense::invalid_cdb_field(2, Some(7)))?
    };
    cmd.data_in.put(&data, alloc);
    Ok(())
}

/// `s` left-aligned in `dst`, cut to its length, padded with spaces.
fn pad(dst: &mut [u8], s: &str) {
    let src = s.bytes().chain(std::iter::repeat(b' '));
    dst.iter_mut().zip(src).for_each(|(d, s)| *d = s);
}

/// `v` at byte `at` of `b` (a constant layout: an offset past the end is a bug the tests of
/// the page catch, not something a guest chooses).
fn put_at(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(dst) = b.get_mut(at..).and_then(|d| d.get_mut(..v.len())) {
        dst.copy_from_slice(v);
    }
}

fn standard(lun: Option<&Lun>, absent: AbsentQualifier) -> Vec<u8> {
    let mut d = [0u8; STD_LEN];
    let (vendor, product, revision) = match lun {
        Some(l) => {
            let i = l.identity();
            (i.vendor.as_str(), i.product.as_str(), i.revision.as_str())
        }
        None => (DEFAULT_VENDOR, DEFAULT_PRODUCT, DEFAULT_REVISION),
    };
    d[0] = if lun.is_some() {
        PDT_DISK
    } else {
        absent.byte0()
    };
    d[2] = 0x06; // SPC-4
    d[3] = 0x12; // HISUP, response data format 2
    d[4] = (STD_LEN - 5) as u8;
    d[7] = 0x02; // CMDQUE
    pad(&mut d[8..16], vendor);
    pad(&mut d[16..32], product);
    pad(&mut d[32..36], revision);
    pad(&mut d[36..56], "");
    for (i, v) in VERSION_DESCRIPTORS.iter().enumerate() {
        put_at(&mut d, 58 + 2 * i, &v.to_be_bytes());
    }
    d.to_vec()
}

/// A VPD page with its 4-byte header; `None` for pages we do not have.
fn vpd(lun: &Lun, page: u8) -> Option<Vec<u8>> {
    let body = match page {
        0x00 => VPD_PAGES.to_vec(),
        0x80 => lun.identity().serial.as_bytes().to_vec(),
        0x83 => device_identification(lun),
        0xb0 => block_limits(lun),
        0xb1 => {
            let mut b = [0u8; 0x3c];
            b[1] = 0x01; // medium rotation rate 1: non-rotating
            b.to_vec()
        }
        0xb2 => {
            let mut b = [0u8; 4];
            if lun.thin_provisioning() {
                b[1] = 0x80 | 0x40 | 0x20 | 0x04; // LBPU, LBPWS, LBPWS10, LBPRZ=001b
                b[2] = 0x02; // provisioning type: thin
            }
            b.to_vec()
        }
        _ => return None,
    };
    let mut d = vec![PDT_DISK, page];
    d.extend_from_slice(&(body.len() as u16).to_be_bytes());
    d.extend_from_slice(&body);
    Some(d)
}

fn device_identification(lun: &Lun) -> Vec<u8> {
    let id = lun.identity();
    let mut d = Vec::with_capacity(96);
    // NAA designator: binary code set, LU association, type 3.
    d.extend_from_slice(&[0x01, 0x03, 0x00, 0x08]);
    d.extend_from_slice(&id.wwn.to_be_bytes());
    // T10 vendor ID designator: ASCII, LU association, type 1: vendor + product + serial.
    let mut t10 = [0u8; 24];
    pad(&mut t10[..8], &id.vendor);
    pad(&mut t10[8..], &id.product);
    let len = t10.len() + id.serial.len();
    d.extend_from_slice(&[0x02, 0x01, 0x00, len as u8]);
    d.extend_from_slice(&t10);
    d.extend_from_slice(id.serial.as_bytes());
    d
}

fn block_limits(lun: &Lun) -> Vec<u8> {
    let per_4k = (4096 / lun.block_size()) as u16;
    let mut b = vec![0u8; 0x3c];
    // Offsets below are from the page start; the body starts at byte 4.
    let mut put = |at: usize, v: &[u8]| put_at(&mut b, at - 4, v);
    put(4, &[0x01]); // WSNZ: WRITE SAME with 0 blocks is an error
    put(6, &per_4k.to_be_bytes()); // optimal transfer length granularity
    put(8, &lun.max_transfer_blocks().to_be_bytes());
    put(12, &((1u32 << 20) / lun.block_size()).to_be_bytes()); // optimal transfer length
    if lun.thin_provisioning() {
        put(20, &MAX_UNMAP_BLOCKS.to_be_bytes());
        put(24, &MAX_UNMAP_DESCRIPTORS.to_be_bytes());
        put(28, &(per_4k as u32).to_be_bytes()); // optimal unmap granularity
    }
    put(36, &lun.max_write_same_blocks().to_be_bytes());
    b
}

#[cfg(test)]
mod tests {
    use super::super::cdb::{be32, be64, INQUIRY};
    use super::super::testutil::*;
    use super::super::{LunOptions, SenseKey};
    use vhost_blk_storage::StorageSpec;

    fn inq(evpd: bool, page: u8, alloc: u16) -> Vec<u8> {
        let mut c = cdb(INQUIRY, 6);
        c[1] = evpd as u8;
        c[2] = page;
        c[3..5].copy_from_slice(&alloc.to_be_bytes());
        c
    }

    #[test]
    fn standard_inquiry_fields() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &inq(false, 0, 255), 255);
        assert_good(&r);
        assert_eq!(d.len(), 96);
        assert_eq!(r.residual, 255 - 96);
        assert_eq!(d[0], 0x00);
        assert_eq!(d[2], 0x06);
        assert_eq!(d[3] & 0x0f, 2);
        assert_eq!(d[4] as usize, d.len() - 5);
        assert_eq!(d[7] & 0x02, 0x02);
        assert_eq!(&d[8..16], b"VHOSTBLK");
        assert_eq!(&d[16..32], b"EMUL RAID VD    ");
        assert_eq!(&d[32..36], b"0100");
        assert_eq!(&d[58..60], &[0x00, 0xa0]);
    }

    #[test]
    fn allocation_length_truncates() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &inq(false, 0, 5), 36);
        assert_good(&r);
        assert_eq!(d.len(), 5);
        assert_eq!(d[4], 91);
        assert!(!r.overrun);
        assert_eq!(r.residual, 31);
        // Allocation length 0: nothing transferred, still GOOD.
        let (r, d) = run_in(&t, 0, &inq(false, 0, 0), 36);
        assert_good(&r);
        assert!(d.is_empty());
    }

    #[test]
    fn buffer_smaller_than_allocation_sets_overrun() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &inq(false, 0, 96), 20);
        assert_good(&r);
        assert_eq!(d.len(), 20);
        assert!(r.overrun);
        assert_eq!(r.residual, 0);
    }

    #[test]
    fn absent_lun_has_qualifier_011b() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 7, &inq(false, 0, 36), 36);
        assert_good(&r);
        assert_eq!(d[0], 0x7f);
        assert_eq!(d.len(), 36);
        let (r, _) = run_in(&t, 7, &inq(true, 0x80, 36), 36);
        assert_check(&r, SenseKey::IllegalRequest, 0x25, 0x00);
    }

    #[test]
    fn invalid_fields() {
        let t = one_lun(512);
        let (r, _) = run_in(&t, 0, &inq(false, 0x80, 36), 36);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        assert_eq!(r.sense[15] & 0xc0, 0xc0);
        assert_eq!(r.sense[17], 2);
        let (r, _) = run_in(&t, 0, &inq(true, 0x99, 36), 36);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
        let mut c = inq(false, 0, 36);
        c[1] = 0x02; // CMDDT
        let (r, _) = run_in(&t, 0, &c, 36);
        assert_check(&r, SenseKey::IllegalRequest, 0x24, 0x00);
    }

    #[test]
    fn vpd_supported_pages_and_serial() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &inq(true, 0x00, 255), 255);
        assert_good(&r);
        assert_eq!(&d[..4], &[0, 0, 0, 6]);
        assert_eq!(&d[4..], &[0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2]);
        let (_, d) = run_in(&t, 0, &inq(true, 0x80, 255), 255);
        assert_eq!(d[1], 0x80);
        assert_eq!(d[3] as usize, d.len() - 4);
        assert_eq!(&d[4..], b"VBLK000000");
    }

    #[test]
    fn vpd_device_identification() {
        let t = one_lun(512);
        let (r, d) = run_in(&t, 0, &inq(true, 0x83, 255), 255);
        assert_good(&r);
        assert_eq!(d[1], 0x83);
        assert_eq!(u16::from_be_bytes([d[2], d[3]]) as usize, d.len() - 4);
        // First designator: NAA, binary, 8 bytes holding the WWN.
        assert_eq!(&d[4..8], &[0x01, 0x03, 0x00, 0x08]);
        let wwn = be64(&d, 8);
        assert_eq!(wwn, t.lun(0).unwrap().identity().wwn);
        assert_eq!(wwn >> 60, 3);
        // Second: T10 vendor ID, ASCII.
        assert_eq!(&d[16..18], &[0x02, 0x01]);
        let len = d[19] as usize;
        assert_eq!(20 + len, d.len());
        assert_eq!(&d[20..28], b"VHOSTBLK");
        assert!(d[20..].ends_with(b"VBLK000000"));
    }

    #[test]
    fn vpd_block_limits_characteristics_provisioning() {
        let t = one_lun(512);
        let (_, d) = run_in(&t, 0, &inq(true, 0xb0, 255), 255);
        assert_eq!(d.len(), 64);
        assert_eq!(&d[1..4], &[0xb0, 0, 0x3c]);
        assert_eq!(d[4] & 1, 1);
        assert_eq!(u16::from_be_bytes([d[6], d[7]]), 8);
        assert_eq!(be32(&d, 8), (8 << 20) / 512);
        assert_eq!(be32(&d, 20), super::MAX_UNMAP_BLOCKS);
        assert_eq!(be32(&d, 24), super::MAX_UNMAP_DESCRIPTORS);
        assert_eq!(be64(&d, 36), (1 << 31) / 512);
        let (_, d) = run_in(&t, 0, &inq(true, 0xb1, 255), 255);
        assert_eq!((d[1], d[4], d[5]), (0xb1, 0, 1));
        let (_, d) = run_in(&t, 0, &inq(true, 0xb2, 255), 255);
        assert_eq!(d[1], 0xb2);
        assert_eq!(d[5] & 0xe0, 0xe0);
        assert_eq!(d[6] & 0x07, 2);

        let thick = target(vec![lun_with(
            0,
            StorageSpec::Null { size: 1 << 20 },
            LunOptions {
                thin_provisioning: false,
                block_size: 4096,
                ..Default::default()
            },
        )]);
        let (_, d) = run_in(&thick, 0, &inq(true, 0xb2, 255), 255);
        assert_eq!(d[5], 0);
        let (_, d) = run_in(&thick, 0, &inq(true, 0xb0, 255), 255);
        assert_eq!(be32(&d, 20), 0);
        assert_eq!(be32(&d, 8), (8 << 20) / 4096);
        assert_eq!(u16::from_be_bytes([d[6], d[7]]), 1);
    }
}
