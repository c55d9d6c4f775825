#!/usr/bin/env python3
"""tools/soak.py: run tickwheel-stress back to back for a chosen time with random profiles.

Each run takes a named profile, scales its populations, and draws from a seeded generator the
engine's options (shards, tick, wait strategy, pinning, transfer cap, sometimes a pending limit,
sometimes a thread-pool executor) and two to four canceller threads beside the producers, so that
most cancels come from a thread other than the one that scheduled. Each run lasts 15 to 45
seconds, so the accounting is settled and checked every 15 to 45 seconds: the harness checks its
own exactly-once rules when the engine stops, exits non-zero on any broken one, and writes its JSON
report; this script reads every report, checks the accounting again from the report's counters
(scheduled + periodic re-arms == fired + cancelled + returned at stop; no double, overlapping,
stray, early or off-shard fire), adds up the operations done, and prints one line per run. A run
whose accounting broke, or that the harness refused, is a violation: its output and report are
kept, its command line printed, and the soak exits 1 when the time is up.

Usage: tools/soak.py STRESS_BINARY [--minutes 10] [--seed S] [--keep DIR]
"""

import argparse
import json
import os
import random
import shlex
import subprocess
import sys
import tempfile
import time

# The report's counters that must be zero in a run that kept every rule (see stress/report.cpp).
MUST_BE_ZERO = ["double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires", "early_fires", "fired_before_tick",
                "cancel_true_not_pending", "moved_early", "refused_pending", "off_shard", "probe_failures", "returned_cancel_false",
                "pending_not_returned", "stale_cancel_true", "unrecorded_fires"]

# Populations per profile, scaled down from the profile's own so that a run's fill takes a small part
# of its time on two cores; a factor drawn per run scales them further.
PROFILES = {
    "default": ["--timers", 400_000, "--periodic", 10_000],
    "gateway": ["--timers", 800_000],
    "heartbeat": ["--timers", 10_000, "--periodic", 100_000],
    "burst": ["--timers", 20_000, "--burst", 150_000],
    "mixed": ["--timers", 200_000, "--periodic", 20_000, "--burst", 50_000],
}


def draw_run(rng, seconds):
    """The command line arguments of one run: a profile and a random configuration."""
    profile = rng.choice(sorted(PROFILES))
    scale = rng.choice([0.25, 0.5, 1.0])
    # --no-fit: the drawn configuration as drawn (the harness would otherwise size producers and
    # cancellers down to the machine's CPUs); the soak checks accounting, not jitter.
    args = ["--profile", profile, "--duration", f"{seconds}s", "--seed", str(rng.randrange(1, 2**31)), "--no-fit"]
    base = PROFILES[profile]
    for flag, count in zip(base[::2], base[1::2]):
        args += [flag, str(max(1, int(count * scale)))]
    args += ["--cancellers", str(rng.randint(2, 4))]
    args += ["--shards", str(rng.choice([1, 2, 3, 4]))]
    args += ["--wait", rng.choice(["sleep", "sleep", "hybrid", "spin"])]
    if profile != "burst":  # the burst profile's 100 ms tick is what makes its flood land in one tick
        args += ["--tick", rng.choice(["100us", "1ms", "1ms", "10ms"])]
    args += ["--transfer-cap", str(rng.choice([1_000, 20_000, 100_000]))]
    if rng.random() < 0.3:  # callbacks on a thread pool: the hand-off and the return of each node
        args += ["--executor", "pool", "--pool-threads", str(rng.randint(1, 3))]
    if rng.random() < 0.3:
        args.append("--no-pin")
    if rng.random() < 0.2:  # a limit some schedules meet: rejected, counted and retried
        args += ["--max-pending", str(rng.choice([50_000, 200_000]))]
    return profile, args


def shape(args):
    """The engine options of a run, short: shards, wait, tick."""
    def value(flag, otherwise):
        return args[args.index(flag) + 1] if flag in args else otherwise
    pool = f"pool{value('--pool-threads', '?')}" if "--executor" in args else "inline"
    return f"{value('--shards', '?')}x {value('--wait', '?'):6s} {value('--tick', '100ms'):>5s} {pool:6s}"


def check(report):
    """The violations a report shows: the harness's own, and the sums re-done from its counters."""
    problems = list(report.get("failures", []))
    acc = report["accounting"]
    settled = acc["fired"] + acc["cancelled"] + acc["returned_at_stop"]
    if acc["scheduled"] + acc["rearmed"] != settled:
        problems.append(f"scheduled {acc['scheduled']} + rearmed {acc['rearmed']} != fired {acc['fired']}"
                        f" + cancelled {acc['cancelled']} + returned {acc['returned_at_stop']}")
    problems += [f"{name} = {acc[name]}" for name in MUST_BE_ZERO if acc.get(name, 0) != 0]
    if report["ok"] != (not problems):
        problems.append(f"the report says ok = {report['ok']}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("stress", help="the tickwheel-stress binary")
    parser.add_argument("--minutes", type=float, default=10.0, help="how long to soak (default 10)")
    parser.add_argument("--seed", type=int, default=None, help="seeds the draws (default: from the time)")
    parser.add_argument("--keep", default="soak-failures", help="where a violating run's report is kept")
    opts = parser.parse_args()

    seed = opts.seed if opts.seed is not None else int(time.time())
    rng = random.Random(seed)
    end = time.monotonic() + opts.minutes * 60
    totals = {"runs": 0, "scheduled": 0, "cancelled": 0, "fired": 0, "periodic_runs": 0, "returned": 0}
    violations = 0
    print(f"soak: {opts.minutes:g} min, seed {seed} (tools/run.sh soak {opts.minutes:g} --seed {seed} draws the "
          "same runs)", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        while True:
            left = end - time.monotonic()
            if left < 8:
                break
            seconds = int(min(rng.randint(15, 45), max(5, left - 3)))
            profile, args = draw_run(rng, seconds)
            report_path = os.path.join(scratch, "run.json")
            command = [opts.stress, *args, "--json", report_path, "--svg", "", "--quiet"]
            started = time.monotonic()
            done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            took = time.monotonic() - started
            totals["runs"] += 1
            try:
                with open(report_path) as f:
                    report = json.load(f)
                problems = check(report)
            except (OSError, ValueError, KeyError) as e:
                report, problems = None, [f"no readable report ({e})"]
            if done.returncode != 0 and not problems:
                problems.append(f"exit status {done.returncode}")
            if report is not None:
                acc = report["accounting"]
                totals["scheduled"] += acc["scheduled"]
                totals["cancelled"] += acc["cancelled"]
                totals["fired"] += acc["fired"]
                totals["returned"] += acc["returned_at_stop"]
                totals["periodic_runs"] += acc["rearmed"]
            line = (f"run {totals['runs']:3d} {took:5.1f}s {profile:9s} {shape(args)} "
                    + (f"scheduled {acc['scheduled']:>10,} re-armed {acc['rearmed']:>10,} fired {acc['fired']:>10,} "
                       f"cancelled {acc['cancelled']:>10,} returned {acc['returned_at_stop']:>8,}"
                       if report is not None else ""))
            print(line + ("  OK" if not problems else "  VIOLATION"), flush=True)
            if problems:
                violations += 1
                os.makedirs(opts.keep, exist_ok=True)
                kept = os.path.join(opts.keep, f"run-{totals['runs']}.log")
                with open(kept, "w") as f:
                    f.write(shlex.join(command) + "\n\n" + done.stdout)
                if report is not None:
                    os.replace(report_path, os.path.join(opts.keep, f"run-{totals['runs']}.json"))
                for p in problems:
                    print(f"    {p}")
                print(f"    command: {shlex.join(args)}  (output kept in {kept})")
    print(f"soak: {totals['runs']} runs, {totals['scheduled']:,} timers scheduled, {totals['fired']:,} fires "
          f"({totals['periodic_runs']:,} of them periodic runs), {totals['cancelled']:,} cancelled, "
          f"{totals['returned']:,} returned at stop; {violations} violations")
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
