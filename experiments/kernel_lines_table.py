#!/usr/bin/env python3
"""The kernel-lines table (docs/results/kernel-lines/README.md): per kernel line, the base kernel
and each seed-000 fix, from committed matrices. Every statistic comes from `guest-tests compare
--json` (Welch p against the line's base, means, CVs); storm figures are summed from the storm
matrices' results.json files.

Usage: experiments/kernel_lines_table.py GT LINE=BASE:LOCKWAIT_DIR[+DIR...][:STORM_DIR] ...
  GT            the guest-tests binary
  LINE          a label for the table (6.12, 7.3)
  BASE          the line's base kernel in the lock-wait matrix (rt, rt73); every other kernel of
                that matrix whose name starts with BASE+ is a fix
  LOCKWAIT_DIR  seed000-lockwait matrices (joined with '+' when several, e.g. a matrix and its
                extension with more base boots)
  STORM_DIR     a quiesce-storm-unfrozen matrix whose kernels are these kernels + "+storm"
e.g. experiments/kernel_lines_table.py target/release/guest-tests \
    6.12=rt:docs/results/seed000-versions/lockwait:docs/results/seed000-versions/unfrozen \
    7.3=rt73:docs/results/kernel-lines/lockwait:docs/results/kernel-lines/unfrozen
"""
import glob
import json
import os
import subprocess
import sys

P = "rt-lock-randread."
COLS = [
    ("qlock_wait_count_per_kio", "queue_lock contentions / kio"),
    ("qlock_wait_ms_per_kio", "queue_lock wait ms / kio"),
    ("lockwait_ms_per_kio", "all-site lock wait ms / kio"),
    ("iops", "randread IOPS"),
]
SEQ = "seqread-4j.bw_kib_s"


def compare(gt, dirs, kernels):
    out = subprocess.run([gt, "compare", *dirs, "--kernels", ",".join(kernels), "--json"],
                         check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["comparison"]["rows"]
    return {r["metric"]: r for r in rows}


def kernels_of(dirs):
    names = []
    for d in dirs:
        for p in sorted(glob.glob(os.path.join(d, "*", "results.json"))):
            k = json.load(open(p))["info"]["kernel"]
            if k not in names:
                names.append(k)
    return names


def storm(dir_):
    per = {}
    for p in sorted(glob.glob(os.path.join(dir_, "*", "results.json"))):
        r = json.load(open(p))
        if r["status"]["state"] != "ok":
            per.setdefault(r["info"]["kernel"], {"failed": 0}).setdefault("failed", 0)
            per[r["info"]["kernel"]]["failed"] += 1
            continue
        m = r["metrics"]
        s = per.setdefault(r["info"]["kernel"], {"failed": 0})
        s.setdefault("cycles", []).append(m.get("quiesce-storm.storm_cycles", 0))
        for k in ("storm_stranded", "storm_stuck", "storm_kernel_warnings"):
            s[k] = s.get(k, 0) + m.get("quiesce-storm." + k, 0)
    return per


def stat(row, kernel):
    for k, s in row["per_kernel"]:
        if k == kernel:
            return s
    return None


def fmt(v, digits=3):
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}g}"


def cell(s):
    if s is None:
        return "-"
    if s["cv"] is None:
        return fmt(s["mean"])
    return f"{fmt(s['mean'])} (CV {s['cv'] * 100:.0f} %)"


def line_rows(gt, label, base, lock_dirs, storm_dir):
    kernels = [base] + [k for k in kernels_of(lock_dirs) if k.startswith(base + "+")]
    rows = compare(gt, lock_dirs, kernels)
    st = storm(storm_dir) if storm_dir else {}
    out = []
    for k in kernels:
        cells = [label, f"`{k}`"]
        main = rows[P + "qlock_wait_ms_per_kio"]
        s = stat(main, k)
        cells.append(str(s["n"]))
        for metric, _ in COLS:
            r = rows.get(P + metric)
            s = stat(r, k) if r else None
            cells.append(cell(s))
        zeros = sum(1 for v in main["values"][k] if v == 0)
        cells.append(f"{zeros}/{len(main['values'][k])}")
        vs = {v["kernel"]: v for v in main["versus"]}
        cells.append("base" if k == base else fmt(vs[k]["welch_p"], 2))
        seq = stat(rows[SEQ], k) if SEQ in rows else None
        cells.append("-" if seq is None else f"{seq['mean'] / 1024:.0f}")
        ss = st.get(k + "+storm")
        if ss and ss.get("cycles"):
            c = ss["cycles"]
            cells.append(f"{len(c)} ok, {ss['failed']} failed; {min(c):,.0f} / {sum(c):,.0f}")
            cells.append(f"{ss['storm_stranded']:.0f} / {ss['storm_stuck']:.0f} / "
                         f"{ss['storm_kernel_warnings']:.0f}")
        else:
            cells += ["-", "-"]
        out.append(cells)
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    gt = argv[1]
    head = ["line", "kernel", "boots"] + [c[1] for c in COLS] + [
        "boots with 0 queue_lock wait", "Welch p (queue_lock wait vs base)", "seqread MiB/s",
        "unfrozen storm: boots; cycles min per boot / in all", "lost runs / stuck I/Os / warnings"]
    print("| " + " | ".join(head) + " |")
    print("|---" * len(head) + "|")
    for spec in argv[2:]:
        try:
            label, rest = spec.split("=", 1)
            parts = rest.split(":")
            base, lock = parts[0], parts[1].split("+")
            storm_dir = parts[2] if len(parts) > 2 else None
        except (ValueError, IndexError):
            print(f"kernel_lines_table: bad argument '{spec}'", file=sys.stderr)
            return 2
        for cells in line_rows(gt, label, base, lock, storm_dir):
            print("| " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
