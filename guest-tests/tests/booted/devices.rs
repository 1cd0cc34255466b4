//! Booted-guest checks of the two personalities and the latency engine, each on Debian's
//! prebuilt PREEMPT_RT kernel under QEMU (TCG unless `VB_ACCEL=kvm`) with our backend:
//! - virtio-blk: the pattern the guest wrote from every CPU is in the image file afterwards;
//! - virtio-scsi: 8 hctx, 8 request vectors, our identity in sysfs, data verified, after a
//!   SeaBIOS probe and reset;
//! - virtio-scsi rescan: exactly the present targets/LUNs of a sparse topology are found;
//! - MSI-X latency 1 ms raises the guest's QD1 completion latency by about 1 ms.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use common::one_boot_on;
use gt_results::results::RunResult;
use gt_suite::Suite;
use guest_tests::matrix;

fn run_dir(name: &str) -> PathBuf {
    let d =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("dev-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// Boots `suite` (optionally one sweep `variant`, optionally with its backend arguments
/// changed by `edit`) and returns the result; panics with the console tail if the run failed.
fn boot(
    suite: &str,
    variant: Option<&str>,
    dir: &Path,
    edit: impl FnOnce(&mut Suite),
) -> RunResult {
    let _g = common::one_guest_at_a_time();
    let mut s = Suite::load(&gt_suite::default_dir(), suite).unwrap();
    edit(&mut s);
    let (spec, rerun) = one_boot_on(
        &common::rig(),
        &s,
        variant,
        dir,
        format!("dev-{suite}"),
        None,
        Some(common::backend_bin()),
    );
    let (r, _) = matrix::execute_retrying(&spec, rerun, None, common::EARLY_CRASH_RETRIES);
    if !r.status.is_ok() {
        let console = std::fs::read_to_string(dir.join("console.log")).unwrap_or_default();
        let tail: Vec<&str> = console.lines().rev().take(20).collect();
        panic!(
            "{suite}: {:?}\nrun dir {}\n{}",
            r.status,
            dir.display(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    r
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn blk_pattern_written_by_the_guest_is_in_the_image_file() {
    let dir = run_dir("blk-image");
    let img_dir = tempfile::tempdir().unwrap();
    let img = img_dir.path().join("disk.img");
    let img_s = img.display().to_string();
    let r = boot("smoke", None, &dir, |s| {
        s.spec.steps = vec!["verify".into()];
        s.spec.backend_args = vec![
            "--image".into(),
            img_s.clone(),
            "--size".into(),
            "8M".into(),
        ];
    });
    assert_eq!(r.guest.disk.get("hctx").map(String::as_str), Some("8"));
    assert_eq!(
        r.guest.disk.get("request_vectors").map(String::as_str),
        Some("8")
    );
    let v = r.guest.verify.as_ref().expect("verify artefact");
    assert!(format!("{v:?}").to_lowercase().contains("ok"), "{v:?}");
    // Every 4 KiB block starts with the guest's pattern line for its LBA and this run.
    let run = r
        .guest
        .meta
        .get("run_id")
        .cloned()
        .unwrap_or_else(|| "dev-smoke".into());
    let data = std::fs::read(&img).unwrap();
    assert_eq!(data.len(), 8 << 20);
    let mut bad = Vec::new();
    for (i, block) in data.chunks(4096).enumerate() {
        let want = format!("VB-PATTERN lba={} run={run}\n", i * 8);
        if !block.starts_with(want.as_bytes()) {
            bad.push(i);
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} blocks lack the pattern, first {:?}",
        bad.len(),
        data.len() / 4096,
        &bad[..bad.len().min(5)]
    );
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_personality_after_a_seabios_probe() {
    let dir = run_dir("scsi-smoke");
    let r = boot("scsi-smoke", None, &dir, |_| {});
    let d = &r.guest.disk;
    assert_eq!(d.get("hctx").map(String::as_str), Some("8"), "{d:?}");
    assert_eq!(
        d.get("request_vectors").map(String::as_str),
        Some("8"),
        "{d:?}"
    );
    assert_eq!(d.get("vendor").map(|s| s.trim()), Some("VHOSTBLK"), "{d:?}");
    assert_eq!(
        d.get("model").map(|s| s.trim()),
        Some("EMUL RAID VD"),
        "{d:?}"
    );
    let v = r.guest.verify.as_ref().expect("verify artefact");
    assert!(format!("{v:?}").to_lowercase().contains("ok"), "{v:?}");
    for s in r.steps.iter().filter(|s| s.fio.is_some()) {
        assert_eq!(s.rc, Some(0), "fio step {} (verify=crc32c) failed", s.label);
    }
    assert!(std::fs::read_to_string(dir.join("qemu.argv"))
        .unwrap()
        .contains("vhost-user-scsi-pci"));
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn scsi_rescan_finds_exactly_the_present_luns() {
    let dir = run_dir("scsi-rescan");
    let r = boot("scsi-rescan", None, &dir, |_| {});
    assert_eq!(r.guest.rescans.len(), 2, "{:?}", r.guest.rescans);
    let want: BTreeSet<&str> = ["0:0:0", "0:3:0", "0:7:0", "0:7:1"].into();
    for rs in &r.guest.rescans {
        // H:C:T:L without the host number, which depends on probe order.
        let got: BTreeSet<&str> = rs
            .devices
            .iter()
            .filter_map(|d| d.split_once(':').map(|(_, ctl)| ctl))
            .collect();
        assert_eq!(got, want, "rescan found {:?}", rs.devices);
        assert!(rs.ms > 0.0);
    }
    eprintln!(
        "rescan of 16 targets (4 LUNs present): {:?} ms",
        r.guest.rescans.iter().map(|x| x.ms).collect::<Vec<_>>()
    );
}

fn qd1_p50_us(r: &RunResult) -> f64 {
    let fio = r
        .steps
        .iter()
        .find_map(|s| s.fio.as_ref())
        .expect("fio step");
    let d = fio.read.as_ref().expect("reads");
    assert!(d.total_ios > 50, "too few I/Os: {}", d.total_ios);
    d.clat_percentiles_us["p50"]
}

#[test]
#[ignore = "boots a guest: ci/test.sh runs these (--ignored)"]
fn msix_latency_of_1ms_raises_guest_completion_latency_by_about_1ms() {
    let base = boot(
        "msix-1ms-check",
        Some("msix-0us"),
        &run_dir("msix-0"),
        |_| {},
    );
    let slow = boot(
        "msix-1ms-check",
        Some("msix-1ms"),
        &run_dir("msix-1ms"),
        |_| {},
    );
    let (a, b) = (qd1_p50_us(&base), qd1_p50_us(&slow));
    eprintln!("guest QD1 randread clat p50: {a:.0} us without, {b:.0} us with 1 ms MSI-X latency");
    let rise = b - a;
    assert!(
        (700.0..4000.0).contains(&rise),
        "p50 rose by {rise:.0} us ({a:.0} -> {b:.0})"
    );
}
