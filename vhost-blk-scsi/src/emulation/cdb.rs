//! Operation codes and CDB field accessors.

use super::sense::{self, Sense};

pub const TEST_UNIT_READY: u8 = 0x00;
pub const REQUEST_SENSE: u8 = 0x03;
pub const READ_6: u8 = 0x08;
pub const WRITE_6: u8 = 0x0a;
pub const INQUIRY: u8 = 0x12;
pub const MODE_SELECT_6: u8 = 0x15;
pub const MODE_SENSE_6: u8 = 0x1a;
pub const START_STOP_UNIT: u8 = 0x1b;
pub const READ_CAPACITY_10: u8 = 0x25;
pub const READ_10: u8 = 0x28;
pub const WRITE_10: u8 = 0x2a;
pub const VERIFY_10: u8 = 0x2f;
pub const SYNCHRONIZE_CACHE_10: u8 = 0x35;
pub const WRITE_SAME_10: u8 = 0x41;
pub const UNMAP: u8 = 0x42;
pub const MODE_SELECT_10: u8 = 0x55;
pub const MODE_SENSE_10: u8 = 0x5a;
pub const ATA_PASS_THROUGH_16: u8 = 0x85;
pub const READ_16: u8 = 0x88;
pub const WRITE_16: u8 = 0x8a;
pub const VERIFY_16: u8 = 0x8f;
pub const SYNCHRONIZE_CACHE_16: u8 = 0x91;
pub const WRITE_SAME_16: u8 = 0x93;
pub const SERVICE_ACTION_IN_16: u8 = 0x9e;
pub const REPORT_LUNS: u8 = 0xa0;
pub const ATA_PASS_THROUGH_12: u8 = 0xa1;
pub const MAINTENANCE_IN: u8 = 0xa3;
pub const READ_12: u8 = 0xa8;
pub const WRITE_12: u8 = 0xaa;

/// SERVICE ACTION IN(16) service action READ CAPACITY(16).
pub const SAI_READ_CAPACITY_16: u8 = 0x10;

/// CDB length implied by the operation code group, for the groups that define one.
pub fn cdb_len(opcode: u8) -> Option<usize> {
    match opcode >> 5 {
        0 => Some(6),
        1 | 2 => Some(10),
        4 => Some(16),
        5 => Some(12),
        _ => None,
    }
}

/// Checks the CDB is long enough for its operation code and that the CONTROL byte asks for
/// nothing unsupported (NACA, or the obsolete LINK and FLAG bits).
pub fn check_framing(cdb: &[u8]) -> Result<(), Sense> {
    let Some(&op) = cdb.first() else {
        return Err(sense::INVALID_OPCODE);
    };
    if let Some(need) = cdb_len(op) {
        if cdb.len() < need {
            // The CDB ends before its own fields do: point at the first missing byte.
            return Err(Sense::invalid_cdb_field(cdb.len() as u16, None));
        }
        let control = cdb.get(need - 1).copied().unwrap_or(0);
        if control & 0x07 != 0 {
            return Err(Sense::invalid_cdb_field((need - 1) as u16, Some(2)));
        }
    }
    Ok(())
}

/// The longest CDB this target decodes (the 16-byte group).
pub const CDB_MAX: usize = 16;

/// A CDB as the commands read it: its first [`CDB_MAX`] bytes, zero-padded. Commands read
/// fields at constant offsets within their own CDB length, which [`check_framing`] checked, so
/// the padding is never read as a field.
pub type Cdb = [u8; CDB_MAX];

/// The [`Cdb`] of `cdb` (longer CDBs are cut to [`CDB_MAX`] bytes).
pub fn padded(cdb: &[u8]) -> Cdb {
    let mut c = [0u8; CDB_MAX];
    c.iter_mut().zip(cdb).for_each(|(d, s)| *d = *s);
    c
}

/// `N` bytes of `b` at `at`; bytes past the end of `b` read as zero (callers check lengths
/// first: this only keeps a wrong offset from panicking).
fn bytes_at<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    let mut v = [0u8; N];
    let src = b.get(at..).unwrap_or_default();
    v.iter_mut().zip(src).for_each(|(d, s)| *d = *s);
    v
}

pub fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes(bytes_at(b, at))
}

pub fn be24(b: &[u8], at: usize) -> u32 {
    let [x, y, z] = bytes_at(b, at);
    u32::from_be_bytes([0, x, y, z])
}

pub fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes_at(b, at))
}

pub fn be64(b: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes_at(b, at))
}

/// Fails with INVALID FIELD IN CDB if any of `bytes` of the CDB is non-zero.
pub fn reserved_zero(cdb: &[u8], bytes: std::ops::Range<usize>) -> Result<(), Sense> {
    let start = bytes.start;
    let field = cdb.get(bytes).unwrap_or_default();
    match field.iter().position(|&b| b != 0) {
        Some(i) => Err(Sense::invalid_cdb_field((start + i) as u16, Some(7))),
        None => Ok(()),
    }
}

/// Fails with INVALID FIELD IN CDB if any bit of `mask` is set in CDB byte `at`.
pub fn reserved_bits(cdb: &[u8], at: usize, mask: u8) -> Result<(), Sense> {
    let bad = cdb.get(at).copied().unwrap_or(0) & mask;
    if bad != 0 {
        return Err(Sense::invalid_cdb_field(
            at as u16,
            Some(7 - bad.leading_zeros() as u8),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_lengths() {
        assert_eq!(cdb_len(READ_6), Some(6));
        assert_eq!(cdb_len(READ_10), Some(10));
        assert_eq!(cdb_len(MODE_SENSE_10), Some(10));
        assert_eq!(cdb_len(READ_16), Some(16));
        assert_eq!(cdb_len(REPORT_LUNS), Some(12));
        assert_eq!(cdb_len(0x7f), None);
    }

    #[test]
    fn framing_rejects_short_cdbs_and_naca() {
        assert_eq!(check_framing(&[]), Err(sense::INVALID_OPCODE));
        let e = check_framing(&[READ_10, 0, 0]).unwrap_err();
        assert_eq!((e.asc, e.field.unwrap().byte), (0x24, 3));
        assert!(check_framing(&[0u8; 6]).is_ok());
        let mut c = [0u8; 10];
        c[0] = READ_10;
        c[9] = 0x04;
        assert!(check_framing(&c).is_err());
        // A longer buffer (virtio's 32-byte CDB field) is fine.
        let mut long = [0u8; 32];
        long[0] = READ_10;
        assert!(check_framing(&long).is_ok());
    }

    #[test]
    fn reserved_bit_pointer() {
        let e = reserved_bits(&[0, 0x10], 1, 0xf0).unwrap_err();
        assert_eq!(e.field.unwrap().bit, Some(4));
    }
}
