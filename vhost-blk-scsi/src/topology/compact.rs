//! The compact, command-line form of a topology.
//!
//! A comma-separated list of items, in any order:
//!
//! | item | meaning |
//! | --- | --- |
//! | `targets=N` | targets `0..N` are present, each with `luns` LUNs of `storage` |
//! | `luns=M` | LUNs per target for `targets=` (default 1; 0 makes targets with no LUN) |
//! | `storage=SPEC` | storage of each `targets=` LUN (default `null:1G`) |
//! | `T:L=SPEC` | LUN `L` of target `T` on `SPEC` (adds to or replaces a `targets=` LUN) |
//! | `max_target=N` | highest target id the guest may scan (default: highest present) |
//! | `bs=512` or `bs=4096` | logical block size of every LUN |
//! | `ro=BOOL`, `thin=BOOL`, `wce=BOOL` | read-only, thin provisioning, write cache (all LUNs) |
//! | `inquiry_delay=DUR`, `report_luns_delay=DUR`, `tur_delay=DUR` | scan latencies |
//! | `absent_luns=N` | REPORT LUNS of every present target also lists N empty LUN ids (from 1 up) |
//! | `absent_pq=3` or `absent_pq=1` | peripheral qualifier absent LUNs answer INQUIRY with (011b / 001b) |
//! | `vendor=S`, `product=S`, `revision=S` | identity of every LUN |
//!
//! `SPEC` is `null:SIZE`, `mem:SIZE`, `file:PATH` or `file:PATH@SIZE` (created sparse with that
//! size if missing). `SIZE` is bytes with an optional binary suffix `K`, `M`, `G` or `T`.
//! `DUR` is a number with `ns`, `us`, `ms` or `s` (kept in whole microseconds). Paths cannot contain commas; use the TOML form for
//! per-LUN options. Examples: `targets=16,luns=1,storage=null:1G`;
//! `0:0=file:/var/tmp/a.img,3:0=null:1G,3:1=mem:64M,max_target=15,inquiry_delay=2ms`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{LunConfig, TargetConfig, TopologyConfig, TopologyError};
use crate::emulation::MAX_TARGET_ID;
use vhost_blk_storage::StorageSpec;
use vhost_blk_units::Zero;

/// The most LUNs `targets=` x `luns=` may replicate (256 targets of 64 LUNs; found by the
/// config fuzzer: `targets=4566,luns=2456` built 11 million LUN settings before anything
/// checked them, and ran out of memory).
pub const MAX_REPLICATED_LUNS: u32 = 16_384;

fn err(msg: impl Into<String>) -> TopologyError {
    TopologyError::Parse(msg.into())
}

/// A storage size (zero is refused), see [`vhost_blk_units`].
fn parse_size(s: &str) -> Result<u64, TopologyError> {
    vhost_blk_units::parse_size(s, Zero::Rejected).map_err(|e| err(e.to_string()))
}

/// A scan latency in microseconds (zero allowed), see [`vhost_blk_units`].
fn parse_duration_us(s: &str) -> Result<u64, TopologyError> {
    vhost_blk_units::parse_duration_ns(s, Zero::Allowed)
        .map(|ns| ns / 1_000)
        .map_err(|e| err(e.to_string()))
}

/// Parses a storage spec: `null:SIZE`, `mem:SIZE`, `file:PATH` or `file:PATH@SIZE`.
pub fn parse_storage(s: &str) -> Result<StorageSpec, TopologyError> {
    let (kind, arg) = s.split_once(':').ok_or_else(|| {
        err(format!(
            "bad storage {s:?} (use null:SIZE, mem:SIZE or file:PATH)"
        ))
    })?;
    Ok(match kind {
        "null" => StorageSpec::Null {
            size: parse_size(arg)?,
        },
        "mem" => StorageSpec::Mem {
            size: parse_size(arg)?,
        },
        "file" => {
            let (path, create_size) = match arg.rsplit_once('@') {
                Some((p, size)) => match parse_size(size) {
                    Ok(n) => (p, Some(n)),
                    Err(_) => (arg, None),
                },
                None => (arg, None),
            };
            if path.is_empty() {
                return Err(err("file storage needs a path"));
            }
            StorageSpec::File {
                path: PathBuf::from(path),
                create_size,
                direct: false,
                read_only: false,
            }
        }
        k => return Err(err(format!("unknown storage kind {k:?}"))),
    })
}

fn parse_bool(key: &str, v: &str) -> Result<bool, TopologyError> {
    match v {
        "true" | "1" | "yes" | "on" => Ok(true),
        "false" | "0" | "no" | "off" => Ok(false),
        _ => Err(err(format!("{key}={v:?} is not a boolean"))),
    }
}

fn parse_num<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, TopologyError> {
    v.parse()
        .map_err(|_| err(format!("{key}={v:?} is not a valid number")))
}

/// Parses the compact form into a validated [`TopologyConfig`].
pub fn parse_topology(s: &str) -> Result<TopologyConfig, TopologyError> {
    let items = split_items(s)?;
    let mut cfg = TopologyConfig::default();
    let shape = apply_settings(&items.settings, &mut cfg)?;
    cfg.targets = shape
        .luns(items.explicit)?
        .into_iter()
        .map(|(id, luns)| TargetConfig {
            id,
            scan_latency: None,
            luns: luns.into_values().collect(),
        })
        .collect();
    cfg.validate()?;
    Ok(cfg)
}

/// The items of the compact form, each given at most once: `KEY=VALUE` settings and `T:L=SPEC`
/// LUNs.
struct Items<'a> {
    settings: BTreeMap<&'a str, &'a str>,
    explicit: BTreeMap<(u16, u16), StorageSpec>,
}

fn split_items(s: &str) -> Result<Items<'_>, TopologyError> {
    let mut items = Items {
        settings: BTreeMap::new(),
        explicit: BTreeMap::new(),
    };
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| err(format!("item {item:?} is not KEY=VALUE or T:L=SPEC")))?;
        if let Some((t, l)) = k.split_once(':') {
            let addr = (parse_num::<u16>("target", t)?, parse_num::<u16>("LUN", l)?);
            if items.explicit.insert(addr, parse_storage(v)?).is_some() {
                return Err(err(format!("LUN {t}:{l} is given twice")));
            }
        } else if items.settings.insert(k, v).is_some() {
            return Err(err(format!("{k} is given twice")));
        }
    }
    Ok(items)
}

/// The LUNs the settings replicate: `targets` x `luns` copies of `template`.
struct Shape {
    targets: Option<u16>,
    luns: u16,
    template: LunConfig,
}

/// Applies the `KEY=VALUE` settings: the topology-wide ones to `cfg`, the per-LUN ones to the
/// returned template.
fn apply_settings(
    settings: &BTreeMap<&str, &str>,
    cfg: &mut TopologyConfig,
) -> Result<Shape, TopologyError> {
    let mut shape = Shape {
        targets: None,
        luns: 1,
        template: LunConfig::new(0, StorageSpec::Null { size: 1 << 30 }),
    };
    let lun = &mut shape.template;
    let (latency, identity) = (&mut cfg.scan_latency, &mut cfg.identity);
    for (&k, &v) in settings {
        match k {
            "targets" => shape.targets = Some(parse_num::<u16>(k, v)?),
            "luns" => shape.luns = parse_num(k, v)?,
            "storage" => lun.storage = parse_storage(v)?,
            "max_target" => cfg.max_target = Some(parse_num(k, v)?),
            "bs" => lun.block_size = parse_num(k, v)?,
            "ro" => lun.read_only = parse_bool(k, v)?,
            "thin" => lun.thin_provisioning = parse_bool(k, v)?,
            "wce" => lun.write_cache = parse_bool(k, v)?,
            "inquiry_delay" => latency.inquiry_us = parse_duration_us(v)?,
            "report_luns_delay" => latency.report_luns_us = parse_duration_us(v)?,
            "tur_delay" => latency.test_unit_ready_us = parse_duration_us(v)?,
            "absent_luns" => cfg.absent_luns = parse_num(k, v)?,
            "absent_pq" => cfg.absent_pq = Some(parse_num(k, v)?),
            "vendor" => identity.vendor = Some(v.into()),
            "product" => identity.product = Some(v.into()),
            "revision" => identity.revision = Some(v.into()),
            _ => return Err(err(format!("unknown key {k:?}"))),
        }
    }
    Ok(shape)
}

impl Shape {
    /// Every LUN by target and id: the replicated ones, then the `T:L=SPEC` ones (which replace
    /// a replicated LUN at the same address).
    fn luns(
        self,
        explicit: BTreeMap<(u16, u16), StorageSpec>,
    ) -> Result<BTreeMap<u16, BTreeMap<u16, LunConfig>>, TopologyError> {
        if self.targets.is_none() && explicit.is_empty() {
            return Err(err("no target given (use targets=N or T:L=SPEC)"));
        }
        let ntargets = self.targets.unwrap_or(0);
        let replicated = u32::from(ntargets) * u32::from(self.luns);
        // Refused before anything is built: the copies are made in memory first.
        if ntargets > MAX_TARGET_ID + 1 {
            return Err(err(format!(
                "targets={ntargets}: at most {} targets (ids 0..={MAX_TARGET_ID})",
                MAX_TARGET_ID + 1
            )));
        }
        if replicated > MAX_REPLICATED_LUNS {
            return Err(err(format!(
                "targets x luns = {replicated} LUNs; at most {MAX_REPLICATED_LUNS}"
            )));
        }
        if replicated > 1 && matches!(self.template.storage, StorageSpec::File { .. }) {
            return Err(err(
                "storage=file:... cannot be shared by several LUNs; use T:L=file:...",
            ));
        }
        let lun = |id: u16| LunConfig {
            id,
            ..self.template.clone()
        };
        let mut targets: BTreeMap<u16, BTreeMap<u16, LunConfig>> = BTreeMap::new();
        for t in 0..ntargets {
            targets
                .entry(t)
                .or_default()
                .extend((0..self.luns).map(|l| (l, lun(l))));
        }
        for ((t, l), storage) in explicit {
            targets
                .entry(t)
                .or_default()
                .insert(l, LunConfig { storage, ..lun(l) });
        }
        Ok(targets)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_durations() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert!(parse_size("").is_err());
        assert!(parse_size("12Q").is_err());
        assert!(parse_size("99999999999T").is_err());
        assert_eq!(parse_duration_us("250us").unwrap(), 250);
        assert_eq!(parse_duration_us("2ms").unwrap(), 2000);
        assert_eq!(parse_duration_us("1s").unwrap(), 1_000_000);
        assert!(parse_duration_us("5").is_err());
        assert!(parse_duration_us("xms").is_err());
    }

    #[test]
    fn storage_specs() {
        assert_eq!(
            parse_storage("null:1G").unwrap(),
            StorageSpec::Null { size: 1 << 30 }
        );
        assert_eq!(
            parse_storage("mem:64M").unwrap(),
            StorageSpec::Mem { size: 64 << 20 }
        );
        match parse_storage("file:/tmp/a@b.img@1G").unwrap() {
            StorageSpec::File {
                path, create_size, ..
            } => {
                assert_eq!(path, PathBuf::from("/tmp/a@b.img"));
                assert_eq!(create_size, Some(1 << 30));
            }
            s => panic!("{s:?}"),
        }
        match parse_storage("file:/tmp/x@y").unwrap() {
            StorageSpec::File {
                path, create_size, ..
            } => {
                assert_eq!(path, PathBuf::from("/tmp/x@y"));
                assert_eq!(create_size, None);
            }
            s => panic!("{s:?}"),
        }
        assert!(parse_storage("file:").is_err());
        assert!(parse_storage("disk:1G").is_err());
        assert!(parse_storage("null").is_err());
    }

    #[test]
    fn replicated_topology() {
        let c = parse_topology("targets=16,luns=2,storage=null:1G,bs=4096").unwrap();
        assert_eq!(c.targets.len(), 16);
        assert!(c.targets.iter().all(|t| t.luns.len() == 2));
        assert_eq!(c.targets[15].id, 15);
        assert_eq!(c.targets[3].luns[1].id, 1);
        assert_eq!(c.targets[3].luns[1].block_size, 4096);
        assert_eq!(c.effective_max_target(), 15);
    }

    #[test]
    fn explicit_luns_with_options() {
        let c = parse_topology(
            "0:0=mem:1M, 3:0=null:1G,3:1=mem:64M,max_target=31,inquiry_delay=2ms,tur_delay=10us,ro=true,product=LAB VD",
        )
        .unwrap();
        assert_eq!(
            c.targets.iter().map(|t| t.id).collect::<Vec<_>>(),
            vec![0, 3]
        );
        assert_eq!(c.targets[1].luns.len(), 2);
        assert_eq!(c.max_target, Some(31));
        assert_eq!(c.scan_latency.inquiry_us, 2000);
        assert_eq!(c.scan_latency.test_unit_ready_us, 10);
        assert!(c.targets[0].luns[0].read_only);
        assert_eq!(c.identity_of(3, &c.targets[1].luns[1]).product, "LAB VD");
        // Explicit entries replace template ones.
        let c = parse_topology("targets=2,1:0=mem:1M").unwrap();
        assert_eq!(
            c.targets[1].luns[0].storage,
            StorageSpec::Mem { size: 1 << 20 }
        );
        assert_eq!(
            c.targets[0].luns[0].storage,
            StorageSpec::Null { size: 1 << 30 }
        );
    }

    #[test]
    fn errors_are_clear() {
        for bad in [
            "",
            "targets=x",
            "targets=2,targets=3",
            "bogus=1",
            "0:0=null:1G,0:0=null:1G",
            "0:0",
            "a:0=null:1G",
            "targets=2,storage=file:/tmp/x",
            "targets=1,bs=1000",
            "targets=1,ro=maybe",
            "300:0=null:1G",
            "0:16384=null:1G",
            "targets=4,max_target=2",
            "targets=1,vendor=WAYTOOLONGVENDOR",
            "targets=1,storage=null:100",
            "targets=1,luns=0,absent_luns=x",
            "targets=1,luns=0,absent_pq=2",
            "targets=1,luns=0,absent_pq=0",
            "targets=1,luns=0,absent_luns=16384",
        ] {
            let e = parse_topology(bad).unwrap_err();
            assert!(!e.to_string().is_empty(), "{bad}");
        }
        assert!(parse_topology("targets=1,storage=file:/tmp/x").is_ok());
        assert!(parse_topology("targets=3,luns=0").is_ok());
        // Found by `ci/fuzz.sh long config` (2026-12-05, out of memory after 6.7 million
        // inputs): the replicated LUNs are bounded before any is built.
        for (bad, want) in [
            (
                "targets=4566,luns=2456,storage=null:1M",
                "at most 256 targets",
            ),
            (
                "targets=256,luns=65,storage=null:1M",
                "16640 LUNs; at most 16384",
            ),
            (
                "targets=1,luns=20000,storage=null:1M",
                "20000 LUNs; at most 16384",
            ),
        ] {
            let e = parse_topology(bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad}: {e}");
        }
        assert!(parse_topology("targets=256,luns=64,storage=null:1M").is_ok());
        assert!(parse_topology("targets=3,luns=0,absent_luns=16383,absent_pq=1").is_ok());
        // One configured LUN above 0 leaves one id fewer below the limit.
        assert!(parse_topology("0:5=null:1M,absent_luns=16383").is_err());
    }

    #[test]
    fn absent_luns_skip_configured_ids() {
        let c =
            parse_topology("targets=2,luns=3,storage=null:1M,absent_luns=4,absent_pq=1").unwrap();
        assert_eq!(c.absent_lun_ids(&c.targets[1]), vec![3, 4, 5, 6]);
        assert_eq!(c.absent_qualifier().unwrap().pq(), 1);
        let c = parse_topology("targets=1,luns=0,absent_luns=3").unwrap();
        assert_eq!(c.absent_lun_ids(&c.targets[0]), vec![1, 2, 3]);
        assert_eq!(c.absent_qualifier().unwrap().pq(), 3);
    }
}
