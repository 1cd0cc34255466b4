#!/usr/bin/env python3
"""The goal table of experiments/restart-experiment.sh, from what it kept in OUT: per run (NAME =
DEVICE-qemuQEMU-runI) NAME.status.json (test exit status), NAME.restarts.json (every backend
instance: fds, RSS, in flight before the kill, chains the next one resubmitted) and the test's
`RESTART-RESULT {json}` line in NAME.log (fio status, job errors, bad dmesg lines).

Usage: restart_goals.py OUT [MIN_RESUBMITTED]. Prints a Markdown table per run, then per mode
(device and QEMU) how many runs met every goal: exit 0 (fio exit 0, no job error or verify
failure, no I/O error / SCSI error handling / hung task in dmesg, no hang), >= MIN chains
resubmitted on request queues over the kills, fds of all instances within 2 and RSS within
+50 % of the smallest."""

import glob
import json
import os
import re
import sys


def load(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def result_line(log_path):
    try:
        text = open(log_path, errors="replace").read()
    except OSError:
        return None, ""
    m = re.search(r"^RESTART-RESULT (\{.*\})$", text, re.M)
    why = ""
    p = re.search(r"panicked at [^\n]*\n([^\n]*)", text)
    if p:
        why = p.group(1).strip()[:120]
    elif "exit" in text and not m:
        why = "no result line"
    return (json.loads(m.group(1)) if m else None), why


def flat(values, fds):
    if not values:
        return False
    lo, hi = min(values), max(values)
    return hi - lo <= 2 if fds else hi <= lo * 1.5


def main():
    out = sys.argv[1]
    need = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    rows, modes = [], {}
    for st_path in sorted(glob.glob(os.path.join(out, "*.status.json"))):
        name = os.path.basename(st_path)[: -len(".status.json")]
        st = load(st_path, {})
        recs = load(os.path.join(out, name + ".restarts.json"), [])
        res, why = result_line(os.path.join(out, name + ".log"))
        killed = [r for r in recs if r.get("killed")]
        resub = [r.get("resubmitted") or 0 for r in killed]
        other = [r.get("resubmitted_other") or 0 for r in killed]
        inflight = [r.get("in_flight") for r in killed]
        fds = [r["backend_fds"] for r in recs if r.get("backend_fds") is not None]
        rss = [r["backend_rss_kib"] for r in recs if r.get("backend_rss_kib") is not None]
        ok = (
            st.get("exit") == 0
            and sum(resub) >= need
            and flat(fds, True)
            and flat(rss, False)
        )
        mode = name.rsplit("-run", 1)[0]
        modes.setdefault(mode, []).append(ok)
        fio = "?" if res is None else f"rc {res['fio_rc']}, {res['fio_job_errors']} job err"
        dmesg = "?" if res is None else str(res["dmesg_bad"])
        rows.append(
            f"| {name} | {len(killed)} | {'/'.join('-' if x is None else str(x) for x in inflight)} "
            f"| {'/'.join(map(str, resub))} | **{sum(resub)}** | {'/'.join(map(str, other))} "
            f"| {fio} | {dmesg} | {fds[0] if fds else '?'} / {fds[-1] if fds else '?'} "
            f"(max-min {max(fds) - min(fds) if fds else '?'}) "
            f"| {rss[0] if rss else '?'} / {rss[-1] if rss else '?'} "
            f"| {st.get('wall_s', '?')} | {'met' if ok else 'MISSED ' + why} |"
        )
    print(
        "| run | kills | in flight before each kill | chains resubmitted per kill (request "
        "queues) | total | other queues (SCSI control/event) | fio (verify_fatal) | bad dmesg "
        "lines | backend fds first / last | backend RSS KiB first / last | wall s | goals |"
    )
    print("|" + "---|" * 12)
    for r in rows:
        print(r)
    print()
    for mode, oks in modes.items():
        print(f"{mode}: goals met in {sum(oks)} of {len(oks)} runs (>= {need} chains resubmitted)")


if __name__ == "__main__":
    main()
