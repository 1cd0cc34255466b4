//! Raw image files (and memfd RAM disks) with positional vectored I/O on one shared descriptor.
//!
//! Guest buffers go to the kernel as they are: `preadv`/`pwritev` on the iovecs of the
//! [`IoBuf`]s (the kernel copies with `copy_{to,from}_user`; no Rust reference to guest memory
//! is made). With O_DIRECT, a request whose buffers, offset or length are not aligned goes
//! through an aligned bounce buffer, copied with vm-memory's volatile copies.
//!
//! Rules (docs/data-guarantees.md):
//! 1. A completed write is in the host's page cache (or, with O_DIRECT, handed to the device);
//!    [`Storage::flush`] is `fdatasync`. An image created here (`create_size`) is synced with
//!    its directory entry before it is used, so a host crash after the first FLUSH cannot lose
//!    the file itself.
//! 2. Write errors are sticky ([`super::health`]): after a failed `fdatasync`, or a write that
//!    failed on the medium, every later flush fails until the backend is restarted.
//! 3. With O_DIRECT, every modifying operation holds the 4 KiB blocks it touches
//!    ([`super::ranges`]): an unaligned write is a read-modify-write of whole blocks, and
//!    nothing else may change those blocks between its read and its write. An image opened
//!    with O_DIRECT must be a whole number of 4 KiB blocks (its last block could not be
//!    written): it is refused at open, before anything is created.
//! 4. With a syscall trace ([`super::trace`]), every `pwritev`, zeroing `fallocate` and
//!    `fdatasync` of the image is recorded around the call itself.
//! 5. Test faults ([`TestFault`]) exist only in debug builds: a release build ignores them and
//!    the backend refuses the option that sets them.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;
use std::sync::Mutex;

use smallvec::SmallVec;
use vmm_sys_util::fallocate::{fallocate, FallocateMode};

use super::health::Health;
use super::ranges::{RangeGuard, RangeLocks};
use super::trace::SyscallTrace;
use super::{check_range, iov_len, IoBuf, Storage, StorageError};

/// Alignment O_DIRECT needs for buffers, offsets and lengths (logical block size of the host).
pub const DIRECT_ALIGN: usize = 4096;
/// `preadv`/`pwritev` take at most IOV_MAX (1024) buffers at a time on Linux.
const IOV_MAX: usize = 1024;
/// iovecs kept inline: a request of up to this many buffers allocates nothing.
const INLINE_IOVECS: usize = 8;

type Iovecs = SmallVec<[libc::iovec; INLINE_IOVECS]>;

// vm-memory is built without its `xen` feature: a pointer guard is a plain pointer and length
// (nothing is mapped for it, nothing to keep alive while the kernel uses the pointer). If that
// ever changes, this fails to compile and `iovecs` must keep the guards.
const _: () = assert!(
    std::mem::size_of::<vm_memory::volatile_memory::PtrGuardMut>()
        == 2 * std::mem::size_of::<usize>()
);

/// Deliberately broken behaviour for the power-loss simulator's self-checks (rule 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestFault {
    /// `flush` calls no `fdatasync` and reports success.
    NoFlush,
    /// A write is acknowledged before it reaches the file: it is kept back and written after
    /// the next `fdatasync`.
    EarlyAck,
}

/// A raw image file or memfd.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    size: u64,
    direct: bool,
    read_only: bool,
    /// Rule 2.
    health: Health,
    /// Rule 3 (used only with O_DIRECT).
    ranges: RangeLocks,
    /// Rule 4.
    trace: Option<SyscallTrace>,
    /// Rule 5.
    fault: Option<TestFault>,
    /// Writes kept back by [`TestFault::EarlyAck`].
    held_back: Mutex<Vec<(u64, Vec<u8>)>>,
}

/// The bytes of a write: the guest's buffers or the backend's own.
#[derive(Clone, Copy)]
enum Src<'a, 'b> {
    Guest(&'a [IoBuf<'b>]),
    Own(&'a [u8]),
}

impl Src<'_, '_> {
    fn len(&self) -> usize {
        match self {
            Src::Guest(b) => iov_len(b) as usize,
            Src::Own(b) => b.len(),
        }
    }

    fn iovecs(&self) -> Iovecs {
        match self {
            Src::Guest(b) => iovecs(b),
            // pwritev only reads through the pointer; the cast satisfies the shared iovec type.
            Src::Own(b) => std::iter::once(libc::iovec {
                iov_base: b.as_ptr().cast_mut().cast(),
                iov_len: b.len(),
            })
            .filter(|v| v.iov_len > 0)
            .collect(),
        }
    }

    /// Copies the bytes into `dst` (exactly `len` bytes long).
    fn copy_into(&self, mut dst: &mut [u8]) {
        match self {
            Src::Guest(bufs) => {
                for b in *bufs {
                    let n = b.copy_to(dst);
                    dst = dst.get_mut(n..).unwrap_or_default();
                }
            }
            Src::Own(b) => {
                if let Some(d) = dst.get_mut(..b.len()) {
                    d.copy_from_slice(b);
                }
            }
        }
    }

    fn to_vec(self) -> Vec<u8> {
        let mut v = vec![0u8; self.len()];
        self.copy_into(&mut v);
        v
    }
}

impl FileStorage {
    /// Opens `path`; if it does not exist and `create_size` is given, creates a sparse file of
    /// that size. The size of an existing file is its length.
    pub fn open(
        path: &Path,
        create_size: Option<u64>,
        direct: bool,
        read_only: bool,
    ) -> Result<Self, StorageError> {
        let unaligned = |size: u64| StorageError::UnalignedDirect {
            path: path.to_owned(),
            size,
        };
        if let Some(s) = create_size.filter(|s| direct && s % DIRECT_ALIGN as u64 != 0) {
            return Err(unaligned(s));
        }
        let mut opts = OpenOptions::new();
        opts.read(true).write(!read_only);
        if direct {
            opts.custom_flags(libc::O_DIRECT);
        }
        let file = match opts.open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && create_size.is_some() => {
                let f = opts.clone().create_new(true).open(path).map_err(|source| {
                    StorageError::Create {
                        path: path.to_owned(),
                        source,
                    }
                })?;
                f.set_len(create_size.unwrap_or(0))
                    .and_then(|()| sync_new_file(&f, path))
                    .map_err(|source| StorageError::Create {
                        path: path.to_owned(),
                        source,
                    })?;
                f
            }
            Err(source) => {
                return Err(StorageError::Open {
                    path: path.to_owned(),
                    source,
                })
            }
        };
        let size = file
            .metadata()
            .map_err(|source| StorageError::Open {
                path: path.to_owned(),
                source,
            })?
            .len();
        if direct && size % DIRECT_ALIGN as u64 != 0 {
            return Err(unaligned(size));
        }
        Ok(Self::from_file(file, size, direct, read_only))
    }

    fn from_file(file: File, size: u64, direct: bool, read_only: bool) -> Self {
        Self {
            file,
            size,
            direct,
            read_only,
            health: Health::default(),
            ranges: RangeLocks::default(),
            trace: None,
            fault: None,
            held_back: Mutex::new(Vec::new()),
        }
    }

    /// A RAM disk of `size` bytes: an anonymous memfd, so reads and writes need no lock.
    pub fn memfd(size: u64) -> Result<Self, StorageError> {
        // SAFETY: the name is a valid NUL-terminated string; the returned descriptor is checked.
        let fd = unsafe { libc::memfd_create(c"vhost-blk-mem".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(StorageError::Io(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        file.set_len(size)?;
        Ok(Self::from_file(file, size, false, false))
    }

    /// Records the image's writes and syncs to a new trace at `path` (rule 4).
    pub fn with_trace(mut self, path: &Path) -> Result<Self, StorageError> {
        let sector = if self.direct { DIRECT_ALIGN } else { 512 } as u32;
        let t = SyscallTrace::create(path, self.size, sector).map_err(|source| {
            StorageError::Create {
                path: path.to_owned(),
                source,
            }
        })?;
        self.trace = Some(t);
        Ok(self)
    }

    /// Breaks the storage on purpose (rule 5; ignored by release builds).
    pub fn with_test_fault(mut self, fault: Option<TestFault>) -> Self {
        self.fault = fault.filter(|_| cfg!(debug_assertions));
        self
    }

    /// Rule 3: the whole blocks around `len` bytes at `offset`, held with O_DIRECT.
    fn hold(&self, offset: u64, len: u64) -> Option<RangeGuard<'_>> {
        let a = DIRECT_ALIGN as u64;
        self.direct.then(|| {
            let start = offset - offset % a;
            let end = offset.saturating_add(len).div_ceil(a).saturating_mul(a);
            self.ranges.lock(start, end.max(start + 1))
        })
    }

    fn fallocate(&self, mode: FallocateMode, offset: u64, len: u64) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        let r = fallocate(&self.file, mode, true, offset, len)
            .map_err(|e| std::io::Error::from_raw_os_error(e.errno()));
        self.health.write_result(r)?;
        if let Some(t) = &self.trace {
            t.zero(offset, len);
        }
        Ok(())
    }

    /// WRITE ZEROES without `fallocate`: zeros written (the caller holds the range).
    fn write_zero_bytes(&self, mut offset: u64, len: u64) -> Result<(), StorageError> {
        let zeros = vec![0u8; 1 << 20];
        let end = offset + len;
        while offset < end {
            let n = (end - offset).min(zeros.len() as u64) as usize;
            self.write_held(Src::Own(zeros.get(..n).unwrap_or_default()), offset)?;
            offset += n as u64;
        }
        Ok(())
    }

    /// A checked write: its range held (rule 3), then written and recorded.
    fn write_src(&self, src: Src<'_, '_>, offset: u64) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        let len = src.len() as u64;
        check_range(offset, len, self.size)?;
        let _held = self.hold(offset, len);
        if self.fault == Some(TestFault::EarlyAck) {
            self.held_back_list().push((offset, src.to_vec()));
            return Ok(());
        }
        self.write_held(src, offset)
    }

    /// Writes `src` at `offset` (range checked and held by the caller), records it.
    fn write_held(&self, src: Src<'_, '_>, offset: u64) -> Result<(), StorageError> {
        let mut iov = src.iovecs();
        let r = if self.direct_ok(&iov, offset) {
            transfer(self.file.as_raw_fd(), &mut iov, offset, pwritev_ffi)
        } else {
            self.bounce_write(offset, src.len(), |dst| src.copy_into(dst))
        };
        self.health.write_result(r)?;
        if let Some(t) = &self.trace {
            t.write(offset, &src.to_vec());
        }
        Ok(())
    }

    fn held_back_list(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Vec<u8>)>> {
        // A list of owned writes: a panicking holder left it whole.
        self.held_back.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `fdatasync` under the health rules, recorded (rules 2 and 4).
    fn sync(&self) -> Result<(), StorageError> {
        if self.fault == Some(TestFault::NoFlush) {
            return self.health.check();
        }
        self.health.sync(|| {
            let n = self.trace.as_ref().map(SyscallTrace::sync_start);
            let r = self.file.sync_data();
            if let (Some(t), Some(n)) = (&self.trace, n) {
                t.sync_end(
                    n,
                    r.as_ref()
                        .err()
                        .map_or(0, |e| e.raw_os_error().unwrap_or(-1)),
                );
            }
            r
        })?;
        if self.fault == Some(TestFault::EarlyAck) {
            let writes = std::mem::take(&mut *self.held_back_list());
            for (offset, data) in writes {
                let _held = self.hold(offset, data.len() as u64);
                self.write_held(Src::Own(&data), offset)?;
            }
        }
        Ok(())
    }

    /// Whether O_DIRECT can take `iov` at `offset` as it is.
    fn direct_ok(&self, iov: &[libc::iovec], offset: u64) -> bool {
        !self.direct
            || (offset as usize % DIRECT_ALIGN == 0
                && iov.iter().all(|v| {
                    v.iov_base as usize % DIRECT_ALIGN == 0 && v.iov_len % DIRECT_ALIGN == 0
                }))
    }

    /// O_DIRECT path for unaligned reads: through an aligned bounce buffer.
    fn bounce_read(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        let span = Bounce::new(offset, iov_len(bufs) as usize, self.size);
        let mut bounce = AlignedBuf::new(span.total);
        self.file
            .read_exact_at(bounce.get_mut(..span.in_file), span.start)?;
        let mut pos = span.head;
        for buf in bufs {
            buf.copy_from(bounce.get_mut(pos..));
            pos += buf.len();
        }
        Ok(())
    }

    /// O_DIRECT path for unaligned writes: read-modify-write through an aligned bounce buffer
    /// (the caller holds the blocks, rule 3); `fill` copies the data into the slice it is given
    /// (exactly `len` bytes).
    fn bounce_write(
        &self,
        offset: u64,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) -> std::io::Result<()> {
        let span = Bounce::new(offset, len, self.size);
        let mut bounce = AlignedBuf::new(span.total);
        if span.head != 0 || len != span.total {
            self.file
                .read_exact_at(bounce.get_mut(..span.in_file), span.start)?;
        }
        fill(bounce.get_mut(span.head..span.head + len));
        self.file
            .write_all_at(bounce.get_mut(..span.in_file), span.start)
    }
}

/// A newly created image and its directory entry on stable storage.
fn sync_new_file(f: &File, path: &Path) -> std::io::Result<()> {
    f.sync_all()?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    File::open(dir)?.sync_all()
}

/// The aligned file range around `len` bytes at `offset`: where it starts, where the data
/// starts in it, its length, and how much of it lies inside a file of `size` bytes.
struct Bounce {
    start: u64,
    head: usize,
    total: usize,
    in_file: usize,
}

impl Bounce {
    fn new(offset: u64, len: usize, size: u64) -> Self {
        let start = offset - offset % DIRECT_ALIGN as u64;
        let head = (offset - start) as usize;
        let total = (head + len).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        Self {
            start,
            head,
            total,
            in_file: total.min(size.saturating_sub(start) as usize),
        }
    }
}

/// A zeroed buffer whose start is aligned for O_DIRECT (an over-allocated `Vec`).
struct AlignedBuf {
    v: Vec<u8>,
    at: usize,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let v = vec![0u8; len + DIRECT_ALIGN];
        let at = v.as_ptr().align_offset(DIRECT_ALIGN).min(DIRECT_ALIGN);
        Self { v, at }
    }

    /// Bytes `range` of the aligned buffer (empty when out of range, which the callers rule
    /// out by construction).
    fn get_mut(&mut self, range: impl std::ops::RangeBounds<usize>) -> &mut [u8] {
        use std::ops::Bound;
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s + 1,
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e + 1,
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.v.len() - self.at,
        };
        self.v
            .get_mut(self.at + start..self.at + end)
            .unwrap_or_default()
    }
}

/// The iovecs of `bufs` (empty buffers left out), where the kernel reads or writes them.
fn iovecs(bufs: &[IoBuf<'_>]) -> Iovecs {
    bufs.iter()
        .filter(|b| !b.is_empty())
        .map(|b| libc::iovec {
            iov_base: b.ptr_guard_mut().as_ptr().cast(),
            iov_len: b.len(),
        })
        .collect()
}

/// Drops `n` bytes from the front of `iov`, returning the index of the first remaining buffer.
fn advance(iov: &mut [libc::iovec], mut n: usize, mut first: usize) -> usize {
    while let Some(v) = iov.get_mut(first) {
        if n < v.iov_len {
            // Pointer arithmetic only: the kernel is the one to use the pointer.
            v.iov_base = v.iov_base.cast::<u8>().wrapping_add(n).cast();
            v.iov_len -= n;
            break;
        }
        n -= v.iov_len;
        first += 1;
    }
    first
}

/// `preadv` or `pwritev`.
type VectoredOp =
    unsafe extern "C" fn(libc::c_int, *const libc::iovec, libc::c_int, libc::off_t) -> isize;

/// Runs `op` (preadv or pwritev) until every byte is moved. A short read at end of file is an
/// error: the caller checked the range, so it means the file shrank under us.
fn transfer(
    fd: libc::c_int,
    iov: &mut [libc::iovec],
    mut offset: u64,
    op: VectoredOp,
) -> std::io::Result<()> {
    let mut first = 0;
    while let Some(rest) = iov.get(first..).filter(|r| !r.is_empty()) {
        let cnt = rest.len().min(IOV_MAX);
        // SAFETY: `rest` holds `cnt` or more iovecs, none empty, each describing bytes of a
        // buffer the caller borrows for this call: an `IoBuf` (a vm-memory VolatileSlice,
        // valid for reads and writes of its length while it lives; its pointer guard holds
        // nothing, see the assertion at the top) or, for `write_at`, the caller's own byte
        // slice, which only pwritev sees and only reads. The kernel copies with
        // copy_{to,from}_user: no Rust reference to that memory exists, so the guest changing
        // it meanwhile is no undefined behaviour here, only data it chose to race with.
        let r = unsafe { op(fd, rest.as_ptr(), cnt as libc::c_int, offset as libc::off_t) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        offset += r as u64;
        first = advance(iov, r as usize, first);
    }
    Ok(())
}

impl Storage for FileStorage {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        check_range(offset, iov_len(bufs), self.size)?;
        let mut iov = iovecs(bufs);
        if !self.direct_ok(&iov, offset) {
            return self.bounce_read(bufs, offset);
        }
        Ok(transfer(
            self.file.as_raw_fd(),
            &mut iov,
            offset,
            libc::preadv,
        )?)
    }

    fn write_vectored_at(&self, bufs: &[IoBuf<'_>], offset: u64) -> Result<(), StorageError> {
        self.write_src(Src::Guest(bufs), offset)
    }

    fn write_at(&self, buf: &[u8], offset: u64) -> Result<(), StorageError> {
        self.write_src(Src::Own(buf), offset)
    }

    fn flush(&self) -> Result<(), StorageError> {
        self.sync()
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        check_range(offset, len, self.size)?;
        let _held = self.hold(offset, len);
        // A discard is advisory: if the file system cannot punch holes, keep the data.
        match self.fallocate(FallocateMode::PunchHole, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    fn write_zeroes(&self, offset: u64, len: u64, may_unmap: bool) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        check_range(offset, len, self.size)?;
        let _held = self.hold(offset, len);
        let mode = if may_unmap {
            FallocateMode::PunchHole
        } else {
            FallocateMode::ZeroRange
        };
        match self.fallocate(mode, offset, len) {
            Ok(()) => Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                self.write_zero_bytes(offset, len)
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// `pwritev` with the signature `transfer` expects.
unsafe extern "C" fn pwritev_ffi(
    fd: libc::c_int,
    iov: *const libc::iovec,
    cnt: libc::c_int,
    off: libc::off_t,
) -> isize {
    // SAFETY: forwarded unchanged; the caller upholds pwritev's contract.
    unsafe { libc::pwritev(fd, iov, cnt, off) }
}

#[cfg(test)]
mod tests;
