//! Guest memory of the in-process frontend: one memfd region at guest address 0, shared with
//! the backend through SET_MEM_TABLE, with a simple bump allocator.

use std::fs::File;
use std::os::unix::io::FromRawFd;
use std::sync::atomic::{AtomicU64, Ordering};

use vm_memory::{
    Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap, GuestMemoryRegion,
};

use super::FrontendError;

/// Shared guest RAM.
#[derive(Debug)]
pub struct GuestRam {
    mem: GuestMemoryMmap<()>,
    size: u64,
    next: AtomicU64,
}

impl GuestRam {
    /// Maps `size` bytes of a fresh memfd at guest address 0.
    pub fn new(size: u64) -> Result<Self, FrontendError> {
        // SAFETY: valid NUL-terminated name; the descriptor is checked below.
        let fd = unsafe { libc::memfd_create(c"vhost-blk-guest".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        // SAFETY: `fd` is fresh and owned by nobody else.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(size)?;
        let mem = GuestMemoryMmap::from_ranges_with_files(&[(
            GuestAddress(0),
            size as usize,
            Some(FileOffset::new(file, 0)),
        )])
        .map_err(|e| FrontendError::Memory(e.to_string()))?;
        // Keep address 0 unused so that a zero address is always a bug.
        Ok(Self {
            mem,
            size,
            next: AtomicU64::new(4096),
        })
    }

    pub fn memory(&self) -> &GuestMemoryMmap<()> {
        &self.mem
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// Allocates `len` bytes aligned to `align` (a power of two). Never freed.
    pub fn alloc(&self, len: u64, align: u64) -> Result<u64, FrontendError> {
        let mut cur = self.next.load(Ordering::Relaxed);
        loop {
            let start = cur.div_ceil(align) * align;
            let end = start
                .checked_add(len)
                .ok_or(FrontendError::OutOfMemory(len))?;
            if end > self.size {
                return Err(FrontendError::OutOfMemory(len));
            }
            match self
                .next
                .compare_exchange(cur, end, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return Ok(start),
                Err(now) => cur = now,
            }
        }
    }

    pub fn write(&self, gpa: u64, data: &[u8]) -> Result<(), FrontendError> {
        self.mem
            .write_slice(data, GuestAddress(gpa))
            .map_err(|e| FrontendError::Memory(e.to_string()))
    }

    pub fn read(&self, gpa: u64, data: &mut [u8]) -> Result<(), FrontendError> {
        self.mem
            .read_slice(data, GuestAddress(gpa))
            .map_err(|e| FrontendError::Memory(e.to_string()))
    }

    /// The frontend's own virtual address of a guest address (vring addresses are given to the
    /// backend in this form).
    pub fn host_addr(&self, gpa: u64) -> Result<u64, FrontendError> {
        self.mem
            .get_host_address(GuestAddress(gpa))
            .map(|p| p as u64)
            .map_err(|e| FrontendError::Memory(e.to_string()))
    }

    /// Region description for SET_MEM_TABLE.
    pub fn region_info(&self) -> Result<vhost::VhostUserMemoryRegionInfo, FrontendError> {
        let region = self
            .mem
            .iter()
            .next()
            .ok_or_else(|| FrontendError::Memory("no region".into()))?;
        let _ = region.len();
        vhost::VhostUserMemoryRegionInfo::from_guest_region(region)
            .map_err(|e| FrontendError::Memory(e.to_string()))
    }
}
