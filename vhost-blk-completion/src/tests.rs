//! Engine and model tests on a virtual clock: nothing sleeps, every time is chosen by the test.

use super::engine::stream_rng;
use super::model::PRESET_COALESCE;
use super::*;
use rand::RngCore;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// Values recorded by [`Recorder`], with the aggregates the tests look at.
#[derive(Debug, Default)]
struct Values(Vec<u64>);

impl Values {
    fn min(&self) -> Option<u64> {
        self.0.iter().copied().min()
    }
    fn max(&self) -> Option<u64> {
        self.0.iter().copied().max()
    }
}

/// An [`EngineSink`] that keeps what the engine reported (the tests' view of its decisions).
#[derive(Debug, Default)]
struct Recorder {
    requests: u64,
    published: u64,
    discarded: u64,
    service: Values,
    irq_delay: Values,
    irq_error: Values,
    per_irq: Values,
    timing: (u64, u64, u64),
}

impl EngineSink for Recorder {
    fn on_publish(&mut self, service_ns: u64) {
        self.published += 1;
        self.service.0.push(service_ns);
    }
    fn on_interrupt(&mut self, published: &[u64], now_ns: u64, error_ns: i128) {
        self.per_irq.0.push(published.len() as u64);
        self.irq_delay
            .0
            .extend(published.iter().map(|&t| now_ns.saturating_sub(t)));
        self.irq_error.0.push(error_ns.unsigned_abs() as u64);
        match error_ns {
            e if e < 0 => self.timing.0 += 1,
            0 => self.timing.1 += 1,
            _ => self.timing.2 += 1,
        }
    }
    fn on_discard(&mut self) {
        self.discarded += 1;
    }
}

impl Recorder {
    /// A request was handed to the engine (counted for `in_flight`).
    fn on_request(&mut self) {
        self.requests += 1;
    }
    fn in_flight(&self) -> u64 {
        self.requests - self.published - self.discarded
    }
    fn interrupts(&self) -> u64 {
        self.per_irq.0.len() as u64
    }
    fn irq_delay(&self) -> &Values {
        &self.irq_delay
    }
    fn irq_error(&self) -> &Values {
        &self.irq_error
    }
    fn service(&self) -> &Values {
        &self.service
    }
    fn completions_per_irq(&self) -> &Values {
        &self.per_irq
    }
    /// (early, on time, late) interrupt counts.
    fn irq_timing(&self) -> (u64, u64, u64) {
        self.timing
    }
}

#[derive(Debug, Default, PartialEq)]
struct Schedule {
    /// (item, publication time)
    published: Vec<(usize, u64)>,
    /// (signal time, completions covered)
    signals: Vec<(u64, usize)>,
}

/// Drives one engine through `submits` (time, extra delay), polling exactly at every submission and
/// every deadline the engine asks for, as a worker with a perfect timer would.
fn simulate(model: &CompletionModel, vector: u16, submits: &[(u64, u64)]) -> (Schedule, Recorder) {
    let mut engine = VectorEngine::new(model, vector);
    let mut stats = Recorder::default();
    let mut sched = Schedule::default();
    let mut next_deadline: Option<u64> = None;
    let mut i = 0;
    loop {
        let next_submit = submits.get(i).map(|s| s.0);
        let now = match (next_submit, next_deadline) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => break,
            },
        };
        while i < submits.len() && submits[i].0 == now {
            stats.on_request();
            engine.submit(now, i, submits[i].1);
            i += 1;
        }
        let before = sched.published.len();
        let poll = engine.poll(now, &mut stats, |item| sched.published.push((item, now)));
        assert_eq!(poll.published, sched.published.len() - before);
        if poll.signal {
            let before: usize = sched.signals.iter().map(|s| s.1).sum();
            sched.signals.push((now, sched.published.len() - before));
        }
        if let Some(d) = poll.next_deadline_ns {
            assert!(
                d > now,
                "engine asked for a deadline {d} not after now {now}"
            );
        }
        next_deadline = poll.next_deadline_ns;
    }
    assert_eq!(engine.pending(), 0);
    assert_eq!(
        engine.unsignalled(),
        0,
        "every completion must end up signalled"
    );
    (sched, stats)
}

fn every(n: usize, step: u64) -> Vec<(u64, u64)> {
    (0..n).map(|i| (i as u64 * step, 0)).collect()
}

fn random_model(seed: u64) -> CompletionModel {
    CompletionModel {
        service: "uniform:0..100us".parse().unwrap(),
        msix: "exp:50us".parse().unwrap(),
        coalesce: Some("4/200us".parse().unwrap()),
        seed,
        ..CompletionModel::default()
    }
}

#[test]
fn same_seed_same_schedule_different_seed_differs() {
    let submits = every(300, 10 * US);
    let (a, _) = simulate(&random_model(7), 0, &submits);
    let (b, _) = simulate(&random_model(7), 0, &submits);
    let (c, _) = simulate(&random_model(8), 0, &submits);
    assert_eq!(a.published.len(), 300);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn each_vector_has_its_own_streams() {
    let submits = every(300, 10 * US);
    let (v0, _) = simulate(&random_model(7), 0, &submits);
    let (v1, _) = simulate(&random_model(7), 1, &submits);
    assert_ne!(v0, v1);
    // Service and MSI-X streams of one vector differ too, and the derivation is stable.
    let mut s = stream_rng(7, 1, 0);
    let mut m = stream_rng(7, 1, 1);
    assert_ne!(s.next_u64(), m.next_u64());
    assert_eq!(
        stream_rng(7, 1, 0).next_u64(),
        stream_rng(7, 1, 0).next_u64()
    );
}

#[test]
fn vector_override_applies_to_that_vector_only() {
    let mut model = CompletionModel {
        msix: "10us".parse().unwrap(),
        ..CompletionModel::default()
    };
    let ov = VectorOverride {
        msix: Some("1ms".parse().unwrap()),
        ..VectorOverride::default()
    };
    model.overrides.insert(3, ov);
    model.validate_for_queues(8).unwrap();
    let submits = every(50, 5 * MS);
    for (vector, expect) in [(2u16, 10 * US), (3, MS)] {
        let (sched, stats) = simulate(&model, vector, &submits);
        assert_eq!(sched.signals.len(), 50);
        for (&(_, published), &(signal, n)) in sched.published.iter().zip(&sched.signals) {
            assert_eq!((signal - published, n), (expect, 1), "vector {vector}");
        }
        assert_eq!(stats.irq_delay().max(), Some(expect));
        assert_eq!(stats.irq_timing(), (0, 50, 0));
    }
}

#[test]
fn coalescing_fires_at_max_batch() {
    let model = CompletionModel {
        coalesce: Some(Coalesce {
            max_batch: 4,
            max_delay_ns: MS,
        }),
        ..CompletionModel::default()
    };
    // 10 completions 1 us apart: batches fill at 3 us and 7 us; the last two wait for max_delay.
    let (sched, stats) = simulate(&model, 0, &every(10, US));
    assert_eq!(
        sched.signals,
        vec![(3 * US, 4), (7 * US, 4), (8 * US + MS, 2)]
    );
    assert_eq!(stats.completions_per_irq().max(), Some(4));
    assert_eq!(stats.interrupts(), 3);
}

#[test]
fn coalescing_fires_at_max_delay_when_batch_not_full() {
    let model = CompletionModel {
        coalesce: Some("100/50us".parse().unwrap()),
        ..CompletionModel::default()
    };
    let submits = vec![(0, 0), (10 * US, 0), (20 * US, 0), (200 * US, 0)];
    let (sched, _) = simulate(&model, 0, &submits);
    assert_eq!(sched.signals, vec![(50 * US, 3), (250 * US, 1)]);
}

#[test]
fn coalescing_never_fires_before_msix_latency() {
    // max(t0 + L, trigger): a full batch still waits for the MSI-X latency of its oldest.
    let model = CompletionModel {
        msix: "30us".parse().unwrap(),
        coalesce: Some("2/1ms".parse().unwrap()),
        ..CompletionModel::default()
    };
    let (sched, _) = simulate(&model, 0, &every(4, US));
    assert_eq!(sched.signals, vec![(30 * US, 4)]);
}

#[test]
fn aligned_tick_puts_every_signal_on_a_multiple() {
    let model = CompletionModel {
        service: "uniform:0..50us".parse().unwrap(),
        msix: "uniform:0..300us".parse().unwrap(),
        aligned_tick_ns: Some(100 * US),
        seed: 3,
        ..CompletionModel::default()
    };
    let submits: Vec<(u64, u64)> = (0..400).map(|i| (i * 7_919 + 13, 0)).collect();
    for vector in 0..4 {
        let (sched, stats) = simulate(&model, vector, &submits);
        assert!(!sched.signals.is_empty());
        for (t, _) in &sched.signals {
            assert_eq!(t % (100 * US), 0, "vector {vector} signalled at {t}");
        }
        // Rounding up never adds more than a tick to the drawn latency.
        assert!(stats.irq_delay().max().unwrap() < 400 * US);
    }
}

#[test]
fn passthrough_publishes_and_signals_at_once() {
    let model = CompletionModel::default();
    let mut engine = VectorEngine::new(&model, 0);
    assert!(engine.is_passthrough());
    let mut stats = Recorder::default();
    for t in [5u64, 5, 17] {
        stats.on_request();
        engine.submit(t, t, 0);
        let mut got = Vec::new();
        let p = engine.poll(t, &mut stats, |x| got.push(x));
        assert_eq!((got, p.signal, p.next_deadline_ns), (vec![t], true, None));
    }
    assert_eq!((stats.interrupts(), stats.in_flight()), (3, 0));
    let not = CompletionModel {
        msix: "1ns".parse().unwrap(),
        ..CompletionModel::default()
    };
    assert!(!VectorEngine::<u32>::new(&not, 0).is_passthrough());
}

#[test]
fn publishes_in_deadline_order_fifo_among_equal() {
    let model = CompletionModel::default();
    let mut engine = VectorEngine::new(&model, 0);
    let mut stats = Recorder::default();
    engine.submit(0, 'a', 100);
    engine.submit(0, 'b', 50);
    engine.submit(0, 'c', 100);
    engine.submit(10, 'd', 40);
    engine.submit(10, 'e', 0);
    let mut got = Vec::new();
    let p = engine.poll(60, &mut stats, |x| got.push(x));
    assert_eq!(got, vec!['e', 'b', 'd']);
    assert_eq!((p.signal, p.next_deadline_ns), (true, Some(100)));
    let p = engine.poll(99, &mut stats, |x| got.push(x));
    assert_eq!((p.published, p.next_deadline_ns), (0, Some(100)));
    engine.poll(100, &mut stats, |x| got.push(x));
    assert_eq!(got, vec!['e', 'b', 'd', 'a', 'c']);
}

#[test]
fn extra_delay_adds_to_service_time() {
    let model = CompletionModel {
        service: "20us".parse().unwrap(),
        ..CompletionModel::default()
    };
    let (sched, stats) = simulate(&model, 0, &[(0, 5 * US), (US, 0)]);
    assert_eq!(sched.published, vec![(1, 21 * US), (0, 25 * US)]);
    assert_eq!(stats.service().max(), Some(25 * US));
}

#[test]
fn balanced_coalesces_only_while_busy() {
    let model = CompletionModel {
        preset: Some(PerfMode::Balanced),
        coalesce: Some("8/100us".parse().unwrap()),
        balanced_threshold_iops: 10_000,
        rate_window_ns: MS,
        ..CompletionModel::default()
    };
    // 2 ms at 1,000 IOPS, then 3 ms at 200,000 IOPS, then 2 ms at 1,000 IOPS again.
    let mut submits: Vec<(u64, u64)> = (0..2).map(|i| (i * MS, 0)).collect();
    submits.extend((0..600).map(|i| (2 * MS + i * 5 * US, 0)));
    submits.extend((0..3).map(|i| (6 * MS + i * MS, 0)));
    let (sched, _) = simulate(&model, 0, &submits);
    let batched = |from: u64, to: u64| {
        sched
            .signals
            .iter()
            .filter(|s| (from..to).contains(&s.0))
            .map(|s| s.1)
            .max()
            .unwrap_or(0)
    };
    let signal_times = |from: u64, to: u64| -> Vec<u64> {
        let times = sched.signals.iter().map(|s| s.0);
        times.filter(|t| (from..to).contains(t)).collect()
    };
    // Idle: every completion signalled the moment it was published.
    assert_eq!(signal_times(0, 2 * MS), vec![0, MS]);
    assert_eq!(
        batched(2 * MS, 3 * MS),
        1,
        "first busy window not yet measured"
    );
    assert_eq!(
        batched(3 * MS + 10 * US, 5 * MS),
        8,
        "busy queue coalesces by 8"
    );
    // The window ending at 6 ms was busy (its batch waits max_delay); the next ones are idle.
    assert_eq!(
        signal_times(6 * MS, 9 * MS),
        vec![6 * MS + 100 * US, 7 * MS, 8 * MS]
    );
}

#[test]
fn presets_expand_as_documented() {
    let mut model = CompletionModel {
        coalesce: Some("4/10us".parse().unwrap()),
        preset: Some(PerfMode::Latency),
        ..CompletionModel::default()
    };
    model.overrides.insert(
        2,
        VectorOverride {
            coalesce: Some("2/5us".parse().unwrap()),
            ..VectorOverride::default()
        },
    );
    assert_eq!(model.settings_for(0).coalesce, None);
    assert_eq!(model.settings_for(2).coalesce.unwrap().max_batch, 2);
    model.preset = Some(PerfMode::Iops);
    assert_eq!(model.settings_for(0).coalesce.unwrap().max_batch, 4);
    model.coalesce = None;
    assert_eq!(model.settings_for(0).coalesce, Some(PRESET_COALESCE));
    model.preset = Some(PerfMode::Balanced);
    assert!(model.settings_for(0).rate_gated);
    assert!(!model.settings_for(2).rate_gated);
    model.overrides.get_mut(&2).unwrap().coalesce = Some("off".parse().unwrap());
    assert_eq!(model.settings_for(2).coalesce, None);
}

#[test]
fn flush_signals_early_and_discard_drops() {
    let model = CompletionModel {
        msix: "1ms".parse().unwrap(),
        service: "10us".parse().unwrap(),
        ..CompletionModel::default()
    };
    let mut engine = VectorEngine::new(&model, 0);
    let mut stats = Recorder::default();
    for i in 0..3 {
        stats.on_request();
        engine.submit(0, i, 0);
    }
    let p = engine.poll(10 * US, &mut stats, |_| {});
    assert_eq!(
        (p.published, p.signal, p.next_deadline_ns),
        (3, false, Some(1010 * US))
    );
    stats.on_request();
    engine.submit(20 * US, 9, 0);
    let mut got = Vec::new();
    let p = engine.flush(20 * US, &mut stats, |x| got.push(x));
    assert_eq!((got, p.signal), (vec![9], true));
    assert_eq!(stats.irq_timing(), (1, 0, 0));
    assert_eq!(stats.irq_error().max(), Some(990 * US));
    stats.on_request();
    engine.submit(30 * US, 10, 0);
    let mut dropped = Vec::new();
    engine.discard(&mut stats, |x| dropped.push(x));
    assert_eq!(
        (dropped, engine.pending(), stats.in_flight()),
        (vec![10], 0, 0)
    );
}

#[test]
fn model_from_toml() {
    let text = r#"
        service = 0
        msix = "uniform:10us..100us"
        coalesce = { max_batch = 8, max_delay = "50us" }
        aligned_tick = "100us"
        preset = "balanced"
        seed = 42
        [overrides.3]
        msix = "1ms"
        coalesce = "off"
    "#;
    let model: CompletionModel = toml::from_str(text).unwrap();
    model.validate_for_queues(8).unwrap();
    assert_eq!(
        model.msix,
        Distribution::Uniform {
            lo: 10 * US,
            hi: 100 * US
        }
    );
    assert_eq!(
        model.coalesce,
        Some(Coalesce {
            max_batch: 8,
            max_delay_ns: 50 * US
        })
    );
    assert_eq!(model.aligned_tick_ns, Some(100 * US));
    assert_eq!(model.overrides[&3].coalesce, Some(Coalesce::OFF));
    assert_eq!(model.spin_ns, model::DEFAULT_SPIN_NS);
    assert_eq!(
        model.validate_for_queues(3),
        Err(ModelError::VectorOutOfRange {
            vector: 3,
            queues: 3
        })
    );
    let line = model.to_string();
    assert!(
        line.contains("msix=uniform:10us..100us") && line.contains("v3[msix=1ms;coalesce=off]"),
        "{line}"
    );

    for bad in [
        "msix = \"50\"",
        "unknown = 1",
        "aligned_tick = 0",
        "coalesce = \"8/0\"",
        "[overrides.x]\nmsix = \"1ms\"",
        "spin = \"2s\"",
    ] {
        let parsed = toml::from_str::<CompletionModel>(bad);
        assert!(
            parsed.is_err() || parsed.unwrap().validate().is_err(),
            "accepted {bad}"
        );
    }
}

#[test]
fn perf_modes_parse_and_reject() {
    assert_eq!("iops".parse::<PerfMode>(), Ok(PerfMode::Iops));
    assert!("fast".parse::<PerfMode>().is_err());
}

/// The worker loop of the module docs on the real clock: timerfd + spin + poll. Bounds are
/// generous (noisy shared host); what must hold exactly is "never early".
#[test]
fn real_clock_worker_loop_is_never_early() {
    let model = CompletionModel {
        msix: "300us".parse().unwrap(),
        ..CompletionModel::default()
    };
    model.validate().unwrap();
    let mut engine = VectorEngine::new(&model, 0);
    let mut stats = Recorder::default();
    let mut timer = DeadlineTimer::new(model.spin_ns).unwrap();
    let mut signals = 0;
    for i in 0..20u32 {
        stats.on_request();
        engine.submit(now_ns(), i, 0);
        let mut poll = engine.poll(now_ns(), &mut stats, |_| {});
        while let Some(deadline) = poll.next_deadline_ns {
            timer.arm(deadline).unwrap();
            let mut pfd = libc::pollfd {
                fd: std::os::fd::AsRawFd::as_raw_fd(&timer),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd for the duration of the call.
            let ready = unsafe { libc::poll(&mut pfd, 1, 1_000) };
            assert_eq!(ready, 1, "timer never fired");
            timer.drain().unwrap();
            let now = timer.spin_until(deadline);
            poll = engine.poll(now, &mut stats, |_| {});
            signals += usize::from(poll.signal);
        }
    }
    assert_eq!(signals, 20);
    assert_eq!(stats.irq_timing().0, 0, "signalled early");
    assert!(stats.irq_delay().min().unwrap() >= 300 * US);
    assert!(stats.irq_error().max().unwrap() < 250 * MS);
}
