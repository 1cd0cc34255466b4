//! What a logical unit says it is (INQUIRY identity), its scan latencies and geometry checks.
//! Plain values of the emulation layer; the topology settings ([`crate::topology`]) build
//! them.

use std::time::Duration;

use serde::Deserialize;

/// Default vendor identification: not a real vendor's name.
pub const DEFAULT_VENDOR: &str = "VHOSTBLK";
/// Default product identification: an emulated RAID virtual drive.
pub const DEFAULT_PRODUCT: &str = "EMUL RAID VD";
/// Default product revision level.
pub const DEFAULT_REVISION: &str = "0100";

/// Highest target id virtio-scsi can address (one byte of the LUN field).
pub const MAX_TARGET_ID: u16 = 255;
/// Highest LUN id flat-space addressing can express.
pub const MAX_LUN_ID: u16 = 16383;

/// What a logical unit says it is (INQUIRY data and VPD pages 0x80/0x83).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// T10 vendor identification, at most 8 printable ASCII characters.
    pub vendor: String,
    /// Product identification, at most 16 printable ASCII characters.
    pub product: String,
    /// Product revision level, at most 4 printable ASCII characters.
    pub revision: String,
    /// Unit serial number, 1..=64 printable ASCII characters.
    pub serial: String,
    /// An 8-byte NAA identifier (NAA 2, 3 or 5) used as the logical unit's WWN.
    pub wwn: u64,
}

impl Identity {
    /// The default identity of `target:lun`: an emulated RAID volume whose serial and WWN are
    /// derived from the address, so every LUN of a topology differs.
    pub fn default_for(target: u8, lun: u16) -> Self {
        Self {
            vendor: DEFAULT_VENDOR.into(),
            product: DEFAULT_PRODUCT.into(),
            revision: DEFAULT_REVISION.into(),
            serial: format!("VBLK{target:02X}{lun:04X}"),
            // NAA 3 (locally assigned) | "VBLK" | target | LUN.
            wwn: (0x3 << 60) | (0x5642_4c4b << 24) | ((target as u64) << 14) | lun as u64,
        }
    }

    /// Checks lengths, character set and WWN format.
    pub fn validate(&self) -> Result<(), IdentityError> {
        check_ascii("vendor", &self.vendor, 8)?;
        check_ascii("product", &self.product, 16)?;
        check_ascii("revision", &self.revision, 4)?;
        check_ascii("serial", &self.serial, 64)?;
        if self.serial.is_empty() {
            return Err(IdentityError::Empty("serial"));
        }
        if self.vendor.trim().is_empty() {
            return Err(IdentityError::Empty("vendor"));
        }
        if !matches!(self.wwn >> 60, 2 | 3 | 5) {
            return Err(IdentityError::BadWwn(self.wwn));
        }
        Ok(())
    }
}

fn check_ascii(field: &'static str, value: &str, max: usize) -> Result<(), IdentityError> {
    if !value.bytes().all(|b| (0x20..=0x7e).contains(&b)) {
        return Err(IdentityError::NotAscii {
            field,
            value: value.into(),
        });
    }
    if value.len() > max {
        return Err(IdentityError::TooLong {
            field,
            value: value.into(),
            max,
        });
    }
    Ok(())
}

/// Errors in an identity.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdentityError {
    #[error("{field} {value:?} is longer than {max} characters")]
    TooLong {
        field: &'static str,
        value: String,
        max: usize,
    },
    #[error("{field} {value:?} must be printable ASCII")]
    NotAscii { field: &'static str, value: String },
    #[error("{0} must not be empty")]
    Empty(&'static str),
    #[error("WWN {0:#018x} is not an 8-byte NAA identifier (first hex digit must be 2, 3 or 5)")]
    BadWwn(u64),
}

/// Completion delays for the commands of a SCSI scan, to emulate a slow SAS discovery. The
/// target layer never sleeps: it hands the delay back in the response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScanLatency {
    #[serde(default)]
    pub inquiry_us: u64,
    #[serde(default)]
    pub report_luns_us: u64,
    #[serde(default)]
    pub test_unit_ready_us: u64,
}

impl ScanLatency {
    /// The delay for `opcode`, if it is a scan command with a non-zero latency.
    pub fn for_opcode(&self, opcode: u8) -> Option<Duration> {
        let us = match opcode {
            super::cdb::INQUIRY => self.inquiry_us,
            super::cdb::REPORT_LUNS => self.report_luns_us,
            super::cdb::TEST_UNIT_READY => self.test_unit_ready_us,
            _ => 0,
        };
        (us > 0).then(|| Duration::from_micros(us))
    }
}

/// Errors in a LUN's geometry.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LunError {
    #[error("block size {0} is not 512 or 4096")]
    BlockSize(u32),
    #[error("storage of {size} bytes is smaller than one {block_size}-byte block")]
    TooSmall { size: u64, block_size: u32 },
}

impl LunError {
    /// Checks a block size and, when known, the storage size.
    pub fn check(block_size: u32, size: Option<u64>) -> Result<(), LunError> {
        if !matches!(block_size, 512 | 4096) {
            return Err(LunError::BlockSize(block_size));
        }
        match size {
            Some(size) if size < block_size as u64 => Err(LunError::TooSmall { size, block_size }),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_identities_are_valid_and_distinct() {
        let a = Identity::default_for(0, 0);
        let b = Identity::default_for(0, 1);
        let c = Identity::default_for(1, 0);
        for i in [&a, &b, &c] {
            i.validate().unwrap();
        }
        assert_ne!(a.serial, b.serial);
        assert_ne!(a.serial, c.serial);
        assert_ne!(a.wwn, b.wwn);
        assert_ne!(b.wwn, c.wwn);
        assert_eq!(a.vendor, "VHOSTBLK");
        assert_eq!(Identity::default_for(255, 16383).serial, "VBLKFF3FFF");
    }

    #[test]
    fn identity_validation() {
        let ok = Identity::default_for(0, 0);
        let mut i = ok.clone();
        i.vendor = "TOOLONGVENDOR".into();
        assert!(matches!(
            i.validate(),
            Err(IdentityError::TooLong {
                field: "vendor",
                ..
            })
        ));
        let mut i = ok.clone();
        i.product = "caf\u{e9}".into();
        assert!(matches!(i.validate(), Err(IdentityError::NotAscii { .. })));
        let mut i = ok.clone();
        i.serial = String::new();
        assert_eq!(i.validate(), Err(IdentityError::Empty("serial")));
        let mut i = ok.clone();
        i.wwn = 0x6000_0000_0000_0001;
        assert_eq!(i.validate(), Err(IdentityError::BadWwn(i.wwn)));
        let mut i = ok;
        i.revision = "12345".into();
        assert!(i.validate().is_err());
    }
}
