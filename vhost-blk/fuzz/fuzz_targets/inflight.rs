//! The vhost-user inflight area as QEMU hands it back after a crash: any bytes in the regions
//! of a 2-queue, 16-descriptor area, any ring size and used index. Checks: no panic, every head
//! to resubmit is inside the ring and listed once, no more than the ring holds, and a second
//! recovery of the same region (now initialised or repaired) finds nothing invalid.
#![no_main]

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk::device::inflight::{InflightArea, Tracker};
use vhost_blk_fuzz::Input;

const QUEUES: u16 = 2;
const SIZE: u16 = 16;

fn area() -> &'static (File, u64, Arc<InflightArea>) {
    static A: OnceLock<(File, u64, Arc<InflightArea>)> = OnceLock::new();
    A.get_or_init(|| {
        let (file, size) = InflightArea::create(QUEUES, SIZE).expect("memfd");
        let area = InflightArea::map(&file, size, 0, QUEUES, SIZE).expect("mmap");
        (file, size, Arc::new(area))
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let (file, size, area) = area();
    let q = usize::from(input.u8() % QUEUES as u8);
    let ring_size = match input.u8() % 4 {
        0 => SIZE,
        1 => SIZE / 2,
        2 => SIZE * 2,
        _ => input.u16(),
    };
    let guest_used = input.u16();
    let mut bytes = input.rest().to_vec();
    bytes.resize(*size as usize, 0);
    file.write_all_at(&bytes, 0).expect("write the area");
    let Some(region) = area.queue(q) else {
        return;
    };
    let mut t = Tracker::new(region);
    if let Some(rec) = t.recover(ring_size, guest_used) {
        assert!(rec.resubmit.len() <= usize::from(ring_size.min(SIZE)));
        let mut seen = std::collections::BTreeSet::new();
        for &h in &rec.resubmit {
            assert!(h < ring_size && h < SIZE, "head {h} outside the ring");
            assert!(seen.insert(h), "head {h} twice");
        }
        // What the first recovery left is valid: a second one discards nothing.
        let mut again = Tracker::new(area.queue(q).expect("region"));
        if let Some(rec2) = again.recover(ring_size, guest_used) {
            assert_eq!(rec2.discarded, 0, "{rec:?} then {rec2:?}");
        }
    }
});
