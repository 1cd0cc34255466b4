//! herd7: where it is, how it runs, what it answered.
//!
//! Rules:
//! 1. The herd7 used is `$VB_HERD7` (a herd7 binary that runs on this host as it is), else the
//!    one `ci/fetch-herd7.sh` unpacked into `<cache>/herd7-<version>/` (version pinned in this
//!    crate's herd7.pin), run through sid's own loader with sid's libraries first on its path.
//!    Neither there: an error that says to run the script.
//! 2. Every run is `herd7 -conf linux-kernel.cfg TEST` in the model's directory (the LKMM's
//!    .cfg names its .cat, .bell and .def beside it) under a timeout; the child is killed when
//!    it expires.
//! 3. Its output is parsed, never trusted: the answer is the `Observation NAME KIND P N` line
//!    (and `Flag data-race` when present); no such line is an error carrying herd7's first
//!    warning (an unknown macro, a syntax error), never an answer.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::litmus::ExistsAnswer;
use super::OrderingError;

/// `gt-ordering/herd7.pin` (shell assignments), compiled in; ci/fetch-herd7.sh sources the same
/// file.
const PIN: &str = include_str!("../herd7.pin");

/// The pinned herd7 version, e.g. `7.58`.
pub fn pinned_version() -> &'static str {
    PIN.lines()
        .find_map(|l| l.trim().strip_prefix("HERD7_VERSION="))
        .map(str::trim)
        .unwrap_or("unknown")
}

/// Where `ci/fetch-herd7.sh` unpacks the pinned herd7 under `cache`.
pub fn pinned_dir(cache: &Path) -> PathBuf {
    cache.join(format!("herd7-{}", pinned_version()))
}

/// A herd7 that runs here (rule 1).
#[derive(Debug, Clone)]
pub struct Herd {
    /// What `herd7 -version` says, up to the first comma (`7.58`).
    pub version: String,
    program: PathBuf,
    prefix: Vec<String>,
}

/// One run's answer (rule 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    pub name: String,
    pub verdict: ExistsAnswer,
    /// Executions where the `exists` clause holds / does not.
    pub positive: u64,
    pub negative: u64,
    /// herd7 printed `Flag data-race`.
    pub datarace: bool,
}

impl Observation {
    /// No execution reached the end (`Never 0 0`): a deadlock, or a test that says nothing.
    pub fn vacuous(&self) -> bool {
        self.verdict == ExistsAnswer::Never && self.positive == 0 && self.negative == 0
    }
}

impl Herd {
    /// `$VB_HERD7`, else the pinned herd7 in `cache` (rule 1).
    pub fn find(cache: &Path) -> Result<Herd, OrderingError> {
        Herd::find_with(cache, std::env::var_os("VB_HERD7").map(PathBuf::from))
    }

    /// [`Herd::find`] with `$VB_HERD7`'s value given.
    fn find_with(cache: &Path, own: Option<PathBuf>) -> Result<Herd, OrderingError> {
        if let Some(bin) = own {
            return Herd::with(bin, Vec::new());
        }
        let dir = pinned_dir(cache);
        let lib = dir.join("usr/lib/x86_64-linux-gnu");
        let loader = lib.join("ld-linux-x86-64.so.2");
        let bin = dir.join("usr/bin/herd7");
        let libdir = dir.join("usr/share/herdtools7/herd");
        if !loader.is_file() || !bin.is_file() || !dir.join(".pinned").is_file() {
            return Err(OrderingError::NoHerd(format!(
                "herd7 {} is not in the cache ({}): run ci/fetch-herd7.sh (with VB_CACHE={}), or set VB_HERD7 to a herd7 binary",
                pinned_version(),
                dir.display(),
                cache.display()
            )));
        }
        let s = |p: &Path| p.to_string_lossy().into_owned();
        let prefix = vec![
            "--library-path".into(),
            s(&lib),
            s(&bin),
            "-set-libdir".into(),
            s(&libdir),
        ];
        Herd::with(loader, prefix)
    }

    fn with(program: PathBuf, prefix: Vec<String>) -> Result<Herd, OrderingError> {
        let mut h = Herd {
            version: String::new(),
            program,
            prefix,
        };
        let out = h.run_args(&["-version"], Path::new("."), Duration::from_secs(30))?;
        h.version = parse_version(&out.stdout).ok_or_else(|| {
            OrderingError::NoHerd(format!(
                "{} -version said '{}'",
                h.program.display(),
                out.stdout.trim()
            ))
        })?;
        Ok(h)
    }

    /// `herd7 -conf linux-kernel.cfg TEST` in `model` (rules 2 and 3).
    pub fn check(
        &self,
        model: &Path,
        test: &Path,
        timeout: Duration,
    ) -> Result<Observation, OrderingError> {
        let test_arg = test.to_string_lossy();
        let out = self.run_args(&["-conf", "linux-kernel.cfg", &test_arg], model, timeout)?;
        parse_output(&out.stdout).map_err(|why| OrderingError::Herd {
            test: test.to_path_buf(),
            msg: match first_warning(&out.stderr, "") {
                Some(w) => format!("{why}: {w}"),
                None => why,
            },
        })
    }

    fn run_args(
        &self,
        args: &[&str],
        cwd: &Path,
        timeout: Duration,
    ) -> Result<Output, OrderingError> {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.prefix).args(args).current_dir(cwd);
        run_with_timeout(&mut cmd, timeout).map_err(|msg| OrderingError::Herd {
            test: args.last().map(PathBuf::from).unwrap_or_default(),
            msg,
        })
    }
}

struct Output {
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to its end, or kills it after `timeout` (rule 2).
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {cmd:?}: {e}"))?;
    let reader = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            String::from_utf8_lossy(&buf).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(5)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s (killed)", timeout.as_secs()));
            }
            Err(e) => return Err(format!("waiting for herd7: {e}")),
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        let why = first_warning(&stderr, &stdout).unwrap_or_default();
        return Err(format!("herd7 exited with {status}: {why}"));
    }
    Ok(Output { stdout, stderr })
}

/// `7.58, Rev: exported` -> `7.58`.
pub fn parse_version(text: &str) -> Option<String> {
    let first = text.lines().next()?.trim();
    let v = first.split([',', ' ']).next()?.trim();
    (!v.is_empty() && v.bytes().all(|b| b.is_ascii_digit() || b == b'.')).then(|| v.to_string())
}

/// The answer in herd7's output (rule 3).
pub fn parse_output(text: &str) -> Result<Observation, String> {
    let datarace = text.lines().any(|l| l.trim() == "Flag data-race");
    for line in text.lines() {
        let mut w = line.split_whitespace();
        if w.next() != Some("Observation") {
            continue;
        }
        let (Some(name), Some(kind), Some(pos), Some(neg)) =
            (w.next(), w.next(), w.next(), w.next())
        else {
            return Err(format!("cannot read herd7's line '{}'", line.trim()));
        };
        let verdict = ExistsAnswer::parse(kind)
            .ok_or_else(|| format!("herd7 answered '{kind}' (not Always, Sometimes or Never)"))?;
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| format!("cannot read herd7's line '{}'", line.trim()))
        };
        return Ok(Observation {
            name: name.to_string(),
            verdict,
            positive: num(pos)?,
            negative: num(neg)?,
            datarace,
        });
    }
    Err("herd7 gave no answer (no Observation line)".into())
}

/// herd7's first `Warning:` or error line, for an error message.
fn first_warning(stderr: &str, stdout: &str) -> Option<String> {
    stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(|l| l.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SB: &str = "Test SB+poonceonces Allowed\nStates 4\n0:r0=0; 1:r0=0;\nOk\nWitnesses\nPositive: 1 Negative: 3\nCondition exists (0:r0=0 /\\ 1:r0=0)\nObservation SB+poonceonces Sometimes 1 3\nTime SB+poonceonces 0.00\nHash=d2b6ca86cddfad6178a05767f57fafbf\n\n";

    #[test]
    fn reads_herd7s_answer() {
        let o = parse_output(SB).unwrap();
        assert_eq!(o.name, "SB+poonceonces");
        assert_eq!(o.verdict, ExistsAnswer::Sometimes);
        assert_eq!((o.positive, o.negative), (1, 3));
        assert!(!o.datarace && !o.vacuous());
        let o = parse_output("Flag data-race\nObservation t Never 0 0\n").unwrap();
        assert!(o.datarace && o.vacuous());
        let o = parse_output("Observation t Always 4 0\n").unwrap();
        assert_eq!(o.verdict, ExistsAnswer::Always);
    }

    #[test]
    fn no_answer_is_an_error_never_a_verdict() {
        for (text, want) in [
            ("", "no Observation"),
            (
                "Warning: File \"t.litmus\", line 38: Lex error\n",
                "no Observation",
            ),
            ("Observation t\n", "cannot read"),
            ("Observation t Perhaps 1 2\n", "Perhaps"),
            ("Observation t Never x 2\n", "cannot read"),
            ("Observation t Never -1 2\n", "cannot read"),
            ("Observations are made\n", "no Observation"),
        ] {
            let e = parse_output(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        assert_eq!(
            first_warning("Warning: File \"t\": Lex error\n", "x").as_deref(),
            Some("Warning: File \"t\": Lex error")
        );
    }

    #[test]
    fn versions_and_the_pin() {
        assert_eq!(
            parse_version("7.58, Rev: exported\n").as_deref(),
            Some("7.58")
        );
        assert_eq!(parse_version("7.52+01\n"), None);
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("herd7 unknown"), None);
        assert_eq!(pinned_version(), "7.58");
        assert!(pinned_dir(Path::new("/c")).ends_with("herd7-7.58"));
    }

    #[test]
    fn a_missing_herd7_says_how_to_get_it() {
        let d = tempfile::tempdir().unwrap();
        let e = Herd::find_with(d.path(), None).unwrap_err().to_string();
        assert!(e.contains("ci/fetch-herd7.sh"), "{e}");
        // A VB_HERD7 that is no herd7: an error, not a herd7 of unknown version.
        let e = Herd::find_with(d.path(), Some("/bin/true".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-version said"), "{e}");
        let e = Herd::find_with(d.path(), Some(d.path().join("none")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot start"), "{e}");
    }

    #[test]
    fn a_run_past_its_timeout_is_killed() {
        let e = run_with_timeout(
            Command::new("sh").args(["-c", "sleep 5"]),
            Duration::from_millis(100),
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("killed"), "{e}");
        let o = run_with_timeout(
            Command::new("sh").args(["-c", "echo hi; echo ho >&2"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert_eq!((o.stdout.as_str(), o.stderr.as_str()), ("hi\n", "ho\n"));
        let e = run_with_timeout(
            Command::new("sh").args(["-c", "echo bad >&2; exit 3"]),
            Duration::from_secs(5),
        )
        .err()
        .unwrap_or_default();
        assert!(e.contains("bad"), "{e}");
    }
}
