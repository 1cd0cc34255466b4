//! The virtio-blk request path on an adversarial ring: header, data descriptors, status byte,
//! DISCARD / WRITE_ZEROES segments and GET_ID, over a 1 MiB RAM disk. Checks: no panic, the
//! used length never exceeds the chain's writable bytes, and nothing outside the chain's
//! device-writable buffers changes.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk::blk::{BlkOptions, BlkPersonality};
use vhost_blk::device::{guest_bufs, Outcome, Personality};
use vhost_blk::storage::{FileStorage, Storage};
use vhost_blk_fuzz::*;

fn personality() -> &'static BlkPersonality {
    static P: OnceLock<BlkPersonality> = OnceLock::new();
    P.get_or_init(|| {
        let s: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 20).expect("memfd"));
        let opts = BlkOptions {
            num_queues: 1,
            queue_size: QUEUE_SIZE,
            block_size: 512,
            serial: "FUZZ".into(),
        };
        BlkPersonality::new(s, opts)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mem = guest_memory();
    let Some(chain) = pop_chain(&mem, &mut input) else {
        return;
    };
    let limits = any_chain();
    let writable_len = guest_bufs(&chain, &limits).map_or(0, |b| b.writable_len());
    let writable = writable_ranges(&chain);
    let before = snapshot(&mem);
    if let Outcome::Complete { used_len, .. } = personality().process(0, chain) {
        assert!(used_len as usize <= writable_len, "used {used_len} > {writable_len}");
    }
    assert_only_writable_changed(&before, &snapshot(&mem), &writable);
});
