//! End to end through the vhost-user protocol: the real backend binary, driven by the
//! in-process frontend on all queues in parallel, with data checked against the image file.

mod common;

use std::time::Duration;

use common::{file_bytes, pattern, Backend};
use vhost_blk_frontend::{BlkRequest, ConnectOptions, Connection, QueueHandle};

const T: Duration = Duration::from_secs(10);

fn run_one(q: &mut QueueHandle, req: &BlkRequest) -> vhost_blk_frontend::BlkResult {
    let head = q.submit(&req.bufs()).unwrap();
    let used = q.wait(T).unwrap();
    assert_eq!(used.len(), 1);
    assert_eq!(used[0].id, head);
    req.result(used[0].len).unwrap()
}

#[test]
fn all_eight_queues_in_parallel_with_data_checked_against_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let img_s = img.to_str().unwrap().to_string();
    let mut backend = Backend::start_in(
        dir,
        &["--image", &img_s, "--size", "64M", "--serial", "E2E-SERIAL"],
    );
    let mut conn = Connection::connect(&backend.socket, &ConnectOptions::default()).unwrap();
    // Config space: capacity in sectors and the number of queues.
    let cfg = conn.config(0, 60).unwrap();
    assert_eq!(
        u64::from_le_bytes(cfg[0..8].try_into().unwrap()),
        (64 << 20) / 512
    );
    assert_eq!(u16::from_le_bytes(cfg[34..36].try_into().unwrap()), 8);
    let region = (64u64 << 20) / 8 / 512; // sectors per queue
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let mut q = conn.take_queue(i).unwrap();
            std::thread::spawn(move || {
                let base = i as u64 * region;
                let mut req = BlkRequest::new(&q.ram.clone(), 64 * 1024).unwrap();
                // Writes of 4..64 KiB across the queue's region, each read back at once.
                let mut sector = base;
                let mut n = 0;
                while sector + 128 <= base + region && n < 40 {
                    let len = 4096 * (1 + (n % 16));
                    let data = pattern(sector, i as u8, len);
                    let r = run_one(&mut q, req.write(sector, &data).unwrap());
                    assert_eq!((r.status, r.used_len), (0, 1));
                    let r = run_one(&mut q, req.read(sector, len as u32).unwrap());
                    assert_eq!((r.status, r.used_len), (0, len as u32 + 1));
                    assert_eq!(req.data().unwrap(), data, "queue {i} sector {sector}");
                    sector += 128;
                    n += 1;
                }
                assert_eq!(run_one(&mut q, req.flush().unwrap()).status, 0);
                let r = run_one(&mut q, req.get_id().unwrap());
                assert_eq!((r.status, r.used_len), (0, 21));
                assert_eq!(&req.data().unwrap()[..10], b"E2E-SERIAL");
                // Discard then write-zeroes the second and third 4 KiB of the region.
                let r = run_one(&mut q, req.discard(&[(base + 8, 8, 0)], false).unwrap());
                assert_eq!(r.status, 0);
                let r = run_one(&mut q, req.discard(&[(base + 16, 8, 1)], true).unwrap());
                assert_eq!(r.status, 0);
                let r = run_one(&mut q, req.read(base + 8, 8192).unwrap());
                assert_eq!(r.status, 0);
                assert!(req.data().unwrap().iter().all(|&b| b == 0));
                (i, n)
            })
        })
        .collect();
    let mut writes = Vec::new();
    for h in handles {
        writes.push(h.join().expect("queue thread"));
    }
    drop(conn);
    let status = backend.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "backend exit: {status:?}");
    assert!(!backend.socket.exists(), "socket removed at exit");
    // The image holds what each queue wrote, and zeros where it discarded.
    for (i, n) in writes {
        let base = i as u64 * region;
        for k in 0..n {
            let sector = base + 128 * k as u64;
            let len = 4096 * (1 + (k % 16));
            let want = pattern(sector, i as u8, len);
            assert_eq!(
                file_bytes(&img, sector * 512, len),
                want,
                "queue {i} write {k}"
            );
        }
        assert!(file_bytes(&img, (base + 8) * 512, 8192)
            .iter()
            .all(|&b| b == 0));
    }
}

#[test]
fn serves_the_next_frontend_after_a_disconnect() {
    let backend = Backend::start(&["--mem", "16M", "--num-queues", "2"]);
    for round in 0..3u8 {
        let opts = ConnectOptions {
            num_queues: 2,
            ..Default::default()
        };
        let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
        for i in 0..2 {
            let mut q = conn.take_queue(i).unwrap();
            let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
            let data = pattern(i as u64, round, 4096);
            assert_eq!(
                run_one(&mut q, req.write(i as u64 * 8, &data).unwrap()).status,
                0
            );
            assert_eq!(
                run_one(&mut q, req.read(i as u64 * 8, 4096).unwrap()).status,
                0
            );
            assert_eq!(req.data().unwrap(), data);
        }
    }
}

#[test]
fn without_event_idx_and_indirect_descriptors_it_still_works() {
    let backend = Backend::start(&["--null", "1G", "--num-queues", "1"]);
    let opts = ConnectOptions {
        num_queues: 1,
        event_idx: false,
        indirect: false,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    let mut q = conn.take_queue(0).unwrap();
    let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
    for s in 0..50 {
        let r = run_one(&mut q, req.read(s * 8, 4096).unwrap());
        assert_eq!((r.status, r.used_len), (0, 4097));
    }
}

#[test]
fn guest_can_switch_to_writethrough() {
    let backend = Backend::start(&["--mem", "16M", "--num-queues", "1"]);
    let opts = ConnectOptions {
        num_queues: 1,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    assert_eq!(conn.config(32, 1).unwrap(), vec![1]);
    conn.set_config(32, &[0]).unwrap();
    assert_eq!(conn.config(32, 1).unwrap(), vec![0]);
    let mut q = conn.take_queue(0).unwrap();
    let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
    assert_eq!(
        run_one(&mut q, req.write(0, &[7u8; 4096]).unwrap()).status,
        0
    );
}
