#!/usr/bin/env python3
"""tools/bench_ab.py — before/after of Google Benchmark binaries, alternated round by round.

Runs each binary once per round (the same --benchmark_filter), for --rounds rounds, the order
rotated every round so that no binary always runs first (on a noisy VM the slot in the round moves a
case by several percent), and prints per case: each binary's median, and for each binary after the
first the paired ratio to the first (the same round's two figures): its median, its interquartile
range, and in how many rounds it was the slower. A paired ratio whose "slower in" count is near half
the rounds is noise, whatever its median reads.

Usage:
  tools/bench_ab.py --rounds 40 --filter '^throughput/engine/' before=/tmp/old/tickwheel-engine-bench \\
                    after=build/bench/tickwheel-engine-bench [--json FILE]

Real time per iteration (cpu time for a benchmark that reports no real time). Nothing is kept
between runs but --json, which holds every figure of every round.
"""
import argparse
import json
import statistics
import subprocess
import sys


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("binaries", nargs="+", metavar="NAME=PATH", help="the first is the baseline")
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--filter", default="", help="passed on as --benchmark_filter")
    p.add_argument("--json", default="", help="write every round's figures here")
    a = p.parse_args()
    a.named = []
    for item in a.binaries:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            p.error(f"'{item}' is not NAME=PATH")
        a.named.append((name, path))
    if len(a.named) < 2:
        p.error("two binaries or more: the baseline first")
    return a


def run_once(path, flt):
    cmd = [path, "--benchmark_format=json"] + ([f"--benchmark_filter={flt}"] if flt else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return {b["name"]: b.get("real_time", b["cpu_time"]) for b in json.loads(out)["benchmarks"]
            if b.get("run_type") != "aggregate"}


def quartiles(xs):
    xs = sorted(xs)
    return xs[(len(xs) - 1) // 4], xs[(3 * (len(xs) - 1)) // 4]


def main():
    a = parse_args()
    rounds = []  # per round: {name: {case: time}}
    for r in range(a.rounds):
        order = a.named[r % len(a.named):] + a.named[:r % len(a.named)]
        rounds.append({name: run_once(path, a.filter) for name, path in order})
        print(f"round {r + 1}/{a.rounds}", file=sys.stderr, flush=True)
    base = a.named[0][0]
    cases = sorted(set().union(*(set(rd[base]) for rd in rounds)))
    names = [n for n, _ in a.named]
    print("| case | " + " | ".join(names) + " | " +
          " | ".join(f"{n}/{base}: median (IQR), slower in" for n in names[1:]) + " |")
    print("|---" * (1 + 2 * len(names) - 1) + "|")
    for case in cases:
        cells = [f"{statistics.median(rd[n][case] for rd in rounds if case in rd[n]):.1f}" for n in names]
        for n in names[1:]:
            ratios = [rd[n][case] / rd[base][case] for rd in rounds if case in rd[n] and case in rd[base]]
            lo, hi = quartiles(ratios)
            slower = sum(x > 1 for x in ratios)
            cells.append(f"{statistics.median(ratios):.3f} ({lo:.2f}-{hi:.2f}), {slower} of {len(ratios)}")
        print(f"| {case} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"binaries": dict(a.named), "filter": a.filter, "rounds": rounds}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
