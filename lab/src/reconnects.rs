//! The reconnect table of experiments/reconnect-experiment.sh (docs/results/restart-35/README.md,
//! "20 frontend connections against one backend"), from the logs it kept. `lab table
//! reconnects` prints it.
//!
//! Contract:
//! 1. For each QEMU Q given, in that order, `OUT/reconnect-qemuQ.log` (bytes that are not UTF-8
//!    read as U+FFFD) is read; each of its lines (ended by `\n`, `\r\n` or a lone `\r`, as
//!    Python's text files read them) that is exactly `RECONNECT-RESULT {...}` is a
//!    [`ReconnectResult`] and one row, in the order of the log.
//! 2. A row: the QEMU's version line, the device, the connections, the backend's (fds,
//!    threads) before the first connection, after the first and after the last, and `yes` when
//!    those two are equal, else `NO`.
//! 3. A log that cannot be read, a result line that does not parse and a result without
//!    connections (no "after the first") are errors that name the file (and the line).
//! 4. The text is what the Python it replaced (reconnect-experiment.sh's inline script,
//!    issue 37) printed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use gt_launch::restart::{ReconnectResult, RECONNECT_PREFIX};

/// The header of the table (rule 2).
const HEADER: &str = "| QEMU | device | connections | (fds, threads) before | after the first | after the last | equal |\n|---|---|---|---|---|---|---|\n";

/// The log of QEMU `qemu` in `out` (rule 1).
pub fn log_path(out: &Path, qemu: &str) -> PathBuf {
    out.join(format!("reconnect-qemu{qemu}.log"))
}

/// The result lines of one log (rules 1, 3); `name` is the file, for errors.
pub fn results(log: &str, name: &Path) -> Result<Vec<ReconnectResult>, String> {
    let mut out = Vec::new();
    let log = log.replace("\r\n", "\n").replace('\r', "\n");
    for (i, l) in log.split('\n').enumerate() {
        let Some(j) = l.strip_prefix(RECONNECT_PREFIX) else {
            continue;
        };
        if !(j.starts_with('{') && j.ends_with('}')) {
            continue;
        }
        let r: ReconnectResult =
            serde_json::from_str(j).map_err(|e| format!("{}:{}: {e}", name.display(), i + 1))?;
        if r.after.is_empty() {
            return Err(format!(
                "{}:{}: a result without connections",
                name.display(),
                i + 1
            ));
        }
        out.push(r);
    }
    Ok(out)
}

fn pair((a, b): (usize, usize)) -> String {
    format!("({a}, {b})")
}

/// One row (rule 2).
fn row(r: &ReconnectResult) -> String {
    let (first, last) = match (r.after.first(), r.after.last()) {
        (Some(f), Some(l)) => (*f, *l),
        _ => return String::new(),
    };
    format!(
        "| {} | {} | {} | {} | {} | {} | {} |\n",
        r.qemu,
        r.device,
        r.connections,
        pair(r.before),
        pair(first),
        pair(last),
        if first == last { "yes" } else { "NO" }
    )
}

/// The whole table over the QEMUs' logs in `out` (rules 1-3).
pub fn reconnect_table(out: &Path, qemus: &[String]) -> Result<String, String> {
    let mut t = String::from(HEADER);
    for q in qemus {
        let p = log_path(out, q);
        let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        for r in results(&String::from_utf8_lossy(&bytes), &p)? {
            let _ = write!(t, "{}", row(&r));
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE_A: &str = r#"RECONNECT-RESULT {"after":[[8,2],[9,2],[8,2]],"before":[7,1],"connections":3,"device":"blk","qemu":"QEMU emulator version 7.2.22","suite":"reconnect-idle"}"#;
    const LINE_B: &str = r#"RECONNECT-RESULT {"after":[[8,2],[10,3]],"before":[7,1],"connections":2,"device":"scsi","qemu":"QEMU emulator version 10.0.2","suite":"reconnect-idle-scsi"}"#;

    #[test]
    fn only_whole_result_lines_are_rows() {
        let log = format!(
            "running 2 tests\n{LINE_A}\n  {LINE_A}\n{LINE_A} trailing\n{LINE_B}\r\nRECONNECT-RESULT\n{LINE_B}\rtest ok\n"
        );
        let r = results(&log, Path::new("x.log")).unwrap();
        // The indented and the trailing copies are not result lines; \r\n ends a line.
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].after, [(8, 2), (9, 2), (8, 2)]);
        assert_eq!(r[1].before, (7, 1));
        assert_eq!(r[1], r[2]);
        // What booted_reconnect.rs prints is the line as it always read.
        let again = serde_json::to_string(&r[0]).unwrap();
        assert_eq!(format!("{RECONNECT_PREFIX}{again}"), LINE_A);
        assert_eq!(
            row(&r[0]),
            "| QEMU emulator version 7.2.22 | blk | 3 | (7, 1) | (8, 2) | (8, 2) | yes |\n"
        );
        assert_eq!(
            row(&r[1]),
            "| QEMU emulator version 10.0.2 | scsi | 2 | (7, 1) | (8, 2) | (10, 3) | NO |\n"
        );
    }

    #[test]
    fn the_table_follows_the_qemus_given() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(log_path(d.path(), "7.2"), format!("{LINE_A}\n")).unwrap();
        let mut b = format!("{LINE_B}\n").into_bytes();
        b.extend_from_slice(b"\xff not utf-8\n");
        std::fs::write(log_path(d.path(), "10"), b).unwrap();
        let t = reconnect_table(d.path(), &["10".into(), "7.2".into()]).unwrap();
        assert_eq!(
            t,
            "| QEMU | device | connections | (fds, threads) before | after the first | after the last | equal |\n\
             |---|---|---|---|---|---|---|\n\
             | QEMU emulator version 10.0.2 | scsi | 2 | (7, 1) | (8, 2) | (10, 3) | NO |\n\
             | QEMU emulator version 7.2.22 | blk | 3 | (7, 1) | (8, 2) | (8, 2) | yes |\n"
        );
        assert_eq!(reconnect_table(d.path(), &[]).unwrap().lines().count(), 2);
    }

    #[test]
    fn bad_logs_name_the_file() {
        let d = tempfile::tempdir().unwrap();
        let e = reconnect_table(d.path(), &["9".into()]).unwrap_err();
        let p = log_path(d.path(), "9");
        assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
        std::fs::write(&p, "ok\nRECONNECT-RESULT {\"after\": 3}\n").unwrap();
        let e = reconnect_table(d.path(), &["9".into()]).unwrap_err();
        assert!(e.starts_with(&format!("{}:2: ", p.display())), "{e}");
        let empty = LINE_A.replace("[[8,2],[9,2],[8,2]]", "[]");
        std::fs::write(&p, format!("{empty}\n")).unwrap();
        let e = reconnect_table(d.path(), &["9".into()]).unwrap_err();
        assert_eq!(
            e,
            format!("{}:1: a result without connections", p.display())
        );
    }
}
