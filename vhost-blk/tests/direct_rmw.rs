//! Unaligned O_DIRECT writes from several queues at once: each is a read-modify-write of whole
//! 4 KiB blocks (storage/file.rs). Eight threads write their own 512-byte sector of the same
//! block at the same moment, round after round; every sector must hold its writer's last
//! bytes. Without the read-modify-write lock, two writers of one block each wrote back the
//! other's old sector, and acknowledged writes were lost (docs/data-guarantees.md).

use std::sync::{Arc, Barrier};

use vhost_blk_storage::{FileStorage, Storage, StorageError};

const WRITERS: usize = 8;
const ROUNDS: usize = 300;
const BLOCKS: usize = 16;

fn sector(round: usize, writer: usize) -> Vec<u8> {
    let mut v = format!("round {round} writer {writer}\n").into_bytes();
    v.resize(512, b'.');
    v
}

#[test]
fn concurrent_unaligned_direct_writes_to_one_block_all_land() {
    // Not the temp dir: it is often a tmpfs, which has no O_DIRECT.
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
    std::fs::create_dir_all(target).unwrap();
    let dir = tempfile::tempdir_in(target).unwrap();
    let path = dir.path().join("rmw.img");
    let s = match FileStorage::open(&path, Some((BLOCKS * 4096) as u64), true, false) {
        Ok(s) => Arc::new(s),
        Err(StorageError::Open { .. }) | Err(StorageError::Create { .. }) => {
            eprintln!("no O_DIRECT on {target}: nothing to test");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let barrier = Arc::new(Barrier::new(WRITERS));
    let threads: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (s, barrier) = (s.clone(), barrier.clone());
            std::thread::spawn(move || {
                for round in 0..ROUNDS {
                    barrier.wait();
                    let off = ((round % BLOCKS) * 4096 + w * 512) as u64;
                    s.write_at(&sector(round, w), off).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut lost = Vec::new();
    for b in 0..BLOCKS {
        let last = (0..ROUNDS).rev().find(|r| r % BLOCKS == b).unwrap();
        for w in 0..WRITERS {
            let mut got = vec![0u8; 512];
            s.read_at(&mut got, (b * 4096 + w * 512) as u64).unwrap();
            if got != sector(last, w) {
                lost.push((b, w, String::from_utf8_lossy(&got[..24]).into_owned()));
            }
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} sectors lost their last write: {:?}",
        lost.len(),
        BLOCKS * WRITERS,
        &lost[..lost.len().min(5)]
    );
}
