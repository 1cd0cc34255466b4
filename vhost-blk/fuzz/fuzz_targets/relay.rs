//! The vhost-user relay (`daemon::relay`) driven by an adversarial frontend: any sequence of
//! messages (known and unknown codes, any flags, payloads of any length, inflight descriptions
//! that lie) with any file descriptors attached (an inflight memfd of the right size, memfds of
//! other sizes, eventfds, pipe ends, /dev/null, more descriptors than a message may carry),
//! then raw bytes, a header whose payload never comes, or a header over the size limit.
//!
//! In process: the relay's two threads run between two socket pairs; behind it a stand-in for
//! vhost-user-backend's handler reads what the relay forwards and answers every message that
//! asks for an answer (so that SET_VRING_CALL's wait for the answer ends at once), and a reader
//! on the frontend side takes whatever the relay sends back (closing the descriptors that come
//! with it). One virtio-blk device on null storage with 2 queues serves every input. A
//! connection serves input after input, as a long-lived one does (a fresh connection per input
//! ran at about a thousand inputs a second, most of it thread creation): each input starts by
//! putting the relay's state back to a fresh connection's (REPLY_ACK off, no inflight area) and
//! ends with a sentinel message; an input that breaks the framing ends the connection, and the
//! next input gets a new one.
//!
//! Checks besides "no panic": a relay that neither answers nor ends within 5 s fails; the relay
//! ends (both threads joined) once the frontend closes; no descriptor leaks: after an input
//! the open descriptors are those open before it, and after a connection ended those open
//! before it began (compared as the objects they refer to: device, inode and file type; the
//! sanitizer's symbolizer pipe aside).
//!
//! Input layout (make_seeds.py writes seeds in it): a sequence of operations, each one byte
//! `op` then its fields (zeros once the input runs out), at most [`MAX_OPS`]:
//! - `op % 8` in 0..=4, a message: code selector (1 byte: below 0xf0 an index into [`CODES`],
//!   else a raw u32 follows), flag selector (1 byte: bit 0 NEED_REPLY, bit 1 REPLY, bit 2 a raw
//!   u32 follows instead), descriptor count (1 byte: `% 5`, 0xff: 33), each descriptor's kind
//!   (1 byte `% 6`, with its fields), payload kind (1 byte `% 5`, with its fields);
//! - 5: raw bytes (length 1 byte, then the bytes);
//! - 6: a header that promises more payload than follows (size u16, then up to a byte's worth
//!   of payload), and the end of the input;
//! - 7: a header over vhost-user's size limit, and the end of the input.
#![no_main]

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use vhost_blk::blk::{BlkKind, BlkOptions, BlkPersonality};
use vhost_blk::daemon::relay::Relay;
use vhost_blk::device::{BackendOptions, DeviceBackend, InflightArea, RequestKind};
use vhost_blk_completion::CompletionModel;
use vhost_blk_fuzz::Input;
use vhost_blk_stats::QueueStats;
use vhost_blk_storage::NullStorage;
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

/// Most operations per input.
const MAX_OPS: usize = 24;
const QUEUES: u16 = 2;
const MAX_QUEUE_SIZE: u16 = 256;
const VERSION_1: u32 = 1;
const REPLY: u32 = 0x4;
const NEED_REPLY: u32 = 0x8;
/// vhost-user's MAX_MSG_SIZE (the relay's limit).
const MAX_MSG_SIZE: u32 = 0x1000;

/// Frontend message codes: the ones the relay looks at first, then the rest of the protocol.
const CODES: &[u32] = &[
    31, // GET_INFLIGHT_FD
    32, // SET_INFLIGHT_FD
    12, // SET_VRING_KICK
    13, // SET_VRING_CALL
    16, // SET_PROTOCOL_FEATURES
    15, // GET_PROTOCOL_FEATURES
    1,
    2,
    3,
    4,
    5,
    6,
    7,
    8,
    9,
    10,
    11,
    14,
    17,
    18,
    19,
    20,
    24,
    25,
    26,
    27,
    28,
    29,
    30,
    33,
    34,
    35,
    36,
    37,
    38,
    39,
    40,
    41,
    42,
    0,
    0xffff_ffff,
];

type Device = DeviceBackend<BlkPersonality>;

fn device() -> &'static Arc<Device> {
    static D: OnceLock<Arc<Device>> = OnceLock::new();
    D.get_or_init(|| {
        // A Rust program ignores SIGPIPE from its start (the daemon does); libFuzzer's main
        // does not, and a relay writing to a side that has gone must get EPIPE, not die.
        // SAFETY: setting a signal's disposition to "ignore" has no handler to be unsafe in.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let personality = Arc::new(BlkPersonality::new(
            Arc::new(NullStorage::new(1 << 20)),
            BlkOptions {
                num_queues: QUEUES,
                queue_size: MAX_QUEUE_SIZE,
                block_size: 512,
                serial: "fuzz".into(),
                writethrough: false,
            },
        ));
        let stats: Vec<_> = (0..QUEUES)
            .map(|q| Arc::new(Mutex::new(QueueStats::new(q, BlkKind::NAMES))))
            .collect();
        let opts = BackendOptions {
            queue_size: MAX_QUEUE_SIZE,
            model: CompletionModel::default(),
            groups: vec![vec![0, 1]],
            inflight: true,
        };
        let mem = GuestMemoryAtomic::new(GuestMemoryMmap::new());
        Arc::new(DeviceBackend::new(personality, mem, opts, &stats).expect("device"))
    })
}

/// What an open descriptor refers to: its object's device and inode number and its file type
/// (`stat` through the `/proc/self/fd` link). All eventfds share one anonymous inode, as all
/// `anon_inode:[eventfd]` links read the same: the comparison is of multisets.
type FdId = (u64, u64, u32);

/// The open descriptors as [`FdId`]s, sorted; the descriptor of the directory being read is left
/// out. Integers, not the links' text: comparing strings went through libFuzzer's memcmp hook
/// and cost a sixth of the target's time.
fn open_fds() -> Vec<FdId> {
    use std::os::unix::fs::MetadataExt;
    let id = |m: std::fs::Metadata| (m.dev(), m.ino(), m.mode() & libc::S_IFMT);
    let Ok(listing) = std::fs::metadata("/proc/self/fd").map(id) else {
        return Vec::new();
    };
    let Ok(d) = std::fs::read_dir("/proc/self/fd") else {
        return Vec::new();
    };
    let mut v: Vec<FdId> = d
        .flatten()
        .filter_map(|e| std::fs::metadata(e.path()).ok())
        .map(id)
        .filter(|&f| f != listing)
        .collect();
    v.sort_unstable();
    v
}

/// Inodes of the pipes this target made: the sanitizer's symbolizer keeps a pipe pair of its
/// own open once it has run, which is no leak of the relay.
static OUR_PIPES: Mutex<Vec<u64>> = Mutex::new(Vec::new());

/// Descriptors open now that were not open in `base` (as a multiset), other pipes than ours
/// left out: what leaked.
fn leaked(base: &[FdId]) -> Vec<FdId> {
    let ours = OUR_PIPES.lock().unwrap_or_else(|e| e.into_inner());
    let mut rest = base.to_vec();
    open_fds()
        .into_iter()
        .filter(|t| match rest.iter().position(|b| b == t) {
            Some(i) => {
                rest.swap_remove(i);
                false
            }
            None => t.2 != libc::S_IFIFO || ours.contains(&t.1),
        })
        .collect()
}

fn header(code: u32, flags: u32, size: u32) -> Vec<u8> {
    [code, flags, size]
        .iter()
        .flat_map(|v| v.to_ne_bytes())
        .collect()
}

fn memfd(size: u64) -> OwnedFd {
    // SAFETY: a valid name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"fuzz".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: a fresh descriptor nothing else owns.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size).expect("set_len");
    f.into()
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut p = [-1; 2];
    // SAFETY: `p` has room for two descriptors; the result is checked.
    assert_eq!(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: two fresh descriptors nothing else owns.
    let ends = unsafe { (OwnedFd::from_raw_fd(p[0]), OwnedFd::from_raw_fd(p[1])) };
    if let Ok(m) = File::from(ends.0.try_clone().expect("dup")).metadata() {
        use std::os::unix::fs::MetadataExt;
        let mut ours = OUR_PIPES.lock().unwrap_or_else(|e| e.into_inner());
        if ours.len() > 4096 {
            ours.clear();
        }
        ours.push(m.ino());
    }
    ends
}

/// The last inflight area made for a descriptor: (size, queues, queue size).
type Area = (u64, u16, u16);

/// One descriptor of the kind the input picks.
fn descriptor(input: &mut Input<'_>, area: &mut Option<Area>) -> OwnedFd {
    match input.u8() % 6 {
        0 => {
            let nq = u16::from(input.u8() % 4);
            let qs = 1u16 << (input.u8() % 10);
            match InflightArea::create(nq, qs) {
                Ok((f, size)) => {
                    *area = Some((size, nq, qs));
                    f.into()
                }
                Err(_) => memfd(0),
            }
        }
        1 => {
            let e = EventFd::new(libc::EFD_NONBLOCK).expect("eventfd");
            // SAFETY: `into_raw_fd` hands over the one owner of a fresh descriptor.
            unsafe { OwnedFd::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(e)) }
        }
        2 => pipe().0,
        3 => pipe().1,
        4 => File::open("/dev/null").expect("/dev/null").into(),
        _ => memfd(u64::from(input.u16()) * 8),
    }
}

fn inflight(mmap_size: u64, mmap_offset: u64, nq: u16, qs: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(24);
    v.extend_from_slice(&mmap_size.to_ne_bytes());
    v.extend_from_slice(&mmap_offset.to_ne_bytes());
    v.extend_from_slice(&nq.to_ne_bytes());
    v.extend_from_slice(&qs.to_ne_bytes());
    v
}

fn payload(input: &mut Input<'_>, area: Option<Area>) -> Vec<u8> {
    match input.u8() % 5 {
        0 => {
            let (size, nq, qs) = area.unwrap_or((0, 0, 0));
            let offset = u64::from(input.u8() % 2) * 4096;
            inflight(size, offset, nq, qs)
        }
        1 => inflight(input.u64(), input.u64(), input.u16(), input.u16()),
        2 => {
            // A vring index and flag bits (bit 8: no fd), or a protocol feature set.
            let v = u64::from(input.u8()) | u64::from(input.u8()) << 8;
            v.to_ne_bytes().to_vec()
        }
        3 => {
            let n = usize::from(input.u8());
            input.take(n).to_vec()
        }
        _ => Vec::new(),
    }
}

/// One message as the input describes it: its bytes and the descriptors sent with them.
fn message(input: &mut Input<'_>, area: &mut Option<Area>) -> (Vec<u8>, Vec<OwnedFd>) {
    let sel = input.u8();
    let code = if sel < 0xf0 {
        CODES
            .get(usize::from(sel) % CODES.len())
            .copied()
            .unwrap_or(0)
    } else {
        input.u32()
    };
    let fsel = input.u8();
    let flags = if fsel & 4 != 0 {
        input.u32()
    } else {
        VERSION_1
            | if fsel & 1 != 0 { NEED_REPLY } else { 0 }
            | if fsel & 2 != 0 { REPLY } else { 0 }
    };
    let n = match input.u8() {
        0xff => 33,
        c => usize::from(c % 5),
    };
    let fds: Vec<OwnedFd> = (0..n).map(|_| descriptor(input, area)).collect();
    let body = payload(input, *area);
    let mut bytes = header(code, flags, body.len() as u32);
    bytes.extend_from_slice(&body);
    (bytes, fds)
}

/// Sends `bytes` with `fds` on the first piece; false once the relay has gone.
fn send(sock: &UnixStream, bytes: &[u8], fds: &[OwnedFd]) -> bool {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let sent = if raw.is_empty() {
        0
    } else {
        match sock.send_with_fds(&[bytes], &raw) {
            Ok(n) => n,
            Err(_) => return false,
        }
    };
    (&*sock)
        .write_all(bytes.get(sent..).unwrap_or_default())
        .is_ok()
}

/// Reads one message (code, flags, payload), closing any descriptors; None at the end.
fn read_message(sock: &UnixStream) -> Option<(u32, u32, Vec<u8>)> {
    let mut hdr = [0u8; 12];
    let mut fds = [-1; 64];
    let mut iov = [libc::iovec {
        iov_base: hdr.as_mut_ptr().cast(),
        iov_len: hdr.len(),
    }];
    // SAFETY: the iovec points at `hdr`.
    let (n, nfds) = unsafe { sock.recv_with_fds(&mut iov, &mut fds) }.ok()?;
    for &fd in fds.iter().take(nfds) {
        // SAFETY: descriptors the kernel just gave us, closed once here.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
    }
    if n == 0 {
        return None;
    }
    (&*sock).read_exact(&mut hdr[n..]).ok()?;
    let word = |i: usize| u32::from_ne_bytes([hdr[i], hdr[i + 1], hdr[i + 2], hdr[i + 3]]);
    let mut payload = vec![0u8; word(8) as usize];
    (&*sock).read_exact(&mut payload).ok()?;
    Some((word(0), word(4), payload))
}

/// A message the fuzzer sends after an input's messages on a connection that stays: an
/// unknown code (the relay passes it on) with this payload. When the stand-in handler sees it,
/// the relay has handled everything sent before it.
const SENTINEL: (u32, u64) = (0x7fff_0001, 0x5eb7_1ae1_5eb7_1ae1);

/// The handler's stand-in on `back` (answers every message that asks for an answer, as
/// vhost-user-backend's handler would, so that SET_VRING_CALL's wait ends at once) and the
/// frontend's reader on `front` (takes what the relay sends back), in this thread: until the
/// sentinel arrives (`until_sentinel`), else until both streams end. A relay that neither
/// answers nor ends within 5 s is a hang. Returns whether both streams ended.
fn serve(front: &UnixStream, back: &UnixStream, until_sentinel: bool) -> bool {
    let mut open = [true, true];
    while open.iter().any(|&o| o) {
        let fd = |s: &UnixStream, o: bool| if o { s.as_raw_fd() } else { -1 };
        let mut p = [
            libc::pollfd {
                fd: fd(back, open[0]),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: fd(front, open[1]),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `p` holds two pollfds.
        let n = unsafe { libc::poll(p.as_mut_ptr(), 2, 5000) };
        assert!(n != 0, "the relay neither answered nor ended within 5 s");
        if p[0].revents != 0 {
            match read_message(back) {
                Some((code, flags, payload)) => {
                    if flags & NEED_REPLY != 0 {
                        let mut m = header(code, VERSION_1 | REPLY, 8);
                        m.extend_from_slice(&0u64.to_ne_bytes());
                        let _ = (&*back).write_all(&m);
                    }
                    if until_sentinel && code == SENTINEL.0 && payload == SENTINEL.1.to_ne_bytes() {
                        return false;
                    }
                }
                None => open[0] = false,
            }
        }
        if p[1].revents != 0 && read_message(front).is_none() {
            open[1] = false;
        }
    }
    true
}

/// The fuzzer's end of a connection to a running relay.
struct Conn {
    front: UnixStream,
    back: UnixStream,
    relay: Relay,
    /// Descriptors open with it (checked after every input that leaves it open).
    fds: Vec<FdId>,
}

/// Descriptors open with no connection (checked after every connection that ends).
static BASELINE: OnceLock<Vec<FdId>> = OnceLock::new();

fn connect(dev: &Arc<Device>) -> Conn {
    let base = BASELINE.get_or_init(open_fds);
    let extra = leaked(base);
    assert!(extra.is_empty(), "open with no connection: {extra:?}");
    let (front, relay_front) = UnixStream::pair().expect("socketpair");
    let (relay_back, back) = UnixStream::pair().expect("socketpair");
    let relay =
        Relay::spawn(relay_front, relay_back, dev.clone(), MAX_QUEUE_SIZE).expect("relay threads");
    let fds = open_fds();
    Conn {
        front,
        back,
        relay,
        fds,
    }
}

/// Ends a connection: the frontend closes, the relay must end.
fn close(c: Conn) {
    let _ = c.front.shutdown(std::net::Shutdown::Write);
    serve(&c.front, &c.back, false);
    c.relay.join();
    drop((c.front, c.back));
    let extra = leaked(BASELINE.get().map_or(&[][..], Vec::as_slice));
    assert!(extra.is_empty(), "open after a connection ended: {extra:?}");
}

/// Sends the input's operations; false when one of them ends the connection.
fn run_ops(front: &UnixStream, input: &mut Input<'_>) -> bool {
    let mut area = None;
    for _ in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        let ok = match input.u8() % 8 {
            0..=4 => {
                let (bytes, fds) = message(input, &mut area);
                send(front, &bytes, &fds)
            }
            5 => {
                let n = usize::from(input.u8());
                send(front, input.take(n), &[]);
                false
            }
            6 => {
                let size = u32::from(input.u16()) + 1;
                let mut m = header(2, VERSION_1, size);
                let n = usize::from(input.u8()).min(size as usize - 1);
                m.extend_from_slice(input.take(n));
                send(front, &m, &[]);
                false
            }
            _ => {
                let size = MAX_MSG_SIZE + 1 + u32::from(input.u16());
                send(front, &header(1, VERSION_1, size), &[]);
                false
            }
        };
        if !ok {
            return false;
        }
    }
    true
}

/// The relay's per-connection state back to a fresh connection's: REPLY_ACK off (protocol
/// features 0), no inflight area (a SET_INFLIGHT_FD without a descriptor is refused).
fn reset(front: &UnixStream) -> bool {
    let mut m = header(16, VERSION_1, 8);
    m.extend_from_slice(&0u64.to_ne_bytes());
    m.extend_from_slice(&header(32, VERSION_1, 24));
    m.extend_from_slice(&[0u8; 24]);
    send(front, &m, &[])
}

/// One connection serves input after input (a fresh one per input cost a thousand inputs/s in
/// thread creation): each input starts with [`reset`] and ends with the sentinel; an input that
/// breaks the framing (raw bytes, a short payload, an oversized header) ends it, and so does a
/// relay that ends by itself.
static CONN: Mutex<Option<Conn>> = Mutex::new(None);

/// At exit (libFuzzer ends a run with `exit`): the connection still open is closed and its relay
/// threads joined, as [`close`] does after a broken input, so that LeakSanitizer's exit-time
/// check sees no live relay thread. Registered after LeakSanitizer's own handler, so it runs
/// first (atexit handlers run in reverse order).
///
/// What looked like its reason (CI's smoke, 2026-12-06: the two threads' buffers and spawn
/// closures reported as leaked after 88,919 inputs) was most likely LeakSanitizer losing live
/// threads once the kernel reuses thread ids: with pid_max 32,768 a run reports the live
/// relay's objects after 42,000-47,000 inputs, 4 runs of 4, and in a pid namespace whose ids
/// do not wrap none in 400,000 (docs/results/fuzz/README.md). `ci/fuzz.sh` runs every target in
/// a fresh pid namespace for this reason.
extern "C" fn close_at_exit() {
    let c = CONN.lock().unwrap_or_else(|e| e.into_inner()).take();
    if let Some(c) = c {
        close(c);
    }
}

fuzz_target!(|data: &[u8]| {
    static AT_EXIT: std::sync::Once = std::sync::Once::new();
    // SAFETY: atexit(3) with a function of the right signature that lives as long as the
    // program; the only failure is a full table (-1), which leaves the run as it was before.
    AT_EXIT.call_once(|| unsafe {
        libc::atexit(close_at_exit);
    });
    let dev = device();
    let mut slot = CONN.lock().unwrap_or_else(|e| e.into_inner());
    let c = match slot.take() {
        Some(c) => c,
        None => connect(dev),
    };
    let mut input = Input::new(data);
    let keep = reset(&c.front) && run_ops(&c.front, &mut input) && {
        let mut m = header(SENTINEL.0, VERSION_1, 8);
        m.extend_from_slice(&SENTINEL.1.to_ne_bytes());
        send(&c.front, &m, &[])
    };
    if keep && !serve(&c.front, &c.back, true) {
        let extra = leaked(&c.fds);
        assert!(extra.is_empty(), "open after an input: {extra:?}");
        *slot = Some(c);
    } else {
        close(c);
    }
});
