use super::*;
use crate::blk::BlkOptions;
use std::sync::Arc;
use vhost_blk_storage::{FileStorage, Storage};
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

const F_WRITE: u16 = 2;

fn personality(size: u64) -> BlkPersonality {
    let s: Arc<dyn Storage> = Arc::new(FileStorage::memfd(size).unwrap());
    BlkPersonality::new(
        s,
        BlkOptions {
            num_queues: 1,
            queue_size: 16,
            block_size: 512,
            serial: "SERIAL-1".into(),
            writethrough: false,
        },
    )
}

/// Builds a chain of `descs` (addr, len, flags) in a mock queue and runs it.
fn run(p: &BlkPersonality, mem: &GuestMemoryMmap, descs: &[(u64, u32, u16)]) -> Outcome<BlkKind> {
    let chain = crate::device::chain::mock_chain(mem, descs);
    handle(p, chain)
}

fn hdr(mem: &GuestMemoryMmap, at: u64, type_: u32, sector: u64) {
    mem.write_obj(RequestHeader::new(type_, sector), GuestAddress(at))
        .unwrap();
}

fn status(mem: &GuestMemoryMmap, at: u64) -> u8 {
    mem.read_obj::<u8>(GuestAddress(at)).unwrap()
}

fn mem() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x100000)]).unwrap()
}

#[test]
fn write_then_read_round_trip() {
    let p = personality(1 << 20);
    let m = mem();
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 7) as u8).collect();
    m.write_slice(&data, GuestAddress(0x20000)).unwrap();
    hdr(&m, 0x10000, VIRTIO_BLK_T_OUT, 8);
    let o = run(
        &p,
        &m,
        &[(0x10000, 16, 0), (0x20000, 1024, 0), (0x30000, 1, F_WRITE)],
    );
    assert!(
        matches!(
            o,
            Outcome::Complete {
                used_len: 1,
                kind: BlkKind::Write,
                ..
            }
        ),
        "{o:?}"
    );
    assert_eq!(status(&m, 0x30000), 0);
    hdr(&m, 0x10000, VIRTIO_BLK_T_IN, 8);
    let o = run(
        &p,
        &m,
        &[
            (0x10000, 16, 0),
            (0x40000, 512, F_WRITE),
            (0x40200, 512, F_WRITE),
            (0x30000, 1, F_WRITE),
        ],
    );
    assert!(
        matches!(
            o,
            Outcome::Complete {
                used_len: 1025,
                kind: BlkKind::Read,
                ..
            }
        ),
        "{o:?}"
    );
    let mut back = vec![0u8; 1024];
    m.read_slice(&mut back, GuestAddress(0x40000)).unwrap();
    assert_eq!(back, data);
}

#[test]
fn header_and_data_in_one_descriptor_are_accepted() {
    let p = personality(1 << 20);
    let m = mem();
    hdr(&m, 0x10000, VIRTIO_BLK_T_OUT, 0);
    m.write_slice(&[0x5a; 512], GuestAddress(0x10010)).unwrap();
    let o = run(&p, &m, &[(0x10000, 16 + 512, 0), (0x30000, 1, F_WRITE)]);
    assert!(matches!(
        o,
        Outcome::Complete {
            kind: BlkKind::Write,
            ..
        }
    ));
    let mut b = [0u8; 512];
    p.storage().read_at(&mut b, 0).unwrap();
    assert_eq!(b, [0x5a; 512]);
}

#[test]
fn bad_requests_get_the_right_status() {
    let p = personality(1 << 20);
    let m = mem();
    type Case = (u32, u64, Vec<(u64, u32, u16)>, u8);
    let cases: Vec<Case> = vec![
        // read past the end
        (
            VIRTIO_BLK_T_IN,
            2048,
            vec![
                (0x10000, 16, 0),
                (0x40000, 512, F_WRITE),
                (0x30000, 1, F_WRITE),
            ],
            1,
        ),
        // sector overflow
        (
            VIRTIO_BLK_T_IN,
            u64::MAX / 256,
            vec![
                (0x10000, 16, 0),
                (0x40000, 512, F_WRITE),
                (0x30000, 1, F_WRITE),
            ],
            1,
        ),
        // partial sector
        (
            VIRTIO_BLK_T_IN,
            0,
            vec![
                (0x10000, 16, 0),
                (0x40000, 100, F_WRITE),
                (0x30000, 1, F_WRITE),
            ],
            1,
        ),
        // unknown type
        (99, 0, vec![(0x10000, 16, 0), (0x30000, 1, F_WRITE)], 2),
        // short header
        (
            VIRTIO_BLK_T_IN,
            0,
            vec![(0x10000, 8, 0), (0x30000, 1, F_WRITE)],
            1,
        ),
    ];
    for (t, sector, descs, want) in cases {
        hdr(&m, 0x10000, t, sector);
        m.write_obj(0xffu8, GuestAddress(0x30000)).unwrap();
        run(&p, &m, &descs);
        assert_eq!(
            status(&m, 0x30000),
            want,
            "type {t} sector {sector} {descs:?}"
        );
    }
}

#[test]
fn get_id_returns_the_serial() {
    let p = personality(1 << 20);
    let m = mem();
    hdr(&m, 0x10000, VIRTIO_BLK_T_GET_ID, 0);
    let o = run(
        &p,
        &m,
        &[
            (0x10000, 16, 0),
            (0x40000, 20, F_WRITE),
            (0x30000, 1, F_WRITE),
        ],
    );
    assert!(matches!(o, Outcome::Complete { used_len: 21, .. }));
    let mut id = [0u8; 20];
    m.read_slice(&mut id, GuestAddress(0x40000)).unwrap();
    assert_eq!(&id[..8], b"SERIAL-1");
    assert!(id[8..].iter().all(|&b| b == 0));
}

#[test]
fn chain_without_status_byte_is_returned_unused() {
    let p = personality(1 << 20);
    let m = mem();
    hdr(&m, 0x10000, VIRTIO_BLK_T_FLUSH, 0);
    let o = run(&p, &m, &[(0x10000, 16, 0)]);
    assert_eq!(
        o,
        Outcome::Complete {
            used_len: 0,
            kind: BlkKind::Error,
            bytes: 0,
            extra_delay_ns: 0
        }
    );
}

#[test]
fn a_write_racing_with_the_switch_to_write_through_is_flushed() {
    use crate::device::Personality;
    use std::sync::Mutex;
    use vhost_blk_storage::probe::ProbeStorage;
    // A write on another queue lands inside the flush of the guest's switch to write-through
    // (the probe runs it when that flush starts). With the flush before the store it read
    // write-back and completed with no flush after it: acknowledged, not durable, after the
    // guest had been told the cache was off.
    let probe = ProbeStorage::new(1 << 20).unwrap();
    let p = Arc::new(BlkPersonality::new(
        probe.clone(),
        BlkOptions {
            num_queues: 2,
            queue_size: 16,
            block_size: 512,
            serial: "S".into(),
            writethrough: false,
        },
    ));
    p.acked_features(1 << VIRTIO_BLK_F_CONFIG_WCE);
    let m = mem();
    let (p2, m2, status_seen) = (p.clone(), m.clone(), Arc::new(Mutex::new(None)));
    let seen = status_seen.clone();
    probe.on_next_flush(move || {
        m2.write_slice(&[5u8; 512], GuestAddress(0x20000)).unwrap();
        hdr(&m2, 0x10000, VIRTIO_BLK_T_OUT, 8);
        run(
            &p2,
            &m2,
            &[(0x10000, 16, 0), (0x20000, 512, 0), (0x30000, 1, F_WRITE)],
        );
        *seen.lock().unwrap() = Some(status(&m2, 0x30000));
    });
    p.set_config(super::super::WRITEBACK_OFFSET as u32, &[0])
        .unwrap();
    assert_eq!(
        *status_seen.lock().unwrap(),
        Some(0),
        "the racing write completed"
    );
    assert!(
        probe.flushed_after_write_at(8 * 512),
        "a write completed during the switch to write-through was never flushed: {:?}",
        probe.events()
    );
}

#[test]
fn a_reset_back_to_write_through_flushes_what_write_back_completed() {
    use crate::device::Personality;
    use vhost_blk_storage::probe::ProbeStorage;
    // Configured --writethrough; the guest switched to write-back and wrote. After a device
    // reset the disk is write-through again and the guest sends no FLUSH for that write.
    let probe = ProbeStorage::new(1 << 20).unwrap();
    let p = BlkPersonality::new(
        probe.clone(),
        BlkOptions {
            num_queues: 1,
            queue_size: 16,
            block_size: 512,
            serial: "S".into(),
            writethrough: true,
        },
    );
    p.acked_features(1 << VIRTIO_BLK_F_CONFIG_WCE);
    p.set_config(super::super::WRITEBACK_OFFSET as u32, &[1])
        .unwrap();
    let m = mem();
    m.write_slice(&[6u8; 512], GuestAddress(0x20000)).unwrap();
    hdr(&m, 0x10000, VIRTIO_BLK_T_OUT, 16);
    run(
        &p,
        &m,
        &[(0x10000, 16, 0), (0x20000, 512, 0), (0x30000, 1, F_WRITE)],
    );
    assert_eq!(status(&m, 0x30000), 0);
    assert!(
        !probe.flushed_after_write_at(16 * 512),
        "write-back: not yet"
    );
    p.reset();
    assert!(
        probe.flushed_after_write_at(16 * 512),
        "the reset to write-through left a completed write unflushed: {:?}",
        probe.events()
    );
}
