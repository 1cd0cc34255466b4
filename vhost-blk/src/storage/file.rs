//! Raw image files (and memfd RAM disks) with positional vectored I/O on one shared descriptor.

use std::fs::{File, OpenOptions};
use std::io::{IoSlice, IoSliceMut};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::path::Path;

use super::{check_range, iov_len, Storage, StorageError};

/// Alignment O_DIRECT needs for buffers, offsets and lengths (logical block size of the host).
const DIRECT_ALIGN: usize = 4096;
/// `preadv`/`pwritev` take at most IOV_MAX (1024) buffers at a time on Linux.
const IOV_MAX: usize = 1024;

/// A raw image file or memfd.
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    size: u64,
    direct: bool,
    read_only: bool,
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
        Ok(Self {
            file,
            size,
            direct,
            read_only,
        })
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
        Ok(Self {
            file,
            size,
            direct: false,
            read_only: false,
        })
    }

    fn direct_aligned<T: std::ops::Deref<Target = [u8]>>(&self, bufs: &[T], offset: u64) -> bool {
        offset as usize % DIRECT_ALIGN == 0
            && bufs
                .iter()
                .all(|b| b.as_ptr() as usize % DIRECT_ALIGN == 0 && b.len() % DIRECT_ALIGN == 0)
    }

    fn fallocate(&self, mode: libc::c_int, offset: u64, len: u64) -> std::io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        // SAFETY: plain syscall on a descriptor we own; arguments are checked by the kernel.
        let r = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                mode,
                offset as libc::off_t,
                len as libc::off_t,
            )
        };
        if r == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    fn write_zero_bytes(&self, mut offset: u64, len: u64) -> Result<(), StorageError> {
        let zeros = vec![0u8; 1 << 20];
        let end = offset + len;
        while offset < end {
            let n = (end - offset).min(zeros.len() as u64) as usize;
            self.write_at(&zeros[..n], offset)?;
            offset += n as u64;
        }
        Ok(())
    }
}

/// Converts buffers into iovecs, `IOV_MAX` at a time.
fn to_iovecs(ptrs: impl Iterator<Item = (*mut u8, usize)>) -> Vec<libc::iovec> {
    ptrs.map(|(p, l)| libc::iovec {
        iov_base: p.cast(),
        iov_len: l,
    })
    .collect()
}

/// Drops `n` bytes from the front of `iov`, returning the index of the first remaining buffer.
fn advance(iov: &mut [libc::iovec], mut n: usize, mut first: usize) -> usize {
    while first < iov.len() && n >= iov[first].iov_len {
        n -= iov[first].iov_len;
        first += 1;
    }
    if first < iov.len() && n > 0 {
        // SAFETY: `n` is smaller than this buffer's length, so the pointer stays inside it.
        iov[first].iov_base = unsafe { iov[first].iov_base.cast::<u8>().add(n) }.cast();
        iov[first].iov_len -= n;
    }
    first
}

/// Runs `op` (preadv or pwritev) until every byte is moved. A short read at end of file is an
/// error: the caller checked the range, so it means the file shrank under us.
fn transfer(
    fd: libc::c_int,
    mut iov: Vec<libc::iovec>,
    mut offset: u64,
    op: unsafe extern "C" fn(libc::c_int, *const libc::iovec, libc::c_int, libc::off_t) -> isize,
) -> std::io::Result<()> {
    let mut first = 0;
    while first < iov.len() {
        let cnt = (iov.len() - first).min(IOV_MAX);
        // SAFETY: every iovec points into a live buffer borrowed by the caller for this call,
        // and `first..first+cnt` is inside the vector.
        let r = unsafe {
            op(
                fd,
                iov[first..].as_ptr(),
                cnt as libc::c_int,
                offset as libc::off_t,
            )
        };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 && iov[first..].iter().any(|v| v.iov_len > 0) {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof));
        }
        offset += r as u64;
        first = advance(&mut iov, r as usize, first);
    }
    Ok(())
}

/// A zeroed buffer aligned for O_DIRECT.
struct AlignedBuf {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl AlignedBuf {
    fn new(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(DIRECT_ALIGN), DIRECT_ALIGN)
            .expect("valid layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        Self { ptr, layout }
    }
    fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` is a live allocation of `layout.size()` bytes owned by self.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

impl FileStorage {
    /// O_DIRECT path for unaligned requests: read-modify-write through an aligned bounce buffer.
    fn bounce_read(&self, bufs: &mut [IoSliceMut<'_>], offset: u64) -> Result<(), StorageError> {
        let len = iov_len(bufs) as usize;
        let start = offset - offset % DIRECT_ALIGN as u64;
        let head = (offset - start) as usize;
        let total = (head + len).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let mut bounce = AlignedBuf::new(total);
        let b = bounce.as_mut_slice();
        self.file
            .read_exact_at(&mut b[..total.min((self.size - start) as usize)], start)?;
        let mut pos = head;
        for buf in bufs.iter_mut() {
            let n = buf.len();
            buf.copy_from_slice(&b[pos..pos + n]);
            pos += n;
        }
        Ok(())
    }

    fn bounce_write(&self, bufs: &[IoSlice<'_>], offset: u64) -> Result<(), StorageError> {
        let len = iov_len(bufs) as usize;
        let start = offset - offset % DIRECT_ALIGN as u64;
        let head = (offset - start) as usize;
        let total = (head + len).div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
        let in_file = total.min((self.size - start) as usize);
        let mut bounce = AlignedBuf::new(total);
        let b = bounce.as_mut_slice();
        if head != 0 || len != total {
            self.file.read_exact_at(&mut b[..in_file], start)?;
        }
        let mut pos = head;
        for buf in bufs {
            b[pos..pos + buf.len()].copy_from_slice(buf);
            pos += buf.len();
        }
        self.file.write_all_at(&b[..in_file], start)?;
        Ok(())
    }
}

impl Storage for FileStorage {
    fn size(&self) -> u64 {
        self.size
    }

    fn read_only(&self) -> bool {
        self.read_only
    }

    fn read_vectored_at(
        &self,
        bufs: &mut [IoSliceMut<'_>],
        offset: u64,
    ) -> Result<(), StorageError> {
        check_range(offset, iov_len(bufs), self.size)?;
        if self.direct && !self.direct_aligned(bufs, offset) {
            return self.bounce_read(bufs, offset);
        }
        let iov = to_iovecs(bufs.iter_mut().map(|b| (b.as_mut_ptr(), b.len())));
        Ok(transfer(self.file.as_raw_fd(), iov, offset, libc::preadv)?)
    }

    fn write_vectored_at(&self, bufs: &[IoSlice<'_>], offset: u64) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        check_range(offset, iov_len(bufs), self.size)?;
        if self.direct && !self.direct_aligned(bufs, offset) {
            return self.bounce_write(bufs, offset);
        }
        let iov = to_iovecs(bufs.iter().map(|b| (b.as_ptr().cast_mut(), b.len())));
        // pwritev only reads through the pointers; the cast satisfies the shared iovec type.
        Ok(transfer(self.file.as_raw_fd(), iov, offset, pwritev_ffi)?)
    }

    fn flush(&self) -> Result<(), StorageError> {
        Ok(self.file.sync_data()?)
    }

    fn discard(&self, offset: u64, len: u64) -> Result<(), StorageError> {
        if self.read_only {
            return Err(StorageError::ReadOnly);
        }
        check_range(offset, len, self.size)?;
        // A discard is advisory: if the file system cannot punch holes, keep the data.
        match self.fallocate(
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
            offset,
            len,
        ) {
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
        let mode = if may_unmap {
            libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE
        } else {
            libc::FALLOC_FL_ZERO_RANGE | libc::FALLOC_FL_KEEP_SIZE
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
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn vectored_roundtrip_on_a_created_sparse_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.img");
        let s = FileStorage::open(&path, Some(1 << 20), false, false).unwrap();
        assert_eq!(s.size(), 1 << 20);
        let a = pattern(512, 1);
        let b = pattern(1536, 2);
        s.write_vectored_at(&[IoSlice::new(&a), IoSlice::new(&b)], 4096)
            .unwrap();
        let mut out = vec![0u8; 2048];
        s.read_at(&mut out, 4096).unwrap();
        assert_eq!(&out[..512], &a[..]);
        assert_eq!(&out[512..], &b[..]);
        assert!(s.read_at(&mut out, (1 << 20) - 1024).is_err());
    }

    #[test]
    fn discard_and_write_zeroes_read_back_zero() {
        let s = FileStorage::memfd(1 << 20).unwrap();
        s.write_at(&pattern(65536, 7), 0).unwrap();
        s.discard(0, 8192).unwrap();
        s.write_zeroes(16384, 4096, false).unwrap();
        let mut out = vec![0xffu8; 65536];
        s.read_at(&mut out, 0).unwrap();
        assert!(out[..8192].iter().all(|&b| b == 0));
        assert!(out[16384..20480].iter().all(|&b| b == 0));
        assert_eq!(out[8192..16384], pattern(65536, 7)[8192..16384]);
    }

    #[test]
    fn read_only_refuses_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.img");
        std::fs::write(&path, vec![1u8; 8192]).unwrap();
        let s = FileStorage::open(&path, None, false, true).unwrap();
        assert!(matches!(
            s.write_at(&[0u8; 512], 0),
            Err(StorageError::ReadOnly)
        ));
        let mut b = [0u8; 512];
        s.read_at(&mut b, 512).unwrap();
        assert_eq!(b, [1u8; 512]);
    }

    #[test]
    fn missing_file_without_create_size_is_an_error_and_creates_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("absent.img");
        assert!(matches!(
            FileStorage::open(&path, None, false, false),
            Err(StorageError::Open { .. })
        ));
        assert!(!path.exists());
    }

    #[test]
    fn direct_io_bounces_unaligned_requests() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("direct.img");
        let s = match FileStorage::open(&path, Some(1 << 20), true, false) {
            Ok(s) => s,
            // tmpfs has no O_DIRECT: nothing to test on this host's temp dir.
            Err(StorageError::Open { .. }) | Err(StorageError::Create { .. }) => return,
            Err(e) => panic!("{e}"),
        };
        let data = pattern(1000, 9);
        match s.write_at(&data, 700) {
            Ok(()) => {}
            Err(StorageError::Io(e)) if e.raw_os_error() == Some(libc::EINVAL) => return,
            Err(e) => panic!("{e}"),
        }
        let mut out = vec![0u8; 1000];
        s.read_at(&mut out, 700).unwrap();
        assert_eq!(out, data);
    }
}
