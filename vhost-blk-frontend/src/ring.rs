//! The driver side of a split virtqueue, in [`GuestRam`].
//!
//! Layout for a queue of size N: descriptor table (16 N bytes), available ring
//! (flags, idx, ring[N], used_event) and used ring (flags, idx, ring[N] of {id, len},
//! avail_event). Index fields are stored with release and loaded with acquire ordering, as a
//! guest driver does with its memory barriers.

use std::sync::atomic::Ordering;

use vm_memory::{Bytes, GuestAddress};

use super::{FrontendError, GuestRam};

const F_NEXT: u16 = 1;
const F_WRITE: u16 = 2;
const F_INDIRECT: u16 = 4;
/// Entries of the indirect table kept per descriptor.
pub const MAX_INDIRECT: usize = 64;

/// One buffer of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Buf {
    pub addr: u64,
    pub len: u32,
    /// Device-writable.
    pub writable: bool,
}

/// A descriptor exactly as written into a table (for hand-made, possibly malformed chains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawDesc {
    pub addr: u64,
    pub len: u32,
    pub flags: u16,
    pub next: u16,
}

/// One used-ring entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Used {
    pub id: u16,
    pub len: u32,
}

/// A split ring as a driver sees it.
#[derive(Debug)]
pub struct SplitRing {
    size: u16,
    desc: u64,
    avail: u64,
    used: u64,
    indirect_tables: u64,
    free: Vec<u16>,
    /// Descriptors owned by each in-flight head (to free them on completion).
    chains: Vec<Vec<u16>>,
    avail_idx: u16,
    last_used: u16,
    event_idx: bool,
    /// Descriptors `[size - reserved, size)` are kept out of the free list for raw use.
    reserved: u16,
}

impl SplitRing {
    /// Allocates the rings in `ram`. `reserved` descriptors at the top are left for
    /// [`SplitRing::write_raw_desc`].
    pub fn new(
        ram: &GuestRam,
        size: u16,
        event_idx: bool,
        reserved: u16,
    ) -> Result<Self, FrontendError> {
        let n = u64::from(size);
        let desc = ram.alloc(16 * n, 4096)?;
        let avail = ram.alloc(6 + 2 * n, 4096)?;
        let used = ram.alloc(6 + 8 * n, 4096)?;
        let indirect_tables = ram.alloc(16 * MAX_INDIRECT as u64 * n, 4096)?;
        ram.write(desc, &vec![0u8; 16 * size as usize])?;
        ram.write(avail, &vec![0u8; 6 + 2 * size as usize])?;
        ram.write(used, &vec![0u8; 6 + 8 * size as usize])?;
        let free = (0..size.saturating_sub(reserved)).rev().collect();
        Ok(Self {
            size,
            desc,
            avail,
            used,
            indirect_tables,
            free,
            chains: vec![Vec::new(); size as usize],
            avail_idx: 0,
            last_used: 0,
            event_idx,
            reserved,
        })
    }

    pub fn size(&self) -> u16 {
        self.size
    }

    /// Guest addresses of (descriptor table, available ring, used ring).
    pub fn addresses(&self) -> (u64, u64, u64) {
        (self.desc, self.avail, self.used)
    }

    /// Requests in flight.
    pub fn in_flight(&self) -> usize {
        self.chains.iter().filter(|c| !c.is_empty()).count()
    }

    /// Writes entry `i` of the descriptor table (or indirect table) at `table`, exactly as given.
    pub fn write_desc(
        &self,
        ram: &GuestRam,
        table: u64,
        i: u16,
        d: RawDesc,
    ) -> Result<(), FrontendError> {
        let RawDesc {
            addr,
            len,
            flags,
            next,
        } = d;
        let mut b = [0u8; 16];
        b[0..8].copy_from_slice(&addr.to_le_bytes());
        b[8..12].copy_from_slice(&len.to_le_bytes());
        b[12..14].copy_from_slice(&flags.to_le_bytes());
        b[14..16].copy_from_slice(&next.to_le_bytes());
        ram.write(table + 16 * u64::from(i), &b)
    }

    /// Writes a reserved descriptor exactly as given (for malformed-request tests).
    pub fn write_raw_desc(&self, ram: &GuestRam, i: u16, d: RawDesc) -> Result<(), FrontendError> {
        self.write_desc(ram, self.desc, i, d)
    }

    /// First reserved descriptor index.
    pub fn first_reserved(&self) -> u16 {
        self.size - self.reserved
    }

    /// Address of the indirect table that belongs to descriptor `i` (usable in raw tests).
    pub fn indirect_table(&self, i: u16) -> u64 {
        self.indirect_tables + 16 * MAX_INDIRECT as u64 * u64::from(i)
    }

    /// Queues a request made of `bufs`; with `indirect`, through one indirect descriptor.
    /// Returns the head index.
    pub fn add(
        &mut self,
        ram: &GuestRam,
        bufs: &[Buf],
        indirect: bool,
    ) -> Result<u16, FrontendError> {
        if bufs.is_empty() {
            return Err(FrontendError::QueueFull);
        }
        if indirect && bufs.len() <= MAX_INDIRECT {
            let head = self.free.pop().ok_or(FrontendError::QueueFull)?;
            let table = self.indirect_table(head);
            for (i, b) in bufs.iter().enumerate() {
                let last = i + 1 == bufs.len();
                let flags = if b.writable { F_WRITE } else { 0 } | if last { 0 } else { F_NEXT };
                self.write_desc(
                    ram,
                    table,
                    i as u16,
                    RawDesc {
                        addr: b.addr,
                        len: b.len,
                        flags,
                        next: (i + 1) as u16,
                    },
                )?;
            }
            let d = RawDesc {
                addr: table,
                len: (16 * bufs.len()) as u32,
                flags: F_INDIRECT,
                next: 0,
            };
            self.write_desc(ram, self.desc, head, d)?;
            self.chains[head as usize] = vec![head];
            self.publish(ram, head)?;
            return Ok(head);
        }
        if self.free.len() < bufs.len() {
            return Err(FrontendError::QueueFull);
        }
        let ids: Vec<u16> = (0..bufs.len()).filter_map(|_| self.free.pop()).collect();
        for (i, b) in bufs.iter().enumerate() {
            let last = i + 1 == bufs.len();
            let flags = if b.writable { F_WRITE } else { 0 } | if last { 0 } else { F_NEXT };
            let next = if last { 0 } else { ids[i + 1] };
            self.write_desc(
                ram,
                self.desc,
                ids[i],
                RawDesc {
                    addr: b.addr,
                    len: b.len,
                    flags,
                    next,
                },
            )?;
        }
        let head = ids[0];
        self.chains[head as usize] = ids;
        self.publish(ram, head)?;
        Ok(head)
    }

    /// Puts `head` in the available ring and advances its index.
    pub fn publish(&mut self, ram: &GuestRam, head: u16) -> Result<(), FrontendError> {
        let slot = u64::from(self.avail_idx % self.size);
        ram.write(self.avail + 4 + 2 * slot, &head.to_le_bytes())?;
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.store_u16(ram, self.avail + 2, self.avail_idx)
    }

    pub fn avail_idx(&self) -> u16 {
        self.avail_idx
    }

    fn store_u16(&self, ram: &GuestRam, gpa: u64, v: u16) -> Result<(), FrontendError> {
        ram.memory()
            .store(v.to_le(), GuestAddress(gpa), Ordering::Release)
            .map_err(|e| FrontendError::Memory(e.to_string()))
    }

    /// Collects new used entries and frees their descriptors. Also moves `used_event` so the
    /// device interrupts on the next completion (EVENT_IDX).
    pub fn poll_used(&mut self, ram: &GuestRam) -> Result<Vec<Used>, FrontendError> {
        let idx: u16 = ram
            .memory()
            .load(GuestAddress(self.used + 2), Ordering::Acquire)
            .map(u16::from_le)
            .map_err(|e| FrontendError::Memory(e.to_string()))?;
        let mut out = Vec::new();
        while self.last_used != idx {
            let slot = u64::from(self.last_used % self.size);
            let mut e = [0u8; 8];
            ram.read(self.used + 4 + 8 * slot, &mut e)?;
            let id = u32::from_le_bytes([e[0], e[1], e[2], e[3]]);
            let len = u32::from_le_bytes([e[4], e[5], e[6], e[7]]);
            self.last_used = self.last_used.wrapping_add(1);
            if id >= u32::from(self.size) {
                return Err(FrontendError::BadUsedId(id));
            }
            let chain = std::mem::take(&mut self.chains[id as usize]);
            self.free
                .extend(chain.into_iter().filter(|&d| d < self.size - self.reserved));
            out.push(Used { id: id as u16, len });
        }
        if self.event_idx {
            let at = self.avail + 4 + 2 * u64::from(self.size);
            self.store_u16(ram, at, self.last_used)?;
        }
        Ok(out)
    }
}
