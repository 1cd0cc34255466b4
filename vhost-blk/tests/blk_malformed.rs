//! Malformed-request corpus: hand-made descriptor chains through the real vhost-user path.
//! Each case asserts what the guest gets back (a status, or the buffer returned unused when
//! there is no valid place for a status), and that the backend then still serves a good
//! request on the same queue.

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

mod common;

use std::time::Duration;

use common::Backend;
use vhost_blk_frontend::{BlkRequest, ConnectOptions, Connection, GuestRam, QueueHandle, RawDesc};

const NEXT: u16 = 1;
const WRITE: u16 = 2;
const INDIRECT: u16 = 4;
const DISK: u64 = 16 << 20;
const SECTORS: u64 = DISK / 512;

/// What the case must produce.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// A used entry whose status byte is this, with this used length (if given).
    Status(u8, Option<u32>),
    /// A used entry with length 0 and the status byte untouched.
    Unused,
    /// Either no used entry at all, or an unused one (the ring itself was invalid).
    NothingOrUnused,
}

/// Buffers a case may point at.
struct Area {
    hdr: u64,
    data: u64,
    status: u64,
    big: u64,
}

/// A descriptor: (addr, len, flags, next) where `next` is relative to the first reserved
/// descriptor unless `ABS` is or-ed into it.
type D = (u64, u32, u16, u16);
const ABS: u16 = 0x8000;

struct Case {
    name: &'static str,
    header: Option<(u32, u64)>,
    /// Extra bytes written at `data` before the request (discard segments).
    data_bytes: Vec<u8>,
    descs: Vec<D>,
    /// Entries of the indirect table of the first reserved descriptor.
    indirect: Vec<D>,
    head_override: Option<u16>,
    expect: Expect,
}

fn seg(sector: u64, n: u32, flags: u32) -> Vec<u8> {
    let mut v = sector.to_le_bytes().to_vec();
    v.extend_from_slice(&n.to_le_bytes());
    v.extend_from_slice(&flags.to_le_bytes());
    v
}

fn cases(a: &Area, ram_size: u64) -> Vec<Case> {
    use Expect::*;
    let c = |name, header, descs: Vec<D>, expect| Case {
        name,
        header,
        data_bytes: vec![],
        descs,
        indirect: vec![],
        head_override: None,
        expect,
    };
    let rd = |t: u32, s: u64, len: u32| -> (Option<(u32, u64)>, Vec<D>) {
        (
            Some((t, s)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.data, len, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
        )
    };
    let wr = |t: u32, s: u64, len: u32| -> (Option<(u32, u64)>, Vec<D>) {
        (
            Some((t, s)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.data, len, NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
        )
    };
    let outside = ram_size + 0x10000;
    let mut v = vec![
        c(
            "no status descriptor",
            Some((0, 0)),
            vec![(a.hdr, 16, 0, 0)],
            Unused,
        ),
        c(
            "status descriptor not writable",
            Some((4, 0)),
            vec![(a.hdr, 16, NEXT, 1), (a.status, 1, 0, 0)],
            Unused,
        ),
        c(
            "header writable",
            Some((0, 0)),
            vec![(a.hdr, 16, WRITE | NEXT, 1), (a.status, 1, WRITE, 0)],
            Status(1, Some(1)),
        ),
        c(
            "zero-length header",
            Some((0, 0)),
            vec![(a.hdr, 0, NEXT, 1), (a.status, 1, WRITE, 0)],
            Unused,
        ),
        c(
            "zero-length data",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.data, 0, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "short header",
            Some((0, 0)),
            vec![(a.hdr, 8, NEXT, 1), (a.status, 1, WRITE, 0)],
            Status(1, Some(1)),
        ),
        c(
            "header outside guest memory",
            None,
            vec![(outside, 16, NEXT, 1), (a.status, 1, WRITE, 0)],
            Unused,
        ),
        c(
            "data outside guest memory",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (outside, 512, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "status outside guest memory",
            Some((4, 0)),
            vec![(a.hdr, 16, NEXT, 1), (outside, 1, WRITE, 0)],
            NothingOrUnused,
        ),
        c(
            "address wraps around",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (u64::MAX - 8, 512, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "data runs off the end of memory",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (ram_size - 256, 512, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "huge data length",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.big, 0xffff_fff0, WRITE | NEXT, 2),
                (a.status, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "readable after writable",
            Some((1, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.status, 1, WRITE | NEXT, 2),
                (a.data, 512, 0, 0),
            ],
            Unused,
        ),
        c(
            "writable buffers overlap",
            Some((0, 0)),
            vec![
                (a.hdr, 16, NEXT, 1),
                (a.data, 1024, WRITE | NEXT, 2),
                (a.data + 512, 1, WRITE, 0),
            ],
            Unused,
        ),
        c(
            "descriptor loop",
            Some((0, 0)),
            vec![(a.hdr, 16, NEXT, 0)],
            NothingOrUnused,
        ),
        c(
            "next index out of range",
            Some((0, 0)),
            vec![(a.hdr, 16, NEXT, ABS | 0x7fff)],
            NothingOrUnused,
        ),
    ];
    let (h, d) = rd(0, SECTORS, 512);
    v.push(c("read past capacity", h, d, Status(1, Some(1))));
    let (h, d) = rd(0, SECTORS - 1, 1024);
    v.push(c("read straddles capacity", h, d, Status(1, None)));
    let (h, d) = rd(0, u64::MAX / 2, 512);
    v.push(c("read sector overflows", h, d, Status(1, None)));
    let (h, d) = rd(0, 0, 100);
    v.push(c("read of a partial sector", h, d, Status(1, None)));
    let (h, d) = wr(1, SECTORS, 512);
    v.push(c("write past capacity", h, d, Status(1, Some(1))));
    let (h, d) = wr(1, 0, 513);
    v.push(c("write of a partial sector", h, d, Status(1, None)));
    let (h, d) = rd(1, 0, 512);
    v.push(c("write with device-writable data", h, d, Status(1, None)));
    let (h, d) = wr(0, 0, 512);
    v.push(c("read with device-readable data", h, d, Status(1, None)));
    for (name, t) in [
        ("unknown type", 0x55u32),
        ("legacy SCSI command", 2),
        ("zone append", 15),
        ("secure erase not offered", 14),
    ] {
        v.push(c(
            name,
            Some((t, 0)),
            vec![(a.hdr, 16, NEXT, 1), (a.status, 1, WRITE, 0)],
            Status(2, Some(1)),
        ));
    }
    let mut disc = |name, t: u32, bytes: Vec<u8>, expect| {
        let len = bytes.len() as u32;
        let (h, d) = wr(t, 0, len.max(1));
        let mut cs = c(name, h, d, expect);
        cs.data_bytes = bytes;
        v.push(cs);
    };
    disc(
        "discard length not a whole segment",
        11,
        vec![0u8; 20],
        Status(1, Some(1)),
    );
    disc(
        "discard beyond capacity",
        11,
        seg(SECTORS - 8, 16, 0),
        Status(1, Some(1)),
    );
    disc(
        "discard with unmap flag",
        11,
        seg(0, 8, 1),
        Status(2, Some(1)),
    );
    disc(
        "discard with too many segments",
        11,
        (0..33).flat_map(|i| seg(i * 8, 8, 0)).collect(),
        Status(1, Some(1)),
    );
    disc(
        "discard segment too large",
        11,
        seg(0, u32::MAX, 0),
        Status(1, Some(1)),
    );
    disc(
        "write zeroes reserved flag",
        13,
        seg(0, 8, 4),
        Status(2, Some(1)),
    );
    disc(
        "write zeroes sector overflows",
        13,
        seg(u64::MAX - 2, 8, 0),
        Status(1, Some(1)),
    );
    // Indirect descriptors.
    let ind = |name, len: u32, entries: Vec<D>, expect| Case {
        name,
        header: Some((0, 0)),
        data_bytes: vec![],
        descs: vec![(0, len, INDIRECT, 0)],
        indirect: entries,
        head_override: None,
        expect,
    };
    let good = vec![
        (a.hdr, 16, NEXT, 1),
        (a.data, 512, WRITE | NEXT, 2),
        (a.status, 1, WRITE, 0),
    ];
    v.push(ind(
        "indirect read (valid)",
        48,
        good.clone(),
        Status(0, Some(513)),
    ));
    v.push(ind(
        "indirect table length not a multiple of 16",
        40,
        good.clone(),
        NothingOrUnused,
    ));
    v.push(ind(
        "indirect entry outside memory",
        48,
        vec![
            (a.hdr, 16, NEXT, 1),
            (outside, 512, WRITE | NEXT, 2),
            (a.status, 1, WRITE, 0),
        ],
        Unused,
    ));
    v.push(ind(
        "nested indirect",
        32,
        vec![(a.hdr, 16, NEXT | INDIRECT, 1), (a.status, 1, WRITE, 0)],
        NothingOrUnused,
    ));
    v.push(ind(
        "indirect next out of table",
        32,
        vec![(a.hdr, 16, NEXT, 9), (a.status, 1, WRITE, 0)],
        NothingOrUnused,
    ));
    let mut hc = c(
        "available ring head out of range",
        Some((0, 0)),
        vec![(a.hdr, 16, 0, 0)],
        NothingOrUnused,
    );
    hc.head_override = Some(0x7fff);
    v.push(hc);
    v.push(c(
        "get id into a 4-byte buffer",
        Some((8, 0)),
        vec![
            (a.hdr, 16, NEXT, 1),
            (a.data, 4, WRITE | NEXT, 2),
            (a.status, 1, WRITE, 0),
        ],
        Status(0, Some(5)),
    ));
    v
}

fn good_request_works(q: &mut QueueHandle, req: &mut BlkRequest) {
    let head = q.submit(&req.read(8, 4096).unwrap().bufs()).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let used = q
            .wait(Duration::from_secs(10))
            .expect("backend stopped serving");
        if let Some(u) = used.iter().find(|u| u.id == head) {
            assert_eq!(req.result(u.len).unwrap().status, 0);
            return;
        }
        assert!(std::time::Instant::now() < deadline);
    }
}

fn run_case(q: &mut QueueHandle, ram: &GuestRam, a: &Area, case: &Case) {
    let r0 = q.ring.first_reserved();
    if let Some((t, s)) = case.header {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&t.to_le_bytes());
        h[8..16].copy_from_slice(&s.to_le_bytes());
        ram.write(a.hdr, &h).unwrap();
    }
    if !case.data_bytes.is_empty() {
        ram.write(a.data, &case.data_bytes).unwrap();
    }
    ram.write(a.status, &[0xee]).unwrap();
    let table = q.ring.indirect_table(r0);
    for (i, &(addr, len, flags, next)) in case.indirect.iter().enumerate() {
        q.ring
            .write_desc(
                ram,
                table,
                i as u16,
                RawDesc {
                    addr,
                    len,
                    flags,
                    next,
                },
            )
            .unwrap();
    }
    for (i, &(addr, len, flags, next)) in case.descs.iter().enumerate() {
        let addr = if flags & INDIRECT != 0 { table } else { addr };
        let next = if next & ABS != 0 {
            next & !ABS
        } else {
            r0 + next
        };
        q.ring
            .write_raw_desc(
                ram,
                r0 + i as u16,
                RawDesc {
                    addr,
                    len,
                    flags,
                    next,
                },
            )
            .unwrap();
    }
    let head = case.head_override.unwrap_or(r0);
    q.ring.publish(ram, head).unwrap();
    q.kick().unwrap();
    let used = match q.wait(Duration::from_millis(
        if case.expect == Expect::NothingOrUnused {
            300
        } else {
            10_000
        },
    )) {
        Ok(u) => u,
        Err(vhost_blk_frontend::FrontendError::Timeout) => vec![],
        Err(e) => panic!("{}: {e}", case.name),
    };
    let mut st = [0u8; 1];
    ram.read(a.status, &mut st).unwrap();
    match case.expect {
        Expect::Status(s, len) => {
            assert_eq!(used.len(), 1, "{}: used {used:?}", case.name);
            assert_eq!(used[0].id, head, "{}", case.name);
            assert_eq!(st[0], s, "{}: status", case.name);
            if let Some(l) = len {
                assert_eq!(used[0].len, l, "{}: used length", case.name);
            }
        }
        Expect::Unused => {
            assert_eq!(used.len(), 1, "{}: used {used:?}", case.name);
            assert_eq!(used[0].len, 0, "{}: used length", case.name);
            assert_eq!(st[0], 0xee, "{}: status must be untouched", case.name);
        }
        Expect::NothingOrUnused => {
            assert!(used.iter().all(|u| u.len == 0), "{}: {used:?}", case.name);
            assert_eq!(st[0], 0xee, "{}: status must be untouched", case.name);
        }
    }
}

#[test]
fn malformed_corpus_gets_the_right_answer_and_the_backend_keeps_serving() {
    let backend = Backend::start(&["--mem", "16M", "--num-queues", "2", "--queue-size", "64"]);
    let opts = ConnectOptions {
        num_queues: 2,
        queue_size: 64,
        reserved_descriptors: 8,
        mem_size: 32 << 20,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    let ram = conn.ram().clone();
    let area = Area {
        hdr: ram.alloc(16, 16).unwrap(),
        data: ram.alloc(64 * 1024, 4096).unwrap(),
        status: ram.alloc(1, 1).unwrap(),
        big: ram.alloc(4096, 4096).unwrap(),
    };
    let corpus = cases(&area, ram.size());
    assert!(corpus.len() >= 30, "corpus has {} cases", corpus.len());
    let mut q = conn.take_queue(1).unwrap();
    let mut req = BlkRequest::new(&ram, 4096).unwrap();
    for case in &corpus {
        run_case(&mut q, &ram, &area, case);
        good_request_works(&mut q, &mut req);
    }
    // The other queue was never disturbed.
    let mut q0 = conn.take_queue(0).unwrap();
    good_request_works(&mut q0, &mut req);
    println!("{} malformed cases passed", corpus.len());
}

#[test]
fn writes_on_a_read_only_disk_fail_and_reads_work() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("ro.img");
    std::fs::write(&img, vec![0x11u8; 1 << 20]).unwrap();
    let img_s = img.to_str().unwrap().to_string();
    let backend = Backend::start_in(
        dir,
        &["--image", &img_s, "--read-only", "--num-queues", "1"],
    );
    let opts = ConnectOptions {
        num_queues: 1,
        ..Default::default()
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    assert_ne!(conn.features() & (1 << 5), 0, "VIRTIO_BLK_F_RO offered");
    let mut q = conn.take_queue(0).unwrap();
    let mut req = BlkRequest::new(&q.ram.clone(), 4096).unwrap();
    q.submit(&req.write(0, &[0u8; 512]).unwrap().bufs())
        .unwrap();
    let u = q.wait(Duration::from_secs(10)).unwrap();
    assert_eq!(req.result(u[0].len).unwrap().status, 1, "write");
    q.submit(&req.discard(&[(0, 8, 0)], false).unwrap().bufs())
        .unwrap();
    let u = q.wait(Duration::from_secs(10)).unwrap();
    assert_eq!(req.result(u[0].len).unwrap().status, 1, "discard");
    q.submit(&req.read(0, 512).unwrap().bufs()).unwrap();
    let u = q.wait(Duration::from_secs(10)).unwrap();
    assert_eq!(req.result(u[0].len).unwrap().status, 0);
    assert_eq!(req.data().unwrap(), vec![0x11u8; 512]);
    assert_eq!(
        std::fs::read(&img).unwrap(),
        vec![0x11u8; 1 << 20],
        "image untouched"
    );
}
