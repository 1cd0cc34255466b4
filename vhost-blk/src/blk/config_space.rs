//! The virtio-blk configuration space (`struct virtio_blk_config`, little endian).

/// Offset of the `writeback` byte, the only field the driver writes.
pub const WRITEBACK_OFFSET: usize = 32;
/// Length of the layout we expose (up to and including `unused1`).
pub const CONFIG_LEN: usize = 60;

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
    /// Serialises the structure.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; CONFIG_LEN];
        b[0..8].copy_from_slice(&self.capacity_sectors.to_le_bytes());
        b[8..12].copy_from_slice(&self.size_max.to_le_bytes());
        b[12..16].copy_from_slice(&self.seg_max.to_le_bytes());
        // 16..20: geometry (not offered).
        b[20..24].copy_from_slice(&self.blk_size.to_le_bytes());
        b[24] = self.physical_block_exp;
        b[25] = 0; // alignment_offset
        b[26..28].copy_from_slice(&self.min_io_size.to_le_bytes());
        b[28..32].copy_from_slice(&self.opt_io_size.to_le_bytes());
        b[WRITEBACK_OFFSET] = u8::from(self.writeback);
        b[34..36].copy_from_slice(&self.num_queues.to_le_bytes());
        b[36..40].copy_from_slice(&self.max_discard_sectors.to_le_bytes());
        b[40..44].copy_from_slice(&self.max_discard_seg.to_le_bytes());
        b[44..48].copy_from_slice(&self.discard_sector_alignment.to_le_bytes());
        b[48..52].copy_from_slice(&self.max_write_zeroes_sectors.to_le_bytes());
        b[52..56].copy_from_slice(&self.max_write_zeroes_seg.to_le_bytes());
        b[56] = u8::from(self.write_zeroes_may_unmap);
        b
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
        assert_eq!(b.len(), CONFIG_LEN);
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
    }
}
