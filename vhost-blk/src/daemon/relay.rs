//! The vhost-user message relay between the frontend (QEMU) and vhost-user-backend's handler,
//! which answers the inflight messages itself.
//!
//! vhost-user-backend 0.24 keeps its request handler private and answers GET_INFLIGHT_FD and
//! SET_INFLIGHT_FD with "not supported"; everything else it does is what we want. So the
//! daemon accepts the frontend's connection itself, gives the handler the other end of a
//! private connection, and copies messages between the two (header, payload and the file
//! descriptors passed with them), except:
//!
//! 1. GET_INFLIGHT_FD: answered here with a new zero-filled memfd sized for the queues and
//!    queue size the frontend asks for (each checked against the device: at most its queues,
//!    1..=its queue size); a request that fails the checks gets `mmap_size = 0` and no fd,
//!    which QEMU takes as "no inflight tracking".
//! 2. SET_INFLIGHT_FD: the area is mapped after checking its size against the queues and queue
//!    size it claims and against the file ([`InflightArea::map`]), and installed in the device
//!    ([`DeviceBackend::set_inflight`]); a bad one is refused (logged; tracking off).
//!    With REPLY_ACK negotiated and `need_reply` set, the answer is 0 or 1.
//! 3. SET_VRING_KICK with an fd, once an area is installed: after the message is passed on,
//!    the kick eventfd is signalled once, so the queue drains (and resubmits what was in
//!    flight) even if the guest, waiting for those requests, never kicks again. The handler
//!    reads the kick only once the ring is started and enabled, so the signal is not lost.
//! 4. A message larger than [`MAX_PAYLOAD`] or a broken socket ends the connection; either
//!    side closing closes the other.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::device::{DeviceBackend, InflightArea, Personality};

const SET_VRING_KICK: u32 = 12;
const SET_PROTOCOL_FEATURES: u32 = 16;
const GET_INFLIGHT_FD: u32 = 31;
const SET_INFLIGHT_FD: u32 = 32;
const FLAG_VERSION: u32 = 0x1;
const FLAG_REPLY: u32 = 0x4;
const FLAG_NEED_REPLY: u32 = 0x8;
const PROTOCOL_F_REPLY_ACK: u64 = 1 << 3;
/// SET_VRING_KICK payload bit: no fd passed, the ring is polled.
const VRING_NOFD: u64 = 1 << 8;
/// Largest payload passed on (vhost-user messages are far smaller).
pub const MAX_PAYLOAD: usize = 64 * 1024;
/// Most file descriptors taken with one message.
const MAX_FDS: usize = 32;
/// The inflight description: mmap_size u64, mmap_offset u64, num_queues u16, queue_size u16.
const INFLIGHT_LEN: usize = 20;

/// One vhost-user message with the descriptors that came with it.
struct Msg {
    request: u32,
    flags: u32,
    payload: Vec<u8>,
    fds: Vec<File>,
}

impl Msg {
    fn u64_at(&self, at: usize) -> Option<u64> {
        let b = self.payload.get(at..at + 8)?;
        Some(u64::from_le_bytes(b.try_into().ok()?))
    }
    fn u16_at(&self, at: usize) -> Option<u16> {
        let b = self.payload.get(at..at + 2)?;
        Some(u16::from_le_bytes(b.try_into().ok()?))
    }
}

/// Reads one message; `None` at end of stream.
fn read_msg(sock: &UnixStream) -> io::Result<Option<Msg>> {
    let mut hdr = [0u8; 12];
    let mut raw: [RawFd; MAX_FDS] = [-1; MAX_FDS];
    let mut iov = [libc::iovec {
        iov_base: hdr.as_mut_ptr().cast(),
        iov_len: hdr.len(),
    }];
    // SAFETY: the iovec points at `hdr`, which may receive any bytes.
    let (n, nfds) = unsafe { sock.recv_with_fds(&mut iov, &mut raw) }
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
    // SAFETY: the first `nfds` entries are descriptors the kernel just gave us; each is
    // wrapped exactly once and closed on drop.
    let fds = raw[..nfds.min(MAX_FDS)]
        .iter()
        .map(|&fd| unsafe { File::from_raw_fd(fd) })
        .collect();
    if n == 0 {
        return Ok(None);
    }
    if n < hdr.len() {
        (&mut &*sock).read_exact(&mut hdr[n..])?;
    }
    let word = |i: usize| u32::from_le_bytes(hdr[4 * i..4 * i + 4].try_into().unwrap());
    let size = word(2) as usize;
    if size > MAX_PAYLOAD {
        return Err(io::Error::other(format!("message of {size} bytes")));
    }
    let mut payload = vec![0u8; size];
    (&mut &*sock).read_exact(&mut payload)?;
    Ok(Some(Msg {
        request: word(0),
        flags: word(1),
        payload,
        fds,
    }))
}

/// Writes one message with its descriptors.
fn write_msg(
    sock: &UnixStream,
    request: u32,
    flags: u32,
    payload: &[u8],
    fds: &[RawFd],
) -> io::Result<()> {
    let mut buf = Vec::with_capacity(12 + payload.len());
    buf.extend_from_slice(&request.to_le_bytes());
    buf.extend_from_slice(&flags.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    let sent = sock
        .send_with_fds(&[buf.as_slice()], fds)
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
    if sent < buf.len() {
        (&mut &*sock).write_all(&buf[sent..])?;
    }
    Ok(())
}

fn forward(to: &UnixStream, m: &Msg) -> io::Result<()> {
    let fds: Vec<RawFd> = m.fds.iter().map(AsRawFd::as_raw_fd).collect();
    write_msg(to, m.request, m.flags, &m.payload, &fds)
}

/// The two copying threads of one connection.
pub struct Relay {
    threads: Vec<JoinHandle<()>>,
}

impl Relay {
    /// Starts copying between `front` (the frontend) and `back` (the handler's connection).
    pub fn spawn<P: Personality>(
        front: UnixStream,
        back: UnixStream,
        device: Arc<DeviceBackend<P>>,
        max_queue_size: u16,
    ) -> io::Result<Self> {
        let front_w = Arc::new(Mutex::new(front.try_clone()?));
        let back_r = back.try_clone()?;
        let front_close = front.try_clone()?;
        let to_back = {
            let front_w = front_w.clone();
            std::thread::Builder::new()
                .name("vu-relay-in".into())
                .spawn(move || {
                    let mut s = State {
                        device,
                        max_queue_size,
                        reply_ack: false,
                        area_installed: false,
                    };
                    if let Err(e) = s.run(&front, &back, &front_w) {
                        tracing::debug!("relay from the frontend: {e}");
                    }
                    let _ = back.shutdown(std::net::Shutdown::Both);
                })?
        };
        let to_front = std::thread::Builder::new()
            .name("vu-relay-out".into())
            .spawn(move || {
                let r = (|| -> io::Result<()> {
                    while let Some(m) = read_msg(&back_r)? {
                        let w = front_w.lock().unwrap_or_else(|e| e.into_inner());
                        forward(&w, &m)?;
                    }
                    Ok(())
                })();
                if let Err(e) = r {
                    tracing::debug!("relay to the frontend: {e}");
                }
                let _ = front_close.shutdown(std::net::Shutdown::Both);
            })?;
        Ok(Self {
            threads: vec![to_back, to_front],
        })
    }

    /// Waits for both threads (after either side closed).
    pub fn join(self) {
        for t in self.threads {
            let _ = t.join();
        }
    }
}

struct State<P: Personality> {
    device: Arc<DeviceBackend<P>>,
    max_queue_size: u16,
    reply_ack: bool,
    area_installed: bool,
}

impl<P: Personality> State<P> {
    fn run(
        &mut self,
        front: &UnixStream,
        back: &UnixStream,
        front_w: &Mutex<UnixStream>,
    ) -> io::Result<()> {
        while let Some(m) = read_msg(front)? {
            match m.request {
                GET_INFLIGHT_FD => {
                    let (payload, file) = self.get_inflight(&m);
                    let fds: Vec<RawFd> = file.iter().map(AsRawFd::as_raw_fd).collect();
                    let w = front_w.lock().unwrap_or_else(|e| e.into_inner());
                    write_msg(&w, m.request, FLAG_VERSION | FLAG_REPLY, &payload, &fds)?;
                }
                SET_INFLIGHT_FD => {
                    let ok = self.set_inflight(m.fds.first(), &m);
                    if self.reply_ack && m.flags & FLAG_NEED_REPLY != 0 {
                        let w = front_w.lock().unwrap_or_else(|e| e.into_inner());
                        let v: u64 = if ok { 0 } else { 1 };
                        write_msg(
                            &w,
                            m.request,
                            FLAG_VERSION | FLAG_REPLY,
                            &v.to_le_bytes(),
                            &[],
                        )?;
                    }
                }
                _ => {
                    if m.request == SET_PROTOCOL_FEATURES {
                        self.reply_ack = m.u64_at(0).is_some_and(|f| f & PROTOCOL_F_REPLY_ACK != 0);
                    }
                    forward(back, &m)?;
                    if m.request == SET_VRING_KICK && self.area_installed {
                        let polled = m.u64_at(0).is_none_or(|v| v & VRING_NOFD != 0);
                        if let (false, Some(mut kick)) = (polled, m.fds.first()) {
                            if let Err(e) = kick.write_all(&1u64.to_ne_bytes()) {
                                tracing::warn!("cannot signal the kick eventfd: {e}");
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The inflight description of `m`: (num_queues, queue_size), if acceptable (rule 1).
    fn dims(&self, m: &Msg) -> Option<(u16, u16)> {
        if m.payload.len() < INFLIGHT_LEN {
            return None;
        }
        let nq = m.u16_at(16)?;
        let qs = m.u16_at(18)?;
        let ok = nq >= 1
            && usize::from(nq) <= self.device.personality().num_queues()
            && qs >= 1
            && qs <= self.max_queue_size;
        ok.then_some((nq, qs))
    }

    fn get_inflight(&self, m: &Msg) -> (Vec<u8>, Option<File>) {
        let mut payload = vec![0u8; m.payload.len().max(INFLIGHT_LEN)];
        let Some((nq, qs)) = self.dims(m) else {
            tracing::warn!("GET_INFLIGHT_FD for an unsupported layout: refused");
            return (payload, None);
        };
        match InflightArea::create(nq, qs) {
            Ok((file, size)) => {
                payload[0..8].copy_from_slice(&size.to_le_bytes());
                payload[16..18].copy_from_slice(&nq.to_le_bytes());
                payload[18..20].copy_from_slice(&qs.to_le_bytes());
                tracing::info!(
                    queues = nq,
                    queue_size = qs,
                    bytes = size,
                    "inflight area created"
                );
                (payload, Some(file))
            }
            Err(e) => {
                tracing::warn!("GET_INFLIGHT_FD: {e}");
                (payload, None)
            }
        }
    }

    fn set_inflight(&mut self, file: Option<&File>, m: &Msg) -> bool {
        let mapped = match (file, self.dims(m), m.u64_at(0), m.u64_at(8)) {
            (Some(f), Some((nq, qs)), Some(size), Some(off)) => {
                InflightArea::map(f, size, off, nq, qs).map_err(|e| e.to_string())
            }
            (None, ..) => Err("no file descriptor".into()),
            _ => Err("unsupported layout".into()),
        };
        match mapped {
            Ok(area) => {
                tracing::info!(
                    queues = area.num_queues(),
                    queue_size = area.queue_size(),
                    "inflight area installed"
                );
                self.device.set_inflight(Some(Arc::new(area)));
                self.area_installed = true;
                true
            }
            Err(e) => {
                tracing::warn!("SET_INFLIGHT_FD refused: {e}");
                self.device.set_inflight(None);
                self.area_installed = false;
                false
            }
        }
    }
}
