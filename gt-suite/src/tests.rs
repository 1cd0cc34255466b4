//! Unit tests of suite parsing and validation.

use super::*;

fn spec(extra: &str) -> Result<SuiteSpec, toml::de::Error> {
    let steps = if extra.contains("steps") {
        ""
    } else {
        "steps = [\"verify\"]"
    };
    toml::from_str(&format!(
        "{steps}\ndescription = \"t\"\ndevice = \"scsi\"\nbackend = \"vhost-blk\"\n{extra}"
    ))
}

#[test]
fn defaults_are_filled_in() {
    let s = spec("").unwrap();
    assert_eq!(s.num_queues, 8);
    assert_eq!(s.smp(), 8);
    assert_eq!(s.bios, Bios::Qboot);
    assert_eq!(s.timeout_secs, 180);
    assert!(validate(&s).is_ok());
}

#[test]
fn unknown_field_is_an_error() {
    let e = spec("num_queus = 4").unwrap_err();
    assert!(e.to_string().contains("num_queus"), "{e}");
    let e = spec("[guest]\nschedular = \"none\"").unwrap_err();
    assert!(e.to_string().contains("schedular"), "{e}");
}

#[test]
fn bad_values_are_rejected() {
    for (extra, needle) in [
        ("num_queues = 0", "num_queues"),
        ("timeout_secs = 0", "timeout"),
        ("steps = [\"fio:../etc/passwd\"]", "bad step"),
        ("steps = [\"storm:../etc/passwd\"]", "bad step"),
        ("steps = [\"rescan:0\"]", "bad step"),
        ("steps = [\"dance\"]", "bad step"),
        ("steps = []", "no steps"),
        ("cmdline = [\"a b\"]", "cmdline"),
        ("func_count = [\"x;rm\"]", "func_count"),
        ("[guest]\nscheduler = \"none; reboot\"", "scheduler"),
        ("[guest]\nqueue_depth = 0", "queue_depth"),
        ("[guest]\ndisk = \"sda\"", "guest.disk"),
        (
            "[[variants]]\nname = \"a\"\n[[variants]]\nname = \"a\"",
            "twice",
        ),
        (
            "[[variants]]\nname = \"a\"\nbuiltin_latency_ns = 5",
            "qemu-builtin",
        ),
        (
            "sweep_param = \"x_us\"\n[[variants]]\nname = \"a\"\nvalue = 1.0\n[[variants]]\nname = \"b\"",
            "go together",
        ),
        ("[restarts]\nkills = 0\nfirst_after_s = 1.0\nevery_s = 1.0", "[restarts]"),
        ("[restarts]\nkills = 2\nfirst_after_s = 1.0\nevery_s = 0.0", "[restarts]"),
        ("[restarts]\nkills = 2\nfirst_after_s = -1.0\nevery_s = 1.0", "[restarts]"),
    ] {
        let s = spec(extra).unwrap();
        let e = validate(&s).unwrap_err();
        assert!(e.contains(needle), "{extra}: {e}");
    }
}

#[test]
fn verify_on_null_storage_is_refused() {
    let s: SuiteSpec = toml::from_str(
        "description = \"t\"\ndevice = \"blk\"\nbackend = \"qemu-builtin\"\nsteps = [\"verify\"]",
    )
    .unwrap();
    assert!(validate(&s).unwrap_err().contains("storage"));
}

#[test]
fn storage_daemon_needs_blk() {
    let s: SuiteSpec = toml::from_str(
        "description = \"t\"\ndevice = \"scsi\"\nbackend = \"qemu-storage-daemon\"\nsteps = [\"verify\"]",
    )
    .unwrap();
    assert!(validate(&s).unwrap_err().contains("vhost-user-blk"));
}

#[test]
fn unknown_suite_lists_known_ones() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("alpha.toml"), "").unwrap();
    std::fs::write(d.path().join("beta.toml"), "").unwrap();
    let e = Suite::load(d.path(), "gamma").unwrap_err();
    assert_eq!(e.to_string(), "unknown suite 'gamma' (known: alpha, beta)");
    let e = Suite::load(d.path(), "../alpha").unwrap_err();
    assert!(matches!(e, SuiteError::Unknown { .. }));
}

#[test]
fn missing_fio_file_is_reported() {
    let d = tempfile::tempdir().unwrap();
    let s = spec("steps = [\"fio:nope.fio\"]").unwrap();
    let e = Suite::from_spec("x", d.path(), s).unwrap_err();
    assert!(e.to_string().contains("nope.fio"), "{e}");
    // A storm step's fio file is packed like a fio step's.
    let s = spec("steps = [\"storm:storm.fio\"]").unwrap();
    let e = Suite::from_spec("x", d.path(), s).unwrap_err();
    assert!(e.to_string().contains("storm.fio"), "{e}");
    std::fs::write(d.path().join("storm.fio"), "[x]\n").unwrap();
    let s = spec("steps = [\"storm:storm.fio\"]").unwrap();
    let suite = Suite::from_spec("x", d.path(), s).unwrap();
    assert_eq!(suite.fio_files[0].0, "storm.fio");
}

#[test]
fn shipped_suites_all_load() {
    let dir = default_dir();
    let names = list(&dir).unwrap();
    for want in ["smoke", "seed000-rt-lock", "seed003-scan", "latency-sweep"] {
        assert!(names.iter().any(|n| n == want), "missing suite {want}");
    }
    for n in &names {
        let s = Suite::load(&dir, n).unwrap_or_else(|e| panic!("{e}"));
        assert!(!s.spec.description.is_empty());
    }
    let sweep = Suite::load(&dir, "latency-sweep").unwrap();
    assert_eq!(sweep.variants().len(), 4);
    let seed0 = Suite::load(&dir, "seed000-rt-lock").unwrap();
    assert_eq!(seed0.spec.device, Device::Scsi);
    assert_eq!(seed0.spec.guest.queue_depth, Some(4));
    assert_eq!(seed0.spec.guest.scheduler.as_deref(), Some("none"));
    assert_eq!(seed0.spec.num_queues, 8);
}
