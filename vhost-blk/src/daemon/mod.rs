//! The daemon: socket hygiene, one connection at a time (then the next: QEMU `reconnect=`),
//! signals (SIGINT/SIGTERM: finish, remove the socket, exit 0; SIGUSR1: write statistics and
//! log each queue's ring state, device::diag).
//!
//! Each frontend connection is accepted here and relayed ([`relay`]) to vhost-user-backend's
//! handler over a private connection, so that the inflight messages can be answered: a
//! backend restarted on the same socket (a supervisor, QEMU `reconnect=`) resubmits what its
//! predecessor had in flight.
//!
//! Rules:
//! 1. Every failure is a [`DaemonError`] returned to `main`, which prints it on one line and
//!    exits with [`DaemonError::exit_code`] (2: what the user asked for cannot be done, 1: a
//!    failure while serving). Nothing here panics; the socket this run bound is removed on
//!    every way out of [`run`] after the bind.
//! 2. A connection that ends, however it ends, is not an error: its requests are completed,
//!    its workers joined, the personality reset, and the next connection is accepted.
//! 3. A poisoned mutex is used anyway (`lock`): the daemon's mutexes hold an optional
//!    shutdown handle, a report closure or a queue's counters, each replaced or read whole, so
//!    a holder that panicked left nothing half written, and the signal thread must still be
//!    able to stop the daemon.
//! 4. Once everything start-up opens is open and the socket is bound, and before the signal
//!    thread or any connection's thread exists, the process confines itself ([`vhost_blk_sandbox`];
//!    `--sandbox off` for debugging); each thread kind enters its own filter where its job
//!    starts (docs/sandbox.md).

pub mod relay;
mod rings;

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use vhost::vhost_user::Listener;
use vhost_user_backend::{ShutdownHandle, VhostUserDaemon};
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::signal;

use crate::blk::{BlkOptions, BlkPersonality};
use crate::config::{Config, DeviceKind};
use crate::device::workers::OwnWorkers;
use crate::device::{BackendOptions, DeviceBackend, Personality, RequestKind, SharedStats};
use crate::scsi::{ScsiOptions, ScsiPersonality};
use vhost_blk_sandbox::{SandboxError, ThreadKind};
use vhost_blk_scsi::emulation::{Identity, Lun, LunOptions, ScanLatency, Target, Topology};
use vhost_blk_stats::{DeviceStats, QueueStats, RequestNames, StatsExporter};
use vhost_blk_storage::StorageError;

/// Errors that stop the daemon.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error("{0}")]
    Storage(#[from] StorageError),
    #[error("socket {0} is in use by a running backend")]
    SocketInUse(PathBuf),
    #[error("{0} exists and is not a socket; not replacing it")]
    NotASocket(PathBuf),
    #[error("cannot prepare socket {path}: {source}")]
    Socket {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Topology(String),
    #[error("vhost-user: {0}")]
    VhostUser(String),
    #[error("--rt-priority {prio}: sched_setscheduler(SCHED_FIFO): {source}")]
    Realtime { prio: u8, source: std::io::Error },
    #[error("sandbox: {0}")]
    Sandbox(#[from] SandboxError),
    #[error("cannot start the signal thread: {0}")]
    SignalThread(#[source] std::io::Error),
    #[error("{0}")]
    Other(String),
}

impl DaemonError {
    /// Exit code: 2 for problems with what the user asked for, 1 for failures while serving.
    pub fn exit_code(&self) -> i32 {
        match self {
            DaemonError::Storage(_)
            | DaemonError::SocketInUse(_)
            | DaemonError::NotASocket(_)
            | DaemonError::Socket { .. }
            | DaemonError::Topology(_)
            | DaemonError::Realtime { .. } => 2,
            _ => 1,
        }
    }
}

/// Removes a socket file left by a crashed backend; refuses to touch a live one or a non-socket.
pub fn clear_stale_socket(path: &Path) -> Result<(), DaemonError> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => {
            return Err(DaemonError::Socket {
                path: path.to_owned(),
                source,
            })
        }
    };
    if !meta.file_type().is_socket() {
        return Err(DaemonError::NotASocket(path.to_owned()));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(DaemonError::SocketInUse(path.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            tracing::info!("removing stale socket {}", path.display());
            std::fs::remove_file(path).map_err(|source| DaemonError::Socket {
                path: path.to_owned(),
                source,
            })
        }
        Err(source) => Err(DaemonError::Socket {
            path: path.to_owned(),
            source,
        }),
    }
}

/// What the signal thread and the serving loop share.
#[derive(Default)]
struct Control {
    stop: AtomicBool,
    connection: Mutex<Option<ShutdownHandle>>,
    /// The connected backend's per-queue stall report (device::diag), logged on SIGUSR1.
    rings: Mutex<Option<RingReport>>,
}

type RingReport = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// Rule 3: a poisoned lock is taken anyway. What the daemon's mutexes guard (an optional
/// handle, a report closure, counters) is valid after any panic of a holder: each is replaced
/// or read whole, never left half written.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The signals the daemon handles (in its signal thread, never asynchronously).
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1];

/// Blocks [`SIGNALS`] in this thread (and so in every thread it spawns later) and returns
/// their set, for `sigwait` in the signal thread.
fn block_signals() -> Result<libc::sigset_t, DaemonError> {
    for sig in SIGNALS {
        match signal::block_signal(sig) {
            Ok(()) | Err(signal::Error::SignalAlreadyBlocked(_)) => {}
            Err(e) => return Err(DaemonError::Other(format!("blocking signal {sig}: {e}"))),
        }
    }
    signal::create_sigset(&SIGNALS).map_err(|e| DaemonError::Other(format!("signal set: {e}")))
}

fn spawn_signal_thread(
    set: libc::sigset_t,
    control: Arc<Control>,
    socket: PathBuf,
    on_usr1: Arc<dyn Fn() + Send + Sync>,
) -> Result<(), DaemonError> {
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            vhost_blk_sandbox::enter(ThreadKind::Signals);
            loop {
                let mut sig: libc::c_int = 0;
                // SAFETY: `set` is an initialised signal set and `sig` a valid out-pointer
                // (vmm-sys-util has no wrapper for sigwait).
                if unsafe { libc::sigwait(&set, &mut sig) } != 0 {
                    continue;
                }
                if sig == libc::SIGUSR1 {
                    on_usr1();
                    continue;
                }
                tracing::info!("signal {sig}: finishing in-flight requests and exiting");
                control.stop.store(true, Ordering::SeqCst);
                let handle = lock(&control.connection).take();
                match handle {
                    Some(h) => h.shutdown(),
                    // Waiting in accept(): a connection of our own wakes it up.
                    None => drop(UnixStream::connect(&socket)),
                }
            }
        })
        .map(drop)
        .map_err(DaemonError::SignalThread)
}

/// `--rt-priority`: this thread SCHED_FIFO at `prio`, before any other thread exists, so that
/// every thread the daemon spawns inherits it.
fn set_realtime(prio: u8) -> Result<(), DaemonError> {
    let param = libc::sched_param {
        sched_priority: prio.into(),
    };
    // SAFETY: sched_setscheduler reads one sched_param from `param`, which lives on this
    // stack; pid 0 is the calling thread.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        return Err(DaemonError::Realtime {
            prio,
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

/// Runs the backend until SIGINT/SIGTERM.
pub fn run(config: Config) -> Result<(), DaemonError> {
    if let Some(p) = config.rt_priority {
        set_realtime(p)?;
    }
    let sigset = block_signals()?;
    clear_stale_socket(&config.socket_path)?;
    match config.device {
        DeviceKind::Blk => {
            let spec = config
                .storage
                .as_ref()
                .ok_or(DaemonError::Other("no storage".into()))?;
            let p = BlkPersonality::new(
                spec.open_with(&config.instruments())?,
                BlkOptions {
                    num_queues: config.num_queues,
                    queue_size: config.queue_size,
                    block_size: config.block_size,
                    serial: config.serial.clone(),
                    writethrough: config.writethrough,
                },
            );
            serve(&config, Arc::new(p), sigset)
        }
        DeviceKind::Scsi => {
            let topology = scsi_topology(&config)?;
            let p = ScsiPersonality::new(
                Arc::new(topology),
                ScsiOptions {
                    num_queues: config.num_queues,
                    queue_size: config.queue_size,
                    cmd_per_lun: config.cmd_per_lun,
                },
            );
            serve(&config, Arc::new(p), sigset)
        }
    }
}

/// The SCSI topology: the configured one, or LUN 0:0 of target 0 on the single storage.
fn scsi_topology(config: &Config) -> Result<Topology, DaemonError> {
    if let Some(t) = &config.topology {
        return Topology::from_config(t).map_err(|e| DaemonError::Topology(e.to_string()));
    }
    let spec = config
        .storage
        .as_ref()
        .ok_or(DaemonError::Other("no storage".into()))?;
    let options = LunOptions {
        block_size: config.block_size,
        write_cache: !config.writethrough,
        ..LunOptions::default()
    };
    let storage = spec.open_with(&config.instruments())?;
    let lun = Lun::new(0, storage, options, Identity::default_for(0, 0))
        .map_err(|e| DaemonError::Topology(format!("LUN 0:0: {e}")))?;
    let mut target = Target::new(0, ScanLatency::default());
    target.insert_lun(lun);
    let mut topology = Topology::new(0);
    topology.insert(target);
    Ok(topology)
}

/// Every queue's statistics, kept across connections.
#[derive(Clone)]
struct StatsRegistry {
    queues: Vec<SharedStats>,
    model: String,
    exporter: Option<StatsExporter>,
}

impl StatsRegistry {
    fn new(n: usize, names: RequestNames, model: String, file: Option<&Path>) -> Self {
        Self {
            queues: (0..n)
                .map(|q| Arc::new(Mutex::new(QueueStats::new(q as u16, names))))
                .collect(),
            model,
            exporter: file.map(StatsExporter::new),
        }
    }

    /// Every queue's summary, each read under its own lock in turn. Not a copy of the queues'
    /// statistics: cloning them (about 0.75 MiB of histograms per driven queue) made every
    /// export, i.e. every SIGUSR1, allocate and free ~95 MiB at 128 queues, which glibc kept:
    /// the backend's private memory went from 100 to 194 MiB under the harness's polling
    /// (experiments/arena-experiment.sh, docs/results/scale128/arena).
    fn snapshot(&self) -> DeviceStats {
        DeviceStats::collect(
            Some(self.model.clone()),
            self.queues.iter().map(|q| lock(q)),
        )
    }

    /// Writes the stats file (if configured) and returns the one-line summary.
    fn export(&self) -> String {
        let s = self.snapshot();
        if let Some(x) = &self.exporter {
            if let Err(e) = x.export(&s) {
                tracing::warn!("{e}");
            }
        }
        s.summary()
    }
}

fn serve<P: Personality>(
    config: &Config,
    personality: Arc<P>,
    sigset: libc::sigset_t,
) -> Result<(), DaemonError> {
    let path = &config.socket_path;
    let listener = UnixListener::bind(path).map_err(|source| DaemonError::Socket {
        path: path.clone(),
        source,
    })?;
    let control = Arc::new(Control::default());
    let stats = StatsRegistry::new(
        personality.num_queues(),
        <P::Kind as RequestKind>::NAMES,
        config.completion.to_string(),
        config.stats_file.as_deref(),
    );
    let on_usr1 = {
        let stats = stats.clone();
        let control = control.clone();
        Arc::new(move || {
            let line = stats.export();
            tracing::info!("{line}");
            let rings = lock(&control.rings).clone();
            for line in rings.map(|r| r()).unwrap_or_default() {
                tracing::info!("{line}");
            }
        })
    };
    let started = confine(config)
        .and_then(|()| spawn_signal_thread(sigset, control.clone(), path.clone(), on_usr1));
    if let Err(e) = started {
        let _ = std::fs::remove_file(path);
        return Err(e);
    }
    let opts = BackendOptions {
        model: config.completion.clone(),
        queue_size: config.queue_size,
        inflight: true,
        groups: config.worker_groups(personality.num_queues(), personality.first_request_queue()),
    };
    tracing::info!(
        socket = %path.display(),
        device = personality.name(),
        queues = personality.num_queues(),
        threads = opts.groups.len(),
        completion = %config.completion,
        "listening"
    );
    let result = serve_connections(&listener, personality, opts, &control, &stats);
    let _ = std::fs::remove_file(path);
    let line = stats.export();
    tracing::info!("{line}");
    result
}

/// `--sandbox on` (the default): the process confines itself now that everything it opens at
/// start-up is open and no other thread runs yet (sandbox, rule 1).
fn confine(config: &Config) -> Result<(), DaemonError> {
    if config.sandbox {
        let paths = vhost_blk_sandbox::Paths {
            socket_dir: vhost_blk_sandbox::parent_dir(&config.socket_path),
            stats_dir: config
                .stats_file
                .as_deref()
                .map(vhost_blk_sandbox::parent_dir),
        };
        let report = vhost_blk_sandbox::confine(&paths)?;
        tracing::info!("sandbox: seccomp per thread kind; {}", report.landlock);
    } else {
        vhost_blk_sandbox::no_new_privs()
            .map_err(|e| DaemonError::Other(format!("PR_SET_NO_NEW_PRIVS: {e}")))?;
        tracing::warn!("sandbox off (--sandbox off): no seccomp filter and no Landlock; no new privileges only");
    }
    vhost_blk_sandbox::enter(ThreadKind::Main);
    Ok(())
}

/// A private connection to a fresh listener of vhost-user-backend's handler: the listener on
/// an abstract socket address nobody else knows, connected to at once (so ours is the
/// connection the handler accepts), then dropped.
fn private_pair() -> std::io::Result<(Listener, UnixStream)> {
    use std::sync::atomic::AtomicU64;
    static N: AtomicU64 = AtomicU64::new(0);
    let nonce: u64 = rand::random();
    let name = format!(
        "vhost-blk-{}-{}-{nonce:016x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let l = UnixListener::bind_addr(&addr)?;
    let s = UnixStream::connect_addr(&addr)?;
    Ok((Listener::from(l), s))
}

fn vhost_user(what: &str, e: &dyn std::fmt::Display) -> DaemonError {
    DaemonError::VhostUser(format!("{what}: {e}"))
}

/// Serves one frontend connection after another until SIGINT/SIGTERM.
fn serve_connections<P: Personality>(
    listener: &UnixListener,
    personality: Arc<P>,
    opts: BackendOptions,
    control: &Control,
    stats: &StatsRegistry,
) -> Result<(), DaemonError> {
    let mut connections = 0u64;
    while !control.stop.load(Ordering::SeqCst) {
        let front = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(vhost_user("accept", &e)),
        };
        if control.stop.load(Ordering::SeqCst) {
            break;
        }
        let conn = Connection::start(front, &personality, &opts, stats)?;
        conn.publish(control);
        if control.stop.load(Ordering::SeqCst) {
            conn.daemon.request_shutdown();
        } else {
            connections += 1;
            tracing::info!(connection = connections, "frontend connected");
        }
        conn.finish(control);
        personality.reset();
    }
    Ok(())
}

/// One frontend connection: vhost-user-backend's daemon on a fresh device backend, our own
/// worker threads for the rings the crate cannot serve (device::workers), and the relay
/// between the frontend and the daemon's handler.
struct Connection<P: Personality> {
    backend: Arc<DeviceBackend<P>>,
    daemon: VhostUserDaemon<Arc<DeviceBackend<P>>>,
    own: OwnWorkers,
    relay: relay::Relay,
}

impl<P: Personality> Connection<P> {
    /// A new device backend over fresh guest memory, its daemon started on a private
    /// connection, and the relay from `front` to it.
    fn start(
        front: UnixStream,
        personality: &Arc<P>,
        opts: &BackendOptions,
        stats: &StatsRegistry,
    ) -> Result<Self, DaemonError> {
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        let backend = Arc::new(
            DeviceBackend::new(
                personality.clone(),
                mem.clone(),
                opts.clone(),
                &stats.queues,
            )
            .map_err(|e| vhost_user("creating the backend", &e))?,
        );
        let daemon = VhostUserDaemon::new("vhost-blk".into(), backend.clone(), mem);
        // Every worker's exit event is registered (or creation failed): close the descriptors
        // vhost-user-backend would leave open for good (device::exit_events).
        backend.close_leaked_exit_fds();
        let mut daemon = daemon.map_err(|e| DaemonError::VhostUser(e.to_string()))?;
        backend
            .register_listeners(&daemon.get_epoll_handlers())
            .map_err(|e| vhost_user("registering listeners", &e))?;
        let own = backend
            .start_own_workers()
            .map_err(|e| vhost_user("starting worker threads", &e))?;
        let (mut inner, back) = private_pair().map_err(|e| vhost_user("private connection", &e))?;
        daemon
            .start(&mut inner)
            .map_err(|e| DaemonError::VhostUser(e.to_string()))?;
        drop(inner);
        let relay = relay::Relay::spawn(front, back, backend.clone(), opts.queue_size)
            .map_err(|e| vhost_user("relay", &e))?;
        Ok(Self {
            backend,
            daemon,
            own,
            relay,
        })
    }

    /// Hands the signal thread this connection's shutdown handle and ring report.
    fn publish(&self, control: &Control) {
        *lock(&control.connection) = self.daemon.shutdown_handle();
        let b = self.backend.clone();
        *lock(&control.rings) = Some(Arc::new(move || b.ring_report()));
    }

    /// Waits for the connection to end, then completes what the device still holds and
    /// stops the workers.
    fn finish(self, control: &Control) {
        let Self {
            backend,
            mut daemon,
            own,
            relay,
        } = self;
        let r = daemon.wait();
        relay.join();
        // Our worker threads: exit events sent, joined (device::workers, rule 5).
        drop(own);
        lock(&control.rings).take();
        lock(&control.connection).take();
        // Requests the device finished but the latency model still holds are completed.
        backend.flush_all();
        match r {
            Ok(()) => tracing::info!("frontend disconnected"),
            Err(e) if control.stop.load(Ordering::SeqCst) => {
                tracing::debug!("connection closed: {e}")
            }
            Err(vhost_user_backend::Error::HandleRequest(
                vhost::vhost_user::Error::Disconnected | vhost::vhost_user::Error::PartialMessage,
            )) => tracing::info!("frontend disconnected"),
            Err(e) => tracing::warn!("connection ended: {e}"),
        }
        // Dropping the daemon sends each worker its exit event and joins it.
        drop(daemon);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_socket_is_removed_live_one_is_kept_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.sock");
        // Stale: bound then the listener dropped.
        drop(std::os::unix::net::UnixListener::bind(&p).unwrap());
        assert!(p.exists());
        clear_stale_socket(&p).unwrap();
        assert!(!p.exists());
        // Live.
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        assert!(matches!(
            clear_stale_socket(&p),
            Err(DaemonError::SocketInUse(_))
        ));
        assert!(p.exists());
        // Not a socket.
        let f = dir.path().join("plain");
        std::fs::write(&f, b"x").unwrap();
        assert!(matches!(
            clear_stale_socket(&f),
            Err(DaemonError::NotASocket(_))
        ));
        assert!(f.exists());
        // Absent.
        clear_stale_socket(&dir.path().join("none")).unwrap();
    }
}
