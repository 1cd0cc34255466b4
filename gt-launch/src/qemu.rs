//! The QEMU command line: machine, shared memory, serial ports, results port, disk, kernel.

use std::path::{Path, PathBuf};

use super::qemus;
use gt_suite::{BackendKind, Bios, Device, Storage, Suite};

/// `-bios` image used for [`Bios::Qboot`].
pub const QBOOT_ROM: &str = "/usr/share/qemu/qboot.rom";

/// Which accelerator runs the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Accel {
    Tcg,
    Kvm,
}

impl Accel {
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Tcg => "tcg",
            Accel::Kvm => "kvm",
        }
    }
}

/// Everything the QEMU argv depends on.
#[derive(Debug, Clone)]
pub struct QemuParams<'a> {
    pub qemu_bin: &'a Path,
    pub accel: Accel,
    pub bios: Bios,
    pub suite: &'a Suite,
    /// Service latency for the built-in null-co disks.
    pub builtin_latency_ns: u64,
    /// vhost-user socket (external backends only).
    pub socket: Option<&'a Path>,
    pub run_dir: &'a Path,
    pub bzimage: &'a Path,
    pub initrd: &'a Path,
    pub cmdline: String,
}

/// Files QEMU writes into the run directory.
pub fn console_log(run_dir: &Path) -> PathBuf {
    run_dir.join("console.log")
}
pub fn ttys1_out(run_dir: &Path) -> PathBuf {
    run_dir.join("ttyS1.out")
}
pub fn results_bin(run_dir: &Path) -> PathBuf {
    run_dir.join("results.bin")
}
/// Backing file of built-in disk `i` when `[builtin] storage = "file"`.
pub fn disk_image(run_dir: &Path, i: u32) -> PathBuf {
    run_dir.join(format!("disk{i}.img"))
}

/// The `-blockdev` (or qemu-storage-daemon `--blockdev`) value of built-in disk `i`.
pub fn blockdev(suite: &Suite, run_dir: &Path, i: u32, latency_ns: u64) -> String {
    let b = &suite.spec.builtin;
    match b.storage {
        Storage::Null => {
            let lat = if latency_ns > 0 {
                format!(",latency-ns={latency_ns}")
            } else {
                String::new()
            };
            format!(
                "driver=null-co,node-name=n{i},size={},read-zeroes=on{lat}",
                b.size_mib << 20
            )
        }
        Storage::File => format!(
            "driver=file,node-name=n{i},filename={},aio=threads,cache.direct=on",
            p(&disk_image(run_dir, i))
        ),
    }
}

/// The kernel command line: fixed words, the kernel's own, then the suite's. `boot_trace`:
/// whether this kernel may enable the traced events from boot (false: the agent enables them).
pub fn kernel_cmdline(kernel_words: &str, boot_trace: bool, suite: &Suite) -> String {
    let mut words = vec![
        "console=ttyS0".to_string(),
        "loglevel=4".into(),
        "panic=-1".into(),
        "printk.time=1".into(),
    ];
    words.extend(kernel_words.split_whitespace().map(String::from));
    // The traced events are enabled from boot, so attaching the agent's filters and triggers
    // later registers no new tracepoint probe, and the agent never disables them: no live code
    // patching of __schedule while eight TCG vCPUs run it (that crashed a guest with an int3
    // Oops mid-run). One `trace_event=` word: the kernel keeps only the last. A kernel line
    // whose boot hangs with it (7.3 under TCG) gets none, and the agent enables the events.
    let events = if suite.spec.trace_locks {
        Some(LOCK_TRACE_EVENTS)
    } else if suite.spec.trace_irq {
        Some(IRQ_TRACE_EVENTS)
    } else {
        None
    };
    if let (true, Some(e)) = (boot_trace, events) {
        words.push(format!("trace_event={e}"));
    }
    words.extend(suite.spec.cmdline.iter().cloned());
    if let Some(k) = suite.spec.running_cpus {
        words.push(format!("maxcpus={k}"));
    }
    words.join(" ")
}

/// The events `trace_locks` suites enable at boot (the agent sets their filters).
pub const LOCK_TRACE_EVENTS: &str =
    "sched:sched_switch,sched:sched_wakeup,lock:contention_begin,lock:contention_end";

/// The event `trace_irq` suites enable at boot (the agent sets its filter per step and switches
/// recording on and off with `tracing_on`). Part of [`LOCK_TRACE_EVENTS`].
pub const IRQ_TRACE_EVENTS: &str = "sched:sched_switch";

fn p(path: &Path) -> String {
    path.display().to_string()
}

/// Builds the full argv (`argv[0]` is the QEMU binary).
pub fn argv(q: &QemuParams) -> Vec<String> {
    let s = &q.suite.spec;
    let mem = format!("{}M", s.memory_mib);
    let mut a: Vec<String> = vec![p(q.qemu_bin)];
    let mut push = |xs: &[&str]| a.extend(xs.iter().map(|x| x.to_string()));
    push(&["-accel", q.accel.as_str()]);
    if q.accel == Accel::Kvm {
        push(&["-cpu", "host"]);
    }
    // debug-threads names the vCPU threads `CPU <n>/TCG`: the host's CPU accounting finds them.
    push(&["-name", "vb,debug-threads=on"]);
    push(&["-smp", &s.smp().to_string(), "-m", &mem]);
    push(&[
        "-object",
        &format!("memory-backend-memfd,id=mem,size={mem},share=on"),
        "-numa",
        "node,memdev=mem",
    ]);
    // An unpacked QEMU's own firmware directory first (qemus, rule 2).
    let data_dir = qemus::own_data_dir(q.qemu_bin);
    if let Some(d) = &data_dir {
        push(&["-L", &p(d)]);
    }
    if q.bios == Bios::Qboot {
        let rom = data_dir.map_or_else(|| PathBuf::from(QBOOT_ROM), |d| d.join("qboot.rom"));
        push(&["-bios", &p(&rom)]);
    }
    push(&["-display", "none", "-no-reboot", "-nodefaults"]);
    push(&["-serial", &format!("file:{}", p(&console_log(q.run_dir)))]);
    push(&["-serial", &format!("file:{}", p(&ttys1_out(q.run_dir)))]);
    push(&[
        "-device",
        "virtio-serial-pci",
        "-chardev",
        &format!("file,id=res,path={}", p(&results_bin(q.run_dir))),
        "-device",
        "virtserialport,chardev=res,name=results",
    ]);
    disk_args(q, &mut push);
    push(&["-kernel", &p(q.bzimage), "-initrd", &p(q.initrd)]);
    push(&["-append", &q.cmdline]);
    a
}

/// The disks' arguments: QEMU's own devices over builtin block nodes (`qemu-builtin`, or no
/// socket), else the vhost-user device on the backend's socket.
fn disk_args(q: &QemuParams, push: &mut dyn FnMut(&[&str])) {
    let s = &q.suite.spec;
    let nq = s.num_queues.to_string();
    // Ring size of every virtqueue: the guest's tag-set depth (virtio-scsi can_queue).
    let (scsi_vq, blk_vq) = match s.virtqueue_size {
        Some(n) => (format!(",virtqueue_size={n}"), format!(",queue-size={n}")),
        None => (String::new(), String::new()),
    };
    match (s.backend, q.socket) {
        (BackendKind::QemuBuiltin, _) | (_, None) => {
            let b = &s.builtin;
            if s.device == Device::Scsi {
                push(&[
                    "-device",
                    &format!("virtio-scsi-pci,id=scsi0,num_queues={nq}{scsi_vq}"),
                ]);
            }
            for i in 0..b.disks {
                push(&[
                    "-blockdev",
                    &blockdev(q.suite, q.run_dir, i, q.builtin_latency_ns),
                ]);
                let dev = match s.device {
                    Device::Scsi => {
                        format!("scsi-hd,bus=scsi0.0,drive=n{i},channel=0,scsi-id={i},lun=0")
                    }
                    Device::Blk => format!("virtio-blk-pci,drive=n{i},num-queues={nq}{blk_vq}"),
                };
                push(&["-device", &dev]);
            }
        }
        (_, Some(sock)) => {
            // With backend restarts QEMU reconnects every second until the backend is back.
            // Only when the backend is what is killed: a QEMU that is killed needs none, and QEMU
            // 7.2's vhost-user-scsi refuses a reconnecting chardev at start.
            let reconnect = if s
                .restarts
                .as_ref()
                .is_some_and(|r| r.target == gt_suite::KillTarget::Backend)
            {
                ",reconnect=1"
            } else {
                ""
            };
            push(&[
                "-chardev",
                &format!("socket,id=vu0,path={}{reconnect}", p(sock)),
            ]);
            let dev = match s.device {
                Device::Blk => format!("vhost-user-blk-pci,chardev=vu0,num-queues={nq}{blk_vq}"),
                Device::Scsi => {
                    format!("vhost-user-scsi-pci,chardev=vu0,num_queues={nq}{scsi_vq}")
                }
            };
            push(&["-device", &dev]);
        }
    }
}

/// First line of `<qemu> -version`, or an error text.
pub fn version(qemu_bin: &Path) -> Result<String, String> {
    let out = std::process::Command::new(qemu_bin)
        .arg("-version")
        .output()
        .map_err(|e| format!("{}: {e}", qemu_bin.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .next()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("{} -version printed nothing", qemu_bin.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use gt_suite::SuiteSpec;

    fn suite(extra: &str) -> Suite {
        let spec: SuiteSpec = toml::from_str(&format!(
            "description = \"d\"\nsteps = [\"sleep:1\"]\ncmdline = [\"initcall_debug\"]\n{extra}"
        ))
        .unwrap();
        Suite::from_spec("t", Path::new("/nonexistent"), spec).unwrap()
    }

    fn build(s: &Suite, sock: Option<&Path>, accel: Accel, bios: Bios, lat: u64) -> Vec<String> {
        argv(&QemuParams {
            qemu_bin: Path::new("qemu-system-x86_64"),
            accel,
            bios,
            suite: s,
            builtin_latency_ns: lat,
            socket: sock,
            run_dir: Path::new("/r"),
            bzimage: Path::new("/k/bzImage"),
            initrd: Path::new("/r/initrd.cpio"),
            cmdline: kernel_cmdline("foo=1", true, s),
        })
    }

    fn has_pair(a: &[String], k: &str, v: &str) -> bool {
        a.windows(2).any(|w| w[0] == k && w[1] == v)
    }

    #[test]
    fn backend_restarts_make_qemu_reconnect() {
        let s = suite(
            "device = \"blk\"\nbackend = \"vhost-blk\"\n[restarts]\nkills = 3\nfirst_after_s = 2.0\nevery_s = 3.0",
        );
        let a = build(&s, Some(Path::new("/t/s.sock")), Accel::Tcg, Bios::Qboot, 0);
        assert!(has_pair(
            &a,
            "-chardev",
            "socket,id=vu0,path=/t/s.sock,reconnect=1"
        ));
    }

    #[test]
    fn vhost_user_scsi_line() {
        let s = suite("device = \"scsi\"\nbackend = \"vhost-blk\"");
        let a = build(&s, Some(Path::new("/t/s.sock")), Accel::Tcg, Bios::Qboot, 0);
        assert!(has_pair(&a, "-accel", "tcg"));
        assert!(has_pair(&a, "-smp", "8"));
        assert!(has_pair(
            &a,
            "-object",
            "memory-backend-memfd,id=mem,size=1024M,share=on"
        ));
        assert!(has_pair(&a, "-bios", QBOOT_ROM));
        assert!(has_pair(&a, "-chardev", "socket,id=vu0,path=/t/s.sock"));
        assert!(has_pair(
            &a,
            "-device",
            "vhost-user-scsi-pci,chardev=vu0,num_queues=8"
        ));
        assert!(has_pair(&a, "-serial", "file:/r/console.log"));
        assert!(has_pair(&a, "-serial", "file:/r/ttyS1.out"));
        assert!(has_pair(&a, "-chardev", "file,id=res,path=/r/results.bin"));
        assert!(has_pair(
            &a,
            "-append",
            "console=ttyS0 loglevel=4 panic=-1 printk.time=1 foo=1 initcall_debug"
        ));
        assert!(!a.iter().any(|x| x == "-cpu"));
    }

    #[test]
    fn builtin_scsi_with_latency_and_seabios() {
        let s = suite(
            "device = \"scsi\"\nbackend = \"qemu-builtin\"\nnum_queues = 4\n[builtin]\ndisks = 2\nsize_mib = 64",
        );
        let a = build(&s, None, Accel::Kvm, Bios::Seabios, 5000);
        assert!(has_pair(
            &a,
            "-device",
            "virtio-scsi-pci,id=scsi0,num_queues=4"
        ));
        assert!(has_pair(
            &a,
            "-blockdev",
            "driver=null-co,node-name=n1,size=67108864,read-zeroes=on,latency-ns=5000"
        ));
        assert!(has_pair(
            &a,
            "-device",
            "scsi-hd,bus=scsi0.0,drive=n1,channel=0,scsi-id=1,lun=0"
        ));
        assert!(!a.iter().any(|x| x == "-bios"));
        assert!(has_pair(&a, "-cpu", "host"));
        assert!(!a.iter().any(|x| x.contains("vhost-user")));
    }

    #[test]
    fn file_storage_points_at_the_run_dir() {
        let s =
            suite("device = \"blk\"\nbackend = \"qemu-builtin\"\n[builtin]\nstorage = \"file\"");
        let a = build(&s, None, Accel::Tcg, Bios::Qboot, 0);
        assert!(has_pair(
            &a,
            "-blockdev",
            "driver=file,node-name=n0,filename=/r/disk0.img,aio=threads,cache.direct=on"
        ));
    }

    #[test]
    fn builtin_blk_has_no_latency_suffix_at_zero() {
        let s = suite("device = \"blk\"\nbackend = \"qemu-builtin\"");
        let a = build(&s, None, Accel::Tcg, Bios::Qboot, 0);
        assert!(has_pair(
            &a,
            "-blockdev",
            "driver=null-co,node-name=n0,size=1073741824,read-zeroes=on"
        ));
        assert!(has_pair(
            &a,
            "-device",
            "virtio-blk-pci,drive=n0,num-queues=8"
        ));
    }

    #[test]
    fn traced_events_are_enabled_at_boot_in_one_word() {
        let count = |line: &str| line.matches("trace_event=").count();
        let traced = |extra: &str| {
            suite(&format!(
                "device = \"scsi\"\nbackend = \"vhost-blk\"\n{extra}"
            ))
        };
        let irq = kernel_cmdline("", true, &traced("trace_irq = true"));
        assert!(
            irq.ends_with("trace_event=sched:sched_switch initcall_debug"),
            "{irq}"
        );
        // A suite with both gets the lock list, which has sched_switch too: the kernel keeps
        // only the last `trace_event=`, so a second word would drop the first's events.
        let both = kernel_cmdline("", true, &traced("trace_irq = true\ntrace_locks = true"));
        assert_eq!(count(&both), 1, "{both}");
        assert!(both.contains(&format!("trace_event={LOCK_TRACE_EVENTS}")));
        assert!(LOCK_TRACE_EVENTS.contains(IRQ_TRACE_EVENTS));
        assert_eq!(count(&kernel_cmdline("", true, &traced(""))), 0);
        // A kernel line that hangs with boot-time events gets none: the agent enables them.
        let late = kernel_cmdline("", false, &traced("trace_locks = true"));
        assert_eq!(count(&late), 0, "{late}");
    }
}
