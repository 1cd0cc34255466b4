//! Sticky write errors (storage/health.rs, docs/data-guarantees.md "Write errors"): once a
//! write of the image is lost, no FLUSH succeeds on any queue, and in write-through mode no
//! write either, with the right status (virtio-blk IOERR; SCSI MEDIUM ERROR / WRITE ERROR for
//! EIO, DATA PROTECT / SPACE ALLOCATION FAILED WRITE PROTECT for ENOSPC).
//!
//! Faults under the real backend process, driven by the in-process frontend on four queues:
//! - EIO: an LD_PRELOAD injector (tests/faultinject/faultinject.c) fails the next `fdatasync`
//!   once and then lets it succeed again, as Linux reports a write-back error once per open
//!   file. Device-mapper (dm-error, dm-flakey) is not available in this container.
//! - ENOSPC: the image, sparse and larger than its file system, on a 1 MiB tmpfs mounted for
//!   the test (root); the kernel's own ENOSPC, through the page cache and with O_DIRECT.
//!
//! Each case prints `WRITE-ERRORS-RESULT {json}` with the flushes acknowledged after the lost
//! write (must be 0).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::disk::{Kind, QueueDisk, Status};
use common::Backend;

const QUEUES: usize = 4;
const ROUNDS: usize = 5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// `fdatasync` fails once with EIO (the injector).
    SyncEio,
    /// The image's file system is full (tmpfs).
    Enospc { direct: bool },
}

/// A tmpfs of `size` mounted for the test, unmounted on drop (then its mount point removed).
struct Tmpfs {
    path: PathBuf,
    _mount_point: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Option<Self> {
        let d = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(d.path())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs {
            path: d.path().to_owned(),
            _mount_point: d,
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

/// The injector, built once into the target directory.
fn injector() -> PathBuf {
    let out = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/faultinject.so"
    ));
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/faultinject/faultinject.c"
    );
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(src)
        .arg("-ldl")
        .status()
        .expect("a C compiler (cc) for the fault injector");
    assert!(st.success(), "building the fault injector failed");
    out
}

/// Arms `n` failures of counter `i` (0: fdatasync, 1: pwritev).
fn arm(ctl: &Path, i: u64, n: i32) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(ctl).unwrap();
    f.write_all_at(&n.to_le_bytes(), i * 4).unwrap();
}

/// The sense a lost write must give on SCSI, per fault.
fn want_sense(f: Fault) -> (u8, u8, u8) {
    match f {
        Fault::SyncEio => (0x03, 0x0c, 0x00),
        Fault::Enospc { .. } => (0x07, 0x27, 0x07),
    }
}

/// Loses a write: returns how the failing request ended.
fn lose_a_write(d: &mut QueueDisk, f: Fault, wt: bool, ctl: &Path) -> Status {
    match f {
        Fault::SyncEio => {
            arm(ctl, 0, 1);
            let w = d.write(64, &[0x5a; 4096]);
            if wt {
                assert!(!w.ok, "write-through: the write's own flush got the EIO");
                return w;
            }
            assert!(w.ok, "write-back: the write is in the page cache");
            let f = d.flush();
            assert!(!f.ok, "the flush that saw the EIO fails");
            f
        }
        Fault::Enospc { .. } => {
            // Past the 1 MiB tmpfs: some write finds no space.
            for i in 0..64u64 {
                let w = d.write(2048 + i * 128, &[0xa5; 65536]);
                if !w.ok {
                    return w;
                }
            }
            panic!("no write ran out of space on a 1 MiB tmpfs");
        }
    }
}

fn check_status(kind: Kind, s: &Status, f: Fault) {
    assert!(!s.ok);
    match kind {
        Kind::Blk => assert_eq!(s.code, 1, "VIRTIO_BLK_S_IOERR"),
        Kind::Scsi => assert_eq!(s.sense, Some(want_sense(f)), "{s:?}"),
    }
}

fn run_case(kind: Kind, wt: bool, fault: Fault, inj: &Path) -> Option<(usize, usize)> {
    let tmpfs;
    let dir = match fault {
        Fault::SyncEio => tempfile::tempdir().unwrap(),
        Fault::Enospc { .. } => {
            let Some(t) = Tmpfs::mount("1M") else {
                eprintln!("SKIPPED {fault:?}: cannot mount a tmpfs (not root?)");
                return None;
            };
            tmpfs = t;
            tempfile::tempdir_in(&tmpfs.path).unwrap()
        }
    };
    let ctl = dir.path().join("fault.ctl");
    std::fs::write(&ctl, [0u8; 8]).unwrap();
    let img = dir.path().join("disk.img").to_str().unwrap().to_string();
    let mut args = kind.args();
    args.extend(["--image".into(), img, "--size".into(), "8M".into()]);
    args.extend(["--num-queues".into(), QUEUES.to_string()]);
    if wt {
        args.push("--writethrough".into());
    }
    if fault == (Fault::Enospc { direct: true }) {
        args.push("--direct".into());
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let (inj_s, ctl_s) = (inj.to_str().unwrap(), ctl.to_str().unwrap().to_string());
    let env = [("LD_PRELOAD", inj_s), ("VB_FAULT_CTL", ctl_s.as_str())];
    let backend = Backend::start_env(dir, &argv, &env);
    let mut conn = kind.connect(&backend.socket, QUEUES as u16);
    let mut disks: Vec<QueueDisk> = (0..QUEUES).map(|i| kind.queue(&mut conn, i)).collect();
    for (i, d) in disks.iter_mut().enumerate() {
        assert!(d.write(i as u64 * 8, &[i as u8; 4096]).ok, "healthy write");
        assert!(d.flush().ok, "healthy flush");
    }
    let lost = lose_a_write(&mut disks[0], fault, wt, &ctl);
    check_status(kind, &lost, fault);
    // Every queue, several rounds: a write to blocks that exist, then a flush.
    let (mut flushes, mut flush_ok, mut wt_write_ok) = (0, 0, 0);
    for round in 0..ROUNDS {
        for (i, d) in disks.iter_mut().enumerate() {
            let w = d.write(i as u64 * 8, &[round as u8; 4096]);
            if wt {
                wt_write_ok += usize::from(w.ok);
                if !w.ok {
                    check_status(kind, &w, fault);
                }
            }
            let f = d.flush();
            flushes += 1;
            flush_ok += usize::from(f.ok);
            if !f.ok {
                check_status(kind, &f, fault);
            }
        }
    }
    println!(
        "WRITE-ERRORS-RESULT {{\"device\": \"{}\", \"cache\": \"{}\", \"fault\": \"{:?}\", \"queues\": {QUEUES}, \"flushes_after_lost_write\": {flushes}, \"flushes_acknowledged\": {flush_ok}, \"write_through_writes_acknowledged\": {wt_write_ok}}}",
        kind.name(),
        if wt { "write-through" } else { "write-back" },
        fault
    );
    Some((flush_ok, wt_write_ok))
}

#[test]
fn no_flush_succeeds_after_a_lost_write_on_any_queue() {
    let inj = injector();
    let mut failures = Vec::new();
    for kind in [Kind::Blk, Kind::Scsi] {
        for wt in [false, true] {
            for fault in [
                Fault::SyncEio,
                Fault::Enospc { direct: false },
                Fault::Enospc { direct: true },
            ] {
                if let Some((flush_ok, write_ok)) = run_case(kind, wt, fault, &inj) {
                    if flush_ok > 0 || write_ok > 0 {
                        failures.push((kind.name(), wt, fault, flush_ok, write_ok));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "acknowledged after a lost write (device, write-through, fault, flushes, writes): {failures:?}");
}
