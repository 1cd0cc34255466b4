//! The virtio-blk request path on an adversarial ring: header, data descriptors, status byte,
//! DISCARD / WRITE_ZEROES segments and GET_ID, over a 1 MiB RAM disk. Checks: no panic, the
//! used length never exceeds the chain's writable bytes, and nothing outside the chain's
//! device-writable buffers changes.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk::blk::{BlkOptions, BlkPersonality};
use vhost_blk::device::Personality;
use vhost_blk_fuzz::*;
use vhost_blk_storage::{FileStorage, Storage};

fn personality() -> &'static BlkPersonality {
    static P: OnceLock<BlkPersonality> = OnceLock::new();
    P.get_or_init(|| {
        let s: Arc<dyn Storage> = Arc::new(FileStorage::memfd(1 << 20).expect("memfd"));
        let opts = BlkOptions {
            num_queues: 1,
            queue_size: QUEUE_SIZE,
            block_size: 512,
            serial: "FUZZ".into(),
            writethrough: false,
        };
        BlkPersonality::new(s, opts)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    process_checked(&mut input, |chain| personality().process(0, chain));
});
