//! The run's verdict: the guest's `status` artefact, host-side expectations, and the console
//! line that explains a crash.

use std::path::Path;

use super::RunStatus;
use gt_launch::agent::Artifact;
use gt_launch::{backend, qemu};
use gt_suite::Suite;

/// `key=value` lookup in an artefact's text.
pub fn kv(text: &str, key: &str) -> Option<String> {
    text.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
}

/// Final verdict: a launcher failure stands; otherwise the guest's `status` artefact decides.
pub fn judge(launcher: RunStatus, arts: &[Artifact], dir: &Path) -> RunStatus {
    if !launcher.is_ok() {
        return launcher;
    }
    match arts.iter().rev().find(|a| a.name == "status") {
        Some(a) if a.complete && a.text().trim() == "ok" => RunStatus::Ok,
        Some(a) if a.complete => RunStatus::Failed {
            reason: format!("guest: {}", a.text().trim()),
        },
        _ => RunStatus::Failed {
            reason: format!(
                "guest ended without a status artefact ({} artefacts); console: {}",
                arts.len(),
                console_summary(&qemu::console_log(dir))
            ),
        },
    }
}

/// Host-side checks of what the guest reported against the suite's expectations.
pub fn expectations(status: RunStatus, suite: &Suite, arts: &[Artifact]) -> RunStatus {
    if !status.is_ok() {
        return status;
    }
    let Some(want) = suite.spec.guest.expect_request_vectors else {
        return status;
    };
    let got = arts
        .iter()
        .find(|a| a.name == "disk" && a.complete)
        .and_then(|a| kv(&a.text(), "request_vectors"));
    match got.as_deref().map(str::parse::<u32>) {
        Some(Ok(n)) if n == want => status,
        other => RunStatus::Failed {
            reason: format!(
                "expected {want} request vectors, the guest reported {}",
                match other {
                    Some(Ok(n)) => n.to_string(),
                    _ => "none".into(),
                }
            ),
        },
    }
}

/// The most telling console line: a panic or BUG/Oops if there is one, else the last lines.
fn console_summary(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let key = [
        "Kernel panic",
        "BUG:",
        "Oops",
        "hung_task",
        "blocked for more than",
    ];
    text.lines()
        .find(|l| key.iter().any(|k| l.contains(k)))
        .map(|l| l.trim().to_string())
        .unwrap_or_else(|| backend::tail(path, 3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn art(name: &str, data: &str, complete: bool) -> Artifact {
        Artifact {
            name: name.into(),
            data: data.as_bytes().to_vec(),
            complete,
        }
    }

    #[test]
    fn judge_uses_status_artifact() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("console.log"),
            "a\n[1.0] Kernel panic - not syncing: x\nb\nc\nd\n",
        )
        .unwrap();
        assert_eq!(
            judge(
                RunStatus::Ok,
                &[art("meta", "x", true), art("status", "ok\n", true)],
                d.path()
            ),
            RunStatus::Ok
        );
        let f = judge(
            RunStatus::Ok,
            &[art("status", "fail no disk", true)],
            d.path(),
        );
        assert_eq!(
            f,
            RunStatus::Failed {
                reason: "guest: fail no disk".into()
            }
        );
        let RunStatus::Failed { reason } =
            judge(RunStatus::Ok, &[art("fio.1.json", "{", false)], d.path())
        else {
            panic!("must fail")
        };
        assert!(reason.contains("Kernel panic"), "{reason}");
        std::fs::write(d.path().join("console.log"), "x\ny\nz\n").unwrap();
        let RunStatus::Failed { reason } = judge(RunStatus::Ok, &[], d.path()) else {
            panic!("must fail")
        };
        assert!(reason.ends_with("x | y | z"), "{reason}");
        let t = RunStatus::TimedOut { after_s: 3.0 };
        assert_eq!(judge(t.clone(), &[art("status", "ok", true)], d.path()), t);
    }

    #[test]
    fn request_vectors_are_checked_on_the_host() {
        let spec: gt_suite::SuiteSpec = toml::from_str(
            "description = \"d\"\ndevice = \"blk\"\nbackend = \"vhost-blk\"\nsteps = [\"verify\"]\n[guest]\nexpect_request_vectors = 8",
        )
        .unwrap();
        let s = Suite::from_spec("t", Path::new("/x"), spec).unwrap();
        let ok = [art("disk", "hctx=8\nrequest_vectors=8\n", true)];
        assert_eq!(expectations(RunStatus::Ok, &s, &ok), RunStatus::Ok);
        let bad = [art("disk", "request_vectors=1\n", true)];
        let RunStatus::Failed { reason } = expectations(RunStatus::Ok, &s, &bad) else {
            panic!("must fail")
        };
        assert_eq!(reason, "expected 8 request vectors, the guest reported 1");
        assert!(!expectations(RunStatus::Ok, &s, &[]).is_ok());
    }

    #[test]
    fn kv_finds_values() {
        assert_eq!(
            kv("a=1\nuname_r=6.12.1-rt\n", "uname_r").as_deref(),
            Some("6.12.1-rt")
        );
        assert_eq!(kv("a=1", "b"), None);
    }
}
