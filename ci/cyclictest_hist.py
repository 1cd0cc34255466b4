"""cyclictest's histogram output (`-h US`), read once for every script that needs its figures.

`read(path)` gives {"n", "p50", "p99", "max", "overflow"} in microseconds (a quantile is the first
1 us bucket whose cumulative count reaches it; one in the overflow is cyclictest's max), or None
when the file is missing or holds no samples. Buckets with a zero count may be absent.
"""
import os
import re


def read(path):
    if not os.path.exists(path):
        return None
    counts, overflow, mx = {}, 0, None
    for line in open(path):
        m = re.match(r"^(\d+)\s+(\d+)\s*$", line)
        if m:
            counts[int(m.group(1))] = int(m.group(2))
        elif line.startswith("# Histogram Overflows:"):
            overflow = sum(int(x) for x in line.split(":")[1].split())
        elif line.startswith("# Max Latencies:"):
            mx = max(int(x) for x in line.split(":")[1].split())
    n = sum(counts.values()) + overflow
    if n == 0:
        return None

    def q(f):
        want, acc = f * n, 0
        for us in sorted(counts):
            acc += counts[us]
            if acc >= want:
                return us
        return mx  # in the overflow

    return {"n": n, "p50": q(0.5), "p99": q(0.99), "max": mx, "overflow": overflow}
