//! The control queue: task management functions and asynchronous-notification requests.
//!
//! Every command has finished executing by the time its chain leaves
//! `ScsiPersonality::process` (completions the latency model still holds are done, only not
//! yet published), so no task is ever left to abort: ABORT TASK, ABORT TASK SET, CLEAR TASK
//! SET, LOGICAL UNIT RESET and I_T NEXUS RESET answer FUNCTION COMPLETE, QUERY TASK and QUERY
//! TASK SET answer FUNCTION COMPLETE (nothing in the task set), CLEAR ACA is rejected (NACA is
//! not supported). No asynchronous event is supported, so AN query and subscribe answer with
//! an empty event mask.

use std::mem::size_of;

use virtio_bindings::virtio_scsi::*;
use vm_memory::ByteValued;

use super::virtio::ScsiKind;
use crate::device::{load_chain, Chain, ChainLimits, GuestBufs, Outcome};
use vhost_blk_scsi::emulation::{decode_virtio_lun, Topology};

/// `virtio_scsi_ctrl_tmf_req`: type, subtype, `lun[8]`, id.
pub const TMF_REQ_LEN: usize = size_of::<virtio_scsi_ctrl_tmf_req>();
/// `virtio_scsi_ctrl_tmf_resp`: response.
pub const TMF_RESP_LEN: usize = size_of::<virtio_scsi_ctrl_tmf_resp>();
/// `virtio_scsi_ctrl_an_req`: type, `lun[8]`, event_requested.
pub const AN_REQ_LEN: usize = size_of::<virtio_scsi_ctrl_an_req>();
/// `virtio_scsi_ctrl_an_resp`: event_actual, response.
pub const AN_RESP_LEN: usize = size_of::<virtio_scsi_ctrl_an_resp>();
const _: () = assert!(TMF_REQ_LEN == 24 && TMF_RESP_LEN == 1);
const _: () = assert!(AN_REQ_LEN == 16 && AN_RESP_LEN == 5);

/// Declares a `ByteValued` wrapper around a virtio-bindings control-queue structure.
macro_rules! wire {
    ($name:ident, $t:ty) => {
        #[derive(Clone, Copy, Debug, Default)]
        #[repr(transparent)]
        struct $name($t);
        // SAFETY: the wrapped virtio-bindings structure is `repr(C, packed)` (no padding) of
        // integers and byte arrays: every byte pattern is a valid value, every byte is
        // initialised.
        unsafe impl ByteValued for $name {}
    };
}
wire!(TmfReq, virtio_scsi_ctrl_tmf_req);
wire!(TmfResp, virtio_scsi_ctrl_tmf_resp);
wire!(AnReq, virtio_scsi_ctrl_an_req);
wire!(AnResp, virtio_scsi_ctrl_an_resp);

/// Whether the LUN a control request names is present; `None` when the field does not decode
/// or the target is absent (BAD_TARGET).
fn lun_present(topology: &Topology, lun: &[u8; 8]) -> Option<bool> {
    let a = decode_virtio_lun(lun).ok()?;
    let t = topology.target(u16::from(a.target))?;
    Some(t.lun(a.lun).is_some())
}

/// The response to a task management function.
pub fn tmf_response(topology: &Topology, subtype: u32, lun: &[u8; 8]) -> u8 {
    let Some(present) = lun_present(topology, lun) else {
        return VIRTIO_SCSI_S_BAD_TARGET as u8;
    };
    let r = match subtype {
        VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET => VIRTIO_SCSI_S_FUNCTION_COMPLETE,
        VIRTIO_SCSI_T_TMF_ABORT_TASK
        | VIRTIO_SCSI_T_TMF_ABORT_TASK_SET
        | VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET
        | VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET
        | VIRTIO_SCSI_T_TMF_QUERY_TASK
        | VIRTIO_SCSI_T_TMF_QUERY_TASK_SET => {
            if present {
                VIRTIO_SCSI_S_FUNCTION_COMPLETE
            } else {
                VIRTIO_SCSI_S_INCORRECT_LUN
            }
        }
        _ => VIRTIO_SCSI_S_FUNCTION_REJECTED,
    };
    r as u8
}

/// `VIRTIO_SCSI_S_FUNCTION_COMPLETE` (not in the bindings; same value as `S_OK`).
const VIRTIO_SCSI_S_FUNCTION_COMPLETE: u32 = 0;

/// The response (event_actual, response) to an AN query or subscribe.
pub fn an_response(topology: &Topology, lun: &[u8; 8]) -> (u32, u8) {
    match lun_present(topology, lun) {
        None => (0, VIRTIO_SCSI_S_BAD_TARGET as u8),
        Some(_) => (0, VIRTIO_SCSI_S_OK as u8),
    }
}

/// Handles one chain of the control queue.
pub(crate) fn handle(topology: &Topology, limits: &ChainLimits, chain: Chain) -> Outcome<ScsiKind> {
    let mut bufs = GuestBufs::empty();
    if !load_chain(&mut bufs, &chain, limits) {
        return Outcome::unanswered();
    }
    let Some(type_) = bufs.read_obj::<u32>(0).map(u32::from_le) else {
        return Outcome::unanswered();
    };
    let used_len = match type_ {
        VIRTIO_SCSI_T_TMF => tmf(topology, &bufs),
        VIRTIO_SCSI_T_AN_QUERY | VIRTIO_SCSI_T_AN_SUBSCRIBE => an(topology, &bufs),
        t => {
            tracing::debug!(type_ = t, "unknown control request type");
            return Outcome::unanswered();
        }
    };
    let Some(used_len) = used_len else {
        tracing::debug!("control chain {} is too short", chain.head_index());
        return Outcome::unanswered();
    };
    Outcome::Complete {
        used_len: used_len as u32,
        kind: ScsiKind::Tmf,
        bytes: 0,
        extra_delay_ns: 0,
    }
}

/// A task management function; the response length, or `None` when the chain is too short.
fn tmf(topology: &Topology, bufs: &GuestBufs<'_>) -> Option<usize> {
    if bufs.writable_len() < TMF_RESP_LEN {
        return None;
    }
    let req = bufs.read_obj::<TmfReq>(0)?.0;
    let (subtype, lun) = (u32::from_le(req.subtype), req.lun);
    let response = tmf_response(topology, subtype, &lun);
    tracing::debug!(subtype, response, "task management function");
    let resp = TmfResp(virtio_scsi_ctrl_tmf_resp { response });
    bufs.write_obj(0, &resp).then_some(TMF_RESP_LEN)
}

/// An asynchronous-notification query or subscription; as [`tmf`].
fn an(topology: &Topology, bufs: &GuestBufs<'_>) -> Option<usize> {
    if bufs.writable_len() < AN_RESP_LEN {
        return None;
    }
    let lun = bufs.read_obj::<AnReq>(0)?.0.lun;
    let (event_actual, response) = an_response(topology, &lun);
    let resp = AnResp(virtio_scsi_ctrl_an_resp {
        event_actual: event_actual.to_le(),
        response,
    });
    bufs.write_obj(0, &resp).then_some(AN_RESP_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scsi::tests::{mem, personality, run, F_WRITE, REQ, RESP};
    use vhost_blk_scsi::emulation::encode_virtio_lun;
    use vm_memory::{Bytes, GuestAddress};

    fn tmf_req(subtype: u32, lun: [u8; 8]) -> Vec<u8> {
        let mut r = VIRTIO_SCSI_T_TMF.to_le_bytes().to_vec();
        r.extend_from_slice(&subtype.to_le_bytes());
        r.extend_from_slice(&lun);
        r.extend_from_slice(&7u64.to_le_bytes());
        r
    }

    #[test]
    fn task_management_answers() {
        let p = personality("0:0=mem:1M,max_target=3");
        let t = p.topology();
        let l00 = encode_virtio_lun(0, 0);
        let l01 = encode_virtio_lun(0, 1);
        let l20 = encode_virtio_lun(2, 0);
        let ok = VIRTIO_SCSI_S_FUNCTION_COMPLETE as u8;
        for st in [
            VIRTIO_SCSI_T_TMF_ABORT_TASK,
            VIRTIO_SCSI_T_TMF_ABORT_TASK_SET,
            VIRTIO_SCSI_T_TMF_CLEAR_TASK_SET,
            VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET,
            VIRTIO_SCSI_T_TMF_QUERY_TASK,
            VIRTIO_SCSI_T_TMF_QUERY_TASK_SET,
        ] {
            assert_eq!(tmf_response(t, st, &l00), ok, "subtype {st}");
            assert_eq!(tmf_response(t, st, &l01), VIRTIO_SCSI_S_INCORRECT_LUN as u8);
            assert_eq!(tmf_response(t, st, &l20), VIRTIO_SCSI_S_BAD_TARGET as u8);
        }
        assert_eq!(tmf_response(t, VIRTIO_SCSI_T_TMF_I_T_NEXUS_RESET, &l01), ok);
        assert_eq!(
            tmf_response(t, VIRTIO_SCSI_T_TMF_CLEAR_ACA, &l00),
            VIRTIO_SCSI_S_FUNCTION_REJECTED as u8
        );
        assert_eq!(
            tmf_response(t, 99, &l00),
            VIRTIO_SCSI_S_FUNCTION_REJECTED as u8
        );
        assert_eq!(
            tmf_response(t, 0, &[9, 0, 0, 0, 0, 0, 0, 0]),
            VIRTIO_SCSI_S_BAD_TARGET as u8
        );
    }

    #[test]
    fn tmf_and_an_through_the_control_queue() {
        let p = personality("0:0=mem:1M");
        let m = mem();
        m.write_slice(
            &tmf_req(
                VIRTIO_SCSI_T_TMF_LOGICAL_UNIT_RESET,
                encode_virtio_lun(0, 0),
            ),
            GuestAddress(REQ),
        )
        .unwrap();
        m.write_obj(0xffu8, GuestAddress(RESP)).unwrap();
        let o = run(&p, &m, 0, &[(REQ, 24, 0), (RESP, 1, F_WRITE)]);
        assert!(
            matches!(
                o,
                Outcome::Complete {
                    used_len: 1,
                    kind: ScsiKind::Tmf,
                    ..
                }
            ),
            "{o:?}"
        );
        assert_eq!(m.read_obj::<u8>(GuestAddress(RESP)).unwrap(), 0);

        let mut an = VIRTIO_SCSI_T_AN_SUBSCRIBE.to_le_bytes().to_vec();
        an.extend_from_slice(&encode_virtio_lun(0, 0));
        an.extend_from_slice(&0xffu32.to_le_bytes());
        m.write_slice(&an, GuestAddress(REQ)).unwrap();
        m.write_slice(&[0xff; 5], GuestAddress(RESP)).unwrap();
        let o = run(&p, &m, 0, &[(REQ, 16, 0), (RESP, 5, F_WRITE)]);
        assert!(matches!(o, Outcome::Complete { used_len: 5, .. }));
        let mut r = [0u8; 5];
        m.read_slice(&mut r, GuestAddress(RESP)).unwrap();
        assert_eq!(r, [0, 0, 0, 0, VIRTIO_SCSI_S_OK as u8]);
        an[..4].copy_from_slice(&VIRTIO_SCSI_T_AN_QUERY.to_le_bytes());
        an[5] = 4; // absent target
        m.write_slice(&an, GuestAddress(REQ)).unwrap();
        run(&p, &m, 0, &[(REQ, 16, 0), (RESP, 5, F_WRITE)]);
        m.read_slice(&mut r, GuestAddress(RESP)).unwrap();
        assert_eq!(r[4], VIRTIO_SCSI_S_BAD_TARGET as u8);
    }

    #[test]
    fn malformed_control_requests_are_returned_unused() {
        let p = personality("0:0=mem:1M");
        let m = mem();
        let req = tmf_req(0, encode_virtio_lun(0, 0));
        m.write_slice(&req, GuestAddress(REQ)).unwrap();
        // Short request, missing response, unknown type, type cut short.
        assert_eq!(
            run(&p, &m, 0, &[(REQ, 20, 0), (RESP, 1, F_WRITE)]),
            Outcome::unanswered()
        );
        assert_eq!(run(&p, &m, 0, &[(REQ, 24, 0)]), Outcome::unanswered());
        assert_eq!(
            run(&p, &m, 0, &[(REQ, 2, 0), (RESP, 1, F_WRITE)]),
            Outcome::unanswered()
        );
        m.write_slice(&77u32.to_le_bytes(), GuestAddress(REQ))
            .unwrap();
        assert_eq!(
            run(&p, &m, 0, &[(REQ, 24, 0), (RESP, 1, F_WRITE)]),
            Outcome::unanswered()
        );
    }
}
