//! The cost of scale (issue 46, `experiments/scale-cost.sh`): for each cell of suite
//! `scale-cost` (vhost-blk virtio-scsi on null storage, 8, 62 and 128 request queues, one
//! possible guest CPU per queue of which 2 run), `repeat` boots against a backend started for
//! that boot.
//!
//! 1. Per boot: the wall time from QEMU's start to the agent's disk report (kernel boot, driver
//!    probe, the queue set-up, SCSI scan); the backend's resident memory, threads and open
//!    descriptors before QEMU connects and once the guest has reported its disk; QEMU's
//!    resident memory and threads then.
//! 2. It checks only that the guest came up and the backend served the connection with one
//!    thread per vring (vhost-user-backend's and vhost-blk's own together): it measures, and the
//!    numbers are judged in docs/results/scale-cost/.
//! 3. [`table`] gives the medians per cell, in the committed table's text.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::EARLY_CRASH_RETRIES;
use super::{
    fresh_dir, guest_argv, load_suite, until_disk_report, DiskReport, DrillError, ProcUse, Rig,
};
use gt_images::KernelImage;
use gt_launch::backend;
use gt_launch::process::Guarded;
use gt_suite::Suite;

/// The suite whose cells the drill boots.
pub const SUITE: &str = "scale-cost";

/// What one boot cost (rule 1).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cost {
    pub queues: u32,
    pub boot_to_disk_s: f64,
    pub backend_idle: ProcUse,
    pub backend_connected: ProcUse,
    pub qemu: ProcUse,
}

/// One boot's line (`COST-RESULT {json}`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CostLine {
    pub kernel: String,
    pub cell: String,
    pub cost: Cost,
}

/// The prefix of [`CostLine`]'s line.
pub const COST_PREFIX: &str = "COST-RESULT ";

/// What the cost drill found: a line per boot, and the checks that failed.
#[derive(Debug, Clone)]
pub struct CostOutcome {
    pub lines: Vec<CostLine>,
    pub failures: Vec<String>,
}

/// How one boot ended.
enum Booted {
    Cost(Cost),
    EarlyOops,
}

/// One boot of `cell` into `dir`.
fn one_boot(rig: &Rig, cell: &Suite, kernel: &KernelImage, dir: &Path) -> Result<Booted, String> {
    fresh_dir(dir).map_err(|e| e.to_string())?;
    let socket = dir.join("vhost.sock");
    let argv = guest_argv(rig, cell, kernel, &socket, dir, "cost").map_err(|e| e.to_string())?;
    let bin = rig.backend().map_err(|e| e.to_string())?;
    let bargv = backend::argv(cell, None, Some(&bin), &socket, dir, 1)
        .map_err(|e| e.to_string())?
        .ok_or("not a vhost-blk suite")?;
    let mut b = backend::start(
        &bargv,
        &socket,
        &dir.join("backend.log"),
        Duration::from_secs(10),
    )
    .map_err(|e| e.to_string())?;
    let bpid = b.pid().unwrap_or(0);
    let backend_idle = ProcUse::settled(bpid);
    let mut q = Guarded::spawn("qemu", &argv, &dir.join("qemu.log"))
        .map_err(|e| format!("QEMU did not start: {e}"))?;
    let limit = Duration::from_secs(cell.spec.timeout_secs);
    let waited = until_disk_report(&mut q, dir, limit);
    let booted = match waited {
        DiskReport::Ready(t) => Booted::Cost(Cost {
            queues: cell.spec.num_queues,
            boot_to_disk_s: t.as_secs_f64(),
            backend_idle,
            backend_connected: ProcUse::settled(bpid),
            qemu: ProcUse::read(q.pid().unwrap_or(0)),
        }),
        DiskReport::EarlyOops => Booted::EarlyOops,
        DiskReport::Failed(why) => {
            q.stop(Duration::from_secs(5));
            b.stop(Duration::from_secs(5));
            return Err(why);
        }
    };
    q.stop(Duration::from_secs(5));
    b.stop(Duration::from_secs(5));
    Ok(booted)
}

/// `repeat` rounds over the cells of [`SUITE`] into `base/<cell>-r<round>` (module docs);
/// `on_line` sees each boot's line as it is made.
pub fn run(
    rig: &Rig,
    repeat: usize,
    base: &Path,
    on_line: &mut dyn FnMut(&CostLine),
) -> Result<CostOutcome, DrillError> {
    let s = load_suite(SUITE)?;
    let kernel = rig.kernel_image()?;
    rig.backend()?;
    let mut out = CostOutcome {
        lines: Vec::new(),
        failures: Vec::new(),
    };
    for r in 0..repeat {
        for v in &s.spec.variants {
            let cell = s
                .for_variant(Some(&v.name))
                .map_err(|e| DrillError::Suite(SUITE.into(), e.to_string()))?;
            let dir: PathBuf = base.join(format!("{}-r{r}", v.name));
            let mut oopses = 0;
            let cost = loop {
                match one_boot(rig, &cell, &kernel, &dir) {
                    Ok(Booted::Cost(c)) => break Some(c),
                    Ok(Booted::EarlyOops) if oopses < EARLY_CRASH_RETRIES => oopses += 1,
                    Ok(Booted::EarlyOops) => {
                        out.failures
                            .push(format!("{}: int3 Oops {} times", v.name, oopses + 1));
                        break None;
                    }
                    Err(e) => {
                        out.failures.push(format!("{}: {e}", v.name));
                        break None;
                    }
                }
            };
            let Some(cost) = cost else { continue };
            // Rule 2: one worker thread per vring while connected, beside the idle threads.
            let vrings = cost.queues as usize + 2;
            if cost.backend_connected.threads < cost.backend_idle.threads + vrings {
                out.failures
                    .push(format!("{}: fewer threads than vrings: {cost:?}", v.name));
            }
            let line = CostLine {
                kernel: rig.kernel.clone(),
                cell: v.name.clone(),
                cost,
            };
            on_line(&line);
            out.lines.push(line);
        }
    }
    Ok(out)
}

/// The table of medians per cell of `lines` (rule 3), for `repeat` boots per cell, as
/// docs/results/scale-cost/scale-cost.md holds it.
pub fn table(kernel: &str, repeat: usize, queues: &[u32], lines: &[CostLine]) -> String {
    let mib = |k: u64| k as f64 / 1024.0;
    let mut t = format!(
        "scale-cost: {kernel}, {repeat} boot(s) per cell, medians\n\
         | request queues | boot to disk report (s) | backend RSS idle / connected (MiB) | \
         backend threads idle / connected | backend fds connected | QEMU RSS (MiB) | QEMU threads |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for &q in queues {
        let c: Vec<&Cost> = lines
            .iter()
            .map(|l| &l.cost)
            .filter(|c| c.queues == q)
            .collect();
        let m = |f: &dyn Fn(&Cost) -> f64| {
            let mut v: Vec<f64> = c.iter().map(|c| f(c)).collect();
            v.sort_by(f64::total_cmp);
            if v.is_empty() {
                f64::NAN
            } else {
                gt_results::metrics::median_sorted(&v)
            }
        };
        t += &format!(
            "| {q} | {:.1} | {:.1} / {:.1} | {:.0} / {:.0} | {:.0} | {:.0} | {:.0} |\n",
            m(&|c| c.boot_to_disk_s),
            m(&|c| mib(c.backend_idle.rss_kib)),
            m(&|c| mib(c.backend_connected.rss_kib)),
            m(&|c| c.backend_idle.threads as f64),
            m(&|c| c.backend_connected.threads as f64),
            m(&|c| c.backend_connected.fds as f64),
            m(&|c| mib(c.qemu.rss_kib)),
            m(&|c| c.qemu.threads as f64),
        );
    }
    t
}

/// The [`CostLine`]s of a drill's output (`COST-RESULT {json}` lines; other lines are not
/// read); Err names the first such line that does not parse.
pub fn read_lines(text: &str) -> Result<Vec<CostLine>, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(COST_PREFIX))
        .map(|json| serde_json::from_str(json).map_err(|e| format!("{e}: {json}")))
        .collect()
}

/// The request-queue count of each cell of [`SUITE`], in its order.
pub fn cell_queues(s: &Suite) -> Vec<u32> {
    s.spec
        .variants
        .iter()
        .map(|v| v.num_queues.unwrap_or(s.spec.num_queues))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"COST-RESULT {"cell":"q8-c2","cost":{"backend_connected":{"fds":95,"rss_kib":12408,"threads":13},"backend_idle":{"fds":7,"rss_kib":4088,"threads":2},"boot_to_disk_s":1.5,"qemu":{"fds":120,"rss_kib":158804,"threads":10},"queues":8},"kernel":"rt128"}"#;

    #[test]
    fn lines_are_read_among_other_output_and_a_bad_one_is_named() {
        let text = format!("compiling...\n{LINE}\nscale-cost: rt128\n{LINE}\n");
        let lines = read_lines(&text).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].cost.backend_connected.threads, 13);
        let t = table("rt128", 2, &[8], &lines);
        assert!(
            t.contains("| 8 | 1.5 | 4.0 / 12.1 | 2 / 13 | 95 | 155 | 10 |"),
            "{t}"
        );
        let bad = read_lines("COST-RESULT {\"cell\":1}\n").unwrap_err();
        assert!(bad.contains("cell"), "{bad}");
    }
}
