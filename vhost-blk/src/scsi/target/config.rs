//! Configuration of the target layer: identities, LUNs, targets and the topology, as read from
//! TOML (serde) or from the compact command-line form (see [`super::compact`]).

use std::time::Duration;

use serde::Deserialize;

use crate::storage::{StorageError, StorageSpec};

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

/// Identity fields to override; unset fields keep the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdentityOverrides {
    pub vendor: Option<String>,
    pub product: Option<String>,
    pub revision: Option<String>,
    pub serial: Option<String>,
    pub wwn: Option<u64>,
}

impl IdentityOverrides {
    /// `base` with the set fields replaced.
    pub fn apply(&self, mut base: Identity) -> Identity {
        if let Some(v) = &self.vendor {
            base.vendor.clone_from(v);
        }
        if let Some(v) = &self.product {
            base.product.clone_from(v);
        }
        if let Some(v) = &self.revision {
            base.revision.clone_from(v);
        }
        if let Some(v) = &self.serial {
            base.serial.clone_from(v);
        }
        if let Some(v) = self.wwn {
            base.wwn = v;
        }
        base
    }
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

fn default_block_size() -> u32 {
    512
}

fn yes() -> bool {
    true
}

/// One logical unit.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LunConfig {
    /// LUN id, 0..=16383.
    pub id: u16,
    pub storage: StorageSpec,
    /// Logical block size: 512 or 4096.
    #[serde(default = "default_block_size")]
    pub block_size: u32,
    #[serde(default)]
    pub read_only: bool,
    /// Advertise thin provisioning (UNMAP, WRITE SAME with UNMAP, LBPME).
    #[serde(default = "yes")]
    pub thin_provisioning: bool,
    /// Initial write-cache-enable (WCE) bit of the caching mode page.
    #[serde(default = "yes")]
    pub write_cache: bool,
    #[serde(default)]
    pub identity: IdentityOverrides,
}

impl LunConfig {
    /// A LUN with default options over `storage`.
    pub fn new(id: u16, storage: StorageSpec) -> Self {
        Self {
            id,
            storage,
            block_size: default_block_size(),
            read_only: false,
            thin_provisioning: true,
            write_cache: true,
            identity: IdentityOverrides::default(),
        }
    }
}

/// One target and its LUNs (a target with no LUN is present but answers INQUIRY with
/// peripheral qualifier 011b).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetConfig {
    /// Target id, 0..=255.
    pub id: u16,
    /// Overrides the topology's scan latency for this target.
    #[serde(default)]
    pub scan_latency: Option<ScanLatency>,
    #[serde(default)]
    pub luns: Vec<LunConfig>,
}

/// The whole topology.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyConfig {
    /// Highest target id the initiator may scan (virtio-scsi `max_target`); defaults to the
    /// highest configured target. Targets up to it that are not configured are absent.
    #[serde(default)]
    pub max_target: Option<u16>,
    #[serde(default)]
    pub scan_latency: ScanLatency,
    /// Identity fields applied to every LUN (a LUN's own overrides win).
    #[serde(default)]
    pub identity: IdentityOverrides,
    #[serde(default)]
    pub targets: Vec<TargetConfig>,
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

/// Errors building a topology.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    #[error("target {0} is configured twice")]
    DuplicateTarget(u16),
    #[error("target {target}: LUN {lun} is configured twice")]
    DuplicateLun { target: u16, lun: u16 },
    #[error(
        "target id {0} is above {MAX_TARGET_ID} (virtio-scsi addresses targets with one byte)"
    )]
    TargetTooBig(u16),
    #[error("target {target}: LUN id {lun} is above {MAX_LUN_ID}")]
    LunTooBig { target: u16, lun: u16 },
    #[error("max_target {max} is below configured target {target}")]
    MaxTargetTooSmall { max: u16, target: u16 },
    #[error("target {target} LUN {lun}: {source}")]
    Lun {
        target: u16,
        lun: u16,
        source: LunError,
    },
    #[error("target {target} LUN {lun}: {source}")]
    Identity {
        target: u16,
        lun: u16,
        source: IdentityError,
    },
    #[error("target {target} LUN {lun}: {source}")]
    Storage {
        target: u16,
        lun: u16,
        source: StorageError,
    },
    #[error("topology string: {0}")]
    Parse(String),
}

impl TopologyConfig {
    /// Checks everything that can be checked without opening storage.
    pub fn validate(&self) -> Result<(), TopologyError> {
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.targets {
            if t.id > MAX_TARGET_ID {
                return Err(TopologyError::TargetTooBig(t.id));
            }
            if !seen.insert(t.id) {
                return Err(TopologyError::DuplicateTarget(t.id));
            }
            if let Some(max) = self.max_target {
                if t.id > max {
                    return Err(TopologyError::MaxTargetTooSmall { max, target: t.id });
                }
            }
            let mut luns = std::collections::BTreeSet::new();
            for l in &t.luns {
                let (target, lun) = (t.id, l.id);
                if lun > MAX_LUN_ID {
                    return Err(TopologyError::LunTooBig { target, lun });
                }
                if !luns.insert(lun) {
                    return Err(TopologyError::DuplicateLun { target, lun });
                }
                LunError::check(l.block_size, l.storage.declared_size()).map_err(|source| {
                    TopologyError::Lun {
                        target,
                        lun,
                        source,
                    }
                })?;
                self.identity_of(t.id as u8, l)
                    .validate()
                    .map_err(|source| TopologyError::Identity {
                        target,
                        lun,
                        source,
                    })?;
            }
        }
        if let Some(max) = self.max_target {
            if max > MAX_TARGET_ID {
                return Err(TopologyError::TargetTooBig(max));
            }
        }
        Ok(())
    }

    /// The identity LUN `l` of target `target` ends up with.
    pub fn identity_of(&self, target: u8, l: &LunConfig) -> Identity {
        l.identity
            .apply(self.identity.apply(Identity::default_for(target, l.id)))
    }

    /// The highest target id the initiator may address.
    pub fn effective_max_target(&self) -> u16 {
        self.max_target
            .unwrap_or_else(|| self.targets.iter().map(|t| t.id).max().unwrap_or(0))
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

    #[test]
    fn toml_topology_parses_and_validates() {
        let cfg: TopologyConfig = toml::from_str(
            r#"
            max_target = 7
            scan_latency = { inquiry_us = 1500 }
            identity = { product = "LAB VOLUME" }
            [[targets]]
            id = 0
            [[targets.luns]]
            id = 0
            storage = { kind = "null", size = 1073741824 }
            block_size = 4096
            identity = { serial = "SER0", wwn = 0x5000c50012345678 }
            [[targets.luns]]
            id = 3
            storage = { kind = "mem", size = 1048576 }
            read_only = true
            [[targets]]
            id = 5
            "#,
        )
        .unwrap();
        cfg.validate().unwrap();
        assert_eq!(cfg.effective_max_target(), 7);
        let id = cfg.identity_of(0, &cfg.targets[0].luns[0]);
        assert_eq!(
            (id.product.as_str(), id.serial.as_str(), id.vendor.as_str()),
            ("LAB VOLUME", "SER0", "VHOSTBLK")
        );
        assert_eq!(cfg.targets[0].luns[1].block_size, 512);
        assert!(cfg.targets[0].luns[1].read_only);
        assert!(cfg.targets[1].luns.is_empty());
        assert_eq!(
            cfg.scan_latency.for_opcode(0x12),
            Some(Duration::from_micros(1500))
        );
        assert_eq!(cfg.scan_latency.for_opcode(0x00), None);
    }

    #[test]
    fn toml_rejects_unknown_fields_and_bad_values() {
        assert!(toml::from_str::<TopologyConfig>("bogus = 1").is_err());
        let bad = |s: &str| {
            toml::from_str::<TopologyConfig>(s)
                .unwrap()
                .validate()
                .unwrap_err()
        };
        let lun = |extra: &str| {
            format!(
                "[[targets]]\nid = 1\n[[targets.luns]]\nid = 0\nstorage = {{ kind = \"null\", size = 4096 }}\n{extra}"
            )
        };
        assert!(matches!(
            bad(&lun("block_size = 1024")),
            TopologyError::Lun {
                source: LunError::BlockSize(1024),
                ..
            }
        ));
        assert!(matches!(
            bad(&lun("block_size = 4096\n[[targets.luns]]\nid = 0\nstorage = { kind = \"null\", size = 4096 }")),
            TopologyError::DuplicateLun { target: 1, lun: 0 }
        ));
        assert!(matches!(
            bad(&lun("identity = { vendor = \"ABCDEFGHI\" }")),
            TopologyError::Identity { .. }
        ));
        assert!(matches!(
            bad("[[targets]]\nid = 256"),
            TopologyError::TargetTooBig(256)
        ));
        assert!(matches!(
            bad("[[targets]]\nid = 2\n[[targets]]\nid = 2"),
            TopologyError::DuplicateTarget(2)
        ));
        assert!(matches!(
            bad("max_target = 1\n[[targets]]\nid = 2"),
            TopologyError::MaxTargetTooSmall { .. }
        ));
        assert!(matches!(
            bad("[[targets]]\nid = 0\n[[targets.luns]]\nid = 16384\nstorage = { kind = \"null\", size = 4096 }"),
            TopologyError::LunTooBig { .. }
        ));
        assert!(matches!(
            bad("[[targets]]\nid = 0\n[[targets.luns]]\nid = 0\nstorage = { kind = \"null\", size = 100 }"),
            TopologyError::Lun { source: LunError::TooSmall { size: 100, block_size: 512 }, .. }
        ));
    }
}
