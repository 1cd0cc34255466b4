//! virtio-scsi end to end through the vhost-user protocol: the real backend binary (`--device
//! scsi`), driven by the in-process frontend on every request queue in parallel, the control
//! queue, present and absent targets/LUNs, malformed chains, renegotiation and scan latency.

// A test reads as one scenario: exempt from clippy::too_many_lines (non-test code is not).
#![allow(clippy::too_many_lines)]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{file_bytes, pattern, Backend};
use vhost_blk_frontend::scsi::{
    lun_address, response, tmf, DataDir, CHECK_CONDITION, CMD_REQ_LEN, CMD_RESP_LEN, CONTROL_QUEUE,
    EVENT_QUEUE, FIRST_REQUEST_QUEUE, GOOD,
};
use vhost_blk_frontend::{
    scsi_connect_options, Buf, ConnectOptions, Connection, GuestRam, QueueHandle, RawDesc,
    ScsiCtrl, ScsiRequest, ScsiResult,
};

const T: Duration = Duration::from_secs(10);
/// ILLEGAL REQUEST.
const IR: u8 = 0x05;

/// Submits `bufs` and waits for their completion (other completions are not expected).
fn run(q: &mut QueueHandle, bufs: &[Buf]) -> u32 {
    let head = q.submit(bufs).unwrap();
    let used = q.wait(T).unwrap();
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!(used[0].id, head);
    used[0].len
}

fn cmd(q: &mut QueueHandle, req: &ScsiRequest) -> ScsiResult {
    let len = run(q, &req.bufs());
    req.result(len).unwrap()
}

fn assert_good(r: &ScsiResult, data_in: u32, what: &str) {
    assert!(r.is_good(), "{what}: {r:?}");
    assert_eq!(r.used_len, CMD_RESP_LEN + data_in, "{what}: used length");
    assert_eq!(r.resid, 0, "{what}: residual");
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

#[test]
fn eight_request_queues_in_parallel_with_data_checked_in_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("disk.img");
    let img_s = img.to_str().unwrap().to_string();
    let mut backend = Backend::start_in(
        dir,
        &["--device", "scsi", "--image", &img_s, "--size", "64M"],
    );
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(8)).unwrap();
    let cfg = conn.config(0, 36).unwrap();
    assert_eq!(le_u32(&cfg, 0), 8, "num_queues in the config space");
    let region = (64u64 << 20) / 8 / 512; // blocks per queue
    let handles: Vec<_> = (0..8u64)
        .map(|i| {
            let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + i as usize).unwrap();
            std::thread::spawn(move || {
                let base = i * region;
                let mut req = ScsiRequest::new(&q.ram.clone(), 64 * 1024).unwrap();
                req.set_tag(i << 32);
                let mut n = 0u64;
                // Writes of 4..64 KiB, alternately WRITE(10) and WRITE(16), each read back
                // with the other CDB size.
                while n < 24 {
                    let lba = base + 128 * n;
                    let blocks = 8 * (1 + (n % 16) as u32);
                    let len = blocks * 512;
                    let sixteen = n % 2 == 1;
                    let data = pattern(lba, i as u8, len as usize);
                    let r = cmd(&mut q, req.write(sixteen, lba, &data).unwrap());
                    assert_good(&r, 0, &format!("queue {i} write {n}"));
                    let r = cmd(&mut q, req.read(!sixteen, lba, blocks).unwrap());
                    assert_good(&r, len, &format!("queue {i} read {n}"));
                    assert_eq!(req.data().unwrap(), data, "queue {i} lba {lba}");
                    n += 1;
                }
                // Eight READ(16)s in flight at once, each with its own tag and buffers.
                let mut slots: Vec<ScsiRequest> = (0..8u64)
                    .map(|k| {
                        let mut r = ScsiRequest::new(&q.ram.clone(), 8192).unwrap();
                        r.set_tag((i << 32) | (k + 1));
                        r
                    })
                    .collect();
                let mut heads = Vec::new();
                for (k, r) in slots.iter_mut().enumerate() {
                    let lba = base + 128 * (2 * k as u64);
                    heads.push(q.submit(&r.read16(lba, 8).unwrap().bufs()).unwrap());
                }
                let mut done = [None; 8];
                while done.iter().any(Option::is_none) {
                    for u in q.wait(T).unwrap() {
                        let k = heads.iter().position(|&h| h == u.id).expect("known head");
                        assert!(done[k].replace(u.len).is_none(), "completed twice");
                    }
                }
                for (k, r) in slots.iter().enumerate() {
                    let lba = base + 128 * (2 * k as u64);
                    assert_good(&r.result(done[k].unwrap()).unwrap(), 4096, "in flight");
                    assert_eq!(r.data().unwrap(), pattern(lba, i as u8, 4096)[..]);
                }
                // UNMAP the first 4 KiB of write 1: reads back as zeros (LBPRZ).
                let r = cmd(&mut q, req.unmap(&[(base + 128, 8)]).unwrap());
                assert_good(&r, 0, "unmap");
                let r = cmd(&mut q, req.read16(base + 128, 16).unwrap());
                assert_good(&r, 8192, "read after unmap");
                let d = req.data().unwrap();
                assert!(d[..4096].iter().all(|&b| b == 0), "queue {i} unmapped");
                assert_eq!(d[4096..], pattern(base + 128, i as u8, 8192)[4096..]);
                let r = cmd(&mut q, req.synchronize_cache(0, 0).unwrap());
                assert_good(&r, 0, "synchronize cache");
                (i, n)
            })
        })
        .collect();
    let done: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    drop(conn);
    let status = backend.signal_and_wait(libc::SIGTERM);
    assert!(status.success(), "backend exit: {status:?}");
    for (i, n) in done {
        let base = i * region;
        for k in 0..n {
            let lba = base + 128 * k;
            let len = 4096 * (1 + (k % 16) as usize);
            let mut want = pattern(lba, i as u8, len);
            if k == 1 {
                want[..4096].fill(0);
            }
            assert_eq!(
                file_bytes(&img, lba * 512, len),
                want,
                "image: queue {i} write {k}"
            );
        }
    }
}

#[test]
fn inquiry_read_capacity_and_report_luns() {
    let backend = Backend::start(&["--device", "scsi", "--null", "1G", "--num-queues", "2"]);
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let cfg = conn.config(0, 36).unwrap();
    assert_eq!(le_u32(&cfg, 0), 2, "num_queues");
    assert_eq!(
        (le_u32(&cfg, 20), le_u32(&cfg, 24)),
        (96, 32),
        "sense/cdb size"
    );
    assert_eq!(u16::from_le_bytes([cfg[30], cfg[31]]), 0, "max_target");
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + 1).unwrap();
    let mut req = ScsiRequest::new(&q.ram.clone(), 4096).unwrap();

    assert_good(&cmd(&mut q, req.test_unit_ready().unwrap()), 0, "TUR");
    let r = cmd(&mut q, req.inquiry(96).unwrap());
    assert_good(&r, 96, "INQUIRY");
    let d = req.data().unwrap();
    assert_eq!(d[0], 0x00, "peripheral qualifier 0, direct-access device");
    assert_eq!(d[4] as usize + 5, 96, "additional length");
    assert_eq!(&d[8..16], b"VHOSTBLK");
    // A shorter allocation length truncates; a bigger buffer leaves a residual.
    let r = cmd(&mut q, req.inquiry(36).unwrap());
    assert_good(&r, 36, "INQUIRY 36");
    assert_eq!(&req.data().unwrap()[8..16], b"VHOSTBLK");
    let r = cmd(
        &mut q,
        req.raw(&[0x12, 0, 0, 0, 96, 0], DataDir::In, 512).unwrap(),
    );
    assert!(r.is_good());
    assert_eq!((r.data_in_len(), r.resid), (96, 512 - 96));

    let r = cmd(&mut q, req.read_capacity_16().unwrap());
    assert_good(&r, 32, "READ CAPACITY(16)");
    let d = req.data().unwrap();
    assert_eq!(
        u64::from_be_bytes(d[0..8].try_into().unwrap()),
        (1u64 << 30) / 512 - 1,
        "last LBA"
    );
    assert_eq!(be32(&d, 8), 512, "block length");

    let r = cmd(&mut q, req.report_luns(64).unwrap());
    assert!(r.is_good(), "{r:?}");
    assert_eq!(r.data_in_len(), 16);
    let d = req.data().unwrap();
    assert_eq!(be32(&d, 0), 8, "one LUN");
    assert_eq!(&d[8..16], &[0u8; 8], "LUN 0");
}

const TOPO: &str = "0:0=null:1G,3:0=null:1G,3:2=mem:16M,max_target=7";

fn topology_backend() -> Backend {
    Backend::start(&["--device", "scsi", "--topology", TOPO, "--num-queues", "2"])
}

#[test]
fn present_and_absent_targets_and_luns() {
    let backend = topology_backend();
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let cfg = conn.config(0, 36).unwrap();
    assert_eq!(u16::from_le_bytes([cfg[30], cfg[31]]), 7, "max_target");
    assert_eq!(le_u32(&cfg, 32), 2, "max_lun");
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    let mut req = ScsiRequest::new(&q.ram.clone(), 64 * 1024).unwrap();

    // The scan a guest does: INQUIRY of LUN 0 on every target up to max_target and beyond.
    for t in 0..=9u8 {
        let r = cmd(&mut q, req.at(t, 0).inquiry(96).unwrap());
        if t == 0 || t == 3 {
            assert_good(&r, 96, &format!("target {t}"));
            assert_eq!(req.data().unwrap()[0], 0x00);
        } else {
            assert_eq!(r.response, response::BAD_TARGET, "target {t}: {r:?}");
            assert_eq!(r.used_len, CMD_RESP_LEN, "target {t}: no data");
            assert!(r.sense.is_empty());
        }
    }
    // Present target, absent LUN.
    let r = cmd(&mut q, req.at(3, 1).inquiry(96).unwrap());
    assert_good(&r, 96, "INQUIRY 3:1");
    assert_eq!(req.data().unwrap()[0], 0x7f, "peripheral qualifier 011b");
    let not_supported = Some((IR, 0x25, 0x00));
    let r = cmd(&mut q, req.at(3, 1).test_unit_ready().unwrap());
    assert_eq!((r.response, r.status), (response::OK, CHECK_CONDITION));
    assert_eq!(r.sense_code(), not_supported, "TUR 3:1");
    let r = cmd(&mut q, req.at(3, 1).read10(0, 8).unwrap());
    assert_eq!((r.response, r.status), (response::OK, CHECK_CONDITION));
    assert_eq!(r.sense_code(), not_supported, "READ 3:1");
    assert_eq!(r.data_in_len(), 0);
    let r = cmd(&mut q, req.at(0, 5).read_capacity_16().unwrap());
    assert_eq!(r.sense_code(), not_supported, "READ CAPACITY 0:5");

    // REPORT LUNS on target 3, through a present and through an absent LUN.
    for lun in [0, 1] {
        let r = cmd(&mut q, req.at(3, lun).report_luns(256).unwrap());
        assert!(r.is_good(), "{r:?}");
        assert_eq!(r.data_in_len(), 24);
        let d = req.data().unwrap();
        assert_eq!(be32(&d, 0), 16, "two LUNs");
        assert_eq!(&d[8..16], &[0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&d[16..24], &[0, 2, 0, 0, 0, 0, 0, 0]);
    }
    // LUN 3:2 is a 16 MiB RAM disk that keeps data.
    let r = cmd(&mut q, req.at(3, 2).read_capacity_16().unwrap());
    assert_good(&r, 32, "READ CAPACITY 3:2");
    let d = req.data().unwrap();
    assert_eq!(u64::from_be_bytes(d[..8].try_into().unwrap()), 32767);
    let data = pattern(100, 32, 8192);
    assert_good(
        &cmd(&mut q, req.write10(100, &data).unwrap()),
        0,
        "WRITE 3:2",
    );
    assert_good(&cmd(&mut q, req.read16(100, 16).unwrap()), 8192, "READ 3:2");
    assert_eq!(req.data().unwrap(), data);
    // ... and the same LBA of 3:0 (null) is still zeros.
    assert_good(
        &cmd(&mut q, req.at(3, 0).read16(100, 16).unwrap()),
        8192,
        "3:0",
    );
    assert!(req.data().unwrap().iter().all(|&b| b == 0));
}

fn ctrl(q: &mut QueueHandle, c: &ScsiCtrl) -> u32 {
    run(q, &c.bufs())
}

#[test]
fn control_queue_task_management_and_async_notification() {
    let backend = topology_backend();
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let mut cq = conn.take_queue(CONTROL_QUEUE).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + 1).unwrap();
    let ram = cq.ram.clone();
    let mut c = ScsiCtrl::new(&ram).unwrap();
    let mut req = ScsiRequest::new(&ram, 4096).unwrap();
    let l00 = lun_address(0, 0);
    for (st, lun, want) in [
        (tmf::ABORT_TASK, l00, response::FUNCTION_COMPLETE),
        (tmf::ABORT_TASK_SET, l00, response::FUNCTION_COMPLETE),
        (tmf::CLEAR_TASK_SET, l00, response::FUNCTION_COMPLETE),
        (tmf::LOGICAL_UNIT_RESET, l00, response::FUNCTION_COMPLETE),
        (
            tmf::LOGICAL_UNIT_RESET,
            lun_address(3, 2),
            response::FUNCTION_COMPLETE,
        ),
        (tmf::I_T_NEXUS_RESET, l00, response::FUNCTION_COMPLETE),
        (tmf::QUERY_TASK, l00, response::FUNCTION_COMPLETE),
        (tmf::QUERY_TASK_SET, l00, response::FUNCTION_COMPLETE),
        (
            tmf::LOGICAL_UNIT_RESET,
            lun_address(3, 1),
            response::INCORRECT_LUN,
        ),
        (tmf::ABORT_TASK, lun_address(1, 0), response::BAD_TARGET),
        (
            tmf::LOGICAL_UNIT_RESET,
            lun_address(9, 0),
            response::BAD_TARGET,
        ),
        (tmf::CLEAR_ACA, l00, response::FUNCTION_REJECTED),
    ] {
        let used = ctrl(&mut cq, c.tmf(st, lun, 42).unwrap());
        assert_eq!(used, 1, "TMF {st}: used length");
        assert_eq!(c.tmf_response().unwrap(), want, "TMF {st} on {lun:?}");
        // Commands keep working after every TMF.
        assert_good(
            &cmd(&mut q, req.read10(8, 1).unwrap()),
            512,
            "READ after TMF",
        );
    }
    for subscribe in [false, true] {
        let used = ctrl(&mut cq, c.an(subscribe, l00, 0xfe).unwrap());
        assert_eq!(used, 5);
        assert_eq!(
            c.an_response().unwrap(),
            (0, response::OK),
            "AN {subscribe}"
        );
        ctrl(&mut cq, c.an(subscribe, lun_address(2, 0), 0xfe).unwrap());
        assert_eq!(c.an_response().unwrap().1, response::BAD_TARGET);
    }
}

/// A command still held by the completion path (scan latency) when ABORT TASK for it arrives:
/// the spec requires the device to have completed every command the TMF covers before it
/// answers the TMF (Linux relies on this: it polls the request queues once after the TMF).
#[test]
fn abort_task_answers_after_the_aborted_command_completed() {
    let backend = Backend::start(&[
        "--device",
        "scsi",
        "--topology",
        "targets=1,inquiry_delay=300ms",
        "--num-queues",
        "1",
    ]);
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(1)).unwrap();
    let mut cq = conn.take_queue(CONTROL_QUEUE).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    let ram = cq.ram.clone();
    let mut req = ScsiRequest::new(&ram, 4096).unwrap();
    let mut c = ScsiCtrl::new(&ram).unwrap();
    let t0 = Instant::now();
    let head = q
        .submit(&req.set_tag(77).inquiry(96).unwrap().bufs())
        .unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(q.poll().unwrap().is_empty(), "INQUIRY is delayed");
    assert_eq!(
        ctrl(
            &mut cq,
            c.tmf(tmf::ABORT_TASK, lun_address(0, 0), 77).unwrap()
        ),
        1
    );
    let answered = t0.elapsed();
    let resp = c.tmf_response().unwrap();
    assert!(
        resp == response::FUNCTION_COMPLETE || resp == response::FUNCTION_SUCCEEDED,
        "{resp}"
    );
    let used = q.poll().unwrap();
    assert_eq!(
        used.len(),
        1,
        "the aborted INQUIRY must be in the used ring when the TMF is answered \
         (TMF answered after {answered:?})"
    );
    assert_eq!(used[0].id, head);
}

#[test]
fn print_capabilities_says_scsi() {
    for (args, ty) in [
        (&["--device", "scsi", "--print-capabilities"][..], "scsi"),
        (&["--print-capabilities", "--device", "blk"][..], "block"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vhost-blk"))
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["type"], ty, "{args:?}");
    }
}

/// What a malformed case must produce.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// A used entry with this response, SCSI status, sense (key, ASC, ASCQ) and used length.
    Resp(u8, u8, Option<(u8, u8, u8)>, u32),
    /// A used entry with length 0 and the response buffer untouched.
    Unused,
    /// No used entry, or an unused one (the chain itself could not be walked).
    NothingOrUnused,
}

const NEXT: u16 = 1;
const W: u16 = 2;
const MEM_BLOCKS: u64 = (16 << 20) / 512;

struct MCase {
    name: &'static str,
    header: Vec<u8>,
    /// (addr, len, flags); NEXT is added to all but the last.
    descs: Vec<(u64, u32, u16)>,
    /// Make the last descriptor point back at the first.
    looped: bool,
    expect: Expect,
}

/// A 51-byte command request header.
fn header(lun: [u8; 8], cdb: &[u8]) -> Vec<u8> {
    let mut h = vec![0u8; CMD_REQ_LEN as usize];
    h[..8].copy_from_slice(&lun);
    h[19..19 + cdb.len()].copy_from_slice(cdb);
    h
}

fn malformed_cases(req: u64, resp: u64, data: u64, ram_size: u64) -> Vec<MCase> {
    use vhost_blk_frontend::scsi::rw_cdb;
    use Expect::*;
    let l00 = lun_address(0, 0);
    let c = |name, header, descs, expect| MCase {
        name,
        header,
        descs,
        looped: false,
        expect,
    };
    let (rq, rs) = (CMD_REQ_LEN, CMD_RESP_LEN);
    let read_1 = header(l00, &rw_cdb(false, false, 0, 1));
    let tur = header(l00, &[0; 6]);
    let cc = |sense| Resp(response::OK, CHECK_CONDITION, Some(sense), rs);
    let bad_target = Resp(response::BAD_TARGET, GOOD, None, rs);
    let outside = ram_size + 0x10000;
    let with_in = |h: Vec<u8>, len| (h, vec![(req, rq, 0), (resp, rs, W), (data, len, W)]);
    let mut v = vec![
        c(
            "request header shorter than virtio_scsi_cmd_req",
            tur.clone(),
            vec![(req, 40, 0), (resp, rs, W)],
            Resp(response::FAILURE, GOOD, None, rs),
        ),
        c(
            "request header split over two descriptors (valid)",
            read_1.clone(),
            vec![
                (req, 19, 0),
                (req + 19, 32, 0),
                (resp, rs, W),
                (data, 512, W),
            ],
            Resp(response::OK, GOOD, None, rs + 512),
        ),
        c(
            "response split over two descriptors (valid)",
            read_1.clone(),
            vec![
                (req, rq, 0),
                (resp, 12, W),
                (resp + 12, 96, W),
                (data, 512, W),
            ],
            Resp(response::OK, GOOD, None, rs + 512),
        ),
        c(
            "response buffer too small",
            tur.clone(),
            vec![(req, rq, 0), (resp, rs - 8, W)],
            Unused,
        ),
        c(
            "response buffer not writable",
            tur.clone(),
            vec![(req, rq, 0), (resp, rs, 0)],
            Unused,
        ),
        c(
            "no response buffer",
            tur.clone(),
            vec![(req, rq, 0)],
            Unused,
        ),
        c(
            "zero-length request descriptor",
            tur.clone(),
            vec![(req, 0, 0), (resp, rs, W)],
            Unused,
        ),
        c(
            "zero-length data-in descriptor",
            read_1.clone(),
            vec![(req, rq, 0), (resp, rs, W), (data, 0, W)],
            Unused,
        ),
        c(
            "request outside guest memory",
            tur.clone(),
            vec![(outside, rq, 0), (resp, rs, W)],
            Unused,
        ),
        c(
            "response outside guest memory",
            tur.clone(),
            vec![(req, rq, 0), (outside, rs, W)],
            Unused,
        ),
        c(
            "data-in outside guest memory",
            read_1.clone(),
            vec![(req, rq, 0), (resp, rs, W), (outside, 512, W)],
            Unused,
        ),
        c(
            "data-in runs off the end of guest memory",
            read_1.clone(),
            vec![(req, rq, 0), (resp, rs, W), (ram_size - 256, 512, W)],
            Unused,
        ),
        c(
            "data-in address wraps around",
            read_1.clone(),
            vec![(req, rq, 0), (resp, rs, W), (u64::MAX - 8, 512, W)],
            Unused,
        ),
        c(
            "readable descriptor after the response",
            read_1.clone(),
            vec![(req, rq, 0), (resp, rs, W), (data, 512, 0)],
            Unused,
        ),
        c(
            "response overlaps the request",
            tur.clone(),
            vec![(req, rq, 0), (req, rs, W)],
            Unused,
        ),
        c(
            "READ with a data-out buffer instead of data-in",
            read_1.clone(),
            vec![(req, rq, 0), (data, 512, 0), (resp, rs, W)],
            Resp(response::OVERRUN, CHECK_CONDITION, Some((IR, 0x24, 0)), rs),
        ),
        c(
            "WRITE(10) of 8 blocks with 512 bytes of data-out",
            header(l00, &rw_cdb(true, false, 8, 8)),
            vec![(req, rq, 0), (data, 512, 0), (resp, rs, W)],
            Resp(response::OVERRUN, CHECK_CONDITION, Some((IR, 0x24, 0)), rs),
        ),
    ];
    let mut push = |name, (header, descs): (Vec<u8>, Vec<(u64, u32, u16)>), expect| {
        v.push(c(name, header, descs, expect));
    };
    push(
        "READ(10) of 8 blocks into a 512-byte data-in buffer",
        with_in(header(l00, &rw_cdb(false, false, 0, 8)), 512),
        Resp(response::OVERRUN, CHECK_CONDITION, Some((IR, 0x24, 0)), rs),
    );
    push(
        "READ(10) beyond capacity",
        with_in(header(l00, &rw_cdb(false, false, MEM_BLOCKS, 1)), 512),
        cc((IR, 0x21, 0)),
    );
    push(
        "READ(16) straddling the end of the medium",
        with_in(header(l00, &rw_cdb(false, true, MEM_BLOCKS - 1, 2)), 1024),
        cc((IR, 0x21, 0)),
    );
    push(
        "READ(16) whose LBA overflows",
        with_in(header(l00, &rw_cdb(false, true, u64::MAX, 1)), 512),
        cc((IR, 0x21, 0)),
    );
    push(
        "READ(16) longer than the maximum transfer",
        with_in(header(l00, &rw_cdb(false, true, 0, 1 << 24)), 512),
        cc((IR, 0x24, 0)),
    );
    push(
        "unknown opcode",
        with_in(header(l00, &[0xc7, 0, 0, 0, 0, 0]), 512),
        cc((IR, 0x20, 0)),
    );
    push(
        "NACA in the control byte",
        with_in(header(l00, &[0, 0, 0, 0, 0, 0x04]), 512),
        cc((IR, 0x24, 0)),
    );
    for (name, lun) in [
        ("LUN field byte 0 is not 1", [0, 0, 0x40, 0, 0, 0, 0, 0]),
        ("LUN field byte 0 is 2", [2, 0, 0x40, 0, 0, 0, 0, 0]),
        ("LUN address method 10b", [1, 0, 0x80, 0, 0, 0, 0, 0]),
        ("second-level LUN", [1, 0, 0x40, 0, 0, 1, 0, 0]),
        ("absent target", lun_address(5, 0)),
        ("target 255", lun_address(255, 0)),
    ] {
        push(
            name,
            with_in(header(lun, &rw_cdb(false, false, 0, 1)), 512),
            bad_target,
        );
    }
    v.push(MCase {
        name: "descriptor loop",
        header: tur,
        descs: vec![(req, rq, 0), (resp, rs, W)],
        looped: true,
        expect: NothingOrUnused,
    });
    v
}

fn run_malformed(q: &mut QueueHandle, ram: &GuestRam, (req, resp): (u64, u64), case: &MCase) {
    ram.write(req, &case.header).unwrap();
    ram.write(resp, &[0xee; CMD_RESP_LEN as usize]).unwrap();
    let r0 = q.ring.first_reserved();
    for (i, &(addr, len, flags)) in case.descs.iter().enumerate() {
        let last = i + 1 == case.descs.len();
        let (flags, next) = match (last, case.looped) {
            (false, _) => (flags | NEXT, r0 + i as u16 + 1),
            (true, true) => (flags | NEXT, r0),
            (true, false) => (flags, 0),
        };
        let d = RawDesc {
            addr,
            len,
            flags,
            next,
        };
        q.ring.write_raw_desc(ram, r0 + i as u16, d).unwrap();
    }
    q.ring.publish(ram, r0).unwrap();
    q.kick().unwrap();
    let wait = if case.expect == Expect::NothingOrUnused {
        Duration::from_millis(300)
    } else {
        T
    };
    let used = match q.wait(wait) {
        Ok(u) => u,
        Err(vhost_blk_frontend::FrontendError::Timeout) => vec![],
        Err(e) => panic!("{}: {e}", case.name),
    };
    let mut b = [0u8; CMD_RESP_LEN as usize];
    ram.read(resp, &mut b).unwrap();
    let untouched = b.iter().all(|&x| x == 0xee);
    match case.expect {
        Expect::Resp(response, status, sense, used_len) => {
            assert_eq!(used.len(), 1, "{}: {used:?}", case.name);
            assert_eq!(used[0].id, r0, "{}", case.name);
            assert_eq!(used[0].len, used_len, "{}: used length", case.name);
            assert_eq!((b[11], b[10]), (response, status), "{}", case.name);
            let sense_len = u32::from_le_bytes(b[0..4].try_into().unwrap());
            match sense {
                Some((key, asc, ascq)) => {
                    assert_eq!(sense_len, 18, "{}: sense length", case.name);
                    assert_eq!(
                        (b[14] & 0xf, b[24], b[25]),
                        (key, asc, ascq),
                        "{}",
                        case.name
                    );
                }
                None => assert_eq!(sense_len, 0, "{}: no sense", case.name),
            }
        }
        Expect::Unused => {
            assert_eq!(used.len(), 1, "{}: {used:?}", case.name);
            assert_eq!(used[0].len, 0, "{}: used length", case.name);
            assert!(untouched, "{}: response must be untouched", case.name);
        }
        Expect::NothingOrUnused => {
            assert!(used.iter().all(|u| u.len == 0), "{}: {used:?}", case.name);
            assert!(untouched, "{}: response must be untouched", case.name);
        }
    }
}

/// A good READ(10) of 8 blocks at LBA 8 on `q`: succeeds, and the medium there is still zero
/// (no malformed WRITE reached it).
fn good_read(q: &mut QueueHandle, req: &mut ScsiRequest, what: &str) {
    let head = q
        .submit(&req.at(0, 0).read10(8, 8).unwrap().bufs())
        .unwrap();
    let deadline = Instant::now() + T;
    loop {
        let used = q.wait(T).unwrap_or_else(|e| panic!("after {what}: {e}"));
        if let Some(u) = used.iter().find(|u| u.id == head) {
            let r = req.result(u.len).unwrap();
            assert_good(&r, 4096, &format!("good READ after {what}"));
            assert!(req.data().unwrap().iter().all(|&b| b == 0), "after {what}");
            return;
        }
        assert!(Instant::now() < deadline, "after {what}");
    }
}

#[test]
fn malformed_requests_get_sane_answers_and_the_queue_keeps_serving() {
    let backend = Backend::start(&[
        "--device",
        "scsi",
        "--mem",
        "16M",
        "--num-queues",
        "2",
        "--queue-size",
        "64",
    ]);
    let opts = ConnectOptions {
        queue_size: 64,
        reserved_descriptors: 8,
        mem_size: 32 << 20,
        ..scsi_connect_options(2)
    };
    let mut conn = Connection::connect(&backend.socket, &opts).unwrap();
    let ram = conn.ram().clone();
    let req = ram.alloc(u64::from(CMD_REQ_LEN), 16).unwrap();
    let resp = ram.alloc(u64::from(CMD_RESP_LEN), 16).unwrap();
    let data = ram.alloc(64 * 1024, 4096).unwrap();
    ram.write(data, &[0x5a; 64 * 1024]).unwrap();
    let corpus = malformed_cases(req, resp, data, ram.size());
    assert!(corpus.len() >= 30, "corpus has {} cases", corpus.len());
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + 1).unwrap();
    let mut good = ScsiRequest::new(&ram, 4096).unwrap();
    for case in &corpus {
        run_malformed(&mut q, &ram, (req, resp), case);
        good_read(&mut q, &mut good, case.name);
    }
    // The other request queue was never disturbed.
    let mut q0 = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    good_read(&mut q0, &mut good, "the corpus, on another queue");
    println!("{} malformed virtio-scsi cases passed", corpus.len());
}

/// One round of I/O on every request queue of `conn`: write a pattern tagged `round`, read it
/// back. Returns the queues.
fn io_round(conn: &mut Connection, queues: usize, round: u8) -> Vec<QueueHandle> {
    (0..queues)
        .map(|i| {
            let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + i).unwrap();
            let mut req = ScsiRequest::new(&q.ram.clone(), 8192).unwrap();
            let lba = 64 * i as u64 + 16 * u64::from(round);
            let data = pattern(lba, round, 8192);
            assert_good(&cmd(&mut q, req.write16(lba, &data).unwrap()), 0, "write");
            assert_good(
                &cmd(&mut q, req.read10(lba as u32, 16).unwrap()),
                8192,
                "read",
            );
            assert_eq!(req.data().unwrap(), data, "round {round} queue {i}");
            q
        })
        .collect()
}

#[test]
fn reset_and_renegotiation_like_firmware_then_linux() {
    let backend = Backend::start(&["--device", "scsi", "--mem", "16M", "--num-queues", "2"]);
    // "Firmware": negotiate, scan, do I/O, give the event queue buffers, stop every ring.
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let mut eq = conn.take_queue(EVENT_QUEUE).unwrap();
    let ev = eq.ram.alloc(4 * 16, 16).unwrap();
    for k in 0..4 {
        eq.submit(&[Buf {
            addr: ev + 16 * k,
            len: 16,
            writable: true,
        }])
        .unwrap();
    }
    let mut queues = io_round(&mut conn, 2, 0);
    let mut req = ScsiRequest::new(conn.ram(), 4096).unwrap();
    assert_good(
        &cmd(&mut queues[0], req.inquiry(96).unwrap()),
        96,
        "INQUIRY",
    );
    assert!(eq.poll().unwrap().is_empty(), "no event is reported");
    // GET_VRING_BASE returns how far the device consumed each ring. The event queue shares its
    // worker with the first request queue, which passes its turn between batches: the event
    // buffers were taken before the INQUIRY on that queue was answered.
    assert_eq!(conn.stop_queue(FIRST_REQUEST_QUEUE).unwrap(), 3);
    assert_eq!(conn.stop_queue(FIRST_REQUEST_QUEUE + 1).unwrap(), 2);
    assert_eq!(conn.stop_queue(EVENT_QUEUE).unwrap(), 4);
    assert_eq!(conn.stop_queue(CONTROL_QUEUE).unwrap(), 0);
    drop((queues, eq, conn));
    // "Linux": a second negotiation on fresh memory and rings; the data of round 0 is there.
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE + 1).unwrap();
    let mut req = ScsiRequest::new(&q.ram.clone(), 8192).unwrap();
    assert_good(&cmd(&mut q, req.read10(64, 16).unwrap()), 8192, "read");
    assert_eq!(req.data().unwrap(), pattern(64, 0, 8192));
    drop((q, conn));
    // Three more connect / I/O / stop / disconnect rounds.
    for round in 1..=3u8 {
        let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
        let queues = io_round(&mut conn, 2, round);
        for i in 0..4 {
            conn.stop_queue(i).unwrap();
        }
        drop((queues, conn));
    }
    // Everything written in every round is still there.
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    let mut req = ScsiRequest::new(&q.ram.clone(), 8192).unwrap();
    for round in 0..=3u8 {
        for i in 0..2u64 {
            let lba = 64 * i + 16 * u64::from(round);
            assert_good(
                &cmd(&mut q, req.read16(lba, 16).unwrap()),
                8192,
                "final read",
            );
            assert_eq!(
                req.data().unwrap(),
                pattern(lba, round, 8192),
                "{round}/{i}"
            );
        }
    }
}

/// The control queue, the event queue and the first request queue share a backend worker. A
/// driver that keeps that request queue busy must not starve the two others: a task management
/// function is answered after a few batches of the stream, not once the stream pauses. (Before
/// the worker passed turns, it stayed on the busy queue as long as the driver kept it fed.)
#[test]
fn a_busy_request_queue_does_not_starve_the_control_queue_beside_it() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;

    /// READs kept in flight on the request queue.
    const DEPTH: u64 = 96;
    let backend = Backend::start(&["--device", "scsi", "--mem", "16M", "--num-queues", "2"]);
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(2)).unwrap();
    let mut cq = conn.take_queue(CONTROL_QUEUE).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    let mut c = ScsiCtrl::new(conn.ram()).unwrap();
    c.tmf(tmf::QUERY_TASK_SET, lun_address(0, 0), 42).unwrap();
    let c = Arc::new(c);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    // Stream completions seen before the TMF's response was (u64::MAX: not yet).
    let before_answer = Arc::new(AtomicU64::new(u64::MAX));
    let streamer = {
        let (c, stop, done, before) =
            (c.clone(), stop.clone(), done.clone(), before_answer.clone());
        std::thread::spawn(move || {
            let mut slots: Vec<ScsiRequest> = (0..DEPTH)
                .map(|k| {
                    let mut r = ScsiRequest::new(&q.ram.clone(), 4096).unwrap();
                    r.set_tag(k + 1);
                    r.read10(8 * k as u32, 8).unwrap();
                    r
                })
                .collect();
            let mut heads: Vec<u16> = slots.iter().map(|r| q.submit(&r.bufs()).unwrap()).collect();
            let mut n = 0u64;
            let end = Instant::now() + Duration::from_secs(20);
            while !stop.load(Ordering::Relaxed) && Instant::now() < end {
                // Looked at before the used ring: every completion counted so far was read from
                // the ring before the response was seen.
                if before.load(Ordering::Relaxed) == u64::MAX
                    && c.tmf_response().unwrap() == response::FUNCTION_COMPLETE
                {
                    before.store(n, Ordering::Relaxed);
                }
                // Every completion is matched before resubmitting: a head freed now may be
                // reused by the next submission.
                let finished: Vec<usize> = q
                    .wait(T)
                    .unwrap()
                    .iter()
                    .map(|u| {
                        let k = heads.iter().position(|&h| h == u.id).expect("known head");
                        assert_good(&slots[k].result(u.len).unwrap(), 4096, "streamed READ");
                        k
                    })
                    .collect();
                n += finished.len() as u64;
                done.store(n, Ordering::Relaxed);
                for k in finished {
                    let r = slots[k].read10(8 * k as u32, 8).unwrap();
                    heads[k] = q.submit(&r.bufs()).unwrap();
                }
            }
        })
    };
    let wait_for = |what: &str, cond: &dyn Fn() -> bool| {
        let deadline = Instant::now() + T;
        while !cond() {
            assert!(Instant::now() < deadline, "{what} within {T:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    wait_for("the stream running", &|| {
        done.load(Ordering::Relaxed) >= 4 * DEPTH
    });
    let head = cq.submit(&c.bufs()).unwrap();
    // Read after the kick: a late read only shortens the delay measured below.
    let at_submit = done.load(Ordering::Relaxed);
    let used = cq
        .wait(T)
        .unwrap_or_else(|e| panic!("TMF not answered while the request queue is busy: {e}"));
    assert_eq!(used.len(), 1, "{used:?}");
    assert_eq!((used[0].id, used[0].len), (head, 1));
    assert_eq!(c.tmf_response().unwrap(), response::FUNCTION_COMPLETE);
    wait_for("the streamer seeing the TMF answered", &|| {
        before_answer.load(Ordering::Relaxed) != u64::MAX
    });
    // The worker passes its turn after each batch of 32: the TMF waits a few batches at most
    // (plus the in-flight READs the streamer may count late), not the whole stream.
    let delay = before_answer
        .load(Ordering::Relaxed)
        .saturating_sub(at_submit);
    println!("TMF answered after {delay} stream completions");
    assert!(
        delay < 2000,
        "{delay} stream completions before the TMF was answered"
    );
    stop.store(true, Ordering::Relaxed);
    streamer.join().unwrap();
}

#[test]
fn inquiry_takes_the_configured_scan_latency_and_reads_do_not() {
    let backend = Backend::start(&[
        "--device",
        "scsi",
        "--topology",
        "targets=1,max_target=3,inquiry_delay=20ms",
        "--num-queues",
        "1",
    ]);
    let mut conn = Connection::connect(&backend.socket, &scsi_connect_options(1)).unwrap();
    let mut q = conn.take_queue(FIRST_REQUEST_QUEUE).unwrap();
    let mut req = ScsiRequest::new(&q.ram.clone(), 4096).unwrap();
    let timed = |q: &mut QueueHandle, req: &ScsiRequest| {
        let t = Instant::now();
        let r = cmd(q, req);
        (r, t.elapsed())
    };
    let floor = Duration::from_millis(20);
    for target in [0u8, 2] {
        for _ in 0..3 {
            let (r, took) = timed(&mut q, req.at(target, 0).inquiry(96).unwrap());
            let want = if target == 0 {
                response::OK
            } else {
                response::BAD_TARGET
            };
            assert_eq!(r.response, want, "target {target}");
            assert!(took >= floor, "INQUIRY of target {target} took {took:?}");
            assert!(took < Duration::from_secs(2), "{took:?}");
        }
    }
    let mut reads: Vec<Duration> = (0..21)
        .map(|k| {
            let (r, took) = timed(&mut q, req.at(0, 0).read10(8 * k, 8).unwrap());
            assert!(r.is_good());
            took
        })
        .collect();
    reads.sort();
    assert!(
        reads[10] < Duration::from_millis(10),
        "median READ took {:?}",
        reads[10]
    );
}
