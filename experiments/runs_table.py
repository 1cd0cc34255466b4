#!/usr/bin/env python3
"""Per-run values of some metrics, read from a matrix directory's results.json files, and per
kernel: n, min, max, sum. For figures that `guest-tests compare` (means, medians, tests) does
not print: a storm's cycles in all, per-boot values, round-by-round differences.

Usage: experiments/runs_table.py DIR METRIC [METRIC ...]
  e.g. experiments/runs_table.py docs/results/seed000-versions/unfrozen quiesce-storm.storm_cycles \
           quiesce-storm.storm_stranded
A metric a run does not have prints as '-'. Failed runs are listed with their state and left
out of the per-kernel figures.
"""
import glob
import json
import os
import sys


def fmt(v):
    if v is None:
        return "-"
    return f"{v:,.0f}" if abs(v) >= 1000 or float(v).is_integer() else f"{v:.4g}"


def main(argv):
    if len(argv) < 3:
        print("usage: experiments/runs_table.py DIR METRIC [METRIC ...]", file=sys.stderr)
        return 2
    root, metrics = argv[1], argv[2:]
    paths = sorted(glob.glob(os.path.join(root, "**", "results.json"), recursive=True))
    paths = [p for p in paths if ".attempt" not in p]
    if not paths:
        print(f"runs_table: no results.json under {root}", file=sys.stderr)
        return 2
    print("| run | kernel | repeat | state | " + " | ".join(metrics) + " |")
    print("|---" * (4 + len(metrics)) + "|")
    per_kernel = {}
    for p in paths:
        r = json.load(open(p))
        info, state = r["info"], r["status"]["state"]
        vals = [r["metrics"].get(m) for m in metrics]
        run = os.path.relpath(os.path.dirname(p), root)
        print(f"| {run} | {info['kernel']} | {info['repeat']} | {state} | "
              + " | ".join(fmt(v) for v in vals) + " |")
        if state == "ok":
            k = per_kernel.setdefault(info["kernel"], [[] for _ in metrics])
            for col, v in zip(k, vals):
                if v is not None:
                    col.append(v)
    print()
    print("| kernel | metric | n | min | max | sum |")
    print("|---|---|---|---|---|---|")
    for kernel, cols in per_kernel.items():
        for m, col in zip(metrics, cols):
            if col:
                print(f"| {kernel} | {m} | {len(col)} | {fmt(min(col))} | {fmt(max(col))} "
                      f"| {fmt(sum(col))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
