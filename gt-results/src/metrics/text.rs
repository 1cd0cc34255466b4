//! The small line-oriented artefacts: `meta`, `disk`, `funcs.*`, `rescan.*`, `scan`, `verify`,
//! `steps`, `status`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::MetricsError;

/// `a=1 b=two` -> {a: 1, b: two} (whitespace-separated `key=value` tokens; others ignored).
pub(crate) fn kv_pairs(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// `key=value` per line, the value being the rest of the line (`meta`, `disk`).
pub fn parse_kv(text: &str) -> Result<BTreeMap<String, String>, MetricsError> {
    let m: BTreeMap<String, String> = text
        .lines()
        .filter_map(|l| l.split_once('='))
        .filter(|(k, _)| !k.trim().is_empty() && !k.trim().contains(char::is_whitespace))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    if m.is_empty() {
        return Err(MetricsError::Empty);
    }
    Ok(m)
}

/// `funcs.<step>`: `func=<name> hits=<n>` -> name -> hits, plus the agent's `error=` notes
/// (`error=<text>`, or `func=<name> error=<why>` for a function that could not be traced).
pub fn parse_funcs(text: &str) -> Result<(BTreeMap<String, u64>, Vec<String>), MetricsError> {
    let mut m = BTreeMap::new();
    let mut errors = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let kv = kv_pairs(line);
        if line.contains("error=") {
            errors.push(line.trim().chars().take(300).collect());
            continue;
        }
        match (
            kv.get("func"),
            kv.get("hits").and_then(|h| h.parse::<u64>().ok()),
        ) {
            (Some(f), Some(h)) => {
                m.insert(f.to_string(), h);
                // Optional total time inside the function (the function profiler's `Time`).
                if let Some(us) = kv.get("usecs").and_then(|u| u.parse::<f64>().ok()) {
                    m.insert(format!("{f}:usecs"), us.round().max(0.0) as u64);
                }
            }
            _ => {
                return Err(MetricsError::Line {
                    line: i + 1,
                    message: "expected `func=<name> hits=<n>`".into(),
                })
            }
        }
    }
    if m.is_empty() {
        return Err(match errors.first() {
            Some(e) => MetricsError::Structure(format!("agent: {e}")),
            None => MetricsError::Empty,
        });
    }
    Ok((m, errors))
}

/// One synchronous SCSI rescan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rescan {
    pub ms: f64,
    pub disks: Option<u64>,
    pub devices: Vec<String>,
}

/// `rescan.<i>`: `ms=<float> disks=<n> devices=<H:C:T:L,...>`.
pub fn parse_rescan(text: &str) -> Result<Rescan, MetricsError> {
    let kv = kv_pairs(text);
    let ms = kv
        .get("ms")
        .and_then(|m| m.parse::<f64>().ok())
        .filter(|m| m.is_finite() && *m >= 0.0)
        .ok_or_else(|| MetricsError::Structure("no valid `ms=`".into()))?;
    Ok(Rescan {
        ms,
        disks: kv.get("disks").and_then(|d| d.parse().ok()),
        devices: kv
            .get("devices")
            .map(|d| {
                d.split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default(),
    })
}

/// Boot-scan timings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScanTimes {
    /// initcall function -> microseconds (summed if it appears twice).
    pub initcalls_us: BTreeMap<String, u64>,
    /// Guest uptime when the first disk appeared.
    pub first_disk_s: Option<f64>,
}

/// `scan`: `initcall=<fn> usecs=<n>` lines and `first_disk_s=<float>`.
pub fn parse_scan(text: &str) -> Result<ScanTimes, MetricsError> {
    let mut s = ScanTimes::default();
    for line in text.lines() {
        let kv = kv_pairs(line);
        if let (Some(f), Some(us)) = (
            kv.get("initcall"),
            kv.get("usecs").and_then(|u| u.parse::<u64>().ok()),
        ) {
            let e = s.initcalls_us.entry(f.to_string()).or_default();
            *e = e.saturating_add(us);
        }
        if let Some(v) = kv.get("first_disk_s").and_then(|v| v.parse::<f64>().ok()) {
            if v.is_finite() {
                s.first_disk_s = Some(v);
            }
        }
    }
    if s.initcalls_us.is_empty() && s.first_disk_s.is_none() {
        return Err(MetricsError::Empty);
    }
    Ok(s)
}

/// The `verify` step's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verify {
    pub ok: bool,
    pub bytes: Option<u64>,
    pub detail: String,
}

/// `verify`: `result=ok|fail bytes=<n> detail=<text>` (detail runs to the end of the line).
pub fn parse_verify(text: &str) -> Result<Verify, MetricsError> {
    let line = text.lines().find(|l| l.contains("result=")).unwrap_or("");
    let kv = kv_pairs(line);
    let ok = match kv.get("result") {
        Some(&"ok") => true,
        Some(&"fail") => false,
        _ => return Err(MetricsError::Structure("no `result=ok|fail`".into())),
    };
    let detail = line
        .split_once("detail=")
        .map_or("", |(_, d)| d.trim())
        .to_string();
    Ok(Verify {
        ok,
        bytes: kv.get("bytes").and_then(|b| b.parse().ok()),
        detail,
    })
}

/// One line of the `steps` artefact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    pub step: String,
    pub rc: i64,
    pub secs: Option<f64>,
}

/// `steps`: `step=<step> rc=<n> secs=<float>` per line.
pub fn parse_steps(text: &str) -> Result<Vec<StepRecord>, MetricsError> {
    let mut v = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let kv = kv_pairs(line);
        let (Some(step), Some(rc)) = (kv.get("step"), kv.get("rc").and_then(|r| r.parse().ok()))
        else {
            return Err(MetricsError::Line {
                line: i + 1,
                message: "expected `step=<step> rc=<n> secs=<float>`".into(),
            });
        };
        v.push(StepRecord {
            step: step.to_string(),
            rc,
            secs: kv
                .get("secs")
                .and_then(|s| s.parse::<f64>().ok())
                .filter(|s| s.is_finite()),
        });
    }
    if v.is_empty() {
        return Err(MetricsError::Empty);
    }
    Ok(v)
}

/// The agent's final verdict.
#[derive(Debug, Clone, PartialEq)]
pub enum GuestStatus {
    Ok,
    Fail(String),
}

/// `status`: `ok` or `fail <reason>`.
pub fn parse_status(text: &str) -> Result<GuestStatus, MetricsError> {
    let t = text.trim();
    if t == "ok" {
        Ok(GuestStatus::Ok)
    } else if let Some(r) = t.strip_prefix("fail") {
        let r = r.trim();
        Ok(GuestStatus::Fail(if r.is_empty() {
            "unspecified".into()
        } else {
            r.chars().take(500).collect()
        }))
    } else {
        Err(MetricsError::Structure(format!(
            "unknown status {:?}",
            t.chars().take(40).collect::<String>()
        )))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn funcs_with_time() {
        let (m, e) =
            super::parse_funcs("func=blk_mq_exit_hctx hits=2040 usecs=812.4\nfunc=x hits=0\n")
                .unwrap();
        assert!(e.is_empty());
        assert_eq!(m["blk_mq_exit_hctx"], 2040);
        assert_eq!(m["blk_mq_exit_hctx:usecs"], 812);
        assert_eq!(m["x"], 0);
        assert!(!m.contains_key("x:usecs"));
    }

    use super::*;

    #[test]
    fn kv_artefacts() {
        let m = parse_kv("uname_r=6.12.117-rt\nuname_v=#1 SMP PREEMPT_RT\ncmdline=console=ttyS0 quiet\nnproc=8\nbogus line\n").unwrap();
        assert_eq!(m["uname_v"], "#1 SMP PREEMPT_RT");
        assert_eq!(m["cmdline"], "console=ttyS0 quiet");
        assert_eq!(m["nproc"], "8");
        assert_eq!(m.len(), 4);
        assert!(parse_kv("nothing here").is_err());
    }

    #[test]
    fn funcs() {
        let (f, e) = parse_funcs(
            "func=blk_mq_run_hw_queue hits=24769\nfunc=blk_mq_update_tag_set_shared hits=510\nfunc=nope error=not_traceable\n",
        )
        .unwrap();
        assert_eq!(e, ["func=nope error=not_traceable"]);
        assert_eq!(f["blk_mq_run_hw_queue"], 24769);
        assert_eq!(f["blk_mq_update_tag_set_shared"], 510);
        assert_eq!(
            parse_funcs("func=a hits=1\nfunc=b hits=-3\n"),
            Err(MetricsError::Line {
                line: 2,
                message: "expected `func=<name> hits=<n>`".into()
            })
        );
        assert!(parse_funcs("").is_err());
        assert!(matches!(
            parse_funcs("error=no function_profile_enabled (kernel without CONFIG_FUNCTION_PROFILER)\n"),
            Err(MetricsError::Structure(m)) if m.contains("FUNCTION_PROFILER")
        ));
    }

    #[test]
    fn rescan() {
        let r = parse_rescan("ms=3312.5 disks=1 devices=0:0:0:0,0:0:1:0\n").unwrap();
        assert_eq!(r.ms, 3312.5);
        assert_eq!(r.disks, Some(1));
        assert_eq!(r.devices, vec!["0:0:0:0", "0:0:1:0"]);
        assert!(parse_rescan("ms=-1").is_err());
        assert!(parse_rescan("ms=NaN").is_err());
        assert!(parse_rescan("disks=1").is_err());
    }

    #[test]
    fn scan() {
        let s = parse_scan("initcall=virtio_scsi_init usecs=315000\ninitcall=init_sd usecs=12\nfirst_disk_s=2.75\njunk\n").unwrap();
        assert_eq!(s.initcalls_us["virtio_scsi_init"], 315_000);
        assert_eq!(s.first_disk_s, Some(2.75));
        assert!(parse_scan("junk").is_err());
    }

    #[test]
    fn verify() {
        let v =
            parse_verify("result=fail bytes=1048576 detail=mismatch at lba=8 (cpu 1)\n").unwrap();
        assert!(!v.ok);
        assert_eq!(v.bytes, Some(1_048_576));
        assert_eq!(v.detail, "mismatch at lba=8 (cpu 1)");
        assert!(parse_verify("result=ok bytes=4096 detail=").unwrap().ok);
        assert!(parse_verify("result=maybe").is_err());
    }

    #[test]
    fn steps_and_status() {
        let s =
            parse_steps("step=0-verify rc=0 secs=1.5\nstep=1-randread.fio rc=1 secs=x\n").unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].rc, 1);
        assert_eq!(s[1].secs, None);
        assert!(parse_steps("rc=0").is_err());
        assert_eq!(parse_status("ok\n").unwrap(), GuestStatus::Ok);
        assert_eq!(
            parse_status("fail fio exited 1").unwrap(),
            GuestStatus::Fail("fio exited 1".into())
        );
        assert_eq!(
            parse_status("fail").unwrap(),
            GuestStatus::Fail("unspecified".into())
        );
        assert!(parse_status("okay").is_err());
    }
}
