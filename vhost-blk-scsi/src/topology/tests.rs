//! Tests of the topology settings: TOML and compact forms, validation, and building the
//! emulation topology from them.

use std::time::Duration;

use super::*;
use crate::emulation::cdb::*;
use crate::emulation::encode_virtio_lun;
use crate::emulation::testutil::*;

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

#[test]
fn topology_lookup_and_resolve() {
    let cfg = compact::parse_topology("0:0=mem:1M,3:0=null:1G,3:2=null:1M,max_target=7").unwrap();
    let topo = Topology::from_config(&cfg).unwrap();
    assert_eq!(topo.max_target(), 7);
    assert_eq!(topo.max_lun(), 2);
    assert!(topo.target(0).is_some());
    assert!(topo.target(1).is_none());
    assert!(topo.target(8).is_none());
    assert!(topo.target(u16::MAX).is_none());
    let t3 = topo.target(3).unwrap();
    assert_eq!(t3.lun_ids().collect::<Vec<_>>(), vec![0, 2]);
    assert_eq!(t3.lun(0).unwrap().blocks(), (1 << 30) / 512);
    // Serial and WWN differ per LUN.
    let (a, b) = (t3.lun(0).unwrap().identity(), t3.lun(2).unwrap().identity());
    assert_ne!((a.wwn, &a.serial), (b.wwn, &b.serial));
    let (t, l) = topo.resolve(&encode_virtio_lun(3, 2)).unwrap();
    assert_eq!((t.id(), l), (3, 2));
    assert!(topo.resolve(&encode_virtio_lun(2, 0)).is_none());
    assert!(topo.resolve(&[0, 3, 0x40, 0, 0, 0, 0, 0]).is_none());
    assert_eq!(topo.targets().count(), 2);
}

#[test]
fn topology_build_errors() {
    let cfg = compact::parse_topology("0:0=file:/nonexistent/dir/x.img").unwrap();
    let e = Topology::from_config(&cfg).unwrap_err();
    assert!(
        matches!(
            e,
            TopologyError::Storage {
                target: 0,
                lun: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn scan_latency_is_returned_not_slept() {
    let cfg =
        compact::parse_topology("0:0=null:1M,inquiry_delay=3ms,report_luns_delay=7ms").unwrap();
    let topo = Topology::from_config(&cfg).unwrap();
    let t = topo.target(0).unwrap();
    let mut inq = cdb(INQUIRY, 6);
    inq[4] = 36;
    let start = std::time::Instant::now();
    let (r, _) = run_in(t, 5, &inq, 36);
    assert!(start.elapsed() < Duration::from_millis(3));
    assert_eq!(r.delay, Some(Duration::from_millis(3)));
    let mut rl = cdb(REPORT_LUNS, 12);
    rl[9] = 64;
    assert_eq!(
        run_in(t, 0, &rl, 64).0.delay,
        Some(Duration::from_millis(7))
    );
    assert_eq!(run_in(t, 0, &cdb(TEST_UNIT_READY, 6), 0).0.delay, None);
    assert_eq!(run_in(t, 0, &cdb(READ_CAPACITY_10, 10), 8).0.delay, None);
    assert_eq!(
        topo.absent_target_delay(&inq),
        Some(Duration::from_millis(3))
    );
    assert_eq!(topo.absent_target_delay(&cdb(READ_10, 10)), None);
    assert_eq!(topo.absent_target_delay(&[]), None);
}

#[test]
fn absent_luns_reach_report_luns_inquiry_and_max_lun() {
    // TOML form: a target with no LUN lists 300 empty ids (1..=300, flat addressing above
    // 255) that answer INQUIRY with qualifier 001b.
    let cfg: TopologyConfig =
        toml::from_str("max_target = 3\nabsent_luns = 300\nabsent_pq = 1\n[[targets]]\nid = 2\n")
            .unwrap();
    let topo = Topology::from_config(&cfg).unwrap();
    assert_eq!(topo.max_lun(), 300);
    let t = topo.target(2).unwrap();
    let mut rl = cdb(REPORT_LUNS, 12);
    rl[6..10].copy_from_slice(&4096u32.to_be_bytes());
    let (r, d) = run_in(t, 0, &rl, 4096);
    assert_good(&r);
    assert_eq!(be32(&d, 0), 300 * 8);
    assert_eq!(&d[8..10], &[0, 1]);
    assert_eq!(&d[d.len() - 8..d.len() - 6], &[0x41, 0x2c]);
    let mut inq = cdb(INQUIRY, 6);
    inq[4] = 36;
    let (r, d) = run_in(t, 300, &inq, 36);
    assert_good(&r);
    assert_eq!(d[0], 0x3f);
    // Bad qualifier in TOML is a validation error naming it.
    let bad: TopologyConfig = toml::from_str("absent_pq = 7\n[[targets]]\nid = 0\n").unwrap();
    assert!(matches!(
        bad.validate(),
        Err(TopologyError::BadAbsentQualifier(7))
    ));
}
