//! `/proc/interrupts`: per-vector totals (summed across CPUs) keyed by the device name column,
//! and before/after deltas.
//!
//! A numbered line is `N: <count per CPU> <chip> <hwirq>-<edge|level|fasteoi> <names>`; the
//! key is everything after the trigger-type token (e.g. `virtio0-req.3`). Lines without such a
//! token (`NMI:`, `LOC:` ...) are keyed by their label (`NMI`, `LOC`).

use std::collections::BTreeMap;

use super::MetricsError;

/// Vector name -> interrupt count summed over CPUs.
pub type InterruptCounts = BTreeMap<String, u64>;

const TRIGGERS: [&str; 4] = ["-edge", "-level", "-fasteoi", "-simple"];

/// Parses one `/proc/interrupts` snapshot.
pub fn parse_interrupts(text: &str) -> Result<InterruptCounts, MetricsError> {
    let mut lines = text.lines();
    let ncpu = lines
        .by_ref()
        .find(|l| !l.trim().is_empty())
        .map(|h| {
            h.split_whitespace()
                .filter(|t| t.starts_with("CPU"))
                .count()
        })
        .unwrap_or(0);
    if ncpu == 0 {
        return Err(MetricsError::Structure("no CPU header line".into()));
    }
    let mut out = InterruptCounts::new();
    for line in lines {
        let Some((label, rest)) = line.split_once(':') else {
            continue;
        };
        let label = label.trim();
        let toks: Vec<&str> = rest.split_whitespace().collect();
        let mut sum = 0u64;
        let mut counted = 0;
        for t in toks.iter().take(ncpu) {
            match t.parse::<u64>() {
                Ok(n) => {
                    sum = sum.saturating_add(n);
                    counted += 1;
                }
                Err(_) => break,
            }
        }
        if counted == 0 {
            continue;
        }
        let tail = &toks[counted..];
        let key = if label.chars().all(|c| c.is_ascii_digit()) {
            match tail
                .iter()
                .position(|t| TRIGGERS.iter().any(|s| t.ends_with(s)))
            {
                Some(p) if p + 1 < tail.len() => tail[p + 1..].join(" "),
                _ => tail.last().map_or(label.to_string(), |s| s.to_string()),
            }
        } else {
            label.to_string()
        };
        let e = out.entry(key).or_default();
        *e = e.saturating_add(sum);
    }
    if out.is_empty() {
        return Err(MetricsError::Empty);
    }
    Ok(out)
}

/// `after - before` per vector (a vector missing before counts from 0; a counter that went
/// backwards gives 0).
pub fn interrupt_deltas(before: &InterruptCounts, after: &InterruptCounts) -> InterruptCounts {
    after
        .iter()
        .map(|(k, a)| (k.clone(), a.saturating_sub(*before.get(k).unwrap_or(&0))))
        .collect()
}

/// A virtio request-queue vector: `virtio<N>-req[.<q>]` or `virtio<N>-request[.<q>]`
/// (virtio-blk names them `req.<q>`; virtio-scsi on 6.12 names every one `request`, so
/// several lines share that key and their counts add up).
pub fn is_request_vector(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("virtio") else {
        return false;
    };
    let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
    if rest.len() == name.len() - "virtio".len() {
        return false; // no device number
    }
    let Some(tail) = rest
        .strip_prefix("-request")
        .or_else(|| rest.strip_prefix("-req"))
    else {
        return false;
    };
    match tail.strip_prefix('.') {
        None => tail.is_empty(),
        Some(q) => !q.is_empty() && q.chars().all(|c| c.is_ascii_digit()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "           CPU0       CPU1       CPU2       CPU3
  0:         44          0          0          0   IO-APIC   2-edge      timer
  4:          0        312          0          0   IO-APIC   4-edge      ttyS0
 24:          0          0          0          0   PCI-MSIX-0000:00:03.0   0-edge      virtio0-config
 25:         10          0          0          0   PCI-MSIX-0000:00:03.0   1-edge      virtio0-control
 27:        100          5          0          0   PCI-MSIX-0000:00:03.0   3-edge      virtio0-request.0
 28:          0        200          0          1   PCI-MSIX-0000:00:03.0   4-edge      virtio0-request.1
 40:          7          0          0          0   PCI-MSIX-0000:00:04.0   1-edge      virtio1-req.0
 11:          1          2          0          0   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio3
NMI:          0          0          0          0   Non-maskable interrupts
LOC:       1000       2000       3000       4000   Local timer interrupts
ERR:          0
";

    #[test]
    fn keys_by_device_name_and_sums_cpus() {
        let c = parse_interrupts(BEFORE).unwrap();
        assert_eq!(c["virtio0-request.0"], 105);
        assert_eq!(c["virtio0-request.1"], 201);
        assert_eq!(c["virtio1-req.0"], 7);
        assert_eq!(c["timer"], 44);
        assert_eq!(c["uhci_hcd:usb1, virtio3"], 3);
        assert_eq!(c["LOC"], 10_000);
        assert_eq!(c["ERR"], 0);
        assert_eq!(c["NMI"], 0);
    }

    #[test]
    fn deltas_and_request_vectors() {
        let after = BEFORE
            .replace("100          5", "150         25")
            .replace("  7          0", " 17          3");
        let d = interrupt_deltas(
            &parse_interrupts(BEFORE).unwrap(),
            &parse_interrupts(&after).unwrap(),
        );
        assert_eq!(d["virtio0-request.0"], 70);
        assert_eq!(d["virtio1-req.0"], 13);
        assert_eq!(d["virtio0-request.1"], 0);
        let req: u64 = d
            .iter()
            .filter(|(k, _)| is_request_vector(k))
            .map(|(_, v)| v)
            .sum();
        assert_eq!(req, 83);
        assert!(!is_request_vector("virtio0-config"));
        for yes in [
            "virtio1-request",
            "virtio12-req.7",
            "virtio0-request.3",
            "virtio2-req",
        ] {
            assert!(is_request_vector(yes), "{yes}");
        }
        for no in [
            "virtio-req.0",
            "virtio1-requests",
            "virtio1-req.",
            "virtio1-req.x",
            "virtio3-rx",
            "xvirtio1-req.0",
        ] {
            assert!(!is_request_vector(no), "{no}");
        }
        // A counter going backwards (reboot between snapshots) is clamped, not wrapped.
        let back = interrupt_deltas(
            &parse_interrupts(&after).unwrap(),
            &parse_interrupts(BEFORE).unwrap(),
        );
        assert_eq!(back["virtio0-request.0"], 0);
    }

    #[test]
    fn real_proc_interrupts() {
        // A snapshot of this build host's /proc/interrupts (2 CPUs, virtio-blk on virtio1).
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guest-tests/tests/fixtures/artifacts/proc-interrupts.host"
        );
        let text = std::fs::read_to_string(p).unwrap();
        let c = parse_interrupts(&text).unwrap();
        assert!(
            c.contains_key("virtio1-req.0") && c.contains_key("LOC") && c.contains_key("ACPI:Ged")
        );
        assert!(c.keys().filter(|k| is_request_vector(k)).count() == 1);
        // Every line with counts gives a key (some share one, like the two ACPI:Ged lines).
        let lines = text.lines().skip(1).filter(|l| l.contains(':')).count();
        assert!(
            c.len() <= lines && c.len() + 2 >= lines,
            "{} keys for {lines} lines",
            c.len()
        );
        // And the live file parses the same way.
        if let Ok(live) = std::fs::read_to_string("/proc/interrupts") {
            let l = parse_interrupts(&live).unwrap();
            assert!(l.contains_key("LOC"));
            assert!(l.values().copied().max().unwrap_or(0) > 0);
        }
    }

    #[test]
    fn virtio_scsi_vectors_share_one_name() {
        // A 6.12 PREEMPT_RT guest with virtio-scsi num_queues=8 (one line per queue, same name).
        let p = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guest-tests/tests/fixtures/artifacts/interrupts.virtio-scsi-guest"
        );
        let c = parse_interrupts(&std::fs::read_to_string(p).unwrap()).unwrap();
        assert_eq!(
            c["virtio1-request"],
            565 + 1390 + 950 + 1028 + 1438 + 1395 + 1775 + 2438
        );
        assert!(is_request_vector("virtio1-request"));
        assert_eq!(c["virtio0-virtqueues"], 14);
    }

    #[test]
    fn garbage() {
        assert!(parse_interrupts("").is_err());
        assert!(parse_interrupts("hello\nworld").is_err());
        assert!(parse_interrupts("  CPU0\n x: y z\n").is_err());
        let c = parse_interrupts("CPU0\n 5: 18446744073709551615 a 1-edge x\n 6: 1 a 1-edge x\n")
            .unwrap();
        assert_eq!(c["x"], u64::MAX);
    }
}
