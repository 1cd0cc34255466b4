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
    MAX_ATTACHED_FD_ENTRIES, MAX_MSG_SIZE,
};
use vm_memory::ByteValued;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::device::{DeviceBackend, InflightArea, Personality};

/// Protocol version 1, the only one (`VhostUserHeaderFlag::VERSION` is the field's mask).
const VERSION_1: u32 = 0x1;
/// SET_VRING_KICK payload bit: no fd passed, the ring is polled (vhost-user specification;
/// the vhost crate tests it inline and exports no name for it).
const VRING_NOFD: u64 = 1 << 8;
/// The header: request, flags, payload size (u32 each).
const HDR_LEN: usize = 12;
/// Longest wait for the handler's answer to a SET_VRING_CALL (rule 4).
const CALL_ACK_LIMIT: Duration = Duration::from_secs(2);

/// Rule 4: the handler's answer to the SET_VRING_CALL the relay is waiting for.
#[derive(Default)]
struct CallAck {
    /// (waiting, the answer is the relay's own and not passed back, arrived)
    state: Mutex<(bool, bool, bool)>,
    cv: Condvar,
}

impl CallAck {
    fn expect(&self, own: bool) {
        *self.state.lock().unwrap_or_else(|e| e.into_inner()) = (true, own, false);
    }

    /// The answer arrived; true if it is the relay's own (not to be passed back).
    fn arrived(&self) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if !s.0 {
            return false;
        }
        *s = (false, s.1, true);
        self.cv.notify_all();
        s.1
    }

    /// Waits (bounded) for [`arrived`](Self::arrived); false on timeout or a broken relay.
    fn wait(&self) -> bool {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = self
            .cv
            .wait_timeout_while(s, CALL_ACK_LIMIT, |s| !s.2)
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
        let mut v = T::default();
        let bytes = v.as_mut_slice();
        (self.payload.len() == bytes.len()).then(|| bytes.copy_from_slice(&self.payload))?;
        Some(v)
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
        let call_ack = Arc::new(CallAck::default());
        let to_back = {
            let front_w = front_w.clone();
            let call_ack = call_ack.clone();
            std::thread::Builder::new()
                .name("vu-relay-in".into())
                .spawn(move || {
                    let mut s = State {
                        device,
                        max_queue_size,
                        reply_ack: false,
                        area_installed: false,
                        call_ack,
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
                        let is_reply = m.flags & VhostUserHeaderFlag::REPLY.bits() != 0;
                        if is_reply
                            && m.code() == Some(FrontendReq::SET_VRING_CALL)
                            && call_ack.arrived()
                        {
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
    area_installed: bool,
    call_ack: Arc<CallAck>,
}

impl<P: Personality> State<P> {
    /// Rule 4: SET_VRING_CALL passed on, then the new call eventfd signalled once installed.
    fn set_vring_call(&self, mut m: Msg, back: &UnixStream) -> io::Result<()> {
        let nofd = m
            .body::<VhostUserU64>()
            .is_none_or(|v| v.value & VRING_NOFD != 0);
        if !self.area_installed || nofd || m.fds.is_empty() {
            return forward(back, &m);
        }
        if self.reply_ack {
            self.call_ack.expect(!m.need_reply());
            m.flags |= VhostUserHeaderFlag::NEED_REPLY.bits();
        }
        forward(back, &m)?;
        if self.reply_ack && !self.call_ack.wait() {
            tracing::warn!("no answer to SET_VRING_CALL: signalling the call eventfd anyway");
        }
        let signalled = m
            .fds
            .first()
            .map(|mut fd| fd.write_all(&1u64.to_ne_bytes()));
        if let Some(Err(e)) = signalled {
            tracing::warn!("cannot signal the call eventfd: {e}");
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
            match m.code() {
                Some(FrontendReq::GET_INFLIGHT_FD) => {
                    let (answer, file) = self.get_inflight(&m);
                    let fds: Vec<RawFd> = file.iter().map(AsRawFd::as_raw_fd).collect();
                    reply(FrontendReq::GET_INFLIGHT_FD, answer.as_slice(), &fds)?;
                }
                Some(FrontendReq::SET_INFLIGHT_FD) => {
                    let ok = self.set_inflight(m.fds.first(), &m);
                    if self.reply_ack && m.need_reply() {
                        let v = VhostUserU64::new(u64::from(!ok));
                        reply(FrontendReq::SET_INFLIGHT_FD, v.as_slice(), &[])?;
                    }
                }
                Some(FrontendReq::SET_VRING_CALL) => self.set_vring_call(m, back)?,
                code => {
                    if code == Some(FrontendReq::SET_PROTOCOL_FEATURES) {
                        self.reply_ack = m.body::<VhostUserU64>().is_some_and(|f| {
                            f.value & VhostUserProtocolFeatures::REPLY_ACK.bits() != 0
                        });
                    }
                    let kick = (code == Some(FrontendReq::SET_VRING_KICK) && self.area_installed)
                        .then(|| m.body::<VhostUserU64>())
                        .flatten()
                        .map(|v| v.value);
                    if let Some(v) = kick {
                        self.device.ring_starting(usize::from(v as u8));
                    }
                    forward(back, &m)?;
                    let polled = kick.is_none_or(|v| v & VRING_NOFD != 0);
                    if let (false, Some(mut fd)) = (polled, m.fds.first()) {
                        if let Err(e) = fd.write_all(&1u64.to_ne_bytes()) {
                            tracing::warn!("cannot signal the kick eventfd: {e}");
                        }
                    }
                }
            }
        }
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
