//! virtio-scsi command framing over the [`emulation`](vhost_blk_scsi::emulation) layer:
//! `virtio_scsi_cmd_req` / `virtio_scsi_cmd_resp` on a request queue, and the request types
//! the statistics count ([`ScsiKind`]).
//!
//! A command whose LUN field does not decode or names an absent target gets BAD_TARGET (after
//! the topology's scan latency for scan commands); everything else goes to the target, whose
//! SCSI status and fixed-format sense are copied into the response. A transfer longer than the
//! buffers is OVERRUN.
//!
//! Allocation-free: the request header and the response are built in stack buffers sized for
//! the largest CDB and sense sizes the driver may configure, sense data is inline, and the
//! buffer lists are inline for short chains (tests/scsi_no_alloc.rs counts allocations).
//!
//! Layout: the fixed parts are virtio-bindings' `virtio_scsi_cmd_req` / `virtio_scsi_cmd_resp`
//! up to their CDB and sense arrays, whose sizes the driver configures (up to 255 bytes, more
//! than the bindings' arrays hold), so the arrays themselves are copied separately. Data-out and
//! data-in go between guest memory and the emulation as volatile slices (no copy for
//! READ/WRITE).

use std::mem::offset_of;

use virtio_bindings::virtio_scsi::*;
use vm_memory::ByteValued;

use super::config_space::{MAX_CDB_SIZE, MAX_SENSE_SIZE};
use crate::device::{load_chain, Chain, ChainLimits, GuestBufs, Outcome, RequestKind};
use vhost_blk_scsi::emulation::{cdb, SenseData, Topology};

/// `virtio_scsi_cmd_req` before the CDB: `lun[8]`, id, task_attr, prio, crn.
pub const CMD_REQ_FIXED: usize = offset_of!(virtio_scsi_cmd_req, cdb);
/// `virtio_scsi_cmd_resp` before the sense: sense_len, residual, status_qualifier, status,
/// response.
pub const CMD_RESP_FIXED: usize = offset_of!(virtio_scsi_cmd_resp, sense);
const _: () = assert!(CMD_REQ_FIXED == 19 && CMD_RESP_FIXED == 12);

/// `virtio_scsi_cmd_resp` as bytes (only its fixed part is used: the sense array of the bindings
/// is shorter than the largest sense size a driver may configure).
#[derive(Clone, Copy, Debug, Default)]
#[repr(transparent)]
struct RespBytes(virtio_scsi_cmd_resp);

// SAFETY: `virtio_scsi_cmd_resp` is `repr(C, packed)` (no padding) of integers and a byte
// array: every byte pattern is a valid value, every byte is initialised.
unsafe impl ByteValued for RespBytes {}
/// Largest request header (fixed part and the largest CDB).
const MAX_CMD_REQ: usize = CMD_REQ_FIXED + MAX_CDB_SIZE as usize;
/// Largest response (fixed part and the largest sense).
const MAX_CMD_RESP: usize = CMD_RESP_FIXED + MAX_SENSE_SIZE as usize;
/// virtio-scsi request types, as the statistics count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScsiKind {
    Read,
    Write,
    Flush,
    Discard,
    WriteZeroes,
    /// Any other SCSI command.
    ScsiCmd,
    /// A control-queue request (task management or asynchronous notification).
    Tmf,
    /// A request that could not be parsed or failed.
    Error,
}

impl RequestKind for ScsiKind {
    const NAMES: &'static [&'static str] = &[
        "read",
        "write",
        "flush",
        "discard",
        "write_zeroes",
        "scsi_cmd",
        "tmf",
        "error",
    ];
    const ERROR: Self = ScsiKind::Error;

    fn index(self) -> usize {
        self as usize
    }

    fn payload(self, bytes: u64) -> (u64, u64) {
        match self {
            ScsiKind::Read => (bytes, 0),
            ScsiKind::Write => (0, bytes),
            _ => (0, 0),
        }
    }
}

/// What a request queue needs of the device to answer one command.
#[derive(Debug, Clone, Copy)]
pub struct CmdContext<'a> {
    pub topology: &'a Topology,
    pub limits: ChainLimits,
    /// CDB and sense sizes the driver configured.
    pub cdb_size: usize,
    pub sense_size: usize,
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

    /// Writes the response header followed by `sense` into `b`, whose length is the response
    /// size (`CMD_RESP_FIXED` + the configured sense size, at least `CMD_RESP_FIXED`): as much
    /// of the sense as fits after the header; the caller zeroed the rest.
    pub fn write_into(&self, sense: &[u8], b: &mut [u8]) {
        let hdr = RespBytes(virtio_scsi_cmd_resp {
            sense_len: self.sense_len.to_le(),
            resid: self.residual.to_le(),
            status_qualifier: 0,
            status: self.status,
            response: self.response,
            ..Default::default()
        });
        let (head, tail) = b.split_at_mut(CMD_RESP_FIXED.min(b.len()));
        head.iter_mut()
            .zip(hdr.as_slice())
            .for_each(|(d, s)| *d = *s);
        tail.iter_mut().zip(sense).for_each(|(d, s)| *d = *s);
    }
}

/// Statistics kind of a successful command.
fn kind_of(opcode: Option<u8>) -> ScsiKind {
    use cdb::*;
    match opcode {
        Some(READ_6 | READ_10 | READ_12 | READ_16) => ScsiKind::Read,
        Some(WRITE_6 | WRITE_10 | WRITE_12 | WRITE_16) => ScsiKind::Write,
        Some(SYNCHRONIZE_CACHE_10 | SYNCHRONIZE_CACHE_16) => ScsiKind::Flush,
        Some(UNMAP) => ScsiKind::Discard,
        Some(WRITE_SAME_10 | WRITE_SAME_16) => ScsiKind::WriteZeroes,
        _ => ScsiKind::ScsiCmd,
    }
}

/// What a command produced, before the response is written.
struct Answer {
    resp: CmdResp,
    sense: SenseData,
    data_in_len: usize,
    kind: ScsiKind,
    bytes: u64,
    delay: Option<std::time::Duration>,
}

impl Answer {
    /// A response without SCSI status (FAILURE, BAD_TARGET): nothing transferred.
    fn virtio(response: u32, delay: Option<std::time::Duration>) -> Self {
        Self {
            resp: CmdResp::with_response(response),
            sense: SenseData::NONE,
            data_in_len: 0,
            kind: ScsiKind::Error,
            bytes: 0,
            delay,
        }
    }
}

/// Handles one chain of a request queue.
pub fn handle_cmd(cx: &CmdContext<'_>, chain: Chain<'_>) -> Outcome<ScsiKind> {
    let mut bufs = GuestBufs::empty();
    if !load_chain(&mut bufs, &chain, &cx.limits) {
        return Outcome::unanswered();
    }
    let (req_len, resp_len) = (CMD_REQ_FIXED + cx.cdb_size, CMD_RESP_FIXED + cx.sense_size);
    if bufs.writable_len() < resp_len {
        tracing::debug!("chain {} has no room for a response", chain.head_index());
        return Outcome::unanswered();
    }
    // The driver can only configure sizes up to the maxima (set_config checks them).
    if req_len > MAX_CMD_REQ || resp_len > MAX_CMD_RESP {
        return Outcome::unanswered();
    }
    let mut req_buf = [0u8; MAX_CMD_REQ];
    let req = req_buf.get_mut(..req_len).unwrap_or_default();
    let a = if bufs.read_readable(0, req) {
        execute(cx, &bufs, req)
    } else {
        tracing::debug!(
            "chain {}: request shorter than {req_len}",
            chain.head_index()
        );
        Answer::virtio(VIRTIO_SCSI_S_FAILURE, None)
    };
    let mut resp_buf = [0u8; MAX_CMD_RESP];
    let resp = resp_buf.get_mut(..resp_len).unwrap_or_default();
    a.resp.write_into(&a.sense, resp);
    bufs.write_writable(0, resp);
    Outcome::Complete {
        used_len: (resp_len + a.data_in_len) as u32,
        kind: a.kind,
        bytes: a.bytes,
        extra_delay_ns: a
            .delay
            .map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
    }
}

/// Runs the command in `req` (fixed part and CDB) with the chain's data-out and data-in.
fn execute(cx: &CmdContext<'_>, bufs: &GuestBufs<'_>, req: &[u8]) -> Answer {
    let (fixed, cdb) = req.split_at(CMD_REQ_FIXED.min(req.len()));
    let mut lun = [0u8; 8];
    lun.iter_mut().zip(fixed).for_each(|(d, s)| *d = *s);
    let Some((target, lun)) = cx.topology.resolve(&lun) else {
        let delay = cx.topology.absent_target_delay(cdb);
        return Answer::virtio(VIRTIO_SCSI_S_BAD_TARGET, delay);
    };
    let resp_len = CMD_RESP_FIXED + cx.sense_size;
    let data_out = bufs.readable_slices(req.len());
    let data_in = bufs.writable_slices(resp_len, bufs.writable_len() - resp_len);
    let r = target.execute(lun, cdb, &data_out, &data_in);
    let response = if r.overrun {
        VIRTIO_SCSI_S_OVERRUN
    } else {
        VIRTIO_SCSI_S_OK
    };
    let kind = if r.is_good() && !r.overrun {
        kind_of(cdb.first().copied())
    } else {
        ScsiKind::Error
    };
    Answer {
        resp: CmdResp {
            sense_len: r.sense.len().min(cx.sense_size) as u32,
            residual: r.residual,
            status: r.status,
            response: response as u8,
        },
        data_in_len: r.data_in_len,
        kind,
        bytes: (r.data_in_len + r.data_out_len) as u64,
        delay: r.delay,
        sense: r.sense,
    }
}
