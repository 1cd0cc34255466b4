//! Tests of the virtio-scsi personality through `Personality::process`, on mock chains; the
//! helpers are shared with the control-queue tests.

use std::sync::Arc;

use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_scsi::*;

use super::config_space::{CDB_SIZE_OFFSET, SENSE_SIZE_OFFSET};
use super::personality::*;
use super::virtio::*;
use crate::device::{Outcome, Personality};
use vhost_blk_scsi::emulation::encode_virtio_lun;
use vhost_blk_scsi::emulation::Topology;
use vhost_blk_scsi::topology::compact::parse_topology;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

pub const F_WRITE: u16 = 2;
pub const REQ: u64 = 0x10000;
pub const OUT: u64 = 0x20000;
pub const RESP: u64 = 0x30000;
pub const IN: u64 = 0x40000;

pub fn personality(topo: &str) -> ScsiPersonality {
    let cfg = parse_topology(topo).unwrap();
    let t = Topology::from_config(&cfg).unwrap();
    ScsiPersonality::new(
        Arc::new(t),
        ScsiOptions {
            num_queues: 2,
            queue_size: 16,
            cmd_per_lun: 8,
        },
    )
}

pub fn mem() -> GuestMemoryMmap {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), 0x100000)]).unwrap()
}

/// Builds a chain of `descs` (addr, len, flags) and runs it on vring `queue`.
pub fn run(
    p: &ScsiPersonality,
    m: &GuestMemoryMmap,
    queue: usize,
    descs: &[(u64, u32, u16)],
) -> Outcome<ScsiKind> {
    let chain = crate::device::chain::mock_chain(m, descs);
    p.process(queue, chain)
}

/// Writes a command request for `target:lun` with `cdb` at REQ.
fn cmd(m: &GuestMemoryMmap, target: u8, lun: u16, cdb: &[u8]) {
    let mut r = vec![0u8; CMD_REQ_FIXED + 32];
    r[..8].copy_from_slice(&encode_virtio_lun(target, lun));
    r[8..16].copy_from_slice(&0x1234u64.to_le_bytes());
    r[CMD_REQ_FIXED..CMD_REQ_FIXED + cdb.len()].copy_from_slice(cdb);
    m.write_slice(&r, GuestAddress(REQ)).unwrap();
}

fn resp(m: &GuestMemoryMmap) -> (CmdResp, Vec<u8>) {
    let mut b = [0u8; CMD_RESP_FIXED + 96];
    m.read_slice(&mut b, GuestAddress(RESP)).unwrap();
    let r = CmdResp {
        sense_len: u32::from_le_bytes(b[0..4].try_into().unwrap()),
        residual: u32::from_le_bytes(b[4..8].try_into().unwrap()),
        status: b[10],
        response: b[11],
    };
    (r, b[CMD_RESP_FIXED..].to_vec())
}

const RESP_LEN: u32 = (CMD_RESP_FIXED + 96) as u32;
const REQ_LEN: u32 = (CMD_REQ_FIXED + 32) as u32;

#[test]
fn inquiry_through_virtio() {
    let p = personality("0:0=mem:1M");
    let m = mem();
    cmd(&m, 0, 0, &[0x12, 0, 0, 0, 96, 0]);
    let o = run(
        &p,
        &m,
        2,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 255, F_WRITE),
        ],
    );
    assert!(
        matches!(o, Outcome::Complete { used_len, kind: ScsiKind::ScsiCmd, bytes: 96, .. } if used_len == RESP_LEN + 96),
        "{o:?}"
    );
    let (r, _) = resp(&m);
    assert_eq!(
        r,
        CmdResp {
            sense_len: 0,
            residual: 255 - 96,
            status: 0,
            response: 0
        }
    );
    let mut d = [0u8; 16];
    m.read_slice(&mut d, GuestAddress(IN + 8)).unwrap();
    assert_eq!(&d[..8], b"VHOSTBLK");
}

#[test]
fn absent_target_and_bad_lun_field_are_bad_target() {
    let p = personality("0:0=mem:1M,max_target=7,inquiry_delay=5ms");
    let m = mem();
    cmd(&m, 3, 0, &[0x12, 0, 0, 0, 36, 0]);
    let o = run(
        &p,
        &m,
        2,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 36, F_WRITE),
        ],
    );
    assert_eq!(
        o,
        Outcome::Complete {
            used_len: RESP_LEN,
            kind: ScsiKind::Error,
            bytes: 0,
            extra_delay_ns: 5_000_000
        }
    );
    assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_BAD_TARGET as u8);
    // A LUN field with a bad first byte.
    cmd(&m, 0, 0, &[0, 0, 0, 0, 0, 0]);
    m.write_slice(&[2u8], GuestAddress(REQ)).unwrap();
    run(&p, &m, 3, &[(REQ, REQ_LEN, 0), (RESP, RESP_LEN, F_WRITE)]);
    assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_BAD_TARGET as u8);
    // Absent LUN on the present target: INQUIRY answers with qualifier 011b.
    cmd(&m, 0, 5, &[0x12, 0, 0, 0, 36, 0]);
    run(
        &p,
        &m,
        2,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 36, F_WRITE),
        ],
    );
    assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_OK as u8);
    assert_eq!(m.read_obj::<u8>(GuestAddress(IN)).unwrap(), 0x7f);
}

#[test]
fn write_then_read_round_trip_and_check_condition_sense() {
    let p = personality("0:1=mem:1M");
    let m = mem();
    let data: Vec<u8> = (0..1024u32).map(|i| (i * 13) as u8).collect();
    m.write_slice(&data, GuestAddress(OUT)).unwrap();
    cmd(&m, 0, 1, &[0x2a, 0, 0, 0, 0, 4, 0, 0, 2, 0]);
    let o = run(
        &p,
        &m,
        2,
        &[(REQ, REQ_LEN, 0), (OUT, 1024, 0), (RESP, RESP_LEN, F_WRITE)],
    );
    assert!(
        matches!(
            o,
            Outcome::Complete {
                kind: ScsiKind::Write,
                bytes: 1024,
                ..
            }
        ),
        "{o:?}"
    );
    assert_eq!(resp(&m).0.status, 0);
    cmd(&m, 0, 1, &[0x28, 0, 0, 0, 0, 4, 0, 0, 2, 0]);
    let o = run(
        &p,
        &m,
        3,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 512, F_WRITE),
            (IN + 0x1000, 512, F_WRITE),
        ],
    );
    assert!(
        matches!(o, Outcome::Complete { kind: ScsiKind::Read, used_len, .. } if used_len == RESP_LEN + 1024)
    );
    let mut back = vec![0u8; 512];
    m.read_slice(&mut back, GuestAddress(IN)).unwrap();
    assert_eq!(back, data[..512]);
    m.read_slice(&mut back, GuestAddress(IN + 0x1000)).unwrap();
    assert_eq!(back, data[512..]);
    // Out of range: CHECK CONDITION with fixed sense in the response.
    cmd(&m, 0, 1, &[0x28, 0, 0, 0, 0x10, 0, 0, 0, 1, 0]);
    run(
        &p,
        &m,
        2,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 512, F_WRITE),
        ],
    );
    let (r, sense) = resp(&m);
    assert_eq!(
        (r.status, r.response, r.sense_len, r.residual),
        (2, 0, 18, 512)
    );
    assert_eq!((sense[0], sense[2], sense[12]), (0x70, 0x05, 0x21));
}

#[test]
fn short_buffers_overrun() {
    let p = personality("0:0=mem:1M");
    let m = mem();
    cmd(&m, 0, 0, &[0x28, 0, 0, 0, 0, 0, 0, 0, 4, 0]);
    let o = run(
        &p,
        &m,
        2,
        &[
            (REQ, REQ_LEN, 0),
            (RESP, RESP_LEN, F_WRITE),
            (IN, 512, F_WRITE),
        ],
    );
    assert!(
        matches!(o, Outcome::Complete { kind: ScsiKind::Error, used_len, .. } if used_len == RESP_LEN)
    );
    assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_OVERRUN as u8);
}

#[test]
fn malformed_chains() {
    let p = personality("0:0=mem:1M");
    let m = mem();
    cmd(&m, 0, 0, &[0, 0, 0, 0, 0, 0]);
    // Request header cut short: FAILURE.
    m.write_obj(0xffu8, GuestAddress(RESP + 11)).unwrap();
    let o = run(&p, &m, 2, &[(REQ, 20, 0), (RESP, RESP_LEN, F_WRITE)]);
    assert!(matches!(
        o,
        Outcome::Complete {
            kind: ScsiKind::Error,
            ..
        }
    ));
    assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_FAILURE as u8);
    // No room for the response: returned unused.
    assert_eq!(
        run(&p, &m, 2, &[(REQ, REQ_LEN, 0), (RESP, 50, F_WRITE)]),
        Outcome::unanswered()
    );
    // Only a device-readable part.
    assert_eq!(run(&p, &m, 2, &[(REQ, REQ_LEN, 0)]), Outcome::unanswered());
    // Outside guest memory.
    assert_eq!(
        run(&p, &m, 2, &[(REQ, REQ_LEN, 0), (0xff000, 0x2000, F_WRITE)]),
        Outcome::unanswered()
    );
}

#[test]
fn configured_cdb_and_sense_sizes_change_the_layout() {
    let p = personality("0:0=mem:1M");
    let m = mem();
    p.set_config(CDB_SIZE_OFFSET as u32, &16u32.to_le_bytes())
        .unwrap();
    p.set_config(SENSE_SIZE_OFFSET as u32, &32u32.to_le_bytes())
        .unwrap();
    assert!(p
        .set_config(CDB_SIZE_OFFSET as u32, &0u32.to_le_bytes())
        .is_err());
    assert!(p.set_config(0, &1u32.to_le_bytes()).is_err());
    assert!(p.set_config(CDB_SIZE_OFFSET as u32, &[1, 0]).is_err());
    let cfg = p.config_space();
    assert_eq!(u32::from_le_bytes(cfg[24..28].try_into().unwrap()), 16);
    let mut r = vec![0u8; CMD_REQ_FIXED + 16];
    r[..8].copy_from_slice(&encode_virtio_lun(0, 0));
    r[CMD_REQ_FIXED] = 0x25; // READ CAPACITY(10)
    m.write_slice(&r, GuestAddress(REQ)).unwrap();
    let resp_len = (CMD_RESP_FIXED + 32) as u32;
    let o = run(
        &p,
        &m,
        2,
        &[
            (REQ, r.len() as u32, 0),
            (RESP, resp_len, F_WRITE),
            (IN, 8, F_WRITE),
        ],
    );
    assert!(
        matches!(o, Outcome::Complete { used_len, .. } if used_len == resp_len + 8),
        "{o:?}"
    );
    let mut cap = [0u8; 8];
    m.read_slice(&mut cap, GuestAddress(IN)).unwrap();
    assert_eq!(u32::from_be_bytes(cap[..4].try_into().unwrap()), 2047);
    p.reset();
    assert_eq!(p.sizes(), (32, 96));
}

#[test]
fn features_queues_and_config_space() {
    let p = personality("0:0=mem:1M,3:2=null:1G,max_target=15");
    assert_eq!(p.num_queues(), 4);
    assert_eq!(p.first_request_queue(), 2);
    assert!(p.completes_after_requests(CONTROL_QUEUE));
    assert!(!p.completes_after_requests(EVENT_QUEUE) && !p.completes_after_requests(2));
    let f = p.features();
    assert_ne!(f & (1 << VIRTIO_SCSI_F_HOTPLUG), 0);
    assert_ne!(f & (1 << VIRTIO_SCSI_F_CHANGE), 0);
    assert_ne!(f & (1 << VIRTIO_F_VERSION_1), 0);
    assert_eq!(f & (1 << VIRTIO_SCSI_F_T10_PI), 0);
    let c = p.config_space();
    let u32_at = |o: usize| u32::from_le_bytes(c[o..o + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 2);
    assert_eq!(u32_at(4), 14);
    assert_eq!(u32_at(8), 16384);
    assert_eq!(u32_at(12), 8);
    assert_eq!(u32_at(16), 16);
    assert_eq!((u32_at(20), u32_at(24)), (96, 32));
    assert_eq!(u16::from_le_bytes([c[30], c[31]]), 15);
    assert_eq!(u32_at(32), 2);
}

#[test]
fn event_queue_buffers_are_held() {
    let p = personality("0:0=mem:1M");
    let m = mem();
    assert_eq!(
        run(&p, &m, EVENT_QUEUE, &[(RESP, 16, F_WRITE)]),
        Outcome::Held
    );
}

#[test]
fn random_chains_never_panic() {
    use rand::{Rng, SeedableRng};
    let p = personality("0:0=mem:1M,1:2=null:1M,max_target=3");
    let m = mem();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0x7669_7274);
    let mut answered = 0;
    for _ in 0..3000 {
        // A request: valid LUN fields and known opcodes most of the time, else noise.
        let mut req: Vec<u8> = (0..CMD_REQ_FIXED + 32).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.8) {
            let lun = encode_virtio_lun(rng.gen_range(0..5), rng.gen_range(0..4));
            req[..8].copy_from_slice(&lun);
            req[CMD_REQ_FIXED] =
                [0x00, 0x12, 0x28, 0x2a, 0x25, 0x9e, 0xa0, 0x42, 0x1a][rng.gen_range(0..9)];
            req[CMD_REQ_FIXED + 1..].iter_mut().for_each(|b| {
                if rng.gen_bool(0.8) {
                    *b = 0
                }
            });
        }
        if rng.gen_bool(0.3) {
            req[..4].copy_from_slice(&rng.gen_range(0u32..4).to_le_bytes());
        }
        m.write_slice(&req, GuestAddress(REQ)).unwrap();
        let n = rng.gen_range(1..5);
        let mut descs = Vec::new();
        let mut writable = false;
        for i in 0..n {
            writable |= i > 0 && rng.gen_bool(0.6);
            let len = match rng.gen_range(0..4) {
                0 => rng.gen_range(0..16),
                1 => rng.gen_range(0..200),
                2 => 512 * rng.gen_range(1..5),
                _ => rng.gen_range(0..0x3000),
            };
            let addr = if rng.gen_bool(0.05) {
                0xff800
            } else {
                [REQ, OUT, RESP, IN][i % 4]
            };
            descs.push((addr, len, if writable { F_WRITE } else { 0 }));
        }
        let queue = rng.gen_range(0..4);
        match run(&p, &m, queue, &descs) {
            Outcome::Complete { used_len, .. } => {
                let w: u32 = descs.iter().filter(|d| d.2 == F_WRITE).map(|d| d.1).sum();
                assert!(used_len <= w, "{descs:?} used {used_len}");
                answered += u32::from(used_len > 0);
            }
            Outcome::Held => assert_eq!(queue, EVENT_QUEUE),
        }
    }
    assert!(answered > 300, "only {answered} chains were answered");
}
