//! vhost-blk-bench: a load generator for any vhost-user-blk backend (ours, qemu-storage-daemon)
//! and for our vhost-user-scsi backend.
//!
//! It connects as the vhost-user frontend (memfd guest memory, split rings), keeps `--qd`
//! requests in flight on each of `--queues` queues from `--threads` threads, and reports per queue
//! IOPS, bandwidth, request latency percentiles and interrupts, as text and JSON.
//!
//! Clients (`--client`): `bench`, this crate's frontend, speaking virtio-blk or (`--device scsi`)
//! virtio-scsi READ/WRITE(10) or (16) to LUN 0:0 on request queues 2..; `blkio`, libblkio's
//! virtio-blk vhost-user driver ([`blkio_client`]), an independent implementation of the
//! driver side, with the same queues, depth, size, pattern, run length and report.
//!
//! As in a guest driver, a queue's completions are reaped (and their slots resubmitted) only when
//! its interrupt (call eventfd) arrives. Two ways to wait for it:
//! - default: sleep on the queues' call eventfds;
//! - `--measure-irq`: spin on the used rings and call eventfds without sleeping, timestamping when
//!   each used entry becomes visible and when the interrupt arrives; the difference is the
//!   *measured interrupt delay* of every completion (resolution: one spin iteration). Spinning
//!   costs one CPU per thread: use it with few queues.
//!
//! With `--backend-pid` the backend's CPU time (utime + stime) during the run is reported, and
//! the throughput per backend CPU-second.
//!
//! The `--json` report's types are the library's ([`vhost_blk_bench::report`]): the experiments'
//! tables (`lab table ...`) read them back through the same types.

// As the library: no unwrap/expect/panic/unreachable, indexing or slicing outside tests
// (lib.rs).
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::unreachable,
        clippy::indexing_slicing
    )
)]

mod blkio_client;
mod slot;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use std::sync::atomic::Ordering;
use vhost_blk_completion::now_ns;
use vhost_blk_frontend::scsi::FIRST_REQUEST_QUEUE;
use vhost_blk_frontend::{
    scsi_connect_options, ConnectOptions, Connection, FrontendError, QueueHandle,
};
use vhost_blk_stats::Hist;

use slot::Slot;
use vhost_blk_bench::args::{Args, Client, Device, Pattern};
use vhost_blk_bench::report::{line, QueueReport, Report};
use vhost_blk_stats::{CountSummary, LatencySummary};
use vm_memory::{Bytes, GuestAddress};

#[derive(Debug, thiserror::Error)]
enum BenchError {
    #[error("{0}")]
    Frontend(#[from] FrontendError),
    #[error("queue {0}: no completion for 10 s (backend hung?)")]
    Stalled(u16),
    #[error("backend CPU time of pid {0}: {1}")]
    Cpu(u32, std::io::Error),
    #[error("writing {0}: {1}")]
    Json(PathBuf, std::io::Error),
    #[error("blkio: {0}")]
    Blkio(String),
    #[error("queue {0} is not connected")]
    NoQueue(usize),
    #[error("request slot {0} does not exist")]
    NoSlot(usize),
    #[error("descriptor head {0} beyond the queue size")]
    BadHead(u16),
    #[error("no thread to drive queue {0}")]
    NoThread(usize),
    #[error("a bench thread panicked")]
    ThreadPanicked,
    #[error("report as JSON: {0}")]
    Serialize(#[from] serde_json::Error),
}

/// Results of one queue.
pub(crate) struct QueueResult {
    queue: u16,
    ops: u64,
    bytes: u64,
    errors: u64,
    interrupts: u64,
    latency: Hist,
    irq_delay: Hist,
    per_irq: Hist,
}

impl QueueResult {
    pub(crate) fn new(queue: u16) -> Self {
        QueueResult {
            queue,
            ops: 0,
            bytes: 0,
            errors: 0,
            interrupts: 0,
            latency: Hist::latency(),
            irq_delay: Hist::latency(),
            per_irq: Hist::counts(),
        }
    }
}

/// One queue's state in a worker thread.
struct Lane {
    q: QueueHandle,
    slots: Vec<Slot>,
    /// Per descriptor head: (slot, submit time).
    by_head: Vec<Option<(usize, u64)>>,
    /// Completions seen and not yet covered by an interrupt (`--measure-irq`): seen times.
    unsignalled: Vec<u64>,
    /// Used index up to which entries were timestamped / consumed.
    seen_idx: u16,
    consumed_idx: u16,
    last_progress: u64,
    res: QueueResult,
}

pub(crate) struct Plan {
    rw: Pattern,
    bs: u32,
    sectors: u64,
    start_record: u64,
    end: u64,
    measure_irq: bool,
}

impl Lane {
    fn issue(
        &mut self,
        slot: usize,
        plan: &Plan,
        rng: &mut ChaCha8Rng,
        seq: &mut u64,
    ) -> Result<(), BenchError> {
        let spb = u64::from(plan.bs / 512);
        let blocks = (plan.sectors / spb).max(1);
        let random = |rng: &mut ChaCha8Rng| rng.gen_range(0..blocks) * spb;
        let req = self.slots.get_mut(slot).ok_or(BenchError::NoSlot(slot))?;
        match plan.rw {
            Pattern::Read | Pattern::Write => {
                let sector = (*seq % blocks) * spb;
                *seq += 1;
                if plan.rw == Pattern::Read {
                    req.read(sector, plan.bs)?;
                } else {
                    req.write_in_place(sector, plan.bs)?;
                }
            }
            Pattern::RandRead => {
                req.read(random(rng), plan.bs)?;
            }
            Pattern::RandWrite => {
                req.write_in_place(random(rng), plan.bs)?;
            }
            Pattern::Mix(pct) => {
                let sector = random(rng);
                if rng.gen_range(0..100u8) < pct {
                    req.read(sector, plan.bs)?;
                } else {
                    req.write_in_place(sector, plan.bs)?;
                }
            }
            Pattern::Flush => {
                req.flush()?;
            }
        }
        // Timestamp before the kick: the backend cannot complete the request earlier, so a
        // preempted bench thread can only make a latency look longer, never shorter.
        let submitted = now_ns();
        let head = self.q.submit(&req.bufs())?;
        let entry = self
            .by_head
            .get_mut(usize::from(head))
            .ok_or(BenchError::BadHead(head))?;
        *entry = Some((slot, submitted));
        Ok(())
    }

    /// Collects completions seen at `now`, resubmits their slots while the run lasts.
    fn reap(
        &mut self,
        now: u64,
        plan: &Plan,
        rng: &mut ChaCha8Rng,
        seq: &mut u64,
    ) -> Result<usize, BenchError> {
        let used = self.q.poll()?;
        // Take every completed head before resubmitting: a resubmission may reuse the head of
        // a completion later in this batch.
        let mut done = Vec::with_capacity(used.len());
        for u in &used {
            if let Some(entry) = self
                .by_head
                .get_mut(usize::from(u.id))
                .and_then(Option::take)
            {
                done.push((entry, u.len));
            }
        }
        for &((slot, submitted), used_len) in &done {
            self.last_progress = now;
            if submitted >= plan.start_record && now <= plan.end {
                let r = &mut self.res;
                r.ops += 1;
                r.latency.record(now.saturating_sub(submitted));
                let req = self.slots.get(slot).ok_or(BenchError::NoSlot(slot))?;
                if !req.ok(used_len)? {
                    r.errors += 1;
                } else if plan.rw != Pattern::Flush {
                    r.bytes += u64::from(plan.bs);
                }
            }
        }
        if now < plan.end {
            for &((slot, _), _) in &done {
                self.issue(slot, plan, rng, seq)?;
            }
        }
        self.consumed_idx = self.consumed_idx.wrapping_add(used.len() as u16);
        // Entries that became visible between the last peek and the reap were not timestamped.
        self.seen_idx = self.consumed_idx;
        Ok(done.len())
    }

    /// Timestamps used entries that became visible since the last look, without consuming them.
    fn peek_used(&mut self, now: u64, plan: &Plan) -> Result<(), BenchError> {
        let (_, _, used) = self.q.ring.addresses();
        let idx: u16 = self
            .q
            .ram
            .memory()
            .load(GuestAddress(used + 2), Ordering::Acquire)
            .map(u16::from_le)
            .map_err(|e| FrontendError::Memory(e.to_string()))?;
        let new = idx.wrapping_sub(self.seen_idx);
        if now >= plan.start_record && now <= plan.end {
            self.unsignalled
                .extend(std::iter::repeat_n(now, usize::from(new)));
        }
        self.seen_idx = idx;
        Ok(())
    }

    fn interrupt(&mut self, now: u64, plan: &Plan) {
        if now < plan.start_record {
            self.unsignalled.clear();
            return;
        }
        self.res.interrupts += 1;
        if plan.measure_irq {
            self.res.per_irq.record(self.unsignalled.len() as u64);
            for t in self.unsignalled.drain(..) {
                self.res.irq_delay.record(now.saturating_sub(t));
            }
        }
    }

    fn in_flight(&self) -> bool {
        self.by_head.iter().any(Option::is_some)
    }
}

fn read_call(q: &QueueHandle) -> bool {
    matches!(q.call_fd().read(), Ok(n) if n > 0)
}

fn run_thread(
    mut lanes: Vec<Lane>,
    plan: &Plan,
    seed: u64,
) -> Result<Vec<QueueResult>, BenchError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seq = 0u64;
    for lane in &mut lanes {
        for slot in 0..lane.slots.len() {
            lane.issue(slot, plan, &mut rng, &mut seq)?;
        }
        lane.last_progress = now_ns();
    }
    // Like a guest driver, a queue is reaped (and its slots resubmitted) only when its interrupt
    // arrives; a 100 ms safety reap covers a lost interrupt. With --measure-irq the thread spins,
    // timestamping used entries as they become visible.
    while lanes.iter().any(Lane::in_flight) {
        let mut timed_out = false;
        if !plan.measure_irq {
            let mut fds: Vec<libc::pollfd> = lanes
                .iter()
                .map(|l| libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(l.q.call_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
            timed_out = n == 0;
        }
        for lane in &mut lanes {
            if plan.measure_irq {
                lane.peek_used(now_ns(), plan)?;
            }
            if read_call(&lane.q) {
                let now = now_ns();
                if plan.measure_irq {
                    lane.peek_used(now, plan)?;
                }
                lane.interrupt(now, plan);
                lane.reap(now, plan, &mut rng, &mut seq)?;
            } else if timed_out {
                lane.reap(now_ns(), plan, &mut rng, &mut seq)?;
            }
            if lane.in_flight() && now_ns().saturating_sub(lane.last_progress) > 10_000_000_000 {
                return Err(BenchError::Stalled(lane.q.index));
            }
        }
    }
    Ok(lanes.into_iter().map(|l| l.res).collect())
}

/// utime + stime of `pid` in seconds.
fn cpu_seconds(pid: u32) -> Result<f64, BenchError> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| BenchError::Cpu(pid, e))?;
    // Fields after the command name (which may contain spaces) start after the last ')'.
    let rest = text.rsplit_once(')').map_or("", |r| r.1);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // SAFETY: sysconf has no memory arguments.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    // utime and stime are fields 14 and 15 of /proc/PID/stat, i.e. 11 and 12 after the name.
    Ok((ticks(11) + ticks(12)) as f64 / hz)
}

/// The run's plan, starting now: ramp, then the measured window.
pub(crate) fn plan(args: &Args, sectors: u64) -> Plan {
    let start = now_ns();
    Plan {
        rw: args.rw,
        bs: args.bs,
        sectors,
        start_record: start + args.ramp,
        end: start + args.ramp + args.duration,
        measure_irq: args.measure_irq,
    }
}

/// Runs `f` on one thread per element of `work` (thread t seeded with `--seed` + t) and takes
/// the backend's CPU time from the start of the measured window until every thread is done.
pub(crate) fn run_measured<W: Send>(
    args: &Args,
    plan: &Plan,
    work: Vec<W>,
    f: impl Fn(W, &Plan, u64) -> Result<Vec<QueueResult>, BenchError> + Sync,
) -> Result<(Vec<QueueResult>, Option<f64>), BenchError> {
    let wait_until = |t: u64| std::thread::sleep(Duration::from_nanos(t.saturating_sub(now_ns())));
    let mut cpu_at_start = None;
    let results = std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = work
            .into_iter()
            .enumerate()
            .map(|(t, w)| s.spawn(move || f(w, plan, args.seed.wrapping_add(t as u64))))
            .collect();
        wait_until(plan.start_record);
        cpu_at_start = args.backend_pid.map(cpu_seconds);
        let mut all = Vec::new();
        for h in handles {
            all.extend(h.join().map_err(|_| BenchError::ThreadPanicked)??);
        }
        Ok::<_, BenchError>(all)
    })?;
    let cpu = match (args.backend_pid, cpu_at_start) {
        (Some(pid), Some(before)) => Some(cpu_seconds(pid)? - before?),
        _ => None,
    };
    Ok((results, cpu))
}

/// The built-in client: virtio-blk, or virtio-scsi on request queues 2...
fn run_bench(args: &Args) -> Result<(Vec<QueueResult>, Option<f64>), BenchError> {
    let per_slot = u64::from(args.bs) + 4096 + 256;
    let base = match args.device {
        Device::Blk => ConnectOptions {
            num_queues: args.queues,
            ..ConnectOptions::default()
        },
        Device::Scsi => scsi_connect_options(args.queues),
    };
    let opts = ConnectOptions {
        num_queues: base.num_queues,
        queue_size: args.queue_size,
        event_idx: !args.no_event_idx,
        mem_size: (16 << 20) + u64::from(args.queues) * (u64::from(args.qd) * per_slot + (1 << 20)),
        ..base
    };
    let mut conn = Connection::connect(&args.socket, &opts)?;
    let first = match args.device {
        Device::Blk => 0,
        Device::Scsi => FIRST_REQUEST_QUEUE,
    };
    let mut queues: Vec<QueueHandle> = (0..usize::from(args.queues))
        .map(|i| {
            conn.take_queue(first + i)
                .ok_or(BenchError::NoQueue(first + i))
        })
        .collect::<Result<_, _>>()?;
    // virtio-scsi: the capacity comes from READ CAPACITY(16), one completion on the first queue.
    let (sectors, block_size, probed) = match args.device {
        Device::Blk => {
            let cap = conn.config(0, 8)?;
            (u64::from_le_bytes(cap.try_into().unwrap_or([0; 8])), 512, 0)
        }
        Device::Scsi => {
            let q0 = queues.first_mut().ok_or(BenchError::NoQueue(first))?;
            let (sectors, bs) = slot::scsi_capacity(conn.ram(), q0)?;
            // READ(10) addresses 2^32 blocks.
            let max = if args.cdb16 {
                u64::MAX
            } else {
                (u64::from(u32::MAX) * u64::from(bs)) / 512
            };
            (sectors.min(max), bs, 1u16)
        }
    };
    let threads = args.threads.unwrap_or(args.queues).min(args.queues);
    let mut per_thread: Vec<Vec<Lane>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, q) in queues.into_iter().enumerate() {
        let slots = (0..args.qd)
            .map(|_| match args.device {
                Device::Blk => Slot::blk(conn.ram(), args.bs),
                Device::Scsi => Slot::scsi(conn.ram(), args.bs, args.cdb16, block_size),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let done = if i == 0 { probed } else { 0 };
        thread_of(&mut per_thread, i)?.push(Lane {
            by_head: vec![None; usize::from(args.queue_size)],
            q,
            slots,
            unsignalled: Vec::new(),
            seen_idx: done,
            consumed_idx: done,
            last_progress: 0,
            res: QueueResult::new(i as u16),
        });
    }
    let plan = plan(args, sectors);
    run_measured(args, &plan, per_thread, run_thread)
}

/// The lanes of the thread that drives queue `i`: thread `i % threads`.
pub(crate) fn thread_of<T>(per_thread: &mut [Vec<T>], i: usize) -> Result<&mut Vec<T>, BenchError> {
    i.checked_rem(per_thread.len())
        .and_then(|t| per_thread.get_mut(t))
        .ok_or(BenchError::NoThread(i))
}

fn run(args: &Args) -> Result<Report, BenchError> {
    let (mut results, cpu) = match args.client {
        Client::Bench => run_bench(args)?,
        Client::Blkio => blkio_client::run(args)?,
    };
    let threads = args.threads.unwrap_or(args.queues).min(args.queues);
    let secs = args.duration as f64 / 1e9;
    results.sort_by_key(|r| r.queue);
    let mut total = QueueResult::new(0);
    for r in &results {
        total.ops += r.ops;
        total.bytes += r.bytes;
        total.errors += r.errors;
        total.interrupts += r.interrupts;
        total.latency.add(&r.latency);
        total.irq_delay.add(&r.irq_delay);
        total.per_irq.add(&r.per_irq);
    }
    Ok(Report {
        socket: args.socket.clone(),
        client: args.client,
        device: args.device,
        rw: format!("{:?}", args.rw).to_lowercase(),
        bs: args.bs,
        queues: args.queues,
        qd: args.qd,
        threads,
        seconds: secs,
        measure_irq: args.measure_irq,
        backend_cpu_seconds: cpu,
        ops_per_backend_cpu_second: cpu.filter(|&c| c > 0.0).map(|c| total.ops as f64 / c),
        per_queue: results
            .iter()
            .map(|r| report_of(r, Some(r.queue), secs, args.measure_irq))
            .collect(),
        total: report_of(&total, None, secs, args.measure_irq),
    })
}

fn report_of(r: &QueueResult, queue: Option<u16>, secs: f64, measure_irq: bool) -> QueueReport {
    QueueReport {
        queue,
        ops: r.ops,
        errors: r.errors,
        iops: r.ops as f64 / secs,
        mib_per_s: r.bytes as f64 / secs / f64::from(1 << 20),
        interrupts: r.interrupts,
        latency_us: LatencySummary::of(&r.latency),
        irq_delay_us: measure_irq.then(|| LatencySummary::of(&r.irq_delay)),
        completions_per_irq: measure_irq.then(|| CountSummary::of(&r.per_irq)),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = args.check() {
        eprintln!("vhost-blk-bench: {e}");
        return ExitCode::from(2);
    }
    let report = match run(&args) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("vhost-blk-bench: {e}");
            return ExitCode::from(1);
        }
    };
    for q in &report.per_queue {
        println!("{}", line(q));
    }
    println!("{}", line(&report.total));
    if let (Some(cpu), Some(per)) = (
        report.backend_cpu_seconds,
        report.ops_per_backend_cpu_second,
    ) {
        println!("backend cpu {cpu:.2} s, {per:.0} ops per backend CPU-second");
    }
    if let Some(path) = &args.json {
        let written = serde_json::to_string_pretty(&report)
            .map_err(BenchError::from)
            .and_then(|text| {
                std::fs::write(path, text + "\n").map_err(|e| BenchError::Json(path.clone(), e))
            });
        if let Err(e) = written {
            eprintln!("vhost-blk-bench: {e}");
            return ExitCode::from(1);
        }
    }
    if report.total.errors > 0 {
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
