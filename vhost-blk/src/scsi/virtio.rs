//! virtio-scsi command framing over the [`emulation`](super::emulation) layer:
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

use virtio_bindings::virtio_scsi::*;

use super::config_space::{MAX_CDB_SIZE, MAX_SENSE_SIZE};
use super::emulation::{cdb, SenseData, Topology};
use crate::device::{guest_bufs, Chain, ChainLimits, Outcome, RequestKind};

/// `virtio_scsi_cmd_req` before the CDB: `lun[8]`, id, task_attr, prio, crn.
pub const CMD_REQ_FIXED: usize = 19;
/// `virtio_scsi_cmd_resp` before the sense: sense_len, residual, status_qualifier, status,
/// response.
pub const CMD_RESP_FIXED: usize = 12;
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
    /// size (`CMD_RESP_FIXED` + the configured sense size): as much of the sense as fits after
    /// the header; the caller zeroed the rest.
    pub fn write_into(&self, sense: &[u8], b: &mut [u8]) {
        let sense_size = b.len() - CMD_RESP_FIXED;
        b[0..4].copy_from_slice(&self.sense_len.to_le_bytes());
        b[4..8].copy_from_slice(&self.residual.to_le_bytes());
        // 8..10: status_qualifier, always 0.
        b[10] = self.status;
        b[11] = self.response;
        let n = sense.len().min(sense_size);
        b[CMD_RESP_FIXED..CMD_RESP_FIXED + n].copy_from_slice(&sense[..n]);
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

/// Handles one chain of a request queue.
pub fn handle_cmd(cx: &CmdContext<'_>, chain: Chain<'_>) -> Outcome<ScsiKind> {
    let Some(mut bufs) = guest_bufs(&chain, &cx.limits) else {
        return Outcome::unanswered();
    };
    let (cdb_size, sense_size) = (cx.cdb_size, cx.sense_size);
    let (req_len, resp_len) = (CMD_REQ_FIXED + cdb_size, CMD_RESP_FIXED + sense_size);
    if bufs.writable_len() < resp_len {
        tracing::debug!("chain {} has no room for a response", chain.head_index());
        return Outcome::unanswered();
    }
    // The driver can only configure sizes up to the maxima (set_config checks them).
    if req_len > MAX_CMD_REQ || resp_len > MAX_CMD_RESP {
        return Outcome::unanswered();
    }
    let mut req_buf = [0u8; MAX_CMD_REQ];
    let req = &mut req_buf[..req_len];
    let (resp, sense, data_in_len, kind, bytes, delay) = if !bufs.read_readable(0, req) {
        tracing::debug!(
            "chain {}: request shorter than {req_len}",
            chain.head_index()
        );
        let r = CmdResp::with_response(VIRTIO_SCSI_S_FAILURE);
        (r, SenseData::NONE, 0, ScsiKind::Error, 0, None)
    } else {
        let mut lun = [0u8; 8];
        lun.copy_from_slice(&req[..8]);
        let cdb = &req[CMD_REQ_FIXED..];
        match cx.topology.resolve(&lun) {
            None => {
                let r = CmdResp::with_response(VIRTIO_SCSI_S_BAD_TARGET);
                let delay = cx.topology.absent_target_delay(cdb);
                (r, SenseData::NONE, 0, ScsiKind::Error, 0, delay)
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
                    ScsiKind::Error
                };
                let bytes = (r.data_in_len + r.data_out_len) as u64;
                (resp, r.sense, r.data_in_len, kind, bytes, r.delay)
            }
        }
    };
    let mut resp_buf = [0u8; MAX_CMD_RESP];
    resp.write_into(&sense, &mut resp_buf[..resp_len]);
    bufs.write_writable(0, &resp_buf[..resp_len]);
    Outcome::Complete {
        used_len: (resp_len + data_in_len) as u32,
        kind,
        bytes,
        extra_delay_ns: delay.map_or(0, |d| d.as_nanos().min(u64::MAX as u128) as u64),
    }
}
