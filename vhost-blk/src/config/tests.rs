//! Tests of the settings: merge, validation, one-line errors.

use super::*;
use clap::Parser;

fn args(v: &[&str]) -> Args {
    let mut all = vec!["vhost-blk"];
    all.extend_from_slice(v);
    Args::try_parse_from(all).unwrap()
}

#[test]
fn minimal_use_gives_eight_queues() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 4096]).unwrap();
    let c = Config::try_from(args(&[
        "--socket-path",
        "/tmp/s",
        "--image",
        img.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(c.num_queues, 8);
    assert_eq!(c.threads, 8);
    assert_eq!(c.queue_size, 256);
    assert_eq!(c.device, DeviceKind::Blk);
    assert_eq!(c.serial, DEFAULT_SERIAL);
    assert!(c.sandbox, "the sandbox is on by default");
}

#[test]
fn sandbox_is_on_unless_off_from_the_command_line_or_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "socket_path = \"/tmp/s\"\nnull = \"1G\"\nsandbox = \"off\"\n",
    )
    .unwrap();
    let c = |v: &[&str]| Config::try_from(args(v)).unwrap().sandbox;
    let f = cfg.to_str().unwrap();
    assert!(!c(&["-c", f]));
    assert!(c(&["-c", f, "--sandbox", "on"]));
    assert!(!c(&[
        "--socket-path",
        "/s",
        "--null",
        "1G",
        "--sandbox",
        "off"
    ]));
    assert!(c(&["--socket-path", "/s", "--null", "1G"]));
    std::fs::write(
        &cfg,
        "socket_path = \"/tmp/s\"\nnull = \"1G\"\nsandbox = \"maybe\"\n",
    )
    .unwrap();
    assert!(Config::try_from(args(&["-c", f])).is_err());
}

#[test]
fn sizes_parse() {
    assert_eq!(parse_size("4096").unwrap(), 4096);
    assert_eq!(parse_size("1G").unwrap(), 1 << 30);
    assert_eq!(parse_size("64m").unwrap(), 64 << 20);
    for bad in ["", "G", "1X", "-1", "0", "99999999999T"] {
        assert!(parse_size(bad).is_err(), "{bad}");
    }
}

#[test]
fn invalid_settings_are_rejected_with_a_reason() {
    let cases: &[(&[&str], &str)] = &[
        (&["--null", "1G"], "socket-path"),
        (&["--socket-path", "s"], "no storage"),
        (
            &["--socket-path", "s", "--null", "1G", "--mem", "1G"],
            "only one",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--num-queues", "0"],
            "1..=256",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--num-queues", "257"],
            "1..=256",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--queue-size", "100"],
            "power of two",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--threads", "9"],
            "--threads",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--block-size", "1024"],
            "512 or 4096",
        ),
        (&["--socket-path", "s", "--null", "1000"], "multiple of 512"),
        (
            &["--socket-path", "s", "--null", "1G", "--size", "1G"],
            "only meaningful",
        ),
        (
            &["--socket-path", "s", "--mem", "1G", "--read-only"],
            "only for --image",
        ),
        (
            &["--socket-path", "s", "--image", "/nonexistent/x.img"],
            "does not exist",
        ),
        (
            &[
                "--socket-path",
                "s",
                "--null",
                "1G",
                "--serial",
                "123456789012345678901",
            ],
            "20 bytes",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--rt-priority", "0"],
            "--rt-priority",
        ),
        (
            &["--socket-path", "s", "--null", "1G", "--rt-priority", "100"],
            "1..=99",
        ),
    ];
    for (a, want) in cases {
        let e = Config::try_from(args(a)).unwrap_err().to_string();
        assert!(e.contains(want), "{a:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn missing_image_with_size_is_not_created_by_validation() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("new.img");
    let c = Config::try_from(args(&[
        "--socket-path",
        "s",
        "--image",
        img.to_str().unwrap(),
        "--size",
        "1M",
    ]))
    .unwrap();
    assert!(!img.exists(), "validation must not create files");
    assert_eq!(
        c.storage,
        Some(StorageSpec::File {
            path: img,
            create_size: Some(1 << 20),
            direct: false,
            read_only: false
        })
    );
}

#[test]
fn toml_file_is_merged_and_cli_wins() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(
        &cfg,
        "socket_path = \"/tmp/from-file\"\nnull = \"1G\"\nnum_queues = 4\nserial = \"FILE\"\n",
    )
    .unwrap();
    let c = Config::try_from(args(&["-c", cfg.to_str().unwrap(), "--serial", "CLI"])).unwrap();
    assert_eq!(c.socket_path, PathBuf::from("/tmp/from-file"));
    assert_eq!(c.num_queues, 4);
    assert_eq!(c.serial, "CLI");
    assert_eq!(c.storage, Some(StorageSpec::Null { size: 1 << 30 }));
    let c = Config::try_from(args(&["-c", cfg.to_str().unwrap(), "--mem", "64M"])).unwrap();
    assert_eq!(c.storage, Some(StorageSpec::Mem { size: 64 << 20 }));
}

#[test]
fn null_untouched_is_its_own_storage_choice() {
    let c = Config::try_from(args(&["--socket-path", "s", "--null-untouched", "1G"])).unwrap();
    assert_eq!(
        c.storage,
        Some(StorageSpec::NullUntouched { size: 1 << 30 })
    );
    let e = Config::try_from(args(&[
        "--socket-path",
        "s",
        "--null",
        "1G",
        "--null-untouched",
        "1G",
    ]))
    .unwrap_err();
    assert!(matches!(e, ConfigError::ConflictingStorage), "{e}");
}

#[test]
fn unknown_toml_key_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    std::fs::write(&cfg, "socket_path = \"s\"\nnul = \"1G\"\n").unwrap();
    let e = Config::try_from(args(&["-c", cfg.to_str().unwrap()])).unwrap_err();
    assert!(matches!(e, ConfigError::ConfigFile { .. }), "{e}");
}

#[test]
fn scsi_topology_replaces_the_single_disk() {
    let c = Config::try_from(args(&[
        "--socket-path",
        "s",
        "--device",
        "scsi",
        "--topology",
        "targets=16,luns=1,storage=null:1G,max_target=255",
    ]))
    .unwrap();
    assert_eq!(c.storage, None);
    let t = c.topology.unwrap();
    assert_eq!(t.targets.len(), 16);
    assert_eq!(t.max_target, Some(255));
    let c = Config::try_from(args(&[
        "--socket-path",
        "s",
        "--device",
        "scsi",
        "--null",
        "1G",
    ]))
    .unwrap();
    assert!(c.topology.is_none());
    assert_eq!(c.cmd_per_lun, 128);
}

#[test]
fn queue_count_leaves_room_for_the_personalitys_vrings() {
    let base = ["--socket-path", "s", "--null", "1G", "--num-queues"];
    let run = |extra: &[&str]| Config::try_from(args(&[&base[..], extra].concat()));
    assert_eq!(run(&["256"]).unwrap().num_queues, 256);
    assert_eq!(run(&["128"]).unwrap().num_queues, 128);
    assert_eq!(run(&["128", "--device", "scsi"]).unwrap().num_queues, 128);
    assert_eq!(run(&["254", "--device", "scsi"]).unwrap().num_queues, 254);
    for n in ["255", "256"] {
        let e = run(&[n, "--device", "scsi"]).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::QueueCount {
                    max: 254,
                    extra: 2,
                    ..
                }
            ),
            "{e}"
        );
        let text = e.to_string();
        assert!(text.contains("1..=254") && !text.contains('\n'), "{text}");
    }
    // The largest configuration: every vring in exactly one group.
    let c = run(&["254", "--device", "scsi", "--threads", "3"]).unwrap();
    let mut all: Vec<usize> = c.worker_groups(254 + 2, 2).concat();
    all.sort_unstable();
    assert_eq!(all, (0..256).collect::<Vec<_>>());
}

#[test]
fn worker_groups_spread_queues() {
    let mut c = Config::try_from(args(&["--socket-path", "s", "--null", "1G"])).unwrap();
    assert_eq!(
        c.worker_groups(8, 0),
        (0..8).map(|q| vec![q]).collect::<Vec<_>>()
    );
    c.threads = 2;
    assert_eq!(
        c.worker_groups(8, 0),
        vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]
    );
    // virtio-scsi: control + event on thread 0 with the first request queue.
    c.threads = 8;
    let m = c.worker_groups(10, 2);
    assert_eq!(m[0], vec![0, 1, 2]);
    assert_eq!(m[7], vec![9]);
}

#[test]
fn topology_from_the_file_as_a_table_or_a_compact_string() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("c.toml");
    let table = "socket_path = \"s\"\ndevice = \"scsi\"\n[topology]\nmax_target = 7\n\
                 [[topology.targets]]\nid = 3\n[[topology.targets.luns]]\nid = 0\n\
                 storage = { kind = \"null\", size = 1048576 }\n";
    let compact =
        "socket_path = \"s\"\ndevice = \"scsi\"\ntopology = \"3:0=null:1M,max_target=7\"\n";
    for text in [table, compact] {
        std::fs::write(&cfg, text).unwrap();
        let c = Config::try_from(args(&["-c", cfg.to_str().unwrap()])).unwrap();
        let t = c.topology.unwrap();
        assert_eq!(
            (t.targets.len(), t.targets[0].id, t.max_target),
            (1, 3, Some(7))
        );
    }
    std::fs::write(&cfg, "socket_path = \"s\"\n[topology]\nbogus = 1\n").unwrap();
    let e = Config::try_from(args(&["-c", cfg.to_str().unwrap()])).unwrap_err();
    assert!(matches!(e, ConfigError::ConfigFile { .. }), "{e}");
    assert!(e.to_string().contains("bogus"), "{e}");
}

#[test]
fn user_text_in_an_error_stays_on_one_line() {
    // Found by `ci/fuzz.sh long config` (2026-12-05, after 1.27 million inputs): a TOML serial
    // with an escaped newline came back inside the error, which then had two lines.
    let text = "socket_path = \"s\"\nmem = \"64M\"\nblock_size = 4096\n\
                serial = \"AB//\\\\&perf_=ode\\\\-\\n\\\\//--sock//\"\n";
    let options: Options = toml::from_str(text).unwrap();
    assert!(options.serial.as_deref().unwrap().contains('\n'));
    let e = Config::try_from(Args {
        options,
        ..Default::default()
    })
    .unwrap_err();
    assert!(matches!(e, ConfigError::SerialTooLong(_)), "{e}");
    let line = e.to_string();
    assert!(!line.contains('\n') && line.contains("\\n"), "{line}");
    // A path with a newline, likewise.
    let e = Config::try_from(args(&["--socket-path", "s", "--image", "no\nsuch"])).unwrap_err();
    assert!(matches!(e, ConfigError::MissingImage(_)), "{e}");
    assert!(!e.to_string().contains('\n'), "{e}");
    // Found by CI's fuzz smoke from the input above (2026-12-05): a size with a newline
    // (`findings/config-size-newline` in docs/results/fuzz).
    let e = Config::try_from(args(&["--socket-path", "s", "--mem", "6de\\-\n//"]));
    let line = e.map(|_| ()).unwrap_err().to_string();
    assert!(!line.contains('\n') && line.contains("\\n"), "{line}");
    // A duration likewise, inside TOML's message.
    let e = Options::parse("[completion]\nservice = \"fixed:1x\\ny\"\n").unwrap_err();
    assert!(e.contains("\\n") && !e.contains('\n'), "{e}");
    // Found by `ci/fuzz.sh long config` (2026-12-05, after 1,105 inputs): a key without a value
    // at the end of the file gets no message from TOML; the error says where instead.
    let e = Options::parse("socket_path = \"s\"\nsize = ").unwrap_err();
    assert!(
        e.starts_with("line 2, column ") && e.len() > "line 2, column 8: ".len(),
        "{e}"
    );
    // TOML's own message quotes a key as given; a quoted key may hold a newline.
    let e = Options::parse("\"a\\nb\" = 1\n").unwrap_err();
    assert!(e.contains("\\n") && !e.contains('\n'), "{e}");
}

#[test]
fn write_log_and_writethrough_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 4096]).unwrap();
    let img = img.to_str().unwrap();
    let log = dir.path().join("w.log");
    let log = log.to_str().unwrap();
    let c = Config::try_from(args(&[
        "--socket-path",
        "s",
        "--image",
        img,
        "--write-log",
        log,
        "--writethrough",
    ]))
    .unwrap();
    assert_eq!(c.write_log.as_deref(), Some(Path::new(log)));
    assert!(c.writethrough);
    assert!(!Path::new(log).exists(), "nothing created while validating");
    let bad: &[(&[&str], &str)] = &[
        (
            &["--socket-path", "s", "--null", "1G", "--write-log", log],
            "only for --image",
        ),
        (
            &[
                "--socket-path",
                "s",
                "--image",
                img,
                "--write-log",
                "/nonexistent/dir/w.log",
            ],
            "directory does not exist",
        ),
        (
            &["--socket-path", "s", "--image", img, "--write-log", img],
            "the image itself",
        ),
        (
            &[
                "--socket-path",
                "s",
                "--device",
                "scsi",
                "--writethrough",
                "--topology",
                "targets=1,luns=1,storage=null:1M",
            ],
            "wce=0",
        ),
    ];
    for (a, want) in bad {
        let e = Config::try_from(args(a)).unwrap_err().to_string();
        assert!(e.contains(want) && !e.contains('\n'), "{a:?}: {e}");
    }
}

#[test]
fn syscall_trace_and_test_fault_are_kept_and_release_builds_refuse_the_fault() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    std::fs::write(&img, vec![0u8; 4096]).unwrap();
    let img = img.to_str().unwrap();
    let tr = dir.path().join("t.trace");
    let tr = tr.to_str().unwrap();
    let base = ["--socket-path", "s", "--image", img, "--syscall-trace", tr];
    let c = Config::try_from(args(&base)).unwrap();
    assert_eq!(c.syscall_trace.as_deref(), Some(Path::new(tr)));
    assert_eq!(c.test_fault, None);
    let with_fault = [&base[..], &["--test-fault", "early-ack"]].concat();
    let r = Config::try_from(args(&with_fault));
    if cfg!(debug_assertions) {
        let c = r.unwrap();
        assert_eq!(c.test_fault, Some(vhost_blk_storage::TestFault::EarlyAck));
    } else {
        assert!(matches!(r, Err(ConfigError::TestFaultInRelease)), "{r:?}");
    }
}
