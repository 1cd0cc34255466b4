//! The shape of the emulated machine in each cell of a suite: request queues, guest CPUs and
//! how many of them run, and the `[grid]` that spans many cells.
//!
//! Rules:
//! 1. A cell is the suite with one variant's overrides applied ([`Suite::for_variant`]):
//!    `num_queues` and `running_cpus` replace the suite's; nothing else is overridden here.
//! 2. With `running_cpus = k` the guest has one possible CPU per request queue (`smp` =
//!    `num_queues`, which the suite may then not give) and Linux brings up `k` of them
//!    (`maxcpus=k`, added by the launcher): blk-mq gets one hctx per queue, CPU i maps to
//!    hctx i, and the hctx of the offline CPUs stay idle, as on a many-queue SAS HBA driven
//!    from a few CPUs. `guest.expect_hctx` defaults to `num_queues`.
//! 3. The queue count is declared once, here: the launcher passes it to the backend
//!    (`--num-queues`) and to QEMU; `backend_args` may not repeat it.
//! 4. `[grid]` expands, at load time, into one variant per (`num_queues`, `running_cpus`)
//!    pair, named `q<queues>-c<cpus>`, on the sweep axis `hw_queues` (its value is the queue
//!    count); a suite has either a grid or hand-written variants.
//! 5. Limits: vhost-user carries a vring's index in one byte, so vhost-blk serves at most 256
//!    vrings: 254 SCSI request queues (control and event queues take two) or 256 blk queues
//!    (past vring 63 on its own worker threads: vhost-user-backend 0.24 keeps each worker's
//!    queues in a u64 mask; docs/design/128-queues.md); qemu-storage-daemon is held to the 64
//!    vrings it was measured with; QEMU's built-in virtio-scsi takes up to 1022; QEMU's `pc`
//!    machine has at most 255 CPUs.
//! 6. `[sweep]` writes a one-axis sweep once: each of its `values` becomes a variant named by
//!    its `name` template and given its `backend_args`, `{value}` filled in (a whole number
//!    without a fraction: `20`, not `20.0`); the variant's value is the value. A suite has at
//!    most one of `[grid]`, `[sweep]` and hand-written variants.
//! 7. `online_cpus` (the agent brings them online after boot) needs `running_cpus`; each is a
//!    possible CPU (below `smp`) that is not already running (at or above `running_cpus`),
//!    given once. The host's vCPU placement (launch::placement) plans the `running_cpus`; these
//!    vCPUs run where the guest's other threads do.

use serde::{Deserialize, Serialize};

use super::{BackendKind, Cell, Device, Suite, SuiteError, SuiteSpec};

/// `[grid]`: every `num_queues` with every `running_cpus` (rule 4).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Grid {
    pub num_queues: Vec<u32>,
    pub running_cpus: Vec<u32>,
}

/// The sweep axis of a grid (rule 4).
pub const GRID_AXIS: &str = "hw_queues";

/// QEMU's `pc` machine limit on CPUs (rule 5).
const MAX_SMP: u32 = 255;

/// The name of a grid cell.
pub fn cell_name(queues: u32, cpus: u32) -> String {
    format!("q{queues}-c{cpus}")
}

/// Expands `spec.grid` into variants (rule 4).
pub fn expand_grid(spec: &mut SuiteSpec) -> Result<(), String> {
    let Some(g) = &spec.grid else {
        return Ok(());
    };
    if !spec.variants.is_empty() || spec.sweep_param.is_some() {
        return Err("[grid] makes the variants and the sweep axis: give neither beside it".into());
    }
    if g.num_queues.is_empty() || g.running_cpus.is_empty() {
        return Err("[grid]: num_queues and running_cpus need at least one value each".into());
    }
    let mut variants = Vec::new();
    for &q in &g.num_queues {
        for &c in &g.running_cpus {
            variants.push(Cell {
                name: cell_name(q, c),
                backend_args: Vec::new(),
                builtin_latency_ns: None,
                value: Some(f64::from(q)),
                num_queues: Some(q),
                running_cpus: Some(c),
            });
        }
    }
    spec.variants = variants;
    spec.sweep_param = Some(GRID_AXIS.into());
    Ok(())
}

/// `[sweep]`: one axis, its values written once (rule 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// Name and unit of the axis, e.g. `msix_latency_us`.
    pub param: String,
    pub values: Vec<f64>,
    /// The variants' name, e.g. `msix-{value}us`.
    pub name: String,
    /// Each variant's backend arguments, e.g. `["--msix-latency", "{value}us"]`.
    #[serde(default)]
    pub backend_args: Vec<String>,
}

/// A sweep value as its variant's name and arguments write it (rule 6).
fn value_text(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

/// Expands `spec.sweep` into variants (rule 6).
pub fn expand_sweep(spec: &mut SuiteSpec) -> Result<(), String> {
    let Some(sw) = &spec.sweep else {
        return Ok(());
    };
    if !spec.variants.is_empty() || spec.sweep_param.is_some() || spec.grid.is_some() {
        return Err(
            "[sweep] makes the variants and the sweep axis: give no [grid], \
                    variants or sweep_param beside it"
                .into(),
        );
    }
    if sw.values.is_empty() || !sw.name.contains("{value}") {
        return Err("[sweep]: give at least one value and a name with {value} in it".into());
    }
    if let Some(v) = sw.values.iter().find(|v| !v.is_finite()) {
        return Err(format!("[sweep]: value {v} is not a finite number"));
    }
    let fill = |t: &str, v: f64| t.replace("{value}", &value_text(v));
    spec.variants = sw
        .values
        .iter()
        .map(|&v| Cell {
            name: fill(&sw.name, v),
            backend_args: sw.backend_args.iter().map(|a| fill(a, v)).collect(),
            builtin_latency_ns: None,
            value: Some(v),
            num_queues: None,
            running_cpus: None,
        })
        .collect();
    spec.sweep_param = Some(sw.param.clone());
    Ok(())
}

impl SuiteSpec {
    /// Guest CPUs QEMU creates (rule 2).
    pub fn smp(&self) -> u32 {
        match (self.smp, self.running_cpus) {
            (Some(n), _) => n,
            (None, Some(_)) => self.num_queues,
            (None, None) => 8,
        }
    }

    /// The most request queues the suite's backend serves (rule 5).
    fn max_queues(&self) -> u32 {
        match (self.backend, self.device) {
            (BackendKind::QemuBuiltin, Device::Scsi) => 1022,
            (BackendKind::QemuBuiltin, Device::Blk) => 1024,
            (BackendKind::VhostBlk, Device::Scsi) => 254,
            (BackendKind::VhostBlk, Device::Blk) => 256,
            (BackendKind::QemuStorageDaemon, Device::Scsi) => 62,
            (BackendKind::QemuStorageDaemon, Device::Blk) => 64,
        }
    }

    /// This suite with `v`'s overrides (rule 1); `smp` and `expect_hctx` follow (rule 2).
    fn with_overrides(&self, v: &Cell) -> SuiteSpec {
        let mut s = self.clone();
        if let Some(q) = v.num_queues {
            s.num_queues = q;
        }
        if v.running_cpus.is_some() {
            s.running_cpus = v.running_cpus;
        }
        if s.running_cpus.is_some() && s.guest.expect_hctx.is_none() {
            s.guest.expect_hctx = Some(s.num_queues);
        }
        s
    }
}

impl Suite {
    /// The cell of variant `v` (rule 1); the suite itself for `None`.
    pub fn for_variant(&self, v: Option<&str>) -> Result<Suite, SuiteError> {
        let mut out = self.clone();
        let Some(name) = v else {
            if out.spec.running_cpus.is_some() && out.spec.guest.expect_hctx.is_none() {
                out.spec.guest.expect_hctx = Some(out.spec.num_queues);
            }
            return Ok(out);
        };
        let var = self.variant(name).ok_or_else(|| SuiteError::Invalid {
            suite: self.name.clone(),
            msg: format!("no variant '{name}'"),
        })?;
        out.spec = self.spec.with_overrides(var);
        Ok(out)
    }
}

/// Checks the machine shape of the suite and of every variant's cell (rules 2, 3, 5).
pub fn validate_shape(s: &SuiteSpec) -> Result<(), String> {
    if s.running_cpus.is_some() && s.smp.is_some() {
        return Err("smp follows num_queues when running_cpus is set: give one of them".into());
    }
    if s.backend_args.iter().any(|a| a == "--num-queues") {
        return Err("backend_args may not give --num-queues: num_queues is passed on".into());
    }
    if s.running_cpus.is_some() && s.cmdline.iter().any(|w| w.starts_with("maxcpus=")) {
        return Err("cmdline may not give maxcpus= beside running_cpus".into());
    }
    check_cell(s, "")?;
    for v in &s.variants {
        if v.backend_args.iter().any(|a| a == "--num-queues") {
            return Err(format!(
                "variant '{}': use num_queues, not --num-queues",
                v.name
            ));
        }
        check_cell(&s.with_overrides(v), &format!("variant '{}': ", v.name))?;
    }
    Ok(())
}

fn check_cell(s: &SuiteSpec, at: &str) -> Result<(), String> {
    let max = s.max_queues();
    if !(1..=max).contains(&s.num_queues) {
        return Err(format!(
            "{at}num_queues {} not in 1..={max} for {} {}",
            s.num_queues,
            s.backend.as_str(),
            s.device.as_str()
        ));
    }
    let smp = s.smp();
    if !(1..=MAX_SMP).contains(&smp) {
        return Err(format!("{at}smp {smp} not in 1..={MAX_SMP}"));
    }
    if let Some(k) = s.running_cpus {
        if !(1..=smp).contains(&k) {
            return Err(format!("{at}running_cpus {k} not in 1..={smp} (smp)"));
        }
    }
    check_online(s, at, smp)
}

/// Rule 7.
fn check_online(s: &SuiteSpec, at: &str, smp: u32) -> Result<(), String> {
    if s.online_cpus.is_empty() {
        return Ok(());
    }
    let Some(k) = s.running_cpus else {
        return Err(format!("{at}online_cpus needs running_cpus"));
    };
    let mut seen = std::collections::BTreeSet::new();
    for &c in &s.online_cpus {
        if !(k..smp).contains(&c) || !seen.insert(c) {
            return Err(format!(
                "{at}online_cpus: CPU {c} is not a possible CPU in {k}..{smp} given once"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(extra: &str) -> SuiteSpec {
        toml::from_str(&format!(
            "steps = [\"verify\"]\ndescription = \"t\"\ndevice = \"scsi\"\nbackend = \"vhost-blk\"\n{extra}"
        ))
        .unwrap()
    }

    fn suite(extra: &str) -> Suite {
        let mut s = spec(extra);
        expand_grid(&mut s).unwrap();
        validate_shape(&s).unwrap();
        Suite {
            name: "t".into(),
            dir: "/nonexistent".into(),
            spec: s,
            fio_files: vec![],
        }
    }

    #[test]
    fn smp_follows_the_queues_when_cpus_are_limited() {
        assert_eq!(spec("").smp(), 8);
        assert_eq!(spec("smp = 4").smp(), 4);
        let s = spec("num_queues = 62\nrunning_cpus = 2");
        assert_eq!(s.smp(), 62);
        let cell = suite("num_queues = 62\nrunning_cpus = 2")
            .for_variant(None)
            .unwrap();
        assert_eq!(cell.spec.guest.expect_hctx, Some(62));
        // An explicit expectation is kept.
        let cell = suite("num_queues = 16\nrunning_cpus = 2\n[guest]\nexpect_hctx = 8")
            .for_variant(None)
            .unwrap();
        assert_eq!(cell.spec.guest.expect_hctx, Some(8));
    }

    #[test]
    fn a_grid_expands_into_named_cells_with_their_own_shape() {
        let s = suite("[grid]\nnum_queues = [8, 62]\nrunning_cpus = [2, 4]");
        let names: Vec<_> = s.spec.variants.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["q8-c2", "q8-c4", "q62-c2", "q62-c4"]);
        assert_eq!(s.spec.sweep_param.as_deref(), Some(GRID_AXIS));
        let c = s.for_variant(Some("q62-c4")).unwrap();
        assert_eq!(
            (c.spec.num_queues, c.spec.running_cpus, c.spec.smp()),
            (62, Some(4), 62)
        );
        assert_eq!(c.spec.guest.expect_hctx, Some(62));
        assert_eq!(s.variant("q8-c2").and_then(|v| v.value), Some(8.0));
        assert!(s.for_variant(Some("q9-c2")).is_err());
    }

    #[test]
    fn shapes_beyond_the_stack_are_refused() {
        for (extra, needle) in [
            ("num_queues = 255", "1..=254"),
            ("num_queues = 0", "1..=254"),
            ("running_cpus = 2\nsmp = 8", "give one of them"),
            ("running_cpus = 9", "running_cpus 9 not in 1..=8"),
            ("backend_args = [\"--num-queues\", \"8\"]", "--num-queues"),
            ("running_cpus = 2\ncmdline = [\"maxcpus=4\"]", "maxcpus"),
            ("online_cpus = [5]", "needs running_cpus"),
            (
                "num_queues = 8\nrunning_cpus = 2\nonline_cpus = [8]",
                "CPU 8",
            ),
            (
                "num_queues = 8\nrunning_cpus = 2\nonline_cpus = [1]",
                "CPU 1",
            ),
            (
                "num_queues = 8\nrunning_cpus = 2\nonline_cpus = [5, 5]",
                "CPU 5",
            ),
            ("smp = 256", "smp 256"),
            (
                "[grid]\nnum_queues = [8, 255]\nrunning_cpus = [2]",
                "q255-c2",
            ),
            (
                "[grid]\nnum_queues = []\nrunning_cpus = [2]",
                "at least one",
            ),
            (
                "sweep_param = \"x\"\n[grid]\nnum_queues = [8]\nrunning_cpus = [2]",
                "neither",
            ),
        ] {
            let mut s = spec(extra);
            let e = expand_grid(&mut s)
                .and_then(|()| validate_shape(&s))
                .unwrap_err();
            assert!(e.contains(needle), "{extra}: {e}");
        }
        // The built-in device and vhost-blk reach the series' 120 queues and the card's 128;
        // qemu-storage-daemon stays at 64 vrings.
        for backend in [BackendKind::QemuBuiltin, BackendKind::VhostBlk] {
            let mut s = spec("num_queues = 128\nrunning_cpus = 2");
            s.backend = backend;
            assert!(validate_shape(&s).is_ok(), "{backend:?}");
            assert_eq!(s.smp(), 128);
        }
        let s = spec("num_queues = 128\nrunning_cpus = 2\nonline_cpus = [64, 127]");
        assert!(validate_shape(&s).is_ok());
        let mut s = spec("num_queues = 65");
        s.device = Device::Blk;
        s.backend = BackendKind::QemuStorageDaemon;
        assert!(validate_shape(&s).unwrap_err().contains("1..=64"));
    }

    #[test]
    fn a_sweep_writes_each_value_once() {
        let mut s = spec(
            "[sweep]\nparam = \"msix_latency_us\"\nvalues = [0, 20, 2.5]\n\
             name = \"msix-{value}us\"\nbackend_args = [\"--msix-latency\", \"{value}us\"]\n",
        );
        expand_sweep(&mut s).unwrap();
        assert_eq!(s.sweep_param.as_deref(), Some("msix_latency_us"));
        let got: Vec<_> = s
            .variants
            .iter()
            .map(|v| (v.name.as_str(), v.value, v.backend_args.join(" ")))
            .collect();
        assert_eq!(
            got,
            [
                ("msix-0us", Some(0.0), "--msix-latency 0us".to_string()),
                ("msix-20us", Some(20.0), "--msix-latency 20us".to_string()),
                ("msix-2.5us", Some(2.5), "--msix-latency 2.5us".to_string()),
            ]
        );
        for (extra, why) in [
            ("sweep_param = \"x\"\n", "beside"),
            ("[[variants]]\nname = \"v\"\n", "beside"),
        ] {
            let mut s = spec(&format!(
                "{extra}[sweep]\nparam = \"p\"\nvalues = [1]\nname = \"n-{{value}}\"\n"
            ));
            assert!(expand_sweep(&mut s).unwrap_err().contains(why), "{extra}");
        }
        let mut s = spec("[sweep]\nparam = \"p\"\nvalues = [1]\nname = \"fixed\"\n");
        assert!(expand_sweep(&mut s).unwrap_err().contains("{value}"));
        let mut s = spec("[sweep]\nparam = \"p\"\nvalues = []\nname = \"n-{value}\"\n");
        assert!(expand_sweep(&mut s).is_err());
    }
}
