//! virtio-scsi framing over the [`emulation`](super::emulation) layer: queue layout (control queue 0,
//! event queue 1, request queues from 2), `virtio_scsi_cmd_req` / `virtio_scsi_cmd_resp`,
//! features and configuration space.
//!
//! A command whose LUN field does not decode or names an absent target gets BAD_TARGET (after
//! the topology's scan latency for scan commands); everything else goes to the target, whose
//! SCSI status and fixed-format sense are copied into the response. A transfer longer than the
//! buffers is OVERRUN. Event-queue buffers are held: the topology is static, so no event is
//! ever reported, and they are dropped at device reset.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use virtio_bindings::virtio_scsi::*;

use super::config_space::{ScsiConfigSpace, CDB_SIZE_OFFSET, SENSE_SIZE_OFFSET};
use super::emulation::{cdb, Topology, MAX_TRANSFER_BYTES};
use crate::backend::{Chain, Outcome, Personality, RequestKind};
use crate::chain::{Desc, GuestBufs};

/// The control queue.
pub const CONTROL_QUEUE: usize = 0;
/// The event queue.
pub const EVENT_QUEUE: usize = 1;
/// The first request queue.
pub const FIRST_REQUEST_QUEUE: usize = 2;
/// `virtio_scsi_cmd_req` before the CDB: `lun[8]`, id, task_attr, prio, crn.
pub const CMD_REQ_FIXED: usize = 19;
/// `virtio_scsi_cmd_resp` before the sense: sense_len, residual, status_qualifier, status,
/// response.
pub const CMD_RESP_FIXED: usize = 12;
/// `struct virtio_scsi_event`.
pub const EVENT_INFO_SIZE: u32 = 16;
/// Largest CDB and sense sizes the driver may configure.
pub const MAX_CDB_SIZE: u32 = 255;
pub const MAX_SENSE_SIZE: u32 = 255;

/// Settings of the personality.
#[derive(Debug, Clone)]
pub struct ScsiOptions {
    /// Request queues (MSI-X vectors for the completion model).
    pub num_queues: u16,
    pub queue_size: u16,
    /// Advertised `cmd_per_lun` (the guest's default LUN queue depth).
    pub cmd_per_lun: u32,
}

/// virtio-scsi over a [`Topology`].
#[derive(Debug)]
pub struct ScsiPersonality {
    topology: Arc<Topology>,
    opts: ScsiOptions,
    cdb_size: AtomicU32,
    sense_size: AtomicU32,
    acked: AtomicU64,
}

impl ScsiPersonality {
    pub fn new(topology: Arc<Topology>, opts: ScsiOptions) -> Self {
        Self {
            topology,
            opts,
            cdb_size: AtomicU32::new(VIRTIO_SCSI_CDB_DEFAULT_SIZE),
            sense_size: AtomicU32::new(VIRTIO_SCSI_SENSE_DEFAULT_SIZE),
            acked: AtomicU64::new(0),
        }
    }

    pub fn topology(&self) -> &Arc<Topology> {
        &self.topology
    }

    fn seg_max(&self) -> u32 {
        // Two descriptors go to the request and response headers.
        u32::from(self.opts.queue_size).saturating_sub(2).max(1)
    }

    /// Largest chain, in bytes, that the device accepts.
    pub(crate) fn max_chain_bytes(&self) -> u64 {
        u64::from(self.seg_max()) * (1 << 20) + 64 * 1024
    }

    pub(crate) fn max_descs(&self) -> usize {
        usize::from(self.opts.queue_size).max(1) + 2
    }

    /// Current CDB and sense sizes of the request layout.
    fn sizes(&self) -> (usize, usize) {
        (
            self.cdb_size.load(Ordering::Relaxed) as usize,
            self.sense_size.load(Ordering::Relaxed) as usize,
        )
    }
}

impl Personality for ScsiPersonality {
    fn name(&self) -> &'static str {
        "virtio-scsi"
    }

    fn num_queues(&self) -> usize {
        FIRST_REQUEST_QUEUE + usize::from(self.opts.num_queues)
    }

    fn first_request_queue(&self) -> usize {
        FIRST_REQUEST_QUEUE
    }

    fn features(&self) -> u64 {
        1u64 << VIRTIO_F_VERSION_1
            | 1 << VIRTIO_RING_F_EVENT_IDX
            | 1 << VIRTIO_RING_F_INDIRECT_DESC
            | 1 << VIRTIO_SCSI_F_HOTPLUG
            | 1 << VIRTIO_SCSI_F_CHANGE
    }

    fn acked_features(&self, features: u64) {
        self.acked.store(features, Ordering::Relaxed);
    }

    fn config_space(&self) -> Vec<u8> {
        let (cdb_size, sense_size) = self.sizes();
        ScsiConfigSpace {
            num_queues: u32::from(self.opts.num_queues),
            seg_max: self.seg_max(),
            max_sectors: (MAX_TRANSFER_BYTES / 512) as u32,
            cmd_per_lun: self.opts.cmd_per_lun,
            event_info_size: EVENT_INFO_SIZE,
            sense_size: sense_size as u32,
            cdb_size: cdb_size as u32,
            max_channel: 0,
            max_target: self.topology.max_target(),
            max_lun: u32::from(self.topology.max_lun()),
        }
        .to_bytes()
    }

    fn set_config(&self, offset: u32, data: &[u8]) -> io::Result<()> {
        let einval = || io::Error::from_raw_os_error(libc::EINVAL);
        let value = u32::from_le_bytes(data.try_into().map_err(|_| einval())?);
        match offset as usize {
            SENSE_SIZE_OFFSET if value <= MAX_SENSE_SIZE => {
                self.sense_size.store(value, Ordering::Relaxed)
            }
            CDB_SIZE_OFFSET if (1..=MAX_CDB_SIZE).contains(&value) => {
                self.cdb_size.store(value, Ordering::Relaxed)
            }
            _ => return Err(einval()),
        }
        tracing::debug!(offset, value, "driver wrote the configuration space");
        Ok(())
    }

    fn reset(&self) {
        self.cdb_size
            .store(VIRTIO_SCSI_CDB_DEFAULT_SIZE, Ordering::Relaxed);
        self.sense_size
            .store(VIRTIO_SCSI_SENSE_DEFAULT_SIZE, Ordering::Relaxed);
    }

    fn completes_after_requests(&self, queue: usize) -> bool {
        // A TMF answer tells the driver the commands it covers are done (Linux polls the
        // request queues once after it and then considers them finished).
        queue == CONTROL_QUEUE
    }

    fn process(&self, queue: usize, chain: Chain<'_>) -> Outcome {
        match queue {
            CONTROL_QUEUE => super::control::handle(self, chain),
            EVENT_QUEUE => Outcome::Held,
            _ => handle_cmd(self, chain),
        }
    }
}

/// Completion that reports nothing (the chain could not carry a response).
pub(crate) fn unanswerable() -> Outcome {
    Outcome::Complete {
        used_len: 0,
        kind: RequestKind::Error,
        bytes: 0,
        extra_delay_ns: 0,
    }
}

/// Validated buffers of a chain, or `None` (logged) when the chain is malformed.
pub(crate) fn chain_bufs<'m>(p: &ScsiPersonality, chain: &'m Chain<'_>) -> Option<GuestBufs<'m>> {
    let descs = chain.clone().map(|d| Desc {
        addr: d.addr().0,
        len: d.len(),
        writable: d.is_write_only(),
    });
    match GuestBufs::new(chain.memory(), descs, p.max_chain_bytes(), p.max_descs()) {
        Ok(b) => Some(b),
        Err(e) => {
            tracing::debug!("refused chain {}: {e}", chain.head_index());
            None
        }
    }
}

/// The fixed part of a command response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmdResp {
    pub sense_len: u32,
    pub residual: u32,
    pub status: u8,
    pub response: u8,
}

impl CmdResp {
    fn with_response(response: u32) -> Self {
        Self {
            sense_len: 0,
            residual: 0,
            status: 0,
            response: response as u8,
        }
    }

    /// The response header followed by `sense` (zero-padded to `sense_size`).
    pub fn to_bytes(&self, sense: &[u8], sense_size: usize) -> Vec<u8> {
        let mut b = vec![0u8; CMD_RESP_FIXED + sense_size];
        b[0..4].copy_from_slice(&self.sense_len.to_le_bytes());
        b[4..8].copy_from_slice(&self.residual.to_le_bytes());
        // 8..10: status_qualifier, always 0.
        b[10] = self.status;
        b[11] = self.response;
        let n = sense.len().min(sense_size);
        b[CMD_RESP_FIXED..CMD_RESP_FIXED + n].copy_from_slice(&sense[..n]);
        b
    }
}

/// Statistics kind of a successful command.
fn kind_of(opcode: Option<u8>) -> RequestKind {
    use cdb::*;
    match opcode {
        Some(READ_6 | READ_10 | READ_12 | READ_16) => RequestKind::Read,
        Some(WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16) => RequestKind::Write,
        Some(SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16) => RequestKind::Flush,
        Some(UNMAP) => RequestKind::Discard,
        Some(WRITE_SAME_10 | WRITE_SAME_16) => RequestKind::WriteZeroes,
        _ => RequestKind::ScsiCmd,
    }
}

/// Handles one chain of a request queue.
fn handle_cmd(p: &ScsiPersonality, chain: Chain<'_>) -> Outcome {
    let Some(mut bufs) = chain_bufs(p, &chain) else {
        return unanswerable();
    };
    let (cdb_size, sense_size) = p.sizes();
    let (req_len, resp_len) = (CMD_REQ_FIXED + cdb_size, CMD_RESP_FIXED + sense_size);
    if bufs.writable_len() < resp_len {
        tracing::debug!("chain {} has no room for a response", chain.head_index());
        return unanswerable();
    }
    let mut req = vec![0u8; req_len];
    let (resp, sense, data_in_len, kind, bytes, delay) = if !bufs.read_readable(0, &mut req) {
        tracing::debug!(
            "chain {}: request shorter than {req_len}",
            chain.head_index()
        );
        let r = CmdResp::with_response(VIRTIO_SCSI_S_FAILURE);
        (r, Vec::new(), 0, RequestKind::Error, 0, None)
    } else {
        let mut lun = [0u8; 8];
        lun.copy_from_slice(&req[..8]);
        let cdb = &req[CMD_REQ_FIXED..];
        match p.topology.resolve(&lun) {
            None => {
                let r = CmdResp::with_response(VIRTIO_SCSI_S_BAD_TARGET);
                let delay = p.topology.absent_target_delay(cdb);
                (r, Vec::new(), 0, RequestKind::Error, 0, delay)
            }
            Some((target, lun)) => {
                let data_out = bufs.readable_iov(req_len);
                let in_len = bufs.writable_len() - resp_len;
                let mut data_in = bufs.writable_iov(resp_len, in_len);
                let r = target.execute(lun, cdb, &data_out, &mut data_in);
                let resp = CmdResp {
                    sense_len: r.sense.len().min(sense_size) as u32,
                    residual: r.residual,
                    status: r.status,
                    response: if r.overrun {
                        VIRTIO_SCSI_S_OVERRUN
                    } else {
                        VIRTIO_SCSI_S_OK
                    } as u8,
                };
                let kind = if r.is_good() && !r.overrun {
                    kind_of(cdb.first().copied())
                } else {
                    RequestKind::Error
                };
                let bytes = (r.data_in_len + r.data_out_len) as u64;
                (resp, r.sense, r.data_in_len, kind, bytes, r.delay)
            }
        }
    };
    bufs.write_writable(0, &resp.to_bytes(&sense, sense_size));
    Outcome::Complete {
        used_len: (resp_len + data_in_len) as u32,
        kind,
        bytes,
        extra_delay_ns: delay.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scsi::emulation::encode_virtio_lun;
    use crate::scsi::topology::compact::parse_topology;
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
    ) -> Outcome {
        let chain = crate::chain::mock_chain(m, descs);
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
            matches!(o, Outcome::Complete { used_len, kind: RequestKind::ScsiCmd, bytes: 96, .. } if used_len == RESP_LEN + 96),
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
                kind: RequestKind::Error,
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
                    kind: RequestKind::Write,
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
            matches!(o, Outcome::Complete { kind: RequestKind::Read, used_len, .. } if used_len == RESP_LEN + 1024)
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
            matches!(o, Outcome::Complete { kind: RequestKind::Error, used_len, .. } if used_len == RESP_LEN)
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
                kind: RequestKind::Error,
                ..
            }
        ));
        assert_eq!(resp(&m).0.response, VIRTIO_SCSI_S_FAILURE as u8);
        // No room for the response: returned unused.
        assert_eq!(
            run(&p, &m, 2, &[(REQ, REQ_LEN, 0), (RESP, 50, F_WRITE)]),
            unanswerable()
        );
        // Only a device-readable part.
        assert_eq!(run(&p, &m, 2, &[(REQ, REQ_LEN, 0)]), unanswerable());
        // Outside guest memory.
        assert_eq!(
            run(&p, &m, 2, &[(REQ, REQ_LEN, 0), (0xff000, 0x2000, F_WRITE)]),
            unanswerable()
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
}
