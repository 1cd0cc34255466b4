//! The virtio-scsi configuration space: virtio-bindings' `struct virtio_scsi_config`, little
//! endian, as vm-memory's `ByteValued` bytes.

use std::mem::{offset_of, size_of};

use virtio_bindings::virtio_scsi::virtio_scsi_config;
use vm_memory::ByteValued;

/// Offset of `sense_size` (driver-writable).
pub const SENSE_SIZE_OFFSET: usize = offset_of!(virtio_scsi_config, sense_size);
/// Offset of `cdb_size` (driver-writable).
pub const CDB_SIZE_OFFSET: usize = offset_of!(virtio_scsi_config, cdb_size);
/// Length of the structure.
pub const CONFIG_LEN: usize = size_of::<virtio_scsi_config>();
/// Largest CDB and sense sizes the driver may configure.
pub const MAX_CDB_SIZE: u32 = 255;
pub const MAX_SENSE_SIZE: u32 = 255;

/// `struct virtio_scsi_config` as bytes.
#[derive(Clone, Copy, Debug, Default)]
#[repr(transparent)]
struct ConfigBytes(virtio_scsi_config);

// SAFETY: `virtio_scsi_config` is `repr(C, packed)` (no padding) of u32 and u16 fields, so every
// byte pattern is a valid value and every byte of it is initialised.
unsafe impl ByteValued for ConfigBytes {}

/// Values of the configuration space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiConfigSpace {
    /// Request queues (not counting control and event queues).
    pub num_queues: u32,
    pub seg_max: u32,
    /// Largest transfer in 512-byte sectors.
    pub max_sectors: u32,
    /// Commands per LUN the driver may queue (Linux: the LUN's queue depth).
    pub cmd_per_lun: u32,
    pub event_info_size: u32,
    pub sense_size: u32,
    pub cdb_size: u32,
    pub max_channel: u16,
    pub max_target: u16,
    pub max_lun: u32,
}

impl ScsiConfigSpace {
    /// Serialises the structure.
    pub fn to_bytes(&self) -> Vec<u8> {
        let c = virtio_scsi_config {
            num_queues: self.num_queues.to_le(),
            seg_max: self.seg_max.to_le(),
            max_sectors: self.max_sectors.to_le(),
            cmd_per_lun: self.cmd_per_lun.to_le(),
            event_info_size: self.event_info_size.to_le(),
            sense_size: self.sense_size.to_le(),
            cdb_size: self.cdb_size.to_le(),
            max_channel: self.max_channel.to_le(),
            max_target: self.max_target.to_le(),
            max_lun: self.max_lun.to_le(),
        };
        ConfigBytes(c).as_slice().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_virtio_spec_offsets() {
        let b = ScsiConfigSpace {
            num_queues: 8,
            seg_max: 254,
            max_sectors: 16384,
            cmd_per_lun: 16,
            event_info_size: 16,
            sense_size: 96,
            cdb_size: 32,
            max_channel: 0,
            max_target: 255,
            max_lun: 16383,
        }
        .to_bytes();
        // Offsets from the virtio 1.2 specification (5.6.4), not from the bindings.
        assert_eq!(
            (SENSE_SIZE_OFFSET, CDB_SIZE_OFFSET, CONFIG_LEN),
            (20, 24, 36)
        );
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
        assert_eq!(b.len(), CONFIG_LEN);
        assert_eq!(u32_at(0), 8);
        assert_eq!(u32_at(8), 16384);
        assert_eq!(u32_at(12), 16);
        assert_eq!(u32_at(SENSE_SIZE_OFFSET), 96);
        assert_eq!(u32_at(CDB_SIZE_OFFSET), 32);
        assert_eq!(u16::from_le_bytes([b[28], b[29]]), 0);
        assert_eq!(u16::from_le_bytes([b[30], b[31]]), 255);
        assert_eq!(u32_at(32), 16383);
    }
}
