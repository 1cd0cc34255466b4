//! Topology settings of the virtio-scsi device: targets, LUNs, identities and scan latencies, as
//! read from TOML (serde) or from the compact command-line form ([`compact`]), validated without
//! opening anything, and built into an emulation [`Topology`] (opening every storage).
//!
//! Depends on the emulation layer (the values it builds) and on storage specs; nothing of virtio.

pub mod compact;
#[cfg(test)]
mod tests;

use serde::Deserialize;

use crate::emulation::{
    AbsentQualifier, Identity, IdentityError, Lun, LunError, LunOptions, ScanLatency, Target,
    Topology, MAX_LUN_ID, MAX_TARGET_ID,
};
use vhost_blk_storage::{StorageError, StorageSpec};

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
    /// REPORT LUNS of every present target also lists this many LUN ids that hold nothing:
    /// the lowest ids from 1 up that no LUN is configured on (LUN 0 is probed by the scan
    /// before REPORT LUNS anyway). Each is a probe the initiator makes and tears down.
    #[serde(default)]
    pub absent_luns: u16,
    /// Peripheral qualifier of absent LUNs' INQUIRY: 3 (011b, the default) or 1 (001b; both
    /// with device type 1Fh).
    #[serde(default)]
    pub absent_pq: Option<u8>,
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
    #[error("absent_pq {0} is not a peripheral qualifier for an absent LUN (use 3 or 1)")]
    BadAbsentQualifier(u8),
    #[error("target {target}: {count} absent LUNs do not fit below LUN id {MAX_LUN_ID}")]
    TooManyAbsentLuns { target: u16, count: u16 },
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
        self.absent_qualifier()?;
        for t in &self.targets {
            let got = self.absent_lun_ids(t).len();
            if got < self.absent_luns as usize {
                return Err(TopologyError::TooManyAbsentLuns {
                    target: t.id,
                    count: self.absent_luns,
                });
            }
        }
        Ok(())
    }

    /// The qualifier absent LUNs answer with.
    pub fn absent_qualifier(&self) -> Result<AbsentQualifier, TopologyError> {
        match self.absent_pq {
            None => Ok(AbsentQualifier::default()),
            Some(pq) => AbsentQualifier::from_pq(pq).ok_or(TopologyError::BadAbsentQualifier(pq)),
        }
    }

    /// The ids target `t` lists as absent LUNs: the lowest `absent_luns` ids from 1 up that
    /// hold no configured LUN (fewer when they run out above [`MAX_LUN_ID`]).
    pub fn absent_lun_ids(&self, t: &TargetConfig) -> Vec<u16> {
        let used: std::collections::BTreeSet<u16> = t.luns.iter().map(|l| l.id).collect();
        (1..=MAX_LUN_ID)
            .filter(|id| !used.contains(id))
            .take(self.absent_luns as usize)
            .collect()
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

impl Topology {
    /// Builds a topology from its configuration, opening every storage.
    pub fn from_config(cfg: &TopologyConfig) -> Result<Self, TopologyError> {
        cfg.validate()?;
        let mut topo = Topology::new(cfg.effective_max_target() as u8);
        topo.set_scan_latency(cfg.scan_latency);
        let qualifier = cfg.absent_qualifier()?;
        for t in &cfg.targets {
            let tid = t.id as u8;
            let mut target = Target::new(tid, t.scan_latency.unwrap_or(cfg.scan_latency));
            target.set_absent_qualifier(qualifier);
            target.list_absent_luns(cfg.absent_lun_ids(t));
            for l in &t.luns {
                let storage = l.storage.open().map_err(|source| TopologyError::Storage {
                    target: t.id,
                    lun: l.id,
                    source,
                })?;
                let options = LunOptions {
                    block_size: l.block_size,
                    read_only: l.read_only,
                    thin_provisioning: l.thin_provisioning,
                    write_cache: l.write_cache,
                };
                let lun = Lun::new(l.id, storage, options, cfg.identity_of(tid, l)).map_err(
                    |source| TopologyError::Lun {
                        target: t.id,
                        lun: l.id,
                        source,
                    },
                )?;
                target.insert_lun(lun);
            }
            topo.insert(target);
        }
        Ok(topo)
    }
}
