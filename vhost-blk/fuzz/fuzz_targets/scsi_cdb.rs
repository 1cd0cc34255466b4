//! The SCSI target emulation on byte buffers: a CDB of any length and content, to a present,
//! absent or out-of-range LUN of 512- and 4096-byte-block RAM disks, with data-out and data-in
//! buffer lists of any shape. Checks: no panic, data-in written only within the buffers and
//! reported no longer than they are, data-out never written, residual bounded, CHECK
//! CONDITION with fixed-format sense and nothing returned.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk_fuzz::Input;
use vhost_blk_scsi::emulation::{
    Identity, Lun, LunOptions, ScanLatency, Target, CHECK_CONDITION, GOOD,
};
use vhost_blk_storage::{IoBuf, Storage, StorageSpec};

fn target() -> &'static Target {
    static T: OnceLock<Target> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = Target::new(0, ScanLatency::default());
        for (id, bs) in [(0u16, 512u32), (1, 4096)] {
            let s: Arc<dyn Storage> = StorageSpec::Mem { size: 256 << 10 }.open().expect("memfd");
            let opts = LunOptions {
                block_size: bs,
                ..Default::default()
            };
            t.insert_lun(Lun::new(id, s, opts, Identity::default_for(0, id)).expect("lun"));
        }
        t.list_absent_luns([5, 7]);
        t
    })
}

/// Up to 4 buffers of up to 64 KiB, lengths from the input (often zero-length ones too).
fn buffers(input: &mut Input<'_>) -> Vec<Vec<u8>> {
    let n = input.u8() % 5;
    (0..n)
        .map(|_| {
            let len = usize::from(input.u16());
            let fill = input.u8();
            vec![fill; len]
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let lun = match input.u8() % 4 {
        0 | 1 => 0,
        2 => 1,
        _ => input.u16(),
    };
    let cdb_len = usize::from(input.u8());
    let cdb = input.take(cdb_len).to_vec();
    let mut out = buffers(&mut input);
    let mut inb = buffers(&mut input);
    // The rest of the input is the data-out payload (the start of the first buffer).
    if let Some(first) = out.first_mut() {
        let rest = input.rest();
        let n = rest.len().min(first.len());
        first[..n].copy_from_slice(&rest[..n]);
    }
    let (out_guard, in_guard) = (out.clone(), inb.clone());
    let (out_cap, in_cap): (usize, usize) = (
        out.iter().map(Vec::len).sum(),
        inb.iter().map(Vec::len).sum(),
    );
    let outs: Vec<IoBuf<'_>> = out.iter_mut().map(|b| IoBuf::from(&mut b[..])).collect();
    let ins: Vec<IoBuf<'_>> = inb.iter_mut().map(|b| IoBuf::from(&mut b[..])).collect();
    let r = target().execute(lun, &cdb, &outs, &ins);
    drop((outs, ins));
    assert!(r.data_in_len <= in_cap);
    assert!(r.data_out_len <= out_cap);
    assert!(r.residual as usize <= in_cap + out_cap);
    assert_eq!(out, out_guard, "data-out written");
    // Data-in bytes past what the command reported are untouched.
    let mut pos = 0;
    for (b, g) in inb.iter().zip(&in_guard) {
        for (i, (x, y)) in b.iter().zip(g).enumerate() {
            assert!(
                x == y || pos + i < r.data_in_len,
                "data-in byte {} past {}",
                pos + i,
                r.data_in_len
            );
        }
        pos += b.len();
    }
    match r.status {
        GOOD => assert!(r.sense.is_empty()),
        CHECK_CONDITION => {
            assert_eq!(r.sense.len(), 18);
            assert_eq!(r.data_in_len, 0);
        }
        s => panic!("status {s:#x}"),
    }
});
