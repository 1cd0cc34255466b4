#!/usr/bin/env python3
"""The summary table of experiments/profile-backend.sh from the flat profiles and JSON of one run.

Usage: profile_backend_table.py OUT_DIR CLIENT
"""
import json
import re
import sys

out, client = sys.argv[1], sys.argv[2]
# Symbol patterns per cost; a symbol counts in the first group it matches.
GROUPS = [
    ("context switches and preemption (finish_task_switch, __schedule, irqentry_exit_to_user_mode)",
     r"finish_task_switch|__schedule\b|irqentry_exit_to_user_mode"),
    ("eventfd write / read (signalling, kicks; the wake-up of the waiting thread)",
     r"_raw_spin_unlock_irq$|eventfd_(write|read)|__GI___libc_write|ksys_(write|read)|vfs_(write|read)"),
    ("guest-memory translation (vm-memory region lookups, vu_gpa_to_va)",
     r"to_region_addr|GuestMemoryBackendSliceIterator|vu_gpa_to_va|find_region"),
    ("zero fill (memset)", r"memset"),
    ("small copies (memmove / memcpy)", r"memmove|memcpy"),
    ("statistics histograms (hdrhistogram)", r"hdrhistogram"),
    ("clock_gettime", r"clock_gettime"),
    ("sched_yield", r"sched_yield"),
]
print(f"| share of the backend's samples, {client} client | ours (one worker per queue) "
      "| ours --threads 1 | qemu-storage-daemon |")
print("|---|---|---|---|")
flat = {}
for name in ("ours-t8", "ours-t1", "qsd"):
    rows = []
    for line in open(f"{out}/{name}-flat.txt"):
        m = re.match(r"^\s*([0-9.]+)%\s+\[[.k]\]\s+(.*?)\s*$", line)
        if m:
            rows.append((float(m.group(1)), m.group(2)))
    flat[name] = rows


def group(sym):
    """The first group whose pattern the symbol matches, or None."""
    return next((label for label, pat in GROUPS if re.search(pat, sym)), None)


sums = {name: {label: 0.0 for label, _ in GROUPS} for name in flat}
for name, rows in flat.items():
    for pct, sym in rows:
        label = group(sym)
        if label:
            sums[name][label] += pct
for label, _ in GROUPS:
    print(f"| {label} | " + " | ".join(f"{sums[n][label]:.1f} %" for n in flat) + " |")
effs = []
for name in flat:
    j = json.load(open(f"{out}/{name}.json"))
    effs.append(j["ops_per_backend_cpu_second"])
print("| ops per backend CPU-second (this profiled run) | " +
      " | ".join(f"{e / 1e6:.2f}M" for e in effs) + " |")
print("| backend CPU per request, us | " + " | ".join(f"{1e6 / e:.3f}" for e in effs) + " |")
unresolved = [sum(p for p, sym in rows if sym.startswith("0x")) for rows in flat.values()]
print("| samples in unresolved symbols (a stripped binary: counted in no group) | " +
      " | ".join(f"{u:.1f} %" for u in unresolved) + " |")
