//! The virtio-blk configuration space: virtio-bindings' `struct virtio_blk_config`, little
//! endian, as vm-memory's `ByteValued` bytes.

use std::mem::{offset_of, size_of};

use virtio_bindings::virtio_blk::virtio_blk_config;
use vm_memory::ByteValued;

/// Offset of the `wce` (writeback) byte, the only field the driver writes.
pub const WRITEBACK_OFFSET: usize = offset_of!(virtio_blk_config, wce);
/// Length of the structure (fields this device does not offer read as zero).
pub const CONFIG_LEN: usize = size_of::<virtio_blk_config>();

/// `struct virtio_blk_config` as bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(transparent)]
struct ConfigBytes(virtio_blk_config);

// SAFETY: `virtio_blk_config` is `repr(C, packed)` (no padding) of integers and integer arrays,
// so every byte pattern is a valid value and every byte of it is initialised.
unsafe impl ByteValued for ConfigBytes {}

/// Values of the configuration space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlkConfigSpace {
    pub capacity_sectors: u64,
    pub size_max: u32,
    pub seg_max: u32,
    pub blk_size: u32,
    pub physical_block_exp: u8,
    pub min_io_size: u16,
    pub opt_io_size: u32,
    pub writeback: bool,
    pub num_queues: u16,
    pub max_discard_sectors: u32,
    pub max_discard_seg: u32,
    pub discard_sector_alignment: u32,
    pub max_write_zeroes_sectors: u32,
    pub max_write_zeroes_seg: u32,
    pub write_zeroes_may_unmap: bool,
}

impl BlkConfigSpace {
    /// Serialises the structure (geometry, secure erase and zoned fields are zero: not offered).
    pub fn to_bytes(&self) -> Vec<u8> {
        let c = virtio_blk_config {
            capacity: self.capacity_sectors.to_le(),
            size_max: self.size_max.to_le(),
            seg_max: self.seg_max.to_le(),
            blk_size: self.blk_size.to_le(),
            physical_block_exp: self.physical_block_exp,
            alignment_offset: 0,
            min_io_size: self.min_io_size.to_le(),
            opt_io_size: self.opt_io_size.to_le(),
            wce: u8::from(self.writeback),
            num_queues: self.num_queues.to_le(),
            max_discard_sectors: self.max_discard_sectors.to_le(),
            max_discard_seg: self.max_discard_seg.to_le(),
            discard_sector_alignment: self.discard_sector_alignment.to_le(),
            max_write_zeroes_sectors: self.max_write_zeroes_sectors.to_le(),
            max_write_zeroes_seg: self.max_write_zeroes_seg.to_le(),
            write_zeroes_may_unmap: u8::from(self.write_zeroes_may_unmap),
            ..Default::default()
        };
        ConfigBytes(c).as_slice().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_virtio_spec_offsets() {
        let c = BlkConfigSpace {
            capacity_sectors: 0x1122_3344_5566_7788,
            size_max: 1 << 20,
            seg_max: 254,
            blk_size: 4096,
            physical_block_exp: 0,
            min_io_size: 8,
            opt_io_size: 256,
            writeback: true,
            num_queues: 8,
            max_discard_sectors: 0x3fff_ffff,
            max_discard_seg: 1,
            discard_sector_alignment: 8,
            max_write_zeroes_sectors: 0x3fff_ffff,
            max_write_zeroes_seg: 1,
            write_zeroes_may_unmap: true,
        };
        let b = c.to_bytes();
        // Offsets from the virtio 1.2 specification (5.2.4), not from the bindings.
        assert_eq!(WRITEBACK_OFFSET, 32);
        assert_eq!(b.len(), CONFIG_LEN);
        assert!(b.len() >= 60);
        assert_eq!(
            u64::from_le_bytes(b[0..8].try_into().unwrap()),
            0x1122_3344_5566_7788
        );
        assert_eq!(u32::from_le_bytes(b[12..16].try_into().unwrap()), 254);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 4096);
        assert_eq!(b[32], 1);
        assert_eq!(u16::from_le_bytes(b[34..36].try_into().unwrap()), 8);
        assert_eq!(u32::from_le_bytes(b[40..44].try_into().unwrap()), 1);
        assert_eq!(b[56], 1);
        assert!(b[57..].iter().all(|&x| x == 0));
    }
}
