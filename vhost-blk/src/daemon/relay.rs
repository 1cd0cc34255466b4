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
//! 3. SET_VRING_KICK with an fd, once an area is installed: before the message is passed on,
//!    the device learns that the ring starts ([`DeviceBackend::ring_starting`]: a queue whose
//!    answers wait for the request queues' recovery, inflight rule 5, waits for this one);
//!    after it, the kick eventfd is signalled once, so the queue drains (and resubmits what
//!    was in flight) even if the guest, waiting for those requests, never kicks again. The
//!    handler reads the kick only once the ring is started and enabled, so the signal is not
//!    lost.
//! 4. SET_VRING_CALL with an fd, once an area is installed: passed on with NEED_REPLY (when
//!    REPLY_ACK is negotiated; that reply is not passed back unless the frontend asked for
//!    it), and once the handler has answered, i.e. installed the fd, the new call eventfd is
//!    signalled once. QEMU's vhost-user-scsi (8.2 to 10 at least) points every ring's call fd
//!    at a "masked" notifier when it connects (`vhost_virtqueue_init`), enables the rings, and
//!    only then sends the guest notifiers; an interrupt the backend sent in between (the
//!    recovery's owed one, a resubmitted request's completion) went to a notifier QEMU never
//!    reads, and a job whose requests were all done waited forever. The signal covers
//!    everything published before the fd was installed; later completions signal the new fd.
//!    A spurious interrupt costs the driver one look at its used ring.
//! 5. A message larger than vhost-user's [`MAX_MSG_SIZE`] or a broken socket ends the
//!    connection; either side closing closes the other.
//! 6. The vring messages of the rings our own threads serve (device::workers: those the
//!    crate's `u64` masks cannot hold) are applied here, through the device, and never reach
//!    the handler (`rings` decodes them; the frontend's memory messages are followed to
//!    translate ring addresses). Their answers are the handler's: GET_VRING_BASE's ring state,
//!    and with REPLY_ACK and `need_reply` 0 (1 for a refused message, which then ends the
//!    connection, as the handler does). Rules 3 and 4 hold for these rings too.
//!    GET_QUEUE_NUM is answered here with the device's vring count when the crate knows of
//!    fewer.
//! 7. Before a message of rule 6 is applied, the handler has answered everything passed on
//!    since the last time (the relay sends it a GET_FEATURES and waits for the answer, which
//!    it keeps): the guest memory the ring will be read through is the frontend's latest, as
//!    it is for the handler's own rings.
//!
//! Message codes, flags, the inflight description and the size limits are the `vhost` crate's;
//! its framing (`Endpoint`, the message header) is crate-private, so the 12-byte header is
//! read and written here.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use vhost::vhost_user::message::{
    FrontendReq, VhostUserHeaderFlag, VhostUserInflight, VhostUserProtocolFeatures, VhostUserU64,
    VhostUserVringState, MAX_ATTACHED_FD_ENTRIES, MAX_MSG_SIZE,
};
use vm_memory::ByteValued;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::rings::{self, AddressMap, OwnMsg, VRING_NOFD};
use crate::device::workers::{RingMsg, CRATE_VRINGS};
use crate::device::{DeviceBackend, InflightArea, Personality};

/// Protocol version 1, the only one (`VhostUserHeaderFlag::VERSION` is the field's mask).
const VERSION_1: u32 = 0x1;
/// The header: request, flags, payload size (u32 each).
const HDR_LEN: usize = 12;
/// Longest wait for the handler's answer to a SET_VRING_CALL (rule 4).
const CALL_ACK_LIMIT: Duration = Duration::from_secs(2);
/// Longest wait for the handler's answer to rule 7's GET_FEATURES.
const SYNC_LIMIT: Duration = Duration::from_secs(10);

/// Rules 4 and 7: the handler's answer the relay is waiting for.
#[derive(Default)]
struct OwnReply {
    /// (the request answered, the answer is the relay's own and not passed back, arrived)
    state: Mutex<(Option<u32>, bool, bool)>,
    cv: Condvar,
}

impl OwnReply {
    fn expect(&self, code: FrontendReq, own: bool) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = (Some(code.into()), own, false);
    }

    /// An answer to `code` arrived; true if it is the relay's own (not to be passed back).
    fn arrived(&self, code: u32) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.0 != Some(code) {
            return false;
        }
        *s = (None, s.1, true);
        self.cv.notify_all();
        s.1
    }

    /// Waits (bounded) for [`arrived`](Self::arrived); false on timeout or a broken relay.
    fn wait(&self, limit: Duration) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = self
            .cv
            .wait_timeout_while(s, limit, |s| !s.2)
            .unwrap_or_else(|e| e.into_inner());
        s.2
    }
}

/// One vhost-user message with the descriptors that came with it.
struct Msg {
    request: u32,
    flags: u32,
    payload: Vec<u8>,
    fds: Vec<File>,
}

impl Msg {
    /// The request, if it is one the protocol defines.
    fn code(&self) -> Option<FrontendReq> {
        FrontendReq::try_from(self.request).ok()
    }
    /// The payload as `T`, if it is exactly that long (native byte order, as the protocol).
    fn body<T: ByteValued + Default>(&self) -> Option<T> {
        rings::decode(&self.payload)
    }
    fn need_reply(&self) -> bool {
        self.flags & VhostUserHeaderFlag::NEED_REPLY.bits() != 0
    }
}

/// Reads one message; `None` at end of stream.
fn read_msg(sock: &UnixStream) -> io::Result<Option<Msg>> {
    let mut hdr = [0u8; HDR_LEN];
    let mut raw: [RawFd; MAX_ATTACHED_FD_ENTRIES] = [-1; MAX_ATTACHED_FD_ENTRIES];
    let mut iov = [libc::iovec {
        iov_base: hdr.as_mut_ptr().cast(),
        iov_len: hdr.len(),
    }];
    // SAFETY: the iovec points at `hdr`, which may receive any bytes.
    let (n, nfds) = unsafe { sock.recv_with_fds(&mut iov, &mut raw) }
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
    // SAFETY: the first `nfds` entries are descriptors the kernel just gave us; each is
    // wrapped exactly once and closed on drop.
    let fds = raw
        .iter()
        .take(nfds)
        .map(|&fd| unsafe { File::from_raw_fd(fd) })
        .collect();
    if n == 0 {
        return Ok(None);
    }
    // `n` is at most the header's length (the one iovec); the rest of it follows.
    if let Some(rest) = hdr.get_mut(n..).filter(|r| !r.is_empty()) {
        (&mut &*sock).read_exact(rest)?;
    }
    let [r0, r1, r2, r3, f0, f1, f2, f3, s0, s1, s2, s3] = hdr;
    let size = u32::from_ne_bytes([s0, s1, s2, s3]) as usize;
    if size > MAX_MSG_SIZE {
        return Err(io::Error::other(format!("message of {size} bytes")));
    }
    let mut payload = vec![0u8; size];
    (&mut &*sock).read_exact(&mut payload)?;
    Ok(Some(Msg {
        request: u32::from_ne_bytes([r0, r1, r2, r3]),
        flags: u32::from_ne_bytes([f0, f1, f2, f3]),
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
    let mut buf = Vec::with_capacity(HDR_LEN + payload.len());
    buf.extend_from_slice(&request.to_ne_bytes());
    buf.extend_from_slice(&flags.to_ne_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_ne_bytes());
    buf.extend_from_slice(payload);
    let sent = sock
        .send_with_fds(&[buf.as_slice()], fds)
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
    if let Some(rest) = buf.get(sent..).filter(|r| !r.is_empty()) {
        (&mut &*sock).write_all(rest)?;
    }
    Ok(())
}

/// Writes 1 to an eventfd the frontend sent (rules 3 and 4).
fn signal(mut fd: &File, what: &str) {
    if let Err(e) = fd.write_all(&1u64.to_ne_bytes()) {
        tracing::warn!("cannot signal the {what} eventfd: {e}");
    }
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
        let own_reply = Arc::new(OwnReply::default());
        let to_back = {
            let front_w = front_w.clone();
            let own_reply = own_reply.clone();
            std::thread::Builder::new()
                .name("vu-relay-in".into())
                .spawn(move || {
                    vhost_blk_sandbox::enter(vhost_blk_sandbox::ThreadKind::Relay);
                    let mut s = State {
                        device,
                        max_queue_size,
                        reply_ack: false,
                        protocol: 0,
                        area_installed: false,
                        own_reply,
                        map: AddressMap::default(),
                        forwarded: false,
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
                vhost_blk_sandbox::enter(vhost_blk_sandbox::ThreadKind::Relay);
                let r = (|| -> io::Result<()> {
                    while let Some(m) = read_msg(&back_r)? {
                        let is_reply = m.flags & VhostUserHeaderFlag::REPLY.bits() != 0;
                        if is_reply && own_reply.arrived(m.request) {
                            continue;
                        }
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
    /// The protocol features the frontend set.
    protocol: u64,
    area_installed: bool,
    own_reply: Arc<OwnReply>,
    /// The frontend's memory regions (rule 6).
    map: AddressMap,
    /// Something was passed to the handler since its last answer (rule 7).
    forwarded: bool,
}

impl<P: Personality> State<P> {
    /// Rule 4: SET_VRING_CALL passed on, then the new call eventfd signalled once installed.
    fn set_vring_call(&mut self, mut m: Msg, back: &UnixStream) -> io::Result<()> {
        let nofd = m
            .body::<VhostUserU64>()
            .is_none_or(|v| v.value & VRING_NOFD != 0);
        if !self.area_installed || nofd || m.fds.is_empty() {
            return self.forward(back, &m);
        }
        if self.reply_ack {
            self.own_reply
                .expect(FrontendReq::SET_VRING_CALL, !m.need_reply());
            m.flags |= VhostUserHeaderFlag::NEED_REPLY.bits();
        }
        self.forward(back, &m)?;
        if self.reply_ack && !self.own_reply.wait(CALL_ACK_LIMIT) {
            tracing::warn!("no answer to SET_VRING_CALL: signalling the call eventfd anyway");
        }
        if let Some(fd) = m.fds.first() {
            signal(fd, "call");
        }
        Ok(())
    }

    fn run(
        &mut self,
        front: &UnixStream,
        back: &UnixStream,
        front_w: &Mutex<UnixStream>,
    ) -> io::Result<()> {
        let reply = |code: FrontendReq, payload: &[u8], fds: &[RawFd]| -> io::Result<()> {
            let w = front_w.lock().unwrap_or_else(|e| e.into_inner());
            let flags = VERSION_1 | VhostUserHeaderFlag::REPLY.bits();
            write_msg(&w, code.into(), flags, payload, fds)
        };
        while let Some(m) = read_msg(front)? {
            if let Some(m) = self.own_ring(m, back, &reply)? {
                self.route(m, back, &reply)?;
            }
        }
        Ok(())
    }

    /// Passes `m` to the handler (rule 7 remembers it).
    fn forward(&mut self, back: &UnixStream, m: &Msg) -> io::Result<()> {
        self.forwarded = true;
        forward(back, m)
    }

    /// Everything but rule 6's messages.
    fn route(
        &mut self,
        m: Msg,
        back: &UnixStream,
        reply: &impl Fn(FrontendReq, &[u8], &[RawFd]) -> io::Result<()>,
    ) -> io::Result<()> {
        match m.code() {
            Some(FrontendReq::GET_INFLIGHT_FD) => {
                let (answer, file) = self.get_inflight(&m);
                let fds: Vec<RawFd> = file.iter().map(AsRawFd::as_raw_fd).collect();
                reply(FrontendReq::GET_INFLIGHT_FD, answer.as_slice(), &fds)
            }
            Some(FrontendReq::SET_INFLIGHT_FD) => {
                let ok = self.set_inflight(m.fds.first(), &m);
                if self.reply_ack && m.need_reply() {
                    let v = VhostUserU64::new(u64::from(!ok));
                    reply(FrontendReq::SET_INFLIGHT_FD, v.as_slice(), &[])?;
                }
                Ok(())
            }
            Some(FrontendReq::SET_VRING_CALL) => self.set_vring_call(m, back),
            code => {
                if code == Some(FrontendReq::SET_PROTOCOL_FEATURES) {
                    self.protocol = m.body::<VhostUserU64>().map_or(0, |f| f.value);
                    self.reply_ack =
                        self.protocol & VhostUserProtocolFeatures::REPLY_ACK.bits() != 0;
                }
                if let Some(code) = code {
                    self.map.observe(code, &m.payload);
                }
                let kick = (code == Some(FrontendReq::SET_VRING_KICK) && self.area_installed)
                    .then(|| m.body::<VhostUserU64>())
                    .flatten()
                    .map(|v| v.value);
                if let Some(v) = kick {
                    self.device.ring_starting(usize::from(v as u8));
                }
                self.forward(back, &m)?;
                let polled = kick.is_none_or(|v| v & VRING_NOFD != 0);
                if let (false, Some(fd)) = (polled, m.fds.first()) {
                    signal(fd, "kick");
                }
                Ok(())
            }
        }
    }

    /// Rule 6: applies `m` if it is for one of our rings (or is GET_QUEUE_NUM and the crate
    /// knows of fewer vrings); otherwise hands it back.
    fn own_ring(
        &mut self,
        mut m: Msg,
        back: &UnixStream,
        reply: &impl Fn(FrontendReq, &[u8], &[RawFd]) -> io::Result<()>,
    ) -> io::Result<Option<Msg>> {
        let Some(code) = m.code() else {
            return Ok(Some(m));
        };
        let total = self.device.personality().num_queues();
        let mq = self.protocol & VhostUserProtocolFeatures::MQ.bits() != 0;
        if code == FrontendReq::GET_QUEUE_NUM && total > CRATE_VRINGS && mq {
            return reply(code, VhostUserU64::new(total as u64).as_slice(), &[]).map(|()| None);
        }
        let q = match rings::ring_index(code, &m.payload) {
            Some(q) if self.device.is_own_ring(q) => q,
            _ => return Ok(Some(m)),
        };
        self.sync(back)?;
        let file = (!m.fds.is_empty()).then(|| m.fds.remove(0));
        // Rules 3 and 4: a copy of the descriptor, to signal once the ring has the original.
        let signal_after = match (&file, self.area_installed) {
            (Some(f), true) => f.try_clone().ok(),
            _ => None,
        };
        let applied = match rings::own_msg(code, &m.payload, file, &self.map) {
            Ok(OwnMsg::Stop) => self.device.own_ring_stop(q).map(Some),
            Ok(OwnMsg::Ring(msg)) => {
                if matches!(msg, RingMsg::Kick(Some(_))) && self.area_installed {
                    self.device.ring_starting(q);
                }
                self.device.own_ring_message(q, msg).map(|()| None)
            }
            Err(why) => Err(crate::device::RingError::Addr { q, why }),
        };
        match applied {
            Ok(Some(next_avail)) => {
                let st = VhostUserVringState::new(q as u32, u32::from(next_avail));
                reply(code, st.as_slice(), &[])?;
            }
            Ok(None) => {
                if let Some(f) = &signal_after {
                    signal(f, "kick or call");
                }
                if self.reply_ack && m.need_reply() {
                    reply(code, VhostUserU64::new(0).as_slice(), &[])?;
                }
            }
            Err(e) => {
                tracing::warn!("{code:?}: {e}: ending the connection");
                if self.reply_ack && m.need_reply() {
                    reply(code, VhostUserU64::new(1).as_slice(), &[])?;
                }
                return Err(io::Error::other(e.to_string()));
            }
        }
        Ok(None)
    }

    /// Rule 7: waits until the handler has answered everything passed on so far.
    fn sync(&mut self, back: &UnixStream) -> io::Result<()> {
        if !self.forwarded {
            return Ok(());
        }
        self.own_reply.expect(FrontendReq::GET_FEATURES, true);
        write_msg(back, FrontendReq::GET_FEATURES.into(), VERSION_1, &[], &[])?;
        if !self.own_reply.wait(SYNC_LIMIT) {
            return Err(io::Error::other("the handler did not answer GET_FEATURES"));
        }
        self.forwarded = false;
        Ok(())
    }

    /// The inflight description of `m` if its layout is acceptable (rule 1).
    fn dims(&self, m: &Msg) -> Option<VhostUserInflight> {
        let d = m.body::<VhostUserInflight>()?;
        let ok = d.num_queues >= 1
            && usize::from(d.num_queues) <= self.device.personality().num_queues()
            && d.queue_size >= 1
            && d.queue_size <= self.max_queue_size;
        ok.then_some(d)
    }

    fn get_inflight(&self, m: &Msg) -> (VhostUserInflight, Option<File>) {
        let refused = VhostUserInflight::default();
        let Some(d) = self.dims(m) else {
            tracing::warn!("GET_INFLIGHT_FD for an unsupported layout: refused");
            return (refused, None);
        };
        match InflightArea::create(d.num_queues, d.queue_size) {
            Ok((file, size)) => {
                tracing::info!(
                    queues = d.num_queues,
                    queue_size = d.queue_size,
                    bytes = size,
                    "inflight area created"
                );
                let answer = VhostUserInflight::new(size, 0, d.num_queues, d.queue_size);
                (answer, Some(file))
            }
            Err(e) => {
                tracing::warn!("GET_INFLIGHT_FD: {e}");
                (refused, None)
            }
        }
    }

    fn set_inflight(&mut self, file: Option<&File>, m: &Msg) -> bool {
        let mapped = match (file, self.dims(m)) {
            (Some(f), Some(d)) => {
                InflightArea::map(f, d.mmap_size, d.mmap_offset, d.num_queues, d.queue_size)
                    .map_err(|e| e.to_string())
            }
            (None, _) => Err("no file descriptor".into()),
            (_, None) => Err("unsupported layout".into()),
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
