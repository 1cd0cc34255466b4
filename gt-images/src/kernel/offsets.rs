//! Where the locks the verdict names sit in their structures, read from the kernel just built:
//! this crate's `probe/lock-offsets.c` (compiled into it) built with the very flags Kbuild used
//! for `block/blk-mq.o` (its `.cmd` file), the way the kernel's own asm-offsets work. The guest
//! agent uses the figures to name a contended lock by its address (metrics::locks).
//!
//! Contract:
//! 1. The result is `NAME VALUE` lines (decimal), one per `->NAME VALUE` marker the compiler
//!    wrote; nothing else is read from the assembly.
//! 2. A kernel whose build tree has no `block/.blk-mq.o.cmd`, or whose structures lack a field,
//!    gets no file: the agent then names fewer locks. The kernel build itself never fails here.

use std::path::Path;
use std::process::Command;

/// The file's name beside a cached bzImage.
pub const FILE: &str = "lock-offsets";

/// The C file, compiled in the build directory.
const SOURCE: &str = include_str!("../../probe/lock-offsets.c");

/// The compile command Kbuild recorded for `block/blk-mq.o`, aimed at `src` -> `out` (`-S`).
pub fn command_for(cmd_file: &str, src: &Path, out: &Path) -> Option<String> {
    let line = cmd_file
        .lines()
        .find_map(|l| l.strip_prefix("savedcmd_block/blk-mq.o := "))?;
    let tail = " -c -o block/blk-mq.o ";
    let at = line.rfind(tail)?;
    let head = line.get(..at)?;
    let head: Vec<&str> = head
        .split(' ')
        .filter(|w| !w.starts_with("-Wp,-MMD,"))
        .collect();
    Some(format!(
        "{} -S -o {} {}",
        head.join(" "),
        out.display(),
        src.display()
    ))
}

/// Rule 1: `->NAME VALUE` markers (`$VALUE` in AT&T syntax) as `NAME VALUE` lines.
pub fn parse_markers(asm: &str) -> String {
    let mut out = String::new();
    for l in asm.lines() {
        let Some(rest) = l.split_once("\"->").map(|(_, r)| r.trim_end_matches('"')) else {
            continue;
        };
        let mut w = rest.split_whitespace();
        let (Some(name), Some(val)) = (w.next(), w.next()) else {
            continue;
        };
        if let Ok(v) = val.trim_start_matches('$').parse::<u64>() {
            out.push_str(&format!("{name} {v}\n"));
        }
    }
    out
}

/// Compiles the probe in `build` and writes the offsets to `dest` (rule 2: errors are only
/// logged).
pub fn write(build: &Path, dest: &Path) {
    if let Err(e) = try_write(build, dest) {
        tracing::warn!("lock offsets not written: {e}");
    }
}

fn try_write(build: &Path, dest: &Path) -> Result<(), String> {
    let cmd_file = std::fs::read_to_string(build.join("block/.blk-mq.o.cmd"))
        .map_err(|e| format!("block/.blk-mq.o.cmd: {e}"))?;
    // In the build directory's root, which Kbuild never reads; removed below.
    let (src, asm) = (
        build.join(".vb-lock-offsets.c"),
        build.join(".vb-lock-offsets.s"),
    );
    std::fs::write(&src, SOURCE).map_err(|e| e.to_string())?;
    let cmd = command_for(&cmd_file, &src, &asm).ok_or("no compile command for block/blk-mq.o")?;
    let out = Command::new("sh")
        .arg("-c")
        .arg(&cmd)
        .current_dir(build)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr)
            .chars()
            .take(400)
            .collect());
    }
    let text = std::fs::read_to_string(&asm).map_err(|e| e.to_string());
    let _ = (std::fs::remove_file(&src), std::fs::remove_file(&asm));
    let lines = parse_markers(&text?);
    if lines.is_empty() {
        return Err("the probe gave no offsets".into());
    }
    std::fs::write(dest, lines).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compile_command_is_kbuilds_aimed_at_the_probe() {
        let cmd = "savedcmd_block/blk-mq.o := ccache gcc -Wp,-MMD,block/.blk-mq.o.d -nostdinc -O2 -DKBUILD_BASENAME='\"blk_mq\"' -c -o block/blk-mq.o block/blk-mq.c\n\nsource_block/blk-mq.o := x\n";
        let c = command_for(cmd, Path::new("/t/p.c"), Path::new("/t/p.s")).unwrap();
        assert_eq!(
            c,
            "ccache gcc -nostdinc -O2 -DKBUILD_BASENAME='\"blk_mq\"' -S -o /t/p.s /t/p.c"
        );
        assert_eq!(
            command_for(
                "savedcmd_x.o := gcc -c -o x.o x.c",
                Path::new("a"),
                Path::new("b")
            ),
            None
        );
    }

    #[test]
    fn markers_are_read_and_nothing_else() {
        let asm = ".text\n.ascii \"->request.q $0\"\n.ascii \"->request_queue.queue_lock $128\"\n\t.ascii \"->bad $x\"\nmov $1, %eax\n";
        assert_eq!(
            parse_markers(asm),
            "request.q 0\nrequest_queue.queue_lock 128\n"
        );
    }
}
