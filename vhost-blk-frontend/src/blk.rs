//! virtio-blk requests built in guest memory.

use std::sync::Arc;

use super::ring::Buf;
use super::{FrontendError, GuestRam};

const T_IN: u32 = 0;
const T_OUT: u32 = 1;
const T_FLUSH: u32 = 4;
const T_GET_ID: u32 = 8;
const T_DISCARD: u32 = 11;
const T_WRITE_ZEROES: u32 = 13;

/// A request with its own header, data and status buffers in guest memory. Reusable: build
/// once per slot, change sector/type, resubmit.
#[derive(Debug)]
pub struct BlkRequest {
    ram: Arc<GuestRam>,
    header: u64,
    data: u64,
    data_cap: u32,
    status: u64,
    type_: u32,
    len: u32,
}

/// What came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlkResult {
    pub status: u8,
    pub used_len: u32,
}

impl BlkRequest {
    /// Allocates buffers for requests of up to `data_cap` bytes.
    pub fn new(ram: &Arc<GuestRam>, data_cap: u32) -> Result<Self, FrontendError> {
        let header = ram.alloc(16, 16)?;
        let data = ram.alloc(u64::from(data_cap.max(512)), 4096)?;
        let status = ram.alloc(1, 1)?;
        Ok(Self {
            ram: ram.clone(),
            header,
            data,
            data_cap: data_cap.max(512),
            status,
            type_: T_IN,
            len: 0,
        })
    }

    fn set_header(&mut self, type_: u32, sector: u64, len: u32) -> Result<(), FrontendError> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&type_.to_le_bytes());
        h[8..16].copy_from_slice(&sector.to_le_bytes());
        self.ram.write(self.header, &h)?;
        self.ram.write(self.status, &[0xff])?;
        self.type_ = type_;
        self.len = len;
        Ok(())
    }

    /// Prepares a read of `len` bytes at `sector`.
    pub fn read(&mut self, sector: u64, len: u32) -> Result<&mut Self, FrontendError> {
        self.set_header(T_IN, sector, len.min(self.data_cap))?;
        Ok(self)
    }

    /// Prepares a write of `data` at `sector`.
    pub fn write(&mut self, sector: u64, data: &[u8]) -> Result<&mut Self, FrontendError> {
        let n = data.len().min(self.data_cap as usize);
        self.ram.write(self.data, &data[..n])?;
        self.set_header(T_OUT, sector, n as u32)?;
        Ok(self)
    }

    /// Prepares a write of the bytes already in the data buffer.
    pub fn write_in_place(&mut self, sector: u64, len: u32) -> Result<&mut Self, FrontendError> {
        self.set_header(T_OUT, sector, len.min(self.data_cap))?;
        Ok(self)
    }

    pub fn flush(&mut self) -> Result<&mut Self, FrontendError> {
        self.set_header(T_FLUSH, 0, 0)?;
        Ok(self)
    }

    pub fn get_id(&mut self) -> Result<&mut Self, FrontendError> {
        self.set_header(T_GET_ID, 0, 20)?;
        Ok(self)
    }

    /// DISCARD (or WRITE_ZEROES with `zeroes`) of `segments` = (sector, sectors, flags).
    pub fn discard(
        &mut self,
        segments: &[(u64, u32, u32)],
        zeroes: bool,
    ) -> Result<&mut Self, FrontendError> {
        let mut b = Vec::with_capacity(16 * segments.len());
        for &(s, n, f) in segments {
            b.extend_from_slice(&s.to_le_bytes());
            b.extend_from_slice(&n.to_le_bytes());
            b.extend_from_slice(&f.to_le_bytes());
        }
        self.ram.write(self.data, &b)?;
        self.set_header(
            if zeroes { T_WRITE_ZEROES } else { T_DISCARD },
            0,
            b.len() as u32,
        )?;
        Ok(self)
    }

    /// The descriptor layout: header, data (device-readable or -writable), status.
    pub fn bufs(&self) -> Vec<Buf> {
        let mut v = vec![Buf {
            addr: self.header,
            len: 16,
            writable: false,
        }];
        let data_writable = matches!(self.type_, T_IN | T_GET_ID);
        if self.len > 0 {
            v.push(Buf {
                addr: self.data,
                len: self.len,
                writable: data_writable,
            });
        }
        v.push(Buf {
            addr: self.status,
            len: 1,
            writable: true,
        });
        v
    }

    /// Reads the status byte and combines it with the used length.
    pub fn result(&self, used_len: u32) -> Result<BlkResult, FrontendError> {
        let mut s = [0u8; 1];
        self.ram.read(self.status, &mut s)?;
        Ok(BlkResult {
            status: s[0],
            used_len,
        })
    }

    /// The data buffer's contents (after a read).
    pub fn data(&self) -> Result<Vec<u8>, FrontendError> {
        let mut v = vec![0u8; self.len as usize];
        self.ram.read(self.data, &mut v)?;
        Ok(v)
    }

    /// Guest addresses of (header, data, status), for hand-made chains.
    pub fn addresses(&self) -> (u64, u64, u64) {
        (self.header, self.data, self.status)
    }

    /// Fills the data buffer (for `write_in_place`).
    pub fn fill(&self, data: &[u8]) -> Result<(), FrontendError> {
        self.ram
            .write(self.data, &data[..data.len().min(self.data_cap as usize)])
    }
}
