//! The guest's cache-mode choice outlives a backend process (inflight rule 6,
//! docs/data-guarantees.md): it is kept in the inflight area's device state, which QEMU hands
//! every new backend with SET_INFLIGHT_FD. Here two personalities stand for the killed backend
//! and its successor, sharing one area as QEMU would make them.

use std::sync::Arc;

use vhost_blk::blk::{BlkOptions, BlkPersonality, WRITEBACK_OFFSET};
use vhost_blk::device::{InflightArea, Personality};
use vhost_blk::scsi::{ScsiOptions, ScsiPersonality};
use vhost_blk_scsi::emulation::{Identity, Lun, LunOptions, ScanLatency, Target, Topology};
use vhost_blk_storage::{FileStorage, Storage};
use virtio_bindings::virtio_blk::VIRTIO_BLK_F_CONFIG_WCE;

fn area(queues: u16) -> Arc<InflightArea> {
    let (file, size) = InflightArea::create(queues, 16).unwrap();
    Arc::new(InflightArea::map(&file, size, 0, queues, 16).unwrap())
}

fn blk(writethrough: bool) -> BlkPersonality {
    let storage: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 20).unwrap());
    let p = BlkPersonality::new(
        storage,
        BlkOptions {
            num_queues: 1,
            queue_size: 16,
            block_size: 512,
            serial: "s".into(),
            writethrough,
        },
    );
    p.acked_features(1 << VIRTIO_BLK_F_CONFIG_WCE);
    p
}

fn writeback(p: &BlkPersonality) -> u8 {
    p.config_space()[WRITEBACK_OFFSET]
}

#[test]
fn virtio_blk_writethrough_chosen_by_the_guest_survives_a_restart() {
    let a = area(1);
    let first = blk(false);
    first.attach_state(a.state());
    assert_eq!(writeback(&first), 1);
    first.set_config(WRITEBACK_OFFSET as u32, &[0]).unwrap();
    assert_eq!(writeback(&first), 0);
    // The successor starts in writeback (its default) and takes the guest's choice from QEMU.
    let second = blk(false);
    assert_eq!(writeback(&second), 1);
    second.attach_state(a.state());
    assert_eq!(writeback(&second), 0, "the guest's writethrough is kept");
    // After a device reset QEMU makes a new, zeroed area: the configured mode again.
    second.reset();
    let fresh = area(1);
    second.attach_state(fresh.state());
    assert_eq!(writeback(&second), 1);
    // A configured writethrough disk records itself where nothing is recorded.
    let wt = blk(true);
    let b = area(1);
    wt.attach_state(b.state());
    let next = blk(false);
    next.attach_state(b.state());
    assert_eq!(writeback(&next), 0);
    // An area without the state trailer (another backend's) changes nothing.
    let (file, size) = InflightArea::create(1, 16).unwrap();
    let exact = Arc::new(InflightArea::map(&file, size - 4096, 0, 1, 16).unwrap());
    assert!(exact.state().is_none());
}

fn scsi() -> (ScsiPersonality, Arc<Topology>) {
    let mut t = Target::new(0, ScanLatency::default());
    for id in 0..2 {
        let storage: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 20).unwrap());
        let lun = Lun::new(
            id,
            storage,
            LunOptions::default(),
            Identity::default_for(0, id),
        );
        t.insert_lun(lun.unwrap());
    }
    let mut topo = Topology::new(0);
    topo.insert(t);
    let topo = Arc::new(topo);
    let opts = ScsiOptions {
        num_queues: 1,
        queue_size: 16,
        cmd_per_lun: 16,
    };
    (ScsiPersonality::new(topo.clone(), opts), topo)
}

#[test]
fn scsi_wce_cleared_by_the_guest_survives_a_restart() {
    let a = area(3);
    let (first, t1) = scsi();
    first.attach_state(a.state());
    // MODE SELECT clearing WCE on LUN 1 (what mode.rs does once the page is checked).
    t1.target(0).unwrap().lun(1).unwrap().set_write_cache(false);
    let (second, t2) = scsi();
    let lun = |t: &Topology, id| t.target(0).unwrap().lun(id).unwrap().write_cache();
    assert!(lun(&t2, 1), "the successor's default");
    second.attach_state(a.state());
    assert!(!lun(&t2, 1), "the guest's WCE 0 is kept");
    assert!(lun(&t2, 0), "LUN 0 was never changed");
    // Detached: later changes are not recorded.
    second.attach_state(None);
    t2.target(0).unwrap().lun(0).unwrap().set_write_cache(false);
    let (third, t3) = scsi();
    third.attach_state(a.state());
    assert!(lun(&t3, 0));
}
