//! One request slot of the in-process client, for either device: a virtio-blk request or a
//! virtio-scsi command (READ/WRITE(10) or (16), SYNCHRONIZE CACHE(10)) to LUN 0:0.
//!
//! Offsets are in 512-byte sectors for both; a SCSI slot converts them to logical blocks of
//! the LUN's block size (from READ CAPACITY(16)).

use std::sync::Arc;

use vhost_blk_frontend::scsi::{rw_cdb, DataDir};
use vhost_blk_frontend::{BlkRequest, Buf, FrontendError, GuestRam, QueueHandle, ScsiRequest};

pub(crate) enum Slot {
    Blk(BlkRequest),
    Scsi {
        req: ScsiRequest,
        /// READ(16)/WRITE(16) rather than the 10-byte forms.
        sixteen: bool,
        block_size: u32,
    },
}

/// The SCSI LUN's geometry: (512-byte sectors, block size).
pub(crate) fn scsi_capacity(
    ram: &Arc<GuestRam>,
    q: &mut QueueHandle,
) -> Result<(u64, u32), FrontendError> {
    let mut req = ScsiRequest::new(ram, 512)?;
    req.read_capacity_16()?;
    q.submit(&req.bufs())?;
    let used = q.wait(std::time::Duration::from_secs(10))?;
    let len = used.first().map_or(0, |u| u.len);
    let r = req.result(len)?;
    if !r.is_good() {
        return Err(FrontendError::VhostUser(format!(
            "READ CAPACITY(16) failed: {r:?}"
        )));
    }
    let d = req.data()?;
    let Some((lba, rest)) = d.split_first_chunk::<8>() else {
        return Err(short_capacity(d.len()));
    };
    let Some(bs) = rest.first_chunk::<4>() else {
        return Err(short_capacity(d.len()));
    };
    let (last_lba, bs) = (u64::from_be_bytes(*lba), u32::from_be_bytes(*bs).max(512));
    Ok((
        last_lba.saturating_add(1).saturating_mul(u64::from(bs)) / 512,
        bs,
    ))
}

fn short_capacity(len: usize) -> FrontendError {
    FrontendError::VhostUser(format!("READ CAPACITY(16) data of {len} bytes, 12 needed"))
}

impl Slot {
    pub fn blk(ram: &Arc<GuestRam>, bs: u32) -> Result<Self, FrontendError> {
        BlkRequest::new(ram, bs).map(Slot::Blk)
    }

    pub fn scsi(
        ram: &Arc<GuestRam>,
        bs: u32,
        sixteen: bool,
        block_size: u32,
    ) -> Result<Self, FrontendError> {
        let mut req = ScsiRequest::new(ram, bs)?;
        req.set_block_size(block_size);
        Ok(Slot::Scsi {
            req,
            sixteen,
            block_size,
        })
    }

    fn scsi_rw(
        req: &mut ScsiRequest,
        write: bool,
        sixteen: bool,
        block_size: u32,
        sector: u64,
        len: u32,
    ) -> Result<(), FrontendError> {
        let lba = sector * 512 / u64::from(block_size);
        let blocks = len / block_size;
        let dir = if write { DataDir::Out } else { DataDir::In };
        req.raw(&rw_cdb(write, sixteen, lba, blocks), dir, len)?;
        Ok(())
    }

    pub fn read(&mut self, sector: u64, len: u32) -> Result<(), FrontendError> {
        match self {
            Slot::Blk(r) => r.read(sector, len).map(drop),
            Slot::Scsi {
                req,
                sixteen,
                block_size,
            } => Self::scsi_rw(req, false, *sixteen, *block_size, sector, len),
        }
    }

    /// A write of what the data buffer holds.
    pub fn write_in_place(&mut self, sector: u64, len: u32) -> Result<(), FrontendError> {
        match self {
            Slot::Blk(r) => r.write_in_place(sector, len).map(drop),
            Slot::Scsi {
                req,
                sixteen,
                block_size,
            } => Self::scsi_rw(req, true, *sixteen, *block_size, sector, len),
        }
    }

    pub fn flush(&mut self) -> Result<(), FrontendError> {
        match self {
            Slot::Blk(r) => r.flush().map(drop),
            Slot::Scsi { req, .. } => req.synchronize_cache(0, 0).map(drop),
        }
    }

    pub fn bufs(&self) -> Vec<Buf> {
        match self {
            Slot::Blk(r) => r.bufs(),
            Slot::Scsi { req, .. } => req.bufs(),
        }
    }

    /// Whether the request succeeded (virtio-blk status OK; virtio-scsi response OK and
    /// status GOOD).
    pub fn ok(&self, used_len: u32) -> Result<bool, FrontendError> {
        Ok(match self {
            Slot::Blk(r) => r.result(used_len)?.status == 0,
            Slot::Scsi { req, .. } => req.result(used_len)?.is_good(),
        })
    }
}
