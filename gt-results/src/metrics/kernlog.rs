//! The kernel's own error reports in a boot's log: what a kernel CI (KernelCI's baseline, LKP's
//! `dmesg.*` stats) reads before any figure.
//!
//! Contract:
//! 1. [`scan`] reads kernel log text (the agent's `dmesg` artefact, the serial console) and
//!    returns one [`LogFinding`] per report line, in order: warnings (`WARNING:`), BUG/Oops,
//!    panics, hung tasks, soft and hard lockups, RCU stalls, "sleeping function called from
//!    invalid context", lockdep reports, KASAN/UBSAN-style reports. Continuation lines (call
//!    traces, register dumps) are not findings.
//! 2. Each finding has a [`LogClass`] and a `signature`: the line without what changes from boot
//!    to boot (timestamps, CPU and PID numbers, addresses, offsets), so the same report on two
//!    boots, or on two kernels, has the same signature. A finding's `line` is the line as
//!    logged (timestamp stripped, at most 300 characters).
//! 3. `Oops: int3` under TCG is [`LogClass::EmulatorInt3`]: a vCPU ran a breakpoint the kernel's
//!    live text patching had removed (the emulated machine's fault, docs/verdict.md); it is
//!    reported, and the judgement does not count it against a kernel.
//! 4. Never panics on any input; a finding appears once per (class, signature) per text, with
//!    its count.

use serde::{Deserialize, Serialize};

/// What kind of report a kernel log line is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogClass {
    Panic,
    Oops,
    Bug,
    Warning,
    HungTask,
    SoftLockup,
    HardLockup,
    RcuStall,
    SleepInAtomic,
    Lockdep,
    Sanitizer,
    EmulatorInt3,
}

impl LogClass {
    pub fn as_str(self) -> &'static str {
        match self {
            LogClass::Panic => "kernel panic",
            LogClass::Oops => "Oops",
            LogClass::Bug => "BUG",
            LogClass::Warning => "WARNING",
            LogClass::HungTask => "hung task",
            LogClass::SoftLockup => "soft lockup",
            LogClass::HardLockup => "hard lockup",
            LogClass::RcuStall => "RCU stall",
            LogClass::SleepInAtomic => "sleeping function called from invalid context",
            LogClass::Lockdep => "lockdep report",
            LogClass::Sanitizer => "sanitizer report",
            LogClass::EmulatorInt3 => "Oops: int3 (TCG's stale breakpoint, not the kernel's)",
        }
    }

    /// Whether the judgement counts it against the kernel (rule 3).
    pub fn counts(self) -> bool {
        self != LogClass::EmulatorInt3
    }
}

/// One report found in a kernel log (rules 1-2, 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogFinding {
    pub class: LogClass,
    pub signature: String,
    pub line: String,
    /// How many lines of this text had this class and signature.
    pub count: u32,
}

/// The classes in the order they are tried; the first match wins (a soft lockup's line starts
/// with `watchdog: BUG:`, so it is tried before BUG).
const PATTERNS: &[(&str, LogClass)] = &[
    ("Oops: int3", LogClass::EmulatorInt3),
    ("Kernel panic - not syncing", LogClass::Panic),
    ("BUG: soft lockup", LogClass::SoftLockup),
    ("Watchdog detected hard LOCKUP", LogClass::HardLockup),
    ("blocked for more than", LogClass::HungTask),
    ("rcu_preempt detected stalls", LogClass::RcuStall),
    ("rcu_sched detected stalls", LogClass::RcuStall),
    ("rcu: INFO: rcu_", LogClass::RcuStall),
    ("self-detected stall on CPU", LogClass::RcuStall),
    (
        "BUG: sleeping function called from invalid context",
        LogClass::SleepInAtomic,
    ),
    ("BUG: scheduling while atomic", LogClass::SleepInAtomic),
    ("BUG: KASAN", LogClass::Sanitizer),
    ("UBSAN:", LogClass::Sanitizer),
    ("BUG: KFENCE", LogClass::Sanitizer),
    ("possible circular locking dependency", LogClass::Lockdep),
    ("possible recursive locking detected", LogClass::Lockdep),
    ("inconsistent lock state", LogClass::Lockdep),
    ("suspicious RCU usage", LogClass::Lockdep),
    ("possible irq lock inversion", LogClass::Lockdep),
    ("bad unlock balance detected", LogClass::Lockdep),
    ("held lock freed", LogClass::Lockdep),
    ("lock held when returning to user space", LogClass::Lockdep),
    ("Oops:", LogClass::Oops),
    ("general protection fault", LogClass::Oops),
    ("kernel BUG at", LogClass::Bug),
    ("BUG:", LogClass::Bug),
    ("WARNING:", LogClass::Warning),
];

/// `[   12.345678] text` -> `text` (a printk timestamp, if any).
fn strip_time(line: &str) -> &str {
    let t = line.trim_start();
    match (t.strip_prefix('['), t.find(']')) {
        (Some(_), Some(end)) if t[1..end].trim().parse::<f64>().is_ok() => t[end + 1..].trim(),
        _ => t.trim(),
    }
}

/// `s` cut to at most `max` bytes, at a character boundary.
fn cut(mut s: String, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s
}

/// Rule 2: digits runs, hex offsets and `comm:pid` numbers reduced to `N`.
fn signature(class: LogClass, text: &str) -> String {
    // A warning's place is what identifies it: `WARNING: CPU: 1 PID: 7 at FILE:LINE FUNC+0x..`.
    let text = match (class, text.find(" at ")) {
        (LogClass::Warning, Some(i)) => &text[i + 4..],
        _ => text,
    };
    let mut out = String::with_capacity(text.len());
    let mut in_num = false;
    for word in text.split_inclusive(|c: char| c.is_whitespace()) {
        // `func+0x1c/0x40` -> `func`: offsets move with the build, the function does not.
        let word = word.split("+0x").next().unwrap_or(word);
        for c in word.chars() {
            if c.is_ascii_digit() {
                if !in_num {
                    out.push('N');
                }
                in_num = true;
            } else {
                in_num = false;
                out.push(c);
            }
        }
        if !out.ends_with(' ') {
            out.push(' ');
        }
    }
    let s = cut(out.split_whitespace().collect::<Vec<_>>().join(" "), 200);
    format!("{}: {s}", class.as_str())
}

/// Rules 1-4.
pub fn scan(text: &str) -> Vec<LogFinding> {
    let mut out: Vec<LogFinding> = Vec::new();
    for raw in text.lines() {
        let line = strip_time(raw);
        let Some(class) = PATTERNS
            .iter()
            .find(|(p, _)| line.contains(p))
            .map(|(_, c)| *c)
        else {
            continue;
        };
        let sig = signature(class, line);
        if let Some(f) = out
            .iter_mut()
            .find(|f| f.class == class && f.signature == sig)
        {
            f.count = f.count.saturating_add(1);
            continue;
        }
        out.push(LogFinding {
            class,
            signature: sig,
            line: cut(line.to_string(), 300),
            count: 1,
        });
    }
    out
}

/// The findings of several texts of one boot (the agent's dmesg and the console see the same
/// lines): per (class, signature), the larger count of the two, the first text's line.
pub fn merge(texts: &[&str]) -> Vec<LogFinding> {
    let mut out: Vec<LogFinding> = Vec::new();
    for t in texts {
        for f in scan(t) {
            match out
                .iter_mut()
                .find(|o| o.class == f.class && o.signature == f.signature)
            {
                Some(o) => o.count = o.count.max(f.count),
                None => out.push(f),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WARN: &str = "[   41.123456] WARNING: CPU: 1 PID: 97 at block/blk-mq.c:2341 \
                        blk_mq_run_hw_queue+0x1c4/0x230";

    #[test]
    fn a_warning_is_found_and_its_signature_ignores_cpu_pid_and_offsets() {
        let f = scan(&format!("noise\n{WARN}\nModules linked in:\n"));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].class, LogClass::Warning);
        assert!(f[0].line.starts_with("WARNING: CPU: 1"), "{}", f[0].line);
        let other = scan(
            "[ 9.1] WARNING: CPU: 0 PID: 12 at block/blk-mq.c:2341 blk_mq_run_hw_queue+0x11/0x230",
        );
        assert_eq!(other[0].signature, f[0].signature);
        assert_eq!(
            f[0].signature,
            "WARNING: block/blk-mq.c:N blk_mq_run_hw_queue"
        );
    }

    #[test]
    fn each_class_is_recognised() {
        let cases = [
            ("Kernel panic - not syncing: vb: test", LogClass::Panic),
            ("watchdog: BUG: soft lockup - CPU#1 stuck for 22s! [irq/25-virtio0:98]", LogClass::SoftLockup),
            ("INFO: task fio:123 blocked for more than 20 seconds.", LogClass::HungTask),
            ("rcu: INFO: rcu_preempt detected stalls on CPUs/tasks:", LogClass::RcuStall),
            ("BUG: sleeping function called from invalid context at kernel/locking/spinlock_rt.c:48", LogClass::SleepInAtomic),
            ("WARNING: possible circular locking dependency detected", LogClass::Lockdep),
            ("kernel BUG at block/blk-mq.c:100!", LogClass::Bug),
            ("BUG: unable to handle page fault for address: 0000000000000008", LogClass::Bug),
            ("Oops: general protection fault, probably for non-canonical address", LogClass::Oops),
            ("Oops: int3: 0000 [#1] PREEMPT_RT SMP NOPTI", LogClass::EmulatorInt3),
        ];
        for (line, want) in cases {
            let f = scan(line);
            assert_eq!(f.len(), 1, "{line}");
            assert_eq!(f[0].class, want, "{line}");
        }
        assert!(!LogClass::EmulatorInt3.counts());
        assert!(LogClass::Warning.counts());
    }

    #[test]
    fn ordinary_boot_lines_are_not_findings() {
        let text = "[    0.000000] Linux version 6.12.117 (gcc)\n[    0.5] virtio_scsi virtio0: 8/0/0 default/read/poll queues\n\
                    [    1.0] sd 0:0:0:0: [sda] Write cache: enabled\nvb-agent: step fio ok\n";
        assert!(scan(text).is_empty());
    }

    #[test]
    fn repeats_are_counted_once_and_merge_takes_the_larger_count() {
        let dmesg = format!("{WARN}\n{WARN}\n");
        let f = scan(&dmesg);
        assert_eq!((f.len(), f[0].count), (1, 2));
        let m = merge(&[&dmesg, WARN, "Kernel panic - not syncing: x"]);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].count, 2);
        assert_eq!(m[1].class, LogClass::Panic);
    }

    #[test]
    fn odd_input_never_panics() {
        for s in [
            "[",
            "[]",
            "[x] WARNING: at ",
            "WARNING: \u{00e9}\u{00e9} at \u{1f600}",
            "\0\0BUG:",
            "] [ 1.0",
        ] {
            let _ = scan(s);
        }
        let long = format!("BUG: {}", "\u{00e9}".repeat(400));
        let f = scan(&long);
        assert!(f[0].line.len() <= 300 && f[0].signature.len() <= 220);
    }
}
