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
    let (mut a, mut b) = (pattern(512, 1), pattern(1536, 2));
    let (a0, b0) = (a.clone(), b.clone());
    s.write_vectored_at(&[IoBuf::from(&mut a[..]), IoBuf::from(&mut b[..])], 4096)
        .unwrap();
    let (a, b) = (a0, b0);
    let mut out = vec![0u8; 2048];
    s.read_at(&mut out, 4096).unwrap();
    assert_eq!(&out[..512], &a[..]);
    assert_eq!(&out[512..], &b[..]);
    assert!(s.read_at(&mut out, (1 << 20) - 1024).is_err());
}

#[test]
fn more_buffers_than_iov_max_and_short_transfers() {
    let s = FileStorage::memfd(1 << 20).unwrap();
    let mut data = pattern(3000 * 7, 3);
    let want = data.clone();
    let bufs: Vec<IoBuf<'_>> = data.chunks_mut(7).map(IoBuf::from).collect();
    assert_eq!(bufs.len(), 3000);
    s.write_vectored_at(&bufs, 100).unwrap();
    let mut back = vec![0u8; want.len()];
    let mut parts: Vec<&mut [u8]> = back.chunks_mut(5).collect();
    parts.insert(1, &mut []);
    let bufs: Vec<IoBuf<'_>> = parts.into_iter().map(IoBuf::from).collect();
    s.read_vectored_at(&bufs, 100).unwrap();
    assert_eq!(back, want);
    let mut iov = [(0usize, 4usize), (0, 4), (0, 4)].map(|(p, l)| libc::iovec {
        iov_base: p as *mut libc::c_void,
        iov_len: l,
    });
    assert_eq!(advance(&mut iov, 6, 0), 1);
    assert_eq!((iov[1].iov_base as usize, iov[1].iov_len), (2, 2));
    assert_eq!(advance(&mut iov, 2, 1), 2);
    assert_eq!(advance(&mut iov, 4, 2), 3);
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
    // Not the temp dir: it is often a tmpfs, which has no O_DIRECT.
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
    let dir = tempfile::tempdir_in(target).unwrap();
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
    // Vectored and unaligned, across a 4 KiB boundary, at the end of the file.
    let mut v = pattern(6000, 4);
    let want = v.clone();
    let (x, y) = v.split_at_mut(1234);
    let end = (1 << 20) - 6000;
    s.write_vectored_at(&[IoBuf::from(x), IoBuf::from(y)], end)
        .unwrap();
    let mut back = vec![0u8; 6000];
    let (x, y) = back.split_at_mut(4000);
    s.read_vectored_at(&[IoBuf::from(x), IoBuf::from(y)], end)
        .unwrap();
    assert_eq!(back, want);
    let mut before = vec![0u8; 1000];
    s.read_at(&mut before, 700).unwrap();
    assert_eq!(before, data, "the bounce kept the bytes around the write");
}

#[test]
fn direct_refuses_an_image_that_is_not_whole_blocks_and_creates_nothing() {
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
    std::fs::create_dir_all(target).unwrap();
    let dir = tempfile::tempdir_in(target).unwrap();
    let path = dir.path().join("tail.img");
    std::fs::write(&path, vec![0u8; 4096 + 512]).unwrap();
    assert!(matches!(
        FileStorage::open(&path, None, true, false),
        Err(StorageError::UnalignedDirect { size: 4608, .. })
    ));
    assert!(FileStorage::open(&path, None, false, false).is_ok());
    let new = dir.path().join("new.img");
    assert!(matches!(
        FileStorage::open(&new, Some(4608), true, false),
        Err(StorageError::UnalignedDirect { .. })
    ));
    assert!(!new.exists(), "nothing created");
}
