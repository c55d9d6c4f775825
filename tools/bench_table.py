#!/usr/bin/env python3
"""tools/bench_table.py — runs a tickwheel benchmark binary with repetitions and prints the README's table.

Each scenario of bench/wheel_bench.cpp runs on the wheel, on the binary-heap baseline and (but
`periodic`) on the reference wheel in the same binary; this script pairs the rows of each (case, N)
by their names (<case>/<queue>/<N>), takes the median over the repetitions of the CPU time per
operation, and prints one Markdown row per (case, N). Given tickwheel-engine-bench instead, it pairs
the engine with the mutex-guarded heap lanes per (case, shards, producer threads)
(<case>/<queue>/<shards>/.../threads:<T>) and uses real time, as that binary measures it; its
executor cases (<case>/<executor>/<M>/...) get a table of their own, the pool beside the inline path
per (case, timers due at once). Every figure comes from the benchmark's JSON output, and so do the
case descriptions: the binary writes them into the JSON context from the same table that registers
the cases, so nothing here is typed by hand and nothing can drift.

Usage:
  tools/bench_table.py [BINARY] [--repetitions R] [--filter REGEX] [--cpu K] [--json FILE] [BINARY FLAGS]
  tools/bench_table.py --from-json FILE     # format a saved run without running anything

Exit status 1 if any benchmark reported an error (a lost timer, an early fire). Standard library
only.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys

QUEUES = ("wheel", "engine", "heap", "ref", "inline", "pool")
EXECUTORS = ("inline", "pool")  # the two sides of tickwheel-engine-bench's executor cases
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
BASE_N = 1_000_000  # the size the "×(N vs 1M)" column compares against


def parse_args():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    default_binary = os.path.join(root, "build", "bench", "tickwheel-bench")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("binary", nargs="?", default=default_binary,
                   help="the benchmark binary (default: build/bench/tickwheel-bench)")
    p.add_argument("--repetitions", "-r", type=int, default=5,
                   help="repetitions per benchmark (default 5)")
    p.add_argument("--filter", "-f", default=None, help="passed on as --benchmark_filter")
    p.add_argument("--cpu", type=int, default=None,
                   help="pin the benchmark to this CPU (passed on as --tickwheel_cpu)")
    p.add_argument("--json", default=None, help="also save the raw JSON output here")
    p.add_argument("--from-json", default=None,
                   help="format this saved JSON output instead of running the binary")
    p.add_argument("--no-interleave", action="store_true",
                   help="run each benchmark's repetitions back to back (default: all shuffled)")
    args, extra = p.parse_known_args()
    args.extra = extra  # anything else goes to the binary, e.g. --tickwheel_shards=1,2
    return args


def run_benchmark(args):
    cmd = [args.binary, "--benchmark_format=json",
           f"--benchmark_repetitions={args.repetitions}",
           "--benchmark_report_aggregates_only=false"]
    if not args.no_interleave:
        # The repetitions of all benchmarks are shuffled together, so a slow spell of the machine
        # (other jobs, frequency changes) falls on the wheel and the heap alike.
        cmd.append("--benchmark_enable_random_interleaving=true")
    if args.filter:
        cmd.append(f"--benchmark_filter={args.filter}")
    if args.cpu is not None:
        cmd.append(f"--tickwheel_cpu={args.cpu}")
    cmd += args.extra
    print("running: " + " ".join(cmd), file=sys.stderr)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(out)
    return json.loads(out), cmd


def cpu_model():
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def split_name(run):
    """(case, queue, N, threads) from a run name such as schedule/wheel/1000000/iterations:2097152
    or schedule/engine/2/iterations:1048576/real_time/threads:2 (N is then the shard count)."""
    parts = run.get("run_name", run["name"]).split("/")
    if len(parts) < 3 or parts[1] not in QUEUES:
        return None
    threads = next((int(p.split(":", 1)[1]) for p in parts if p.startswith("threads:")), 1)
    return parts[0], parts[1], int(parts[2]), threads


def collect(data):
    """{(case, N, threads): {queue: [one dict per repetition]}} from the iteration rows."""
    table = {}
    for run in data["benchmarks"]:
        if run.get("run_type") != "iteration" or run.get("error_occurred"):
            continue
        key = split_name(run)
        if key is None:
            continue
        case, queue, n, threads = key
        clock = "real_time" if "/real_time" in run.get("run_name", run["name"]) else "cpu_time"
        ns_per_iter = run[clock] * TIME_UNIT_NS[run["time_unit"]]
        table.setdefault((case, n, threads), {}).setdefault(queue, []).append({
            "ns_per_op": ns_per_iter / run.get("ops_per_iter", 1.0),
            "bytes_per_timer": run.get("bytes_per_timer"),
            "worst_advance_us": run.get("worst_advance_us"),
            "p999_advance_us": run.get("p999_advance_us"),
            "max_pass_work": run.get("max_pass_work"),
        })
    return table


def errors(data):
    return [f"{r['name']}: {r.get('error_message', '?')}"
            for r in data["benchmarks"] if r.get("error_occurred")]


def med(reps, field):
    values = [r[field] for r in reps if r.get(field) is not None]
    return statistics.median(values) if values else None


def fmt_ns(v):
    if v is None:
        return "–"
    return f"{v:.1f}" if v < 100 else f"{v:.0f}"


def fmt_num(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def fmt_range(reps):
    if not reps:
        return "–"
    values = [r["ns_per_op"] for r in reps]
    return f"{fmt_ns(min(values))}–{fmt_ns(max(values))}"


def pair(wheel, heap, field, digits=1):
    return f"{fmt_num(med(wheel, field), digits)} / {fmt_num(med(heap, field), digits)}"


def case_order(data):
    """Cases in the order the binary registered them (its "cases" context), then any others."""
    order = [c for c in data.get("context", {}).get("cases", "").split(",") if c]
    for run in data["benchmarks"]:
        key = split_name(run)
        if key and key[0] not in order:
            order.append(key[0])
    return order


HEADER = ["case", "N", "wheel ns/op", "heap ns/op", "heap/wheel", "ref ns/op", "ref/wheel",
          "wheel min–max", "heap min–max", "ref min–max", "wheel ×(N vs 1M)", "bytes/timer wheel / heap",
          "worst advance µs wheel / heap", "p99.9 advance µs wheel / heap", "wheel max pass work"]

NOTES = ("ns/op is CPU time per operation (for `fire`, per fired timer; for `periodic`, per run); "
         "ref is the reference wheel (bench/reference_wheel.hpp: the plain 8 x 256 wheel of the "
         "issue's ratas, handles without a generation); "
         "min–max is the range over the repetitions; heap/wheel or ref/wheel > 1 means the wheel is faster; "
         "wheel ×(N vs 1M) is the wheel's cost per op at N over its cost at 1M. Worst / p99.9 advance: the slowest and the "
         "99.9th-percentile advance() of an instrumented drain in `fire` (medians over the "
         "repetitions; the worst includes any preemption of the benchmark). Wheel max pass work: "
         "the most fires + level moves one advance() did (in `fire` or `periodic`).")


def row_cells(case, n, wheel, heap, ref, base_ns):
    w_ns, h_ns, r_ns = med(wheel, "ns_per_op"), med(heap, "ns_per_op"), med(ref, "ns_per_op")
    cells = [case, f"{n:,}", fmt_ns(w_ns), fmt_ns(h_ns),
             f"{h_ns / w_ns:.2f}×" if w_ns and h_ns else "–",
             fmt_ns(r_ns), f"{r_ns / w_ns:.2f}×" if w_ns and r_ns else "–",
             fmt_range(wheel), fmt_range(heap), fmt_range(ref),
             f"{w_ns / base_ns:.2f}" if w_ns and base_ns else "–",
             pair(wheel, heap, "bytes_per_timer")]
    if med(wheel, "worst_advance_us") is not None or med(heap, "worst_advance_us") is not None:
        cells += [pair(wheel, heap, "worst_advance_us"), pair(wheel, heap, "p999_advance_us", 2)]
    else:
        cells += ["", ""]
    pass_work = med(wheel, "max_pass_work")
    cells.append("" if pass_work is None else fmt_num(pass_work, 0))
    return cells


ENGINE_HEADER = ["case", "shards", "producers", "engine ns/op", "heap ns/op", "heap/engine",
                 "engine min–max", "heap min–max"]

ENGINE_NOTES = ("ns/op is real time per operation over all producer threads together (the "
                "inverse of the aggregate rate; one thread's own cost is that times the producer "
                "count); min–max is the range over the repetitions; heap/engine > 1 means the "
                "engine is faster. The heap is the baseline a user writes by hand: one "
                "mutex-guarded binary heap and consumer thread per shard.")


def engine_rows(table, order):
    lines = ["| " + " | ".join(ENGINE_HEADER) + " |", "|" + "|".join(["---"] * len(ENGINE_HEADER)) + "|"]
    for case in order:
        for (c, shards, threads) in sorted(k for k in table if k[0] == case):
            row = table[(c, shards, threads)]
            if "engine" not in row and "heap" not in row:
                continue
            e, h = row.get("engine", []), row.get("heap", [])
            e_ns, h_ns = med(e, "ns_per_op"), med(h, "ns_per_op")
            cells = [case, str(shards), str(threads), fmt_ns(e_ns), fmt_ns(h_ns),
                     f"{h_ns / e_ns:.2f}×" if e_ns and h_ns else "–", fmt_range(e), fmt_range(h)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


EXECUTOR_HEADER = ["case", "timers due", "inline ns/timer", "pool ns/timer",
                   "hand-off ns/timer (pool − inline)", "pool/inline", "inline min–max",
                   "pool min–max"]

EXECUTOR_NOTES = ("Executor cases: ns/timer is real time per fired timer (per run, for a periodic "
                  "case) of a caller-driven engine with one shard, all the timers due at once; "
                  "inline: no executor, the poll runs the callbacks; pool: a ThreadPoolExecutor "
                  "of one thread, timed until every callback has run and a poll has taken its "
                  "node back. pool − inline is the hand-off's cost per fired timer.")


def executor_rows(table, order):
    lines = ["| " + " | ".join(EXECUTOR_HEADER) + " |",
             "|" + "|".join(["---"] * len(EXECUTOR_HEADER)) + "|"]
    for case in order:
        for key in sorted(k for k in table if k[0] == case):
            row = table[key]
            if not any(e in row for e in EXECUTORS):
                continue
            i, p = row.get("inline", []), row.get("pool", [])
            i_ns, p_ns = med(i, "ns_per_op"), med(p, "ns_per_op")
            cells = [case, f"{key[1]:,}", fmt_ns(i_ns), fmt_ns(p_ns),
                     fmt_ns(p_ns - i_ns) if i_ns and p_ns else "–",
                     f"{p_ns / i_ns:.2f}×" if i_ns and p_ns else "–", fmt_range(i), fmt_range(p)]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def render(data, cmd, repetitions):
    ctx = data.get("context", {})
    table = collect(data)
    order = case_order(data)
    engine = any("engine" in queues for queues in table.values())
    executor = any(e in queues for queues in table.values() for e in EXECUTORS)
    engine_binary = engine or executor
    reps_seen = max((len(q) for v in table.values() for q in v.values()), default=0)
    pinned = f", pinned to CPU {ctx['pinned_cpu']}" if "pinned_cpu" in ctx else ""
    load = ""
    if cmd and hasattr(os, "getloadavg"):
        load = f"; load average at the end {os.getloadavg()[0]:.2f}"
    what = "real time" if engine_binary else "CPU time"
    lines = [
        f"{'tickwheel-engine-bench' if engine_binary else 'tickwheel-bench'}: median of {reps_seen} "
        f"repetitions (requested {repetitions}) of {what} per operation; machine: {ctx.get('num_cpus', os.cpu_count())} x {cpu_model()}, "
        f"{ctx.get('mhz_per_cpu', '?')} MHz{pinned}{load}; compiler {ctx.get('compiler', '?')}; "
        f"{ctx.get('date', '')}",
        "",
    ]
    if "workload" in ctx and (engine or not engine_binary):
        lines += [f"Workload: {ctx['workload']}.", ""]
    if engine:
        lines += engine_rows(table, order)
    if executor:
        if engine:
            lines.append("")
        if "executor_workload" in ctx:
            lines += [f"Executor cases: {ctx['executor_workload']}.", ""]
        lines += executor_rows(table, order)
    if not engine_binary:
        lines.append("| " + " | ".join(HEADER) + " |")
        lines.append("|" + "|".join(["---"] * len(HEADER)) + "|")
        for case in order:
            base = table.get((case, BASE_N, 1), {}).get("wheel")
            base_ns = med(base, "ns_per_op") if base else None
            for n in sorted(n for (c, n, _) in table if c == case):
                row = table[(case, n, 1)]
                cells = row_cells(case, n, row.get("wheel", []), row.get("heap", []), row.get("ref", []),
                                  base_ns)
                lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    by_name = {k.split(":", 1)[1]: v for k, v in ctx.items() if k.startswith("case:")}
    if by_name:
        lines.append("Cases:")
        for case in order + sorted(set(by_name) - set(order)):
            if case in by_name:
                lines.append(f"- `{case}`: {by_name[case]}")
        lines.append("")
    if engine:
        lines.append(ENGINE_NOTES)
    if executor:
        lines.append(EXECUTOR_NOTES)
    if not engine_binary:
        lines.append(NOTES)
    if cmd:
        lines += ["", "Command: `" + " ".join(cmd) + "`"]
    bad = errors(data)
    if bad:
        lines += ["", "Benchmarks that reported an error (left out above):"]
        lines += [f"- {e}" for e in bad]
    if ctx.get("tickwheel_build", "").startswith("assertions ON"):
        lines += ["", "WARNING: built with assertions on; these are not release figures."]
    return "\n".join(lines)


def main():
    args = parse_args()
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            data = json.load(f)
        cmd = None
    else:
        data, cmd = run_benchmark(args)
    print(render(data, cmd, args.repetitions))
    return 1 if errors(data) else 0


if __name__ == "__main__":
    sys.exit(main())
