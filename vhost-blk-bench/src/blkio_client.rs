//! `--client blkio`: libblkio's virtio-blk vhost-user driver (the `blkio` crate) as the client,
//! an implementation of the driver side that shares no code with this crate.
//!
//! Same shape as the built-in client: `--queues` queues of `--qd` requests of `--bs` bytes, queue
//! i on thread i % `--threads`, one buffer per slot in one memory region libblkio shares with the
//! backend. Like a guest driver, a queue is reaped (and its slots resubmitted) when its
//! completion eventfd (the vring's call eventfd) fires; libblkio kicks the backend when the
//! requests are queued (`do_io`). Latency: from just before a request is queued to the reap
//! that sees it. `interrupts` counts completion-fd wake-ups.

use std::mem::MaybeUninit;
use std::os::fd::RawFd;

use blkio::{Blkio, Blkioq, Completion, MemoryRegion, ReqFlags};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vhost_blk_completion::now_ns;

use super::{plan, run_measured, thread_of, BenchError, Plan, QueueResult};
use vhost_blk_bench::args::{Args, Pattern};

const DRIVER: &str = "virtio-blk-vhost-user";

fn err(what: &str) -> impl Fn(blkio::Error) -> BenchError + '_ {
    move |e| BenchError::Blkio(format!("{what}: {e}"))
}

/// One queue driven by a thread.
struct Lane {
    q: Blkioq,
    fd: RawFd,
    /// Per slot: buffer address and submit time (None: not in flight).
    bufs: Vec<usize>,
    submitted: Vec<Option<u64>>,
    last_progress: u64,
    res: QueueResult,
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
        let (Some(&buf), Some(submitted)) = (self.bufs.get(slot), self.submitted.get_mut(slot))
        else {
            return Err(BenchError::NoSlot(slot));
        };
        let (buf, len) = (buf as *mut u8, plan.bs as usize);
        let random = |rng: &mut ChaCha8Rng| rng.gen_range(0..blocks) * spb * 512;
        let write = match plan.rw {
            Pattern::Read | Pattern::RandRead => false,
            Pattern::Write | Pattern::RandWrite => true,
            Pattern::Mix(pct) => rng.gen_range(0..100u8) >= pct,
            Pattern::Flush => {
                *submitted = Some(now_ns());
                self.q.flush(slot, ReqFlags::empty());
                return Ok(());
            }
        };
        let offset = match plan.rw {
            Pattern::Read | Pattern::Write => {
                *seq += 1;
                ((*seq - 1) % blocks) * spb * 512
            }
            _ => random(rng),
        };
        *submitted = Some(now_ns());
        if write {
            self.q.write(offset, buf, len, slot, ReqFlags::empty());
        } else {
            self.q.read(offset, buf, len, slot, ReqFlags::empty());
        }
        Ok(())
    }

    /// Takes every completion available, resubmits while the run lasts, and lets libblkio
    /// kick the backend for what was queued. Returns how many completed.
    fn reap(
        &mut self,
        plan: &Plan,
        rng: &mut ChaCha8Rng,
        seq: &mut u64,
        comps: &mut [MaybeUninit<Completion>],
    ) -> Result<usize, BenchError> {
        let mut total = 0;
        loop {
            let n = self.q.do_io(comps, 0, None, None).map_err(err("do_io"))?;
            let now = now_ns();
            for c in comps.iter().take(n) {
                // SAFETY: do_io initialised the first `n` completions.
                let c = unsafe { c.assume_init_ref() };
                let slot = c.user_data;
                let Some(at) = self.submitted.get_mut(slot).and_then(Option::take) else {
                    continue;
                };
                self.last_progress = now;
                if at >= plan.start_record && now <= plan.end {
                    self.res.ops += 1;
                    self.res.latency.record(now.saturating_sub(at));
                    if c.ret != 0 {
                        self.res.errors += 1;
                    } else if plan.rw != Pattern::Flush {
                        self.res.bytes += u64::from(plan.bs);
                    }
                }
                if now < plan.end {
                    self.issue(slot, plan, rng, seq)?;
                }
            }
            total += n;
            if n == 0 {
                // The last do_io also kicked the backend for the resubmissions.
                return Ok(total);
            }
        }
    }

    fn in_flight(&self) -> bool {
        self.submitted.iter().any(Option::is_some)
    }
}

fn run_thread(
    mut lanes: Vec<Lane>,
    plan: &Plan,
    seed: u64,
) -> Result<Vec<QueueResult>, BenchError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut seq = 0u64;
    let qd = lanes.first().map_or(1, |l| l.bufs.len());
    let mut comps: Vec<MaybeUninit<Completion>> = (0..qd).map(|_| MaybeUninit::uninit()).collect();
    for lane in &mut lanes {
        for slot in 0..lane.bufs.len() {
            lane.issue(slot, plan, &mut rng, &mut seq)?;
        }
        lane.last_progress = now_ns();
        // Submits (and kicks), and takes what has completed already: against a fast backend
        // the whole first round can be back before do_io returns, and completions do_io hands
        // out are gone from libblkio. (Dropping them here was the "blkio stall": the lane
        // waited for 16 completions libblkio had already returned.)
        lane.reap(plan, &mut rng, &mut seq, &mut comps)?;
    }
    let mut fds: Vec<libc::pollfd> = lanes
        .iter()
        .map(|l| libc::pollfd {
            fd: l.fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    while lanes.iter().any(Lane::in_flight) {
        // SAFETY: `fds` is a valid array of pollfd for the duration of the call.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
        for (lane, p) in lanes.iter_mut().zip(&mut fds) {
            let fired = p.revents & libc::POLLIN != 0;
            p.revents = 0;
            if fired {
                let mut v = 0u64;
                // SAFETY: reads 8 bytes into `v` from the queue's eventfd (resets it).
                unsafe { libc::read(lane.fd, (&mut v as *mut u64).cast(), 8) };
                if plan.start_record <= now_ns() {
                    lane.res.interrupts += 1;
                }
            }
            if fired || n == 0 {
                lane.reap(plan, &mut rng, &mut seq, &mut comps)?;
            }
            if lane.in_flight() && now_ns().saturating_sub(lane.last_progress) > 10_000_000_000 {
                return Err(BenchError::Stalled(lane.res.queue));
            }
        }
    }
    Ok(lanes.into_iter().map(|l| l.res).collect())
}

/// Connects libblkio to `--socket` and runs the plan.
pub(crate) fn run(args: &Args) -> Result<(Vec<QueueResult>, Option<f64>), BenchError> {
    let mut b = Blkio::new(DRIVER).map_err(err("driver"))?;
    let path = args.socket.to_string_lossy();
    b.set_str("path", &path).map_err(err("path"))?;
    b.connect().map_err(err("connect"))?;
    b.set_i32("num-queues", i32::from(args.queues))
        .map_err(err("num-queues"))?;
    b.set_i32("queue-size", i32::from(args.queue_size))
        .map_err(err("queue-size"))?;
    let started = b.start().map_err(err("start"))?;
    let capacity = b.get_u64("capacity").map_err(err("capacity"))?;
    let align = b
        .get_u64("mem-region-alignment")
        .map_err(err("alignment"))?
        .max(4096);
    let per_slot = (u64::from(args.bs)).div_ceil(align) * align;
    let len = per_slot * u64::from(args.qd) * u64::from(args.queues);
    let region: MemoryRegion = b
        .alloc_mem_region(len as usize)
        .map_err(err("alloc_mem_region"))?;
    b.map_mem_region(&region).map_err(err("map_mem_region"))?;
    let threads = args.threads.unwrap_or(args.queues).min(args.queues);
    let mut per_thread: Vec<Vec<Lane>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, mut q) in started.queues.into_iter().enumerate() {
        q.set_completion_fd_enabled(true);
        let fd = q
            .get_completion_fd()
            .ok_or_else(|| BenchError::Blkio("queue without a completion fd".into()))?;
        let first = region.addr + i * usize::from(args.qd) * per_slot as usize;
        thread_of(&mut per_thread, i)?.push(Lane {
            q,
            fd,
            bufs: (0..usize::from(args.qd))
                .map(|s| first + s * per_slot as usize)
                .collect(),
            submitted: vec![None; usize::from(args.qd)],
            last_progress: 0,
            res: QueueResult::new(i as u16),
        });
    }
    let plan = plan(args, capacity / 512);
    let out = run_measured(args, &plan, per_thread, run_thread);
    b.unmap_mem_region(&region);
    b.free_mem_region(&region);
    out
}
