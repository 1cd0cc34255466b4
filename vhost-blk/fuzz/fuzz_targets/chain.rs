//! Descriptor chain -> guest buffers, two ways: an adversarial split ring popped by
//! virtio-queue (loops, indirect tables in guest memory, bad `next`) then `load_chain`, and
//! `GuestBufs::new` on descriptor lists straight from the input (overflowing addresses, holes,
//! zero lengths, overlaps). Every accessor is exercised at input-chosen offsets. Checks: no
//! panic, the slices add up to the lengths, reads and writes stay within the parts, and
//! nothing outside the device-writable descriptors changes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vhost_blk::device::chain::Desc;
use vhost_blk::device::{load_chain, ChainLimits, GuestBufs};
use vhost_blk_fuzz::*;

fn sum(s: &[vm_memory::VolatileSlice<'_>]) -> usize {
    s.iter().map(|s| s.len()).sum()
}

fn exercise(bufs: &GuestBufs<'_>, input: &mut Input<'_>) {
    let (r, w) = (bufs.readable_len(), bufs.writable_len());
    assert_eq!(sum(&bufs.readable_slices(0)), r);
    assert_eq!(sum(&bufs.writable_slices(0, usize::MAX)), w);
    for _ in 0..4 {
        let off = usize::from(input.u16());
        let len = usize::from(input.u16() % 4096);
        assert_eq!(sum(&bufs.readable_slices(off)), r.saturating_sub(off));
        assert_eq!(
            sum(&bufs.writable_slices(off, len)),
            len.min(w.saturating_sub(off))
        );
        let mut dst = vec![0u8; len];
        assert_eq!(bufs.read_readable(off, &mut dst), off + len <= r);
        let src = vec![input.u8(); len];
        assert_eq!(bufs.write_writable(off, &src), off + len <= w);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mem = guest_memory();
    let writable;
    if input.u8() & 1 == 0 {
        let Some(chain) = pop_chain(mem, &mut input) else {
            return;
        };
        writable = writable_ranges(&chain);
        snapshot_before(mem);
        let limits = ChainLimits::new(QUEUE_SIZE, input.u32());
        let mut bufs = GuestBufs::empty();
        if load_chain(&mut bufs, &chain, &limits) {
            exercise(&bufs, &mut input);
        } else {
            assert_eq!((bufs.readable_len(), bufs.writable_len()), (0, 0));
        }
    } else {
        let n = input.u8() % 12;
        let descs: Vec<Desc> = (0..n)
            .map(|_| Desc {
                addr: if input.u8() & 1 == 0 {
                    u64::from(input.u32() % 0x40000)
                } else {
                    input.u64()
                },
                len: u32::from(input.u16()),
                writable: input.u8() & 1 == 1,
            })
            .collect();
        writable = descs
            .iter()
            .filter(|d| d.writable)
            .filter_map(|d| {
                let end = d.addr.checked_add(u64::from(d.len))?;
                match d.addr {
                    0..0x10000 if end <= 0x10000 => Some((d.addr as usize, end as usize)),
                    0x20000..0x30000 if end <= 0x30000 => {
                        Some(((d.addr - 0x10000) as usize, (end - 0x10000) as usize))
                    }
                    _ => None,
                }
            })
            .collect();
        snapshot_before(mem);
        let (max_bytes, max_descs) = (u64::from(input.u32()), usize::from(input.u8()));
        if let Ok(bufs) = GuestBufs::new(mem, descs, max_bytes, max_descs) {
            exercise(&bufs, &mut input);
        }
    }
    assert_only_writable_changed(mem, &writable);
});
