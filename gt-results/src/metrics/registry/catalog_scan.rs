//! The SCSI host's queue shape (`disk` artefact: `scsi_nr_hw_queues`, `scsi_can_queue`) and the
//! first rescan: the factors of seed 003's cost model (report/model.rs), which multiplies probe
//! removals x hctx x tags per hctx x per-tag cost.

use super::{Better, Derive, Headline, MetricDef, Out};
use crate::metrics::GuestInfo;

/// A positive integer the guest reported in its `disk` artefact.
fn disk_count(g: &GuestInfo, key: &str, o: &mut Out) {
    if let Some(v) = g
        .disk
        .get(key)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|v| *v > 0)
    {
        o.put(v as f64);
    }
}

use Derive::Guest;
use Headline::No;

/// Queue shape of the first SCSI host and the first rescan's time.
pub static SCAN_METRICS: &[MetricDef] = &[
    def!(
        "scan.scsi_nr_hw_queues",
        "hctx",
        Neither,
        "disk",
        No,
        "hardware queues (hctx) of every request queue of the first SCSI host (its tag set's nr_hw_queues)",
        Guest(|g, o| disk_count(g, "scsi_nr_hw_queues", o))
    ),
    def!(
        "scan.scsi_can_queue",
        "tags",
        Neither,
        "disk",
        No,
        "tags per hctx of the first SCSI host (can_queue = the tag set's queue depth)",
        Guest(|g, o| disk_count(g, "scsi_can_queue", o))
    ),
    def!(
        "rescan.ms_first",
        "ms",
        Lower,
        "rescan.<i>",
        No,
        "time of the first synchronous rescan after boot",
        Guest(|g, o| if let Some(r) = g.rescans.first() {
            o.put(r.ms)
        })
    ),
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use crate::metrics::registry::{derive_guest, find};
    use crate::metrics::{GuestInfo, Rescan};

    #[test]
    fn queue_shape_and_first_rescan() {
        let mut g = GuestInfo::default();
        for (k, v) in [("scsi_nr_hw_queues", "16"), ("scsi_can_queue", "1024")] {
            g.disk.insert(k.into(), v.into());
        }
        for ms in [900.0, 700.0] {
            g.rescans.push(Rescan {
                ms,
                disks: Some(0),
                devices: vec![],
            });
        }
        let mut m = BTreeMap::new();
        derive_guest(&mut m, &g);
        assert_eq!(m["scan.scsi_nr_hw_queues"], 16.0);
        assert_eq!(m["scan.scsi_can_queue"], 1024.0);
        assert_eq!(m["rescan.ms_first"], 900.0);
        assert_eq!(m["rescan.ms_min"], 700.0);
        assert_eq!(find("rescan.ms_first").unwrap().def.unit, "ms");
        // Missing, zero or junk values give no metric.
        let mut g = GuestInfo::default();
        g.disk.insert("scsi_nr_hw_queues".into(), "0".into());
        g.disk.insert("scsi_can_queue".into(), "x".into());
        let mut m = BTreeMap::new();
        derive_guest(&mut m, &g);
        assert!(!m.keys().any(|k| k.starts_with("scan.scsi_")), "{m:?}");
        assert!(!m.contains_key("rescan.ms_first"));
    }
}
