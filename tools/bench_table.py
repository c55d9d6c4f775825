#!/usr/bin/env python3
"""tools/bench_table.py — runs a tickwheel benchmark binary with repetitions and prints its tables.

Each scenario of bench/wheel_bench.cpp runs on the wheel, on the binary-heap baseline and (but
`periodic`) on the reference wheel in the same binary; this script pairs the rows of each (case, N)
by their names (<case>/<queue>/<N>), takes the median over the repetitions of the CPU time per
operation, and prints one Markdown row per (case, N). Given tickwheel-engine-bench instead, it pairs
the engine with the mutex-guarded heap lanes per (case, shards, producer threads)
(<case>/<queue>/<shards>/.../threads:<T>) and uses real time, as that binary measures it; its
executor cases (<case>/<executor>/<M>/...) get a table of their own, the pool beside the inline path
per (case, timers due at once); its `mix` cases (the owner's share of a shard's pairs against another
thread's, beside heap lanes) and `owned` cases (the owner's calls beside a standalone Wheel's) get
one table each. Every figure comes from the benchmark's JSON output, and so do the case
descriptions: the binary writes them into the JSON context from the same table that registers the
cases, so nothing here is typed by hand and nothing can drift.

Given tickwheel-stress (or a JSON report it wrote), it runs the harness once and renders its floor
table (what the engine adds above the platform's own wake-up jitter, per percentile), the lateness
of every fire, the throughput and the accounting, from the harness's own JSON report.

Given examples/gateway/run_gateway.py (its own arguments after it: --server, --load, --asio and the
load), it runs the reference gateway on tickwheel and on Boost.Asio and renders the runner's table
of medians from the report it writes.

Given the timer peers' run.sh (../shared/peers/run.sh: the same seeded workloads on ratas, a lazy
heap and this checkout's Wheel, one process per peer), it runs them once per population in
--peers-n with --repetitions runs each, keeps every RESULT line in the JSON, and renders one row
per population: tickwheel's median beside ratas's and the heap's for each workload.

With --doc FILE --section NAME the tables, the machine they ran on (CPU, cores, clock source,
kernel, load average, date, commit) and the commands that made them replace the block between
`<!-- bench_table.py section=NAME begin -->` and its `end` marker in FILE (appended when FILE has
none), so a re-run replaces a section instead of adding to it. The machine and the commands are
saved in the JSON (--json) beside the benchmark's own output, so --from-json regenerates the same
block from the file alone.

Usage:
  tools/bench_table.py [BINARY] [--repetitions R] [--filter REGEX] [--cpu K] [--json FILE]
                       [--doc FILE --section NAME] [BINARY FLAGS]
  tools/bench_table.py --from-json FILE [--doc FILE --section NAME]   # format a saved run
  tools/bench_table.py --check docs/benchmarks.md   # each section == its docs/bench/<NAME>.json?

--check regenerates every generated section of the file from the JSON beside it
(bench/<NAME>.json, relative to the file) and fails naming each section that differs or has no
JSON, so a figure typed into the file by hand, or a JSON changed without its section, is caught
(CTest `tools.bench_doc`).

Exit status 1 if any benchmark reported an error (a lost timer, an early fire). Standard library
only.
"""

import argparse
import datetime
import tempfile
import json
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUEUES = ("wheel", "engine", "heap", "ref", "inline", "pool")
EXECUTORS = ("inline", "pool")  # the two sides of tickwheel-engine-bench's executor cases
TIME_UNIT_NS = {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
BASE_N = 1_000_000  # the size the "×(N vs 1M)" column compares against


def parse_args():
    default_binary = os.path.join(ROOT, "build", "bench", "tickwheel-bench")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0], allow_abbrev=False)
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
    p.add_argument("--doc", default=None,
                   help="write the tables into this Markdown file (with --section), replacing that section")
    p.add_argument("--section", default=None, help="the section of --doc to replace (a word: [a-z0-9_-]+)")
    p.add_argument("--peers-n", default="10000,100000,1000000",
                   help="with the peers' run.sh: the populations, comma-separated")
    p.add_argument("--peers", default="tickwheel ratas heap",
                   help="with the peers' run.sh: the peers (PEERS names), tickwheel first")
    p.add_argument("--check", default=None, metavar="FILE",
                   help="check that every generated section of FILE is what its saved JSON gives")
    args, extra = p.parse_known_args()
    if (args.doc is None) != (args.section is None):
        p.error("--doc and --section go together")
    if args.section is not None and not re.fullmatch(r"[a-z0-9_-]+", args.section):
        p.error(f"--section must match [a-z0-9_-]+, got '{args.section}'")
    args.extra = extra  # anything else goes to the binary, e.g. --tickwheel_shards=1,2
    return args


def read_text(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def cpu_model():
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def git(*argv):
    try:
        return subprocess.run(["git", "-C", ROOT, *argv], check=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def source_commit():
    """The checkout's commit, marked when what the binaries are built from has uncommitted changes."""
    commit = git("rev-parse", "--short=12", "HEAD")
    if commit is None:
        return "unknown (not a git checkout)"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", "include", "engine", "bench",
                  "stress", "examples", "CMakeLists.txt", "CMakePresets.json", "cmake")
    return commit + (" with uncommitted changes to the sources" if changed else "")


def load_average():
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg()) if hasattr(os, "getloadavg") else "unknown"


def machine_facts():
    """What the run's figures depend on, read when it starts."""
    return {
        "cpu": cpu_model(),
        "cpus_online": os.cpu_count(),
        "clocksource": read_text("/sys/devices/system/clocksource/clocksource0/current_clocksource")
                       or "unknown",
        "kernel": platform.release(),
        "load_before": load_average(),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": source_commit(),
    }


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
    print("running: " + shlex.join(cmd), file=sys.stderr)
    machine = machine_facts()
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout
    machine["load_after"] = load_average()
    data = json.loads(out)
    # Beside the benchmark's own output, so that --from-json can say where and how it was made.
    data["tickwheel_run"] = {
        "machine": machine,
        "benchmark_command": shlex.join(relative(c) for c in cmd),
        "table_command": "python3 tools/bench_table.py " + shlex.join(relative(a) for a in sys.argv[1:]),
        "repetitions": args.repetitions,
    }
    save(args.json, data)
    return data


def save(path, data):
    """Writes a run's JSON, with this script's record of it, where --json asked (nowhere if not)."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")


def is_stress(binary):
    return os.path.basename(binary).startswith("tickwheel-stress")


def run_stress(args):
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [args.binary, "--json", report, "--svg", "", "--quiet", *args.extra]
        return run_tool(args, cmd, report, [args.binary, "--json", "REPORT.json", "--svg", "", "--quiet",
                                            *args.extra])


def is_gateway(binary):
    return os.path.basename(binary) == "run_gateway.py"


def is_peers(binary):
    return os.path.basename(binary) == "run.sh" and os.path.basename(os.path.dirname(
        os.path.abspath(binary))) == "peers"


def run_peers(args):
    """Each population in its own run of run.sh: {"populations": {N: {peer: {metric: [values]}}}}."""
    machine = machine_facts()
    populations, versions = {}, []
    for n in args.peers_n.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            results = os.path.join(tmp, "results.txt")
            env = dict(os.environ, TICKWHEEL_SRC=ROOT, TIMER_N=n, PEERS=args.peers,
                       RUNS=str(args.repetitions), RESULTS=results)
            print(f"running: TIMER_N={n} PEERS='{args.peers}' RUNS={args.repetitions} {args.binary}",
                  file=sys.stderr)
            subprocess.run(["bash", args.binary], env=env, check=True, stdout=subprocess.DEVNULL)
            table = {}
            for line in read_text(results).splitlines():
                f = line.split()
                if len(f) == 4 and f[0] == "RESULT":
                    table.setdefault(f[1], {}).setdefault(f[2], []).append(float(f[3]))
                elif line.startswith("VERSIONS:") and line not in versions:
                    versions.append(line)
            populations[n] = table
    machine["load_after"] = load_average()
    data = {"tool": "timer-peers", "peers": args.peers.split(), "repetitions": args.repetitions,
            "populations": populations, "versions": versions,
            "tickwheel_run": {"machine": machine,
                              "table_command": "python3 tools/bench_table.py " +
                              shlex.join(relative(a) for a in sys.argv[1:])}}
    save(args.json, data)
    return data


PEER_METRICS = (("w1_schedule_ns", "W1 schedule ns"), ("w2_cancel_ns", "W2 cancel ns"),
                ("w3_fire_ns", "W3 fire ns"), ("w4_churn_ns", "W4 churn pair ns"),
                ("mem_bytes_per_timer", "bytes/timer"))


def render_peers(data):
    m = data["tickwheel_run"]["machine"]
    peers = data["peers"]
    lines = [runs_machine_line(m) + f" Median of {data['repetitions']} runs, each peer in a process of "
             "its own.", "",
             f"Command: `{data['tickwheel_run']['table_command']}`", "",
             "Each cell: " + " / ".join(peers) + ".", ""]
    rows = []
    for n, table in data["populations"].items():
        cells = []
        for metric, _ in PEER_METRICS:
            # run.sh prints the heap and the multimap as baseline-<name>
            vals = [table.get(p, table.get("baseline-" + p, {})).get(metric) for p in peers]
            cells.append(" / ".join("–" if v is None else fmt_num(statistics.median(v)) for v in vals))
        rows.append([f"{int(n):,}", *cells])
    lines += markdown(["N", *(name for _, name in PEER_METRICS)], rows)
    lines += ["", *(f"`{v}`" for v in data["versions"])]
    return "\n".join(lines)


def relative(a):
    return os.path.relpath(a, ROOT) if os.path.isabs(a) and a.startswith(ROOT) else a


def run_tool(args, cmd, report, record):
    """Runs a tool that writes a JSON report; the report, with this script's record of the run."""
    print("running: " + shlex.join(cmd), file=sys.stderr)
    machine = machine_facts()
    rc = subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL).returncode
    machine["load_after"] = load_average()
    with open(report, encoding="utf-8") as f:
        data = json.load(f)
    data["tickwheel_run"] = {
        "machine": machine,
        "benchmark_command": shlex.join(relative(c) for c in record),
        "table_command": "python3 tools/bench_table.py " + shlex.join(relative(a) for a in sys.argv[1:]),
        "exit_status": rc,
    }
    save(args.json, data)
    return data


def run_gateway(args):
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, args.binary, *args.extra, "--out", tmp]
        return run_tool(args, cmd, os.path.join(tmp, "gateway.json"),
                        ["python3", args.binary, *args.extra, "--out", "DIR"])


def runs_machine_line(m):
    """Where a tool's runs ran: machine_facts() read before them, the load average after."""
    return (f"Machine: {m.get('cpus_online', '?')} CPUs of {m.get('cpu', '?')}, clock source "
            f"{m.get('clocksource', '?')}, Linux {m.get('kernel', '?')}; load average "
            f"{m.get('load_before', '?')} before the runs and {m.get('load_after', '?')} after; "
            f"{m.get('date_utc', '?')}; commit {m.get('commit', '?')}.")


def render_gateway(data):
    run = data.get("tickwheel_run", {})
    m = run.get("machine", {})
    par = data.get("parameters", {})
    lines = [runs_machine_line(m), ""]
    if run:
        lines += [f"Command: `{run['table_command']}`", "", f"It ran: `{run['benchmark_command']}`", ""]
    fifo = f"; servers under SCHED_FIFO {par['rt_priority']}" if par.get("rt_priority") else ""
    lines += [f"Load: {par.get('runs', '?')} run(s) of {par.get('seconds', '?')} s per configuration "
              f"(medians), {par.get('loops', '?')} loop thread(s), request timeout "
              f"{par.get('timeout_us', '?')} us, upstream mean service time {par.get('service_us', '?')} us, "
              f"{100 * par.get('drop', 0):g}% never answered, idle timeout {par.get('idle_ms', '?')} ms; "
              f"shapes are connections x requests a second per connection{fifo}.", "", data["table"], "",
              "Lateness is a request timeout's fire time minus its deadline; past the tick, for tickwheel, "
              "minus the deadline rounded up to the tick (what the engine adds beyond its rounding). CPU is "
              "the server process's per request; violations count every broken rule (a timer early, twice "
              "or after a winning cancel, a reply lost or doubled) and must be 0."]
    return "\n".join(lines)


def fmt_us(ns):
    return "–" if ns is None else fmt_ns(ns / 1e3)


STRESS_PCTS = ("p50", "p90", "p99", "p99_9", "p99_99", "max")


def render_stress(data):
    """The stress harness's report: where it ran, the floor, lateness, throughput, accounting."""
    run = data.get("tickwheel_run", {})
    m = run.get("machine", {})
    o, plat, place = data["options"], data["platform"], data["placement"]
    lines = [
        f"Machine: {m.get('cpus_online', plat.get('allowed_cpus', '?'))} CPUs of {m.get('cpu', '?')}, "
        f"clock source {plat.get('clocksource', '?')}, Linux {m.get('kernel', plat.get('kernel', '?'))}, "
        f"isolated CPUs: {plat.get('isolated', '?')}, THP {plat.get('thp', '?')}; load average "
        f"{plat.get('loadavg_start', '?')} at the start and {plat.get('loadavg_end', '?')} at the end; "
        f"{m.get('date_utc', '?')}; commit {m.get('commit', '?')}.", ""]
    if run:
        lines += [f"Command: `{run['table_command']}`", "", f"It ran: `{run['benchmark_command']}`", ""]
    lines += [f"Workload: {data.get('config', '?')}. Placement: workers on CPU "
              f"{place.get('workers', '?')}, load threads on {place.get('load', '?')} ({o['threads']}); it "
              f"ran {data['run']['seconds']:.1f} s.", ""]
    floor = data.get("floor", [])
    if floor:
        lines += ["**What the engine adds above the platform** (us; the control thread sleeps to the same "
                  "tick grid and does nothing else)", ""]
        header = ["percentile", "tick probe", "control", "probe − control", "past the tick",
                  "past the tick − control"]
        fields = ("tick_probe_ns", "control_ns", "probe_minus_control_ns", "past_tick_ns",
                  "past_tick_minus_control_ns")
        rows = [[r["percentile"].replace("_", ".")] + [fmt_us(r.get(f)) for f in fields] for r in floor]
        lines += markdown(header, rows) + [""]
    fire = data["fire"]
    lat = [("every fire", fire.get("lateness_ns")), ("one-shot timers", fire.get("oneshot_lateness_ns")),
           ("periodic runs", fire.get("periodic_lateness_ns"))]
    rows = [[name, f"{h['count']:,}"] + [fmt_us(h.get(p)) for p in STRESS_PCTS] for name, h in lat if h]
    if rows:
        lines += ["**Lateness: callback start − deadline** (us; a deadline is rounded up to the tick, so "
                  "a one-shot timer waits up to a tick for its rounding)", ""]
        lines += markdown(["timers", "fires", *[p.replace("_", ".") for p in STRESS_PCTS]], rows) + [""]
    acc = data.get("accounting", {})
    broken = {k: v for k, v in acc.items() if isinstance(v, (int, float)) and v and k in (
        "double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires", "early_fires",
        "fired_before_tick", "moved_early", "refused_pending", "pending_not_returned")}
    lines += [f"Throughput: {data['schedule']['per_second']:,.0f} schedules, "
              f"{data['cancel']['per_second']:,.0f} cancels and {fire['per_second']:,.0f} fires a second. "
              f"Accounting: "
              f"{'PASS' if data.get('ok') else 'FAIL'} ({acc.get('scheduled', 0):,} scheduled, "
              f"{acc.get('fired', 0):,} fired, {acc.get('cancelled', 0):,} cancelled, "
              f"{acc.get('returned_at_stop', 0):,} returned by stop()"
              + (", broken: " + ", ".join(f"{k} {v}" for k, v in broken.items()) if broken else "") + ")."]
    warnings = place.get("warnings", [])
    if warnings:
        lines += ["", "The harness's warnings about this run:"] + [f"- {w}" for w in warnings]
    return "\n".join(lines)


def split_name(run):
    """(case, queue, args, threads) from a run name such as schedule/wheel/1000000/iterations:2097152,
    schedule/engine/2/iterations:1048576/real_time/threads:2 (the argument is then the shard count)
    or mix/engine/90/2/iterations:3/manual_time (two arguments)."""
    parts = run.get("run_name", run["name"]).split("/")
    if len(parts) < 3 or parts[1] not in QUEUES:
        return None
    args = []
    for p in parts[2:]:
        if not p.isdigit():
            break
        args.append(int(p))
    if not args:
        return None
    threads = next((int(p.split(":", 1)[1]) for p in parts if p.startswith("threads:")), 1)
    return parts[0], parts[1], tuple(args), threads


def collect(data):
    """{(case, args, threads): {queue: [one dict per repetition]}} from the iteration rows."""
    table = {}
    for run in data["benchmarks"]:
        if run.get("run_type") != "iteration" or run.get("error_occurred"):
            continue
        key = split_name(run)
        if key is None:
            continue
        case, queue, args, threads = key
        name = run.get("run_name", run["name"])
        if "/manual_time" in name and run.get("items_per_second"):
            # A round of many operations timed by the benchmark itself: per item, from its rate.
            ns_per_op = 1e9 / run["items_per_second"]
        else:
            clock = "real_time" if "/real_time" in name else "cpu_time"
            ns_per_op = run[clock] * TIME_UNIT_NS[run["time_unit"]] / run.get("ops_per_iter", 1.0)
        table.setdefault((case, args, threads), {}).setdefault(queue, []).append({
            "ns_per_op": ns_per_op,
            "bytes_per_timer": run.get("bytes_per_timer"),
            "worst_advance_us": run.get("worst_advance_us"),
            "p999_advance_us": run.get("p999_advance_us"),
            "max_pass_work": run.get("max_pass_work"),
            "producer_cpu_ns": run.get("producer_cpu_ns"),
            "worker_cpu_ns": run.get("worker_cpu_ns"),
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
    return f"{v:.1f}" if abs(v) < 100 else f"{v:,.0f}"


def fmt_num(v, digits=1):
    return "–" if v is None else f"{v:.{digits}f}"


def fmt_range(reps):
    if not reps:
        return "–"
    values = [r["ns_per_op"] for r in reps]
    return f"{fmt_ns(min(values))}–{fmt_ns(max(values))}"


def fmt_ratio(num, den):
    return f"{num / den:.2f}×" if num and den else "–"


def pair(wheel, heap, field, digits=1):
    if med(wheel, field) is None and med(heap, field) is None:
        return ""
    return f"{fmt_num(med(wheel, field), digits)} / {fmt_num(med(heap, field), digits)}"


def markdown(header, rows):
    """A Markdown table, leaving out the columns no row has a figure in (a queue filtered out)."""
    keep = [i for i in range(len(header)) if any(r[i] not in ("", "–") for r in rows)]
    lines = ["| " + " | ".join(header[i] for i in keep) + " |", "|" + "|".join(["---"] * len(keep)) + "|"]
    lines += ["| " + " | ".join(r[i] for i in keep) + " |" for r in rows]
    return lines


def case_order(data):
    """Cases in the order the binary registered them (its "cases" context), then any others."""
    order = [c for c in data.get("context", {}).get("cases", "").split(",") if c]
    for run in data["benchmarks"]:
        key = split_name(run)
        if key and key[0] not in order:
            order.append(key[0])
    return order


def keys_of(table, case, nargs):
    return sorted(k for k in table if k[0] == case and len(k[1]) == nargs)


HEADER = ["case", "N", "wheel ns/op", "heap ns/op", "heap/wheel", "ref ns/op", "ref/wheel",
          "wheel min–max", "heap min–max", "ref min–max", "wheel ×(N vs 1M)", "bytes/timer wheel / heap",
          "worst advance µs wheel / heap", "p99.9 advance µs wheel / heap", "wheel max pass work"]

NOTES = ("ns/op is CPU time per operation (for `fire`, per fired timer; for `periodic`, per run); "
         "ref is the reference wheel (bench/reference_wheel.hpp: a plain 8 x 256 wheel in the "
         "style of ratas, handles without a generation); "
         "min–max is the range over the repetitions; heap/wheel or ref/wheel > 1 means the wheel is faster; "
         "wheel ×(N vs 1M) is the wheel's cost per op at N over its cost at 1M. Worst / p99.9 advance: the slowest and the "
         "99.9th-percentile advance() of an instrumented drain in `fire` (medians over the "
         "repetitions; the worst includes any preemption of the benchmark). Wheel max pass work: "
         "the most fires + level moves one advance() did (in `fire` or `periodic`).")


def wheel_rows(table, order):
    rows = []
    for case in order:
        base = table.get((case, (BASE_N,), 1), {}).get("wheel")
        base_ns = med(base, "ns_per_op") if base else None
        for key in keys_of(table, case, 1):
            row = table[key]
            wheel, heap, ref = row.get("wheel", []), row.get("heap", []), row.get("ref", [])
            w_ns, h_ns, r_ns = med(wheel, "ns_per_op"), med(heap, "ns_per_op"), med(ref, "ns_per_op")
            pass_work = med(wheel, "max_pass_work")
            rows.append([case, f"{key[1][0]:,}", fmt_ns(w_ns), fmt_ns(h_ns), fmt_ratio(h_ns, w_ns),
                         fmt_ns(r_ns), fmt_ratio(r_ns, w_ns), fmt_range(wheel), fmt_range(heap),
                         fmt_range(ref), f"{w_ns / base_ns:.2f}" if w_ns and base_ns else "–",
                         pair(wheel, heap, "bytes_per_timer"), pair(wheel, heap, "worst_advance_us"),
                         pair(wheel, heap, "p999_advance_us", 2),
                         "" if pass_work is None else fmt_num(pass_work, 0)])
    return markdown(HEADER, rows) if rows else []


ENGINE_HEADER = ["case", "shards", "producers", "engine ns/op", "heap ns/op", "heap/engine",
                 "engine min–max", "heap min–max"]

ENGINE_NOTES = ("ns/op is real time per operation over all producer threads together (the "
                "inverse of the aggregate rate; one thread's own cost is that times the producer "
                "count); min–max is the range over the repetitions; heap/engine > 1 means the "
                "engine is faster. The heap is the baseline a user writes by hand: one "
                "mutex-guarded binary heap and consumer thread per shard.")


def engine_pairs(table, order, system):
    """(case, key, engine reps, heap reps, engine ns, heap ns) of each one-argument engine/heap
    case: those that count the CPU of the queue's own threads (system) or the others."""
    for case in order:
        for key in keys_of(table, case, 1):
            row = table[key]
            if ("engine" not in row and "heap" not in row) or is_system_case(row) != system:
                continue
            e, h = row.get("engine", []), row.get("heap", [])
            yield case, key, e, h, med(e, "ns_per_op"), med(h, "ns_per_op")


def engine_rows(table, order):
    rows = [[case, str(key[1][0]), str(key[2]), fmt_ns(e_ns), fmt_ns(h_ns), fmt_ratio(h_ns, e_ns),
             fmt_range(e), fmt_range(h)]
            for case, key, e, h, e_ns, h_ns in engine_pairs(table, order, system=False)]
    return markdown(ENGINE_HEADER, rows) if rows else []


def is_system_case(row):
    """A case that counts the CPU of the queue's own threads (throughput): its own table."""
    return any(med(reps, "worker_cpu_ns") is not None for reps in row.values())


def cpu_total(reps):
    p, w = med(reps, "producer_cpu_ns"), med(reps, "worker_cpu_ns")
    return p + w if p is not None and w is not None else None


SYSTEM_HEADER = ["case", "shards", "producers", "engine ns/pair", "heap ns/pair", "heap/engine",
                 "engine CPU ns/pair: producers + workers", "heap CPU ns/pair: producers + consumers",
                 "CPU heap/engine", "engine min–max", "heap min–max"]

SYSTEM_NOTES = ("`throughput` ns/pair is real time per cancel+schedule pair over all producers, "
                "until the workers (the heap lanes' consumers) have absorbed the last; CPU ns/pair is "
                "the CPU time of the producer threads and of the queue's own threads over the same "
                "span, per pair (medians of each; the worker's share is what a hand-off moves off "
                "the producer); CPU heap/engine > 1 means the engine spends less CPU in all.")


def system_rows(table, order):
    rows = []
    for case, key, e, h, e_ns, h_ns in engine_pairs(table, order, system=True):
        cpu = [f"{fmt_ns(cpu_total(r))} = {fmt_ns(med(r, 'producer_cpu_ns'))} + "
               f"{fmt_ns(med(r, 'worker_cpu_ns'))}" if cpu_total(r) is not None else "–" for r in (e, h)]
        rows.append([case, str(key[1][0]), str(key[2]), fmt_ns(e_ns), fmt_ns(h_ns), fmt_ratio(h_ns, e_ns),
                     cpu[0], cpu[1], fmt_ratio(cpu_total(h), cpu_total(e)), fmt_range(e), fmt_range(h)])
    return markdown(SYSTEM_HEADER, rows) if rows else []


MIX_HEADER = ["owner's share", "shards", "engine ns/pair", "heap ns/pair", "heap/engine",
              "engine M pairs/s", "heap M pairs/s", "engine min–max", "heap min–max"]

MIX_NOTES = ("`mix` ns/pair is real time per cancel+schedule pair over all shards together (from the "
             "benchmark's pairs per second); the owner's share is the percent of each shard's pairs "
             "made by the thread that owns it (straight into its wheel), the rest by another thread "
             "(a hand-off); a heap lane is a mutex-guarded heap per shard under the same mix; "
             "heap/engine > 1 means the engine is faster.")


def mix_rows(table):
    rows = []
    for key in sorted(keys_of(table, "mix", 2), key=lambda k: (-k[1][0], k[1][1])):
        e, h = table[key].get("engine", []), table[key].get("heap", [])
        e_ns, h_ns = med(e, "ns_per_op"), med(h, "ns_per_op")
        rows.append([f"{key[1][0]}%", str(key[1][1]), fmt_ns(e_ns), fmt_ns(h_ns), fmt_ratio(h_ns, e_ns),
                     fmt_num(1e3 / e_ns if e_ns else None), fmt_num(1e3 / h_ns if h_ns else None),
                     fmt_range(e), fmt_range(h)])
    return markdown(MIX_HEADER, rows) if rows else []


OWNED_OPS = ("schedule_after", "cancel", "reschedule_after")  # the first argument of `owned`
OWNED_HEADER = ["owner's call", "pending", "Wheel ns/op", "Engine owner ns/op", "engine/wheel",
                "Wheel min–max", "Engine min–max"]

OWNED_NOTES = ("`owned` ns/op is CPU time per call made by the thread that owns a caller-driven shard "
               "(Engine::own_shard), beside the same call on a standalone Wheel; engine/wheel is what "
               "going through the Engine's handle adds.")


def owned_rows(table):
    rows = []
    for key in keys_of(table, "owned", 2):
        op, n = key[1]
        w, e = table[key].get("wheel", []), table[key].get("engine", [])
        w_ns, e_ns = med(w, "ns_per_op"), med(e, "ns_per_op")
        rows.append([f"`{OWNED_OPS[op]}`" if op < len(OWNED_OPS) else str(op), f"{n:,}", fmt_ns(w_ns),
                     fmt_ns(e_ns), fmt_ratio(e_ns, w_ns), fmt_range(w), fmt_range(e)])
    return markdown(OWNED_HEADER, rows) if rows else []


EXECUTOR_HEADER = ["case", "timers due", "inline ns/timer", "pool ns/timer",
                   "hand-off ns/timer (pool − inline)", "pool/inline", "inline min–max",
                   "pool min–max"]

EXECUTOR_NOTES = ("Executor cases: ns/timer is real time per fired timer (per run, for a periodic "
                  "case) of a caller-driven engine with one shard, all the timers due at once; "
                  "inline: no executor, the poll runs the callbacks; pool: a ThreadPoolExecutor "
                  "of one thread, timed until every callback has run and a poll has taken its "
                  "node back. pool − inline is the hand-off's cost per fired timer.")


def executor_rows(table, order):
    rows = []
    for case in order:
        for key in keys_of(table, case, 1):
            row = table[key]
            if not any(e in row for e in EXECUTORS):
                continue
            i, p = row.get("inline", []), row.get("pool", [])
            i_ns, p_ns = med(i, "ns_per_op"), med(p, "ns_per_op")
            rows.append([case, f"{key[1][0]:,}", fmt_ns(i_ns), fmt_ns(p_ns),
                         fmt_ns(p_ns - i_ns) if i_ns and p_ns else "–", fmt_ratio(p_ns, i_ns),
                         fmt_range(i), fmt_range(p)])
    return markdown(EXECUTOR_HEADER, rows) if rows else []


def machine_line(data, reps_seen, requested):
    """One line: where, when and from what the figures come."""
    ctx = data.get("context", {})
    run = data.get("tickwheel_run", {})
    m = run.get("machine", {})
    pinned = f"; the benchmark pinned to CPU {ctx['pinned_cpu']}" if "pinned_cpu" in ctx else ""
    if m:
        where = (f"{m['cpus_online']} CPUs of {m['cpu']} ({ctx.get('mhz_per_cpu', '?')} MHz), clock source "
                 f"{m['clocksource']}, Linux {m['kernel']}{pinned}; load average {m['load_before']} before "
                 f"the run and {m.get('load_after', '?')} after; {m['date_utc']}; commit {m['commit']}")
    else:  # a JSON saved by an older version of this script: only the benchmark's own context
        where = (f"{ctx.get('num_cpus', '?')} CPUs of {cpu_model()} ({ctx.get('mhz_per_cpu', '?')} MHz)"
                 f"{pinned}; {ctx.get('date', '')}")
    return (f"Machine: {where}. Compiler {ctx.get('compiler', '?')}, {ctx.get('tickwheel_build', '?')}. "
            f"Median of {reps_seen} repetitions (requested {requested}).")


def render(data, repetitions):
    ctx = data.get("context", {})
    run = data.get("tickwheel_run", {})
    table = collect(data)
    order = case_order(data)
    queues = {q for v in table.values() for q in v}
    engine_binary = bool(queues & {"engine", "inline", "pool"})
    reps_seen = max((len(q) for v in table.values() for q in v.values()), default=0)
    lines = [machine_line(data, reps_seen, run.get("repetitions", repetitions)), ""]
    if run:
        lines += [f"Command: `{run['table_command']}`", "",
                  f"It ran: `{run['benchmark_command']}`", ""]
    if "workload" in ctx:
        lines += [f"Workload: {ctx['workload']}.", ""]
    notes = []
    blocks = []
    if engine_binary:
        blocks.append(("Another thread's calls, against heap lanes", engine_rows(table, order), ENGINE_NOTES))
        blocks.append(("Pairs from other threads, the whole system: time and CPU, against heap lanes",
                       system_rows(table, order), SYSTEM_NOTES))
        blocks.append(("The owner's share of a shard's pairs, against heap lanes under the same mix",
                       mix_rows(table), MIX_NOTES))
        blocks.append(("The owner's own calls, against a standalone Wheel", owned_rows(table), OWNED_NOTES))
        if "executor_workload" in ctx and executor_rows(table, order):
            lines += [f"Executor cases: {ctx['executor_workload']}.", ""]
        blocks.append(("Fired timers inline and through an executor", executor_rows(table, order),
                       EXECUTOR_NOTES))
    else:
        ref_note = NOTES[NOTES.index("ref is the"):NOTES.index("min–max is")]
        note = NOTES if "ref" in queues else NOTES.replace(ref_note, "")
        blocks.append((None, wheel_rows(table, order), note))
    titled = sum(1 for _, rows, _ in blocks if rows) > 1
    for title, rows, note in blocks:
        if rows:
            lines += ([f"**{title}**", ""] if titled else []) + rows + [""]
            notes.append(note)
    cases = sorted({k[0] for k in table}, key=lambda c: order.index(c) if c in order else len(order))
    by_name = {k.split(":", 1)[1]: v for k, v in ctx.items() if k.startswith("case:")}
    if any(c in by_name for c in cases):
        lines.append("Cases:")
        lines += [f"- `{c}`: {by_name[c]}" for c in cases if c in by_name]
        lines.append("")
    lines += [" ".join(notes)]
    bad = errors(data)
    if bad:
        lines += ["", "Benchmarks that reported an error (left out above):"]
        lines += [f"- {e}" for e in bad]
    if ctx.get("tickwheel_build", "").startswith("assertions ON"):
        lines += ["", "WARNING: built with assertions on; these are not release figures."]
    return "\n".join(lines)


SECTION = re.compile(r"<!-- bench_table.py section=([a-z0-9_-]+) begin.*?-->\n(?:(.*?)\n)?"
                     r"<!-- bench_table.py section=\1 end -->", re.S)


def with_section(text, section, block):
    """text with the block between section's markers replaced (or a new section appended)."""
    new = (f"<!-- bench_table.py section={section} begin: generated, edit tools/bench_table.py instead -->\n"
           f"{block}\n<!-- bench_table.py section={section} end -->")
    for m in SECTION.finditer(text):
        if m.group(1) == section:
            return text[:m.start()] + new + text[m.end():]
    return (text.rstrip("\n") + "\n\n" if text else "") + new + "\n"


def write_section(path, section, block):
    """A re-run replaces its section of the file instead of adding to it."""
    text = with_section(read_text(path) or "", section, block)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.rstrip("\n") + "\n")
    print(f"wrote section '{section}' of {path}", file=sys.stderr)


def check_doc(path):
    """0 if every generated section of path is what bench/<section>.json beside it gives."""
    text = read_text(path)
    if text is None:
        print(f"{path}: cannot read it", file=sys.stderr)
        return 1
    sections = [m.group(1) for m in SECTION.finditer(text)]
    failed = 0
    for section in sections:
        source = os.path.join(os.path.dirname(path), "bench", section + ".json")
        try:
            with open(source, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{path}: section '{section}' has no readable JSON ({source}: {e})", file=sys.stderr)
            failed = 1
            continue
        block = (render_stress(data) if data.get("tool") == "tickwheel-stress"
                 else render_peers(data) if data.get("tool") == "timer-peers"
                 else render_gateway(data) if "configurations" in data else render(data, 0))
        if with_section(text, section, block) != text:
            print(f"{path}: section '{section}' is not what {source} gives: regenerate it with "
                  f"tools/bench_table.py --from-json {source} --doc {path} --section {section}",
                  file=sys.stderr)
            failed = 1
    if not sections:
        print(f"{path}: no generated section", file=sys.stderr)
        failed = 1
    if not failed:
        print(f"{path}: {len(sections)} sections, each as its JSON gives it ({', '.join(sections)})")
    return failed


def main():
    args = parse_args()
    if args.check:
        return check_doc(args.check)
    if args.from_json:
        with open(args.from_json, encoding="utf-8") as f:
            data = json.load(f)
    elif is_stress(args.binary):
        data = run_stress(args)
    elif is_gateway(args.binary):
        data = run_gateway(args)
    elif is_peers(args.binary):
        data = run_peers(args)
    else:
        data = run_benchmark(args)
    if data.get("tool") == "timer-peers":
        block = render_peers(data)
        if args.doc:
            write_section(args.doc, args.section, block)
        else:
            print(block)
        return 0
    if data.get("tool") == "tickwheel-stress" or "configurations" in data:
        block = render_stress(data) if data.get("tool") == "tickwheel-stress" else render_gateway(data)
        if args.doc:
            write_section(args.doc, args.section, block)
        else:
            print(block)
        return 0 if data.get("ok", data.get("violations", 1) == 0 and data.get("errors", 1) == 0) else 1
    block = render(data, args.repetitions)
    if args.doc:
        write_section(args.doc, args.section, block)
    else:
        print(block)
    return 1 if errors(data) else 0


if __name__ == "__main__":
    sys.exit(main())
