//! virtio-scsi requests built in guest memory: commands for the request queues
//! ([`ScsiRequest`]) and task management / asynchronous notification requests for the control
//! queue ([`ScsiCtrl`]).
//!
//! Queue layout of a virtio-scsi device: 0 control, 1 event, request queues from 2. A
//! connection to a device with `n` request queues therefore sets up `n + 2` vrings
//! ([`scsi_connect_options`]). The layout of the request and response headers assumes the
//! default `cdb_size` (32) and `sense_size` (96).

use std::sync::Arc;

use super::ring::Buf;
use super::{ConnectOptions, FrontendError, GuestRam};

/// The control queue.
pub const CONTROL_QUEUE: usize = 0;
/// The event queue.
pub const EVENT_QUEUE: usize = 1;
/// The first request queue.
pub const FIRST_REQUEST_QUEUE: usize = 2;
/// CDB bytes in `virtio_scsi_cmd_req` (default `cdb_size`).
pub const CDB_SIZE: usize = 32;
/// Sense bytes in `virtio_scsi_cmd_resp` (default `sense_size`).
pub const SENSE_SIZE: usize = 96;
/// `virtio_scsi_cmd_req`: `lun[8]`, tag, task_attr, prio, crn, `cdb[32]`.
pub const CMD_REQ_LEN: u32 = 19 + CDB_SIZE as u32;
/// `virtio_scsi_cmd_resp`: sense_len, resid, status_qualifier, status, response, `sense[96]`.
pub const CMD_RESP_LEN: u32 = 12 + SENSE_SIZE as u32;
/// `virtio_scsi_ctrl_tmf_req` / `_resp`.
pub const TMF_REQ_LEN: u32 = 24;
pub const TMF_RESP_LEN: u32 = 1;
/// `virtio_scsi_ctrl_an_req` / `_resp`.
pub const AN_REQ_LEN: u32 = 16;
pub const AN_RESP_LEN: u32 = 5;

/// virtio-scsi response codes (`VIRTIO_SCSI_S_*`).
pub mod response {
    pub const OK: u8 = 0;
    /// Same value as OK, for task management functions.
    pub const FUNCTION_COMPLETE: u8 = 0;
    pub const OVERRUN: u8 = 1;
    pub const ABORTED: u8 = 2;
    pub const BAD_TARGET: u8 = 3;
    pub const RESET: u8 = 4;
    pub const BUSY: u8 = 5;
    pub const TRANSPORT_FAILURE: u8 = 6;
    pub const TARGET_FAILURE: u8 = 7;
    pub const NEXUS_FAILURE: u8 = 8;
    pub const FAILURE: u8 = 9;
    pub const FUNCTION_SUCCEEDED: u8 = 10;
    pub const FUNCTION_REJECTED: u8 = 11;
    pub const INCORRECT_LUN: u8 = 12;
}

/// Task management function subtypes (`VIRTIO_SCSI_T_TMF_*`).
pub mod tmf {
    pub const ABORT_TASK: u32 = 0;
    pub const ABORT_TASK_SET: u32 = 1;
    pub const CLEAR_ACA: u32 = 2;
    pub const CLEAR_TASK_SET: u32 = 3;
    pub const I_T_NEXUS_RESET: u32 = 4;
    pub const LOGICAL_UNIT_RESET: u32 = 5;
    pub const QUERY_TASK: u32 = 6;
    pub const QUERY_TASK_SET: u32 = 7;
}

/// SCSI status GOOD.
pub const GOOD: u8 = 0x00;
/// SCSI status CHECK CONDITION.
pub const CHECK_CONDITION: u8 = 0x02;

const T_TMF: u32 = 0;
const T_AN_QUERY: u32 = 1;
const T_AN_SUBSCRIBE: u32 = 2;
/// Written over the response before submission: no valid response byte has this value.
const UNTOUCHED: u8 = 0xff;

/// Connection options for a virtio-scsi device with `request_queues` request queues.
pub fn scsi_connect_options(request_queues: u16) -> ConnectOptions {
    ConnectOptions {
        num_queues: FIRST_REQUEST_QUEUE as u16 + request_queues,
        ..ConnectOptions::default()
    }
}

/// The virtio-scsi LUN field of `target:lun` (flat space addressing, as Linux sends it).
pub fn lun_address(target: u8, lun: u16) -> [u8; 8] {
    let v = 0x4000 | (lun & 0x3fff);
    let [hi, lo] = v.to_be_bytes();
    [1, target, hi, lo, 0, 0, 0, 0]
}

/// Which way the data of a command goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataDir {
    None,
    /// Device to driver (device-writable buffer after the response).
    In,
    /// Driver to device (device-readable buffer after the request).
    Out,
}

/// A READ or WRITE CDB: 10-byte form when `sixteen` is false.
pub fn rw_cdb(write: bool, sixteen: bool, lba: u64, blocks: u32) -> Vec<u8> {
    if sixteen {
        let mut c = vec![0u8; 16];
        c[0] = if write { 0x8a } else { 0x88 };
        c[2..10].copy_from_slice(&lba.to_be_bytes());
        c[10..14].copy_from_slice(&blocks.to_be_bytes());
        c
    } else {
        let mut c = vec![0u8; 10];
        c[0] = if write { 0x2a } else { 0x28 };
        c[2..6].copy_from_slice(&(lba as u32).to_be_bytes());
        c[7..9].copy_from_slice(&(blocks as u16).to_be_bytes());
        c
    }
}

/// What came back for a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScsiResult {
    /// virtio-scsi response ([`response`]); 0xff if the device never wrote it.
    pub response: u8,
    /// SCSI status.
    pub status: u8,
    pub status_qualifier: u16,
    pub resid: u32,
    /// Sense bytes (`sense_len` of them, at most [`SENSE_SIZE`]).
    pub sense: Vec<u8>,
    pub used_len: u32,
}

impl ScsiResult {
    /// Response OK and status GOOD.
    pub fn is_good(&self) -> bool {
        self.response == response::OK && self.status == GOOD
    }

    /// (sense key, ASC, ASCQ) of fixed (0x70/0x71) or descriptor (0x72/0x73) sense data.
    pub fn sense_code(&self) -> Option<(u8, u8, u8)> {
        let s = &self.sense;
        match s.first().map(|b| b & 0x7f) {
            Some(0x70 | 0x71) if s.len() >= 14 => Some((s[2] & 0x0f, s[12], s[13])),
            Some(0x72 | 0x73) if s.len() >= 4 => Some((s[1] & 0x0f, s[2], s[3])),
            _ => None,
        }
    }

    /// Bytes of data-in the device reports as written (used length past the response).
    pub fn data_in_len(&self) -> u32 {
        self.used_len.saturating_sub(CMD_RESP_LEN)
    }
}

/// A command with its own request, data and response buffers in guest memory. Reusable:
/// build once per slot, prepare another command, resubmit.
#[derive(Debug)]
pub struct ScsiRequest {
    ram: Arc<GuestRam>,
    req: u64,
    resp: u64,
    data: u64,
    data_cap: u32,
    lun: [u8; 8],
    tag: u64,
    task_attr: u8,
    block_size: u32,
    dir: DataDir,
    len: u32,
}

impl ScsiRequest {
    /// Allocates buffers for commands moving up to `data_cap` bytes, addressed to LUN 0:0.
    pub fn new(ram: &Arc<GuestRam>, data_cap: u32) -> Result<Self, FrontendError> {
        let data_cap = data_cap.max(512);
        Ok(Self {
            ram: ram.clone(),
            req: ram.alloc(u64::from(CMD_REQ_LEN), 16)?,
            resp: ram.alloc(u64::from(CMD_RESP_LEN), 16)?,
            data: ram.alloc(u64::from(data_cap), 4096)?,
            data_cap,
            lun: lun_address(0, 0),
            tag: 0,
            task_attr: 0,
            block_size: 512,
            dir: DataDir::None,
            len: 0,
        })
    }

    /// Addresses the next commands to `target:lun`.
    pub fn at(&mut self, target: u8, lun: u16) -> &mut Self {
        self.lun = lun_address(target, lun);
        self
    }

    /// The tag of the next commands (the `id` ABORT TASK names).
    pub fn set_tag(&mut self, tag: u64) -> &mut Self {
        self.tag = tag;
        self
    }

    /// Logical block size used to size READ/WRITE transfers (default 512).
    pub fn set_block_size(&mut self, bs: u32) -> &mut Self {
        self.block_size = bs.max(1);
        self
    }

    pub fn data_cap(&self) -> u32 {
        self.data_cap
    }

    /// Prepares `cdb` (at most [`CDB_SIZE`] bytes, the rest zero) moving `len` bytes of data
    /// in direction `dir`; for [`DataDir::Out`] the bytes must already be in the data buffer.
    /// `len` is capped at the buffer size; 0 means no data descriptor.
    pub fn raw(&mut self, cdb: &[u8], dir: DataDir, len: u32) -> Result<&mut Self, FrontendError> {
        let mut h = [0u8; CMD_REQ_LEN as usize];
        h[..8].copy_from_slice(&self.lun);
        h[8..16].copy_from_slice(&self.tag.to_le_bytes());
        h[16] = self.task_attr;
        let n = cdb.len().min(CDB_SIZE);
        h[19..19 + n].copy_from_slice(&cdb[..n]);
        self.ram.write(self.req, &h)?;
        self.ram
            .write(self.resp, &[UNTOUCHED; CMD_RESP_LEN as usize])?;
        self.dir = if len == 0 { DataDir::None } else { dir };
        self.len = len.min(self.data_cap);
        Ok(self)
    }

    /// TEST UNIT READY.
    pub fn test_unit_ready(&mut self) -> Result<&mut Self, FrontendError> {
        self.raw(&[0x00; 6], DataDir::None, 0)
    }

    /// Standard INQUIRY data, `alloc` bytes.
    pub fn inquiry(&mut self, alloc: u16) -> Result<&mut Self, FrontendError> {
        let [hi, lo] = alloc.to_be_bytes();
        self.raw(&[0x12, 0, 0, hi, lo, 0], DataDir::In, u32::from(alloc))
    }

    /// READ CAPACITY(16) (32 bytes of parameter data).
    pub fn read_capacity_16(&mut self) -> Result<&mut Self, FrontendError> {
        let mut c = [0u8; 16];
        c[0] = 0x9e;
        c[1] = 0x10;
        c[13] = 32;
        self.raw(&c, DataDir::In, 32)
    }

    /// REPORT LUNS (select report 0), `alloc` bytes.
    pub fn report_luns(&mut self, alloc: u32) -> Result<&mut Self, FrontendError> {
        let mut c = [0u8; 12];
        c[0] = 0xa0;
        c[6..10].copy_from_slice(&alloc.to_be_bytes());
        self.raw(&c, DataDir::In, alloc)
    }

    /// READ of `blocks` blocks at `lba`, 10- or 16-byte CDB.
    pub fn read(
        &mut self,
        sixteen: bool,
        lba: u64,
        blocks: u32,
    ) -> Result<&mut Self, FrontendError> {
        let len = blocks.saturating_mul(self.block_size);
        self.raw(&rw_cdb(false, sixteen, lba, blocks), DataDir::In, len)
    }

    pub fn read10(&mut self, lba: u32, blocks: u16) -> Result<&mut Self, FrontendError> {
        self.read(false, u64::from(lba), u32::from(blocks))
    }

    pub fn read16(&mut self, lba: u64, blocks: u32) -> Result<&mut Self, FrontendError> {
        self.read(true, lba, blocks)
    }

    /// WRITE of `data` (whole blocks, at most the buffer) at `lba`, 10- or 16-byte CDB.
    pub fn write(
        &mut self,
        sixteen: bool,
        lba: u64,
        data: &[u8],
    ) -> Result<&mut Self, FrontendError> {
        let n = data.len().min(self.data_cap as usize);
        self.ram.write(self.data, &data[..n])?;
        let blocks = n as u32 / self.block_size;
        self.raw(
            &rw_cdb(true, sixteen, lba, blocks),
            DataDir::Out,
            blocks * self.block_size,
        )
    }

    pub fn write10(&mut self, lba: u32, data: &[u8]) -> Result<&mut Self, FrontendError> {
        self.write(false, u64::from(lba), data)
    }

    pub fn write16(&mut self, lba: u64, data: &[u8]) -> Result<&mut Self, FrontendError> {
        self.write(true, lba, data)
    }

    /// SYNCHRONIZE CACHE(10) of `blocks` at `lba` (0 blocks: to the end of the medium).
    pub fn synchronize_cache(&mut self, lba: u32, blocks: u16) -> Result<&mut Self, FrontendError> {
        let mut c = [0u8; 10];
        c[0] = 0x35;
        c[2..6].copy_from_slice(&lba.to_be_bytes());
        c[7..9].copy_from_slice(&blocks.to_be_bytes());
        self.raw(&c, DataDir::None, 0)
    }

    /// UNMAP of `ranges` = (lba, blocks).
    pub fn unmap(&mut self, ranges: &[(u64, u32)]) -> Result<&mut Self, FrontendError> {
        let mut p = vec![0u8; 8];
        for &(lba, n) in ranges {
            p.extend_from_slice(&lba.to_be_bytes());
            p.extend_from_slice(&n.to_be_bytes());
            p.extend_from_slice(&[0; 4]);
        }
        let total = p.len() as u16;
        p[0..2].copy_from_slice(&(total - 2).to_be_bytes());
        p[2..4].copy_from_slice(&(total - 8).to_be_bytes());
        self.fill(&p)?;
        let mut c = [0u8; 10];
        c[0] = 0x42;
        c[7..9].copy_from_slice(&total.to_be_bytes());
        self.raw(&c, DataDir::Out, u32::from(total))
    }

    /// Descriptor layout: request, data-out, response, data-in (virtio-scsi order).
    pub fn bufs(&self) -> Vec<Buf> {
        let mut v = vec![Buf {
            addr: self.req,
            len: CMD_REQ_LEN,
            writable: false,
        }];
        let data = Buf {
            addr: self.data,
            len: self.len,
            writable: self.dir == DataDir::In,
        };
        if self.dir == DataDir::Out {
            v.push(data);
        }
        v.push(Buf {
            addr: self.resp,
            len: CMD_RESP_LEN,
            writable: true,
        });
        if self.dir == DataDir::In {
            v.push(data);
        }
        v
    }

    /// Parses the response written by the device.
    pub fn result(&self, used_len: u32) -> Result<ScsiResult, FrontendError> {
        let mut b = [0u8; CMD_RESP_LEN as usize];
        self.ram.read(self.resp, &mut b)?;
        let sense_len = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let n = (sense_len as usize).min(SENSE_SIZE);
        Ok(ScsiResult {
            response: b[11],
            status: b[10],
            status_qualifier: u16::from_le_bytes([b[8], b[9]]),
            resid: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            sense: b[12..12 + n].to_vec(),
            used_len,
        })
    }

    /// The data buffer (`len` bytes of the last command).
    pub fn data(&self) -> Result<Vec<u8>, FrontendError> {
        let mut v = vec![0u8; self.len as usize];
        self.ram.read(self.data, &mut v)?;
        Ok(v)
    }

    /// Fills the data buffer (for data-out commands built with [`ScsiRequest::raw`]).
    pub fn fill(&self, data: &[u8]) -> Result<(), FrontendError> {
        let n = data.len().min(self.data_cap as usize);
        self.ram.write(self.data, &data[..n])
    }

    /// Guest addresses of (request, response, data), for hand-made chains.
    pub fn addresses(&self) -> (u64, u64, u64) {
        (self.req, self.resp, self.data)
    }
}

/// A control-queue request: a task management function or an asynchronous notification
/// query/subscribe.
#[derive(Debug)]
pub struct ScsiCtrl {
    ram: Arc<GuestRam>,
    req: u64,
    resp: u64,
    req_len: u32,
    resp_len: u32,
}

impl ScsiCtrl {
    pub fn new(ram: &Arc<GuestRam>) -> Result<Self, FrontendError> {
        Ok(Self {
            ram: ram.clone(),
            req: ram.alloc(u64::from(TMF_REQ_LEN), 16)?,
            resp: ram.alloc(8, 8)?,
            req_len: TMF_REQ_LEN,
            resp_len: TMF_RESP_LEN,
        })
    }

    /// Task management function `subtype` ([`tmf`]) for `lun`, naming task `tag`.
    pub fn tmf(
        &mut self,
        subtype: u32,
        lun: [u8; 8],
        tag: u64,
    ) -> Result<&mut Self, FrontendError> {
        let mut r = Vec::with_capacity(TMF_REQ_LEN as usize);
        r.extend_from_slice(&T_TMF.to_le_bytes());
        r.extend_from_slice(&subtype.to_le_bytes());
        r.extend_from_slice(&lun);
        r.extend_from_slice(&tag.to_le_bytes());
        self.prepare(&r, TMF_RESP_LEN)
    }

    /// AN query (or subscribe) for the events in `mask`.
    pub fn an(
        &mut self,
        subscribe: bool,
        lun: [u8; 8],
        mask: u32,
    ) -> Result<&mut Self, FrontendError> {
        let t = if subscribe {
            T_AN_SUBSCRIBE
        } else {
            T_AN_QUERY
        };
        let mut r = t.to_le_bytes().to_vec();
        r.extend_from_slice(&lun);
        r.extend_from_slice(&mask.to_le_bytes());
        self.prepare(&r, AN_RESP_LEN)
    }

    fn prepare(&mut self, req: &[u8], resp_len: u32) -> Result<&mut Self, FrontendError> {
        self.ram.write(self.req, req)?;
        self.ram.write(self.resp, &[UNTOUCHED; 8])?;
        self.req_len = req.len() as u32;
        self.resp_len = resp_len;
        Ok(self)
    }

    pub fn bufs(&self) -> Vec<Buf> {
        vec![
            Buf {
                addr: self.req,
                len: self.req_len,
                writable: false,
            },
            Buf {
                addr: self.resp,
                len: self.resp_len,
                writable: true,
            },
        ]
    }

    /// The response byte of a TMF (0xff if never written).
    pub fn tmf_response(&self) -> Result<u8, FrontendError> {
        let mut b = [0u8; 1];
        self.ram.read(self.resp, &mut b)?;
        Ok(b[0])
    }

    /// (event_actual, response) of an AN request.
    pub fn an_response(&self) -> Result<(u32, u8), FrontendError> {
        let mut b = [0u8; AN_RESP_LEN as usize];
        self.ram.read(self.resp, &mut b)?;
        Ok((u32::from_le_bytes([b[0], b[1], b[2], b[3]]), b[4]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lun_field_and_cdbs() {
        assert_eq!(lun_address(3, 2), [1, 3, 0x40, 2, 0, 0, 0, 0]);
        assert_eq!(lun_address(255, 0x1234), [1, 255, 0x52, 0x34, 0, 0, 0, 0]);
        assert_eq!(
            rw_cdb(false, false, 0x0102_0304, 8),
            [0x28, 0, 1, 2, 3, 4, 0, 0, 8, 0]
        );
        let c = rw_cdb(true, true, 1 << 40, 0x10000);
        assert_eq!((c[0], c.len()), (0x8a, 16));
        assert_eq!(&c[2..10], &(1u64 << 40).to_be_bytes());
        assert_eq!(&c[10..14], &[0, 1, 0, 0]);
    }

    #[test]
    fn layout_follows_the_data_direction() {
        let ram = Arc::new(GuestRam::new(1 << 20).unwrap());
        let mut r = ScsiRequest::new(&ram, 4096).unwrap();
        let (req, resp, data) = r.addresses();
        let w = |b: &[Buf]| {
            b.iter()
                .map(|b| (b.addr, b.len, b.writable))
                .collect::<Vec<_>>()
        };
        r.read10(0, 2).unwrap();
        assert_eq!(
            w(&r.bufs()),
            [
                (req, CMD_REQ_LEN, false),
                (resp, CMD_RESP_LEN, true),
                (data, 1024, true)
            ]
        );
        r.write16(0, &[1u8; 512]).unwrap();
        assert_eq!(
            w(&r.bufs()),
            [
                (req, CMD_REQ_LEN, false),
                (data, 512, false),
                (resp, CMD_RESP_LEN, true)
            ]
        );
        r.test_unit_ready().unwrap();
        assert_eq!(r.bufs().len(), 2);
        // The header carries LUN, tag and CDB; the response starts untouched.
        r.at(5, 7).set_tag(0xabcd).inquiry(96).unwrap();
        let mut h = [0u8; CMD_REQ_LEN as usize];
        ram.read(req, &mut h).unwrap();
        assert_eq!(&h[..8], &lun_address(5, 7));
        assert_eq!(u64::from_le_bytes(h[8..16].try_into().unwrap()), 0xabcd);
        assert_eq!(&h[19..25], &[0x12, 0, 0, 0, 96, 0]);
        assert_eq!(r.result(0).unwrap().response, UNTOUCHED);
    }

    #[test]
    fn result_parses_fixed_and_descriptor_sense() {
        let ram = Arc::new(GuestRam::new(1 << 20).unwrap());
        let r = ScsiRequest::new(&ram, 512).unwrap();
        let (_, resp, _) = r.addresses();
        let mut b = vec![0u8; CMD_RESP_LEN as usize];
        b[0] = 18;
        b[4..8].copy_from_slice(&7u32.to_le_bytes());
        b[10] = CHECK_CONDITION;
        b[12] = 0x70;
        b[14] = 0x05;
        b[24] = 0x21;
        ram.write(resp, &b).unwrap();
        let res = r.result(CMD_RESP_LEN).unwrap();
        assert_eq!((res.response, res.status, res.resid), (0, 2, 7));
        assert_eq!(res.sense.len(), 18);
        assert_eq!(res.sense_code(), Some((5, 0x21, 0)));
        assert_eq!(res.data_in_len(), 0);
        b[12..16].copy_from_slice(&[0x72, 0x06, 0x29, 0x01]);
        ram.write(resp, &b).unwrap();
        assert_eq!(r.result(0).unwrap().sense_code(), Some((6, 0x29, 1)));
    }
}
