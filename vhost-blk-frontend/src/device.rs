//! Connecting to a vhost-user backend: negotiation, memory table, vrings.

use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserInflight, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VringConfigData};
use virtio_bindings::virtio_ring::{VIRTIO_RING_F_EVENT_IDX, VIRTIO_RING_F_INDIRECT_DESC};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::ring::{Buf, SplitRing, Used};
use super::{FrontendError, GuestRam};

/// How to connect.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    pub num_queues: u16,
    pub queue_size: u16,
    /// Negotiate EVENT_IDX if the backend offers it.
    pub event_idx: bool,
    /// Negotiate INDIRECT_DESC if offered.
    pub indirect: bool,
    /// Guest RAM size.
    pub mem_size: u64,
    /// Descriptors per queue kept out of normal allocation, for raw (malformed) chains.
    pub reserved_descriptors: u16,
    /// Negotiate inflight tracking (INFLIGHT_SHMFD) if offered and, as QEMU does before the
    /// rings are set up, ask for an area (GET_INFLIGHT_FD) and hand it back (SET_INFLIGHT_FD).
    pub inflight: bool,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            num_queues: 8,
            queue_size: 128,
            event_idx: true,
            indirect: true,
            mem_size: 64 << 20,
            reserved_descriptors: 0,
            inflight: false,
        }
    }
}

fn vu<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> FrontendError {
    move |e| FrontendError::VhostUser(format!("{what}: {e}"))
}

/// One queue, ready to be driven from its own thread.
#[derive(Debug)]
pub struct QueueHandle {
    pub index: u16,
    pub ring: SplitRing,
    pub ram: Arc<GuestRam>,
    kick: EventFd,
    call: EventFd,
    indirect: bool,
}

impl QueueHandle {
    /// Queues a request and kicks the backend.
    pub fn submit(&mut self, bufs: &[Buf]) -> Result<u16, FrontendError> {
        let head = self
            .ring
            .add(&self.ram, bufs, self.indirect && bufs.len() > 2)?;
        self.kick()?;
        Ok(head)
    }

    /// Notifies the backend that the available ring moved.
    pub fn kick(&self) -> Result<(), FrontendError> {
        self.kick.write(1)?;
        Ok(())
    }

    /// Used entries already there, without waiting.
    pub fn poll(&mut self) -> Result<Vec<Used>, FrontendError> {
        self.ring.poll_used(&self.ram)
    }

    /// Waits up to `timeout` for at least one completion.
    pub fn wait(&mut self, timeout: Duration) -> Result<Vec<Used>, FrontendError> {
        let deadline = Instant::now() + timeout;
        loop {
            let used = self.poll()?;
            if !used.is_empty() {
                return Ok(used);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(FrontendError::Timeout);
            }
            self.wait_call(left.min(Duration::from_millis(100)))?;
        }
    }

    /// Blocks until the call eventfd fires or `timeout` passes; returns the count read.
    pub fn wait_call(&self, timeout: Duration) -> Result<u64, FrontendError> {
        let mut pfd = libc::pollfd {
            fd: self.call.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd for the duration of the call.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e.into());
        }
        if r == 0 {
            return Ok(0);
        }
        match self.call.read() {
            Ok(n) => Ok(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
            Err(e) => Err(e.into()),
        }
    }

    /// The call eventfd (interrupt) of this queue.
    pub fn call_fd(&self) -> &EventFd {
        &self.call
    }
}

/// GET_INFLIGHT_FD then SET_INFLIGHT_FD with the area received, as QEMU does on a first start.
fn inflight_area(
    frontend: &mut Frontend,
    opts: &ConnectOptions,
) -> Result<std::fs::File, FrontendError> {
    let ask = VhostUserInflight::new(0, 0, opts.num_queues, opts.queue_size);
    let (area, file) = frontend
        .get_inflight_fd(&ask)
        .map_err(vu("GET_INFLIGHT_FD"))?;
    frontend
        .set_inflight_fd(&area, file.as_raw_fd())
        .map_err(vu("SET_INFLIGHT_FD"))?;
    Ok(file)
}

/// GET_FEATURES (EVENT_IDX and INDIRECT_DESC dropped unless asked for), the protocol features
/// (MQ, CONFIG, REPLY_ACK, CONFIGURE_MEM_SLOTS, INFLIGHT_SHMFD if asked for; enough queues),
/// SET_FEATURES. The features set and whether the backend speaks the protocol features.
fn negotiate(frontend: &mut Frontend, opts: &ConnectOptions) -> Result<(u64, bool), FrontendError> {
    let offered = frontend.get_features().map_err(vu("GET_FEATURES"))?;
    let mut features = offered;
    if !opts.event_idx {
        features &= !(1 << VIRTIO_RING_F_EVENT_IDX);
    }
    if !opts.indirect {
        features &= !(1 << VIRTIO_RING_F_INDIRECT_DESC);
    }
    let has_proto = offered & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits() != 0;
    if has_proto {
        let proto = frontend
            .get_protocol_features()
            .map_err(vu("GET_PROTOCOL_FEATURES"))?;
        let mut want = VhostUserProtocolFeatures::MQ
            | VhostUserProtocolFeatures::CONFIG
            | VhostUserProtocolFeatures::REPLY_ACK
            | VhostUserProtocolFeatures::CONFIGURE_MEM_SLOTS;
        if opts.inflight {
            want |= VhostUserProtocolFeatures::INFLIGHT_SHMFD;
        }
        frontend
            .set_protocol_features(proto & want)
            .map_err(vu("SET_PROTOCOL_FEATURES"))?;
        if proto.contains(VhostUserProtocolFeatures::MQ) {
            let n = frontend.get_queue_num().map_err(vu("GET_QUEUE_NUM"))?;
            if n < u64::from(opts.num_queues) {
                return Err(FrontendError::VhostUser(format!(
                    "backend has {n} queues, {} requested",
                    opts.num_queues
                )));
            }
        }
    }
    frontend
        .set_features(features)
        .map_err(vu("SET_FEATURES"))?;
    Ok((features, has_proto))
}

/// Queue `q`'s vring on the backend: size, addresses of `ring`, base 0, call and kick eventfds,
/// enabled (with the protocol features). The (call, kick) eventfds.
fn start_vring(
    frontend: &mut Frontend,
    ram: &GuestRam,
    ring: &SplitRing,
    opts: &ConnectOptions,
    q: u16,
    has_proto: bool,
) -> Result<(EventFd, EventFd), FrontendError> {
    let (d, a, u) = ring.addresses();
    let i = usize::from(q);
    frontend
        .set_vring_num(i, opts.queue_size)
        .map_err(vu("SET_VRING_NUM"))?;
    frontend
        .set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: opts.queue_size,
                queue_size: opts.queue_size,
                flags: 0,
                desc_table_addr: ram.host_addr(d)?,
                used_ring_addr: ram.host_addr(u)?,
                avail_ring_addr: ram.host_addr(a)?,
                log_addr: None,
            },
        )
        .map_err(vu("SET_VRING_ADDR"))?;
    frontend
        .set_vring_base(i, 0)
        .map_err(vu("SET_VRING_BASE"))?;
    let call = EventFd::new(EFD_NONBLOCK)?;
    let kick = EventFd::new(EFD_NONBLOCK)?;
    frontend
        .set_vring_call(i, &call)
        .map_err(vu("SET_VRING_CALL"))?;
    frontend
        .set_vring_kick(i, &kick)
        .map_err(vu("SET_VRING_KICK"))?;
    if has_proto {
        frontend
            .set_vring_enable(i, true)
            .map_err(vu("SET_VRING_ENABLE"))?;
    }
    Ok((call, kick))
}

/// A negotiated connection with all queues set up.
pub struct Connection {
    frontend: Frontend,
    ram: Arc<GuestRam>,
    features: u64,
    queues: Vec<Option<QueueHandle>>,
    /// The inflight area the backend gave (`ConnectOptions::inflight`), kept as QEMU keeps it.
    inflight: Option<std::fs::File>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("features", &self.features)
            .finish()
    }
}

impl Connection {
    /// Connects, negotiates and starts `opts.num_queues` queues.
    pub fn connect(path: &Path, opts: &ConnectOptions) -> Result<Self, FrontendError> {
        let mut frontend =
            Frontend::connect(path, u64::from(opts.num_queues)).map_err(vu("connect"))?;
        frontend.set_owner().map_err(vu("SET_OWNER"))?;
        let (features, has_proto) = negotiate(&mut frontend, opts)?;
        let inflight = if opts.inflight && has_proto {
            Some(inflight_area(&mut frontend, opts)?)
        } else {
            None
        };
        let ram = Arc::new(GuestRam::new(opts.mem_size)?);
        frontend
            .set_mem_table(&[ram.region_info()?])
            .map_err(vu("SET_MEM_TABLE"))?;
        let event_idx = features & (1 << VIRTIO_RING_F_EVENT_IDX) != 0;
        let indirect = features & (1 << VIRTIO_RING_F_INDIRECT_DESC) != 0;
        let mut queues = Vec::new();
        for q in 0..opts.num_queues {
            let ring = SplitRing::new(&ram, opts.queue_size, event_idx, opts.reserved_descriptors)?;
            let (call, kick) = start_vring(&mut frontend, &ram, &ring, opts, q, has_proto)?;
            queues.push(Some(QueueHandle {
                index: q,
                ring,
                ram: ram.clone(),
                kick,
                call,
                indirect,
            }));
        }
        Ok(Self {
            frontend,
            ram,
            features,
            queues,
            inflight,
        })
    }

    /// Whether the backend gave an inflight area (`ConnectOptions::inflight`).
    pub fn has_inflight_area(&self) -> bool {
        self.inflight.is_some()
    }

    /// Negotiated virtio features.
    pub fn features(&self) -> u64 {
        self.features
    }

    pub fn ram(&self) -> &Arc<GuestRam> {
        &self.ram
    }

    /// Reads `len` bytes of the device configuration space at `offset`.
    pub fn config(&mut self, offset: u32, len: u32) -> Result<Vec<u8>, FrontendError> {
        let buf = vec![0u8; len as usize];
        let (_, data) = self
            .frontend
            .get_config(offset, len, VhostUserConfigFlags::WRITABLE, &buf)
            .map_err(vu("GET_CONFIG"))?;
        Ok(data)
    }

    /// Writes the configuration space and, as QEMU does with REPLY_ACK, waits for the backend
    /// to say it applied the write (a guest's cache-mode switch is done when this returns).
    pub fn set_config(&mut self, offset: u32, data: &[u8]) -> Result<(), FrontendError> {
        self.frontend
            .set_hdr_flags(vhost::vhost_user::message::VhostUserHeaderFlag::NEED_REPLY);
        let r = self
            .frontend
            .set_config(offset, VhostUserConfigFlags::WRITABLE, data);
        self.frontend
            .set_hdr_flags(vhost::vhost_user::message::VhostUserHeaderFlag::empty());
        r.map_err(vu("SET_CONFIG"))
    }

    /// Takes queue `i` out, to drive it from another thread.
    pub fn take_queue(&mut self, i: usize) -> Option<QueueHandle> {
        self.queues.get_mut(i).and_then(Option::take)
    }

    /// Stops ring `i` (GET_VRING_BASE) and returns the backend's next available index.
    pub fn stop_queue(&mut self, i: usize) -> Result<u32, FrontendError> {
        self.frontend
            .get_vring_base(i)
            .map_err(vu("GET_VRING_BASE"))
    }

    /// The underlying vhost-user frontend, for tests that send unusual messages.
    pub fn frontend(&mut self) -> &mut Frontend {
        &mut self.frontend
    }
}
