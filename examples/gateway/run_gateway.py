#!/usr/bin/env python3
"""examples/gateway/run_gateway.py — the gateway side by side (tools/run.sh gateway runs it).

Runs the reference gateway on tickwheel (caller-driven loops; engine workers + LoopExecutor), on
Boost.Asio, and on Boost.Asio with tickwheel::asio::timer for steady_timer, under the same load,
configuration after configuration, each driven and checked by tickwheel-gateway-load, and prints for each: requests/s, the request timeouts' lateness (p50, p99,
p99.9, max; for tickwheel also "past the tick": lateness minus the tick's rounding), server CPU per
request (getrusage of the whole server process, upstream thread included), the server's max RSS and
the correctness counts. Writes a JSON report and an SVG of the lateness curves (stress/plot.py,
matplotlib) into --out.

Configurations: every shape (connections x requests/s per connection) x every mode; tickwheel
modes (asio-tickwheel among them) once per tick. `manual-ms` is the caller-driven loop timing its
sleep with epoll_wait's milliseconds instead of epoll_pwait2's nanoseconds: the cause of a 100 us
tick's worse tail.
With --runs N each configuration runs N times, interleaved (run 1 of every configuration, then run
2, each run's order rotated by one, so slow drift of the machine spreads over all of them), and
the table shows medians. Repeatable: the same arguments run the same configurations in the same
order with the same seeds.

Exit status: 0 iff every correctness count of every run is 0 (no timer fired after a winning cancel,
twice or early; no reply missing, doubled, unknown or on the wrong connection; no connection closed
early and every idle probe closed by its idle timeout) and every process exited cleanly. The
performance targets (tickwheel against Asio: see targets()) are printed beside the table, met or
not; they do not set the status.
"""
import argparse
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ALL_MODES = ("manual", "workers", "asio", "asio-tickwheel", "manual-ms")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--server", required=True, help="tickwheel-gateway")
    p.add_argument("--load", required=True, help="tickwheel-gateway-load")
    p.add_argument("--asio", default="", help="tickwheel-gateway-asio (empty: no Asio baseline)")
    p.add_argument("--asio-tickwheel", default="",
                   help="tickwheel-gateway-asio-tickwheel (empty: no Asio server with tickwheel timers)")
    p.add_argument("--only", default=",".join(ALL_MODES),
                   help="modes, comma-separated: " + ", ".join(ALL_MODES) + " (default: all)")
    p.add_argument("--shapes", default="1000x20,5000x4",
                   help="connections x requests/s per connection, comma-separated (default 1000x20,5000x4)")
    p.add_argument("--ticks", default="1000,100", help="tickwheel ticks in microseconds (default 1000,100)")
    p.add_argument("--ms-ticks", default="1000,100",
                   help="ticks at which manual-ms runs (default 1000,100; it matters only below 1 ms)")
    p.add_argument("--seconds", type=float, default=10.0, help="sending time of each run (default 10)")
    p.add_argument("--runs", type=int, default=1, help="interleaved runs of each configuration (median shown)")
    p.add_argument("--loops", type=int, default=1, help="server loop threads (default 1: a 2-core machine)")
    p.add_argument("--timeout-us", type=int, default=5000, help="each request's timeout (default 5000)")
    p.add_argument("--idle-ms", type=int, default=2000, help="connection idle timeout (default 2000)")
    p.add_argument("--service-us", type=float, default=1000.0, help="upstream mean service time (default 1000)")
    p.add_argument("--drop", type=float, default=0.05, help="share the upstream never answers (default 0.05)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rt-priority", type=int, default=0,
                   help="run each server under SCHED_FIFO at this priority (chrt -f; 0: no, the default), so "
                        "that other work on a shared machine does not preempt its threads")
    p.add_argument("--out", default="gateway-report", help="directory for the JSON, the SVG and each run's files")
    p.add_argument("--check-files", action="store_true", help="also check that the JSON and the SVG parse")
    return p.parse_args()


def configurations(a):
    modes = [m.strip() for m in a.only.split(",") if m.strip()]
    for m in modes:
        if m not in ALL_MODES:
            sys.exit(f"run_gateway.py: --only: unknown mode '{m}' (one of {', '.join(ALL_MODES)})")
    for m, binary in (("asio", a.asio), ("asio-tickwheel", a.asio_tickwheel)):
        if m in modes and not binary:
            sys.exit(f"run_gateway.py: the {m} server was not built (Debian: libboost-dev); "
                     f"pass --only without {m}, or install it and build again")
    ticks = [int(t) for t in a.ticks.split(",") if t]
    ms_ticks = [int(t) for t in a.ms_ticks.split(",") if t]
    configs = []
    for shape in a.shapes.split(","):
        conns, per = shape.lower().split("x")
        conns, per = int(conns), float(per)
        for m in ALL_MODES:  # a fixed order, whatever --only's
            if m not in modes:
                continue
            if m == "asio":
                configs.append({"shape": shape, "connections": conns, "per_conn": per, "mode": m, "tick_us": 0})
                continue
            for t in ticks:
                if m == "manual-ms" and t not in ms_ticks:
                    continue
                configs.append({"shape": shape, "connections": conns, "per_conn": per, "mode": m, "tick_us": t})
    for c in configs:
        c["name"] = f"{c['shape']} {c['mode']}" + (f" tick {c['tick_us']}us" if c["tick_us"] else "")
        c["slug"] = c["name"].replace(" ", "-")
    return configs


def raise_fd_limit(need):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < need:
        sys.exit(f"run_gateway.py: {need} file descriptors are needed per process but RLIMIT_NOFILE's hard "
                 f"limit is {hard}: raise it (ulimit -Hn as root, or /etc/security/limits.conf), or run "
                 f"fewer connections")
    return soft


def linked_malloc(binary):
    """The malloc library the binary links besides libc's (the tickwheel library built with
    TICKWHEEL_WITH_JEMALLOC links jemalloc, which then serves the whole process), or None."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        name, _, rest = line.strip().partition(" => ")
        if name.startswith(("libjemalloc", "libtcmalloc", "libmimalloc")) and rest:
            return rest.split()[0]
    return None


def run_one(a, c, run, out):
    base = os.path.join(out, f"{c['slug']}-run{run}")
    server_json, load_json = base + "-server.json", base + "-load.json"
    for f in (server_json, load_json):
        if os.path.exists(f):
            os.remove(f)
    max_seconds = int(a.seconds + a.idle_ms / 1000 + a.timeout_us / 1e6 + 120)
    common = ["--loops", str(a.loops), "--idle-ms", str(a.idle_ms), "--service-us", str(a.service_us),
              "--drop", str(a.drop), "--seed", str(a.seed + run), "--json", server_json,
              "--max-seconds", str(max_seconds)]
    env = None
    if c["mode"] == "asio":
        cmd = [a.asio] + common
        if a.malloc:  # the allocator the tickwheel server runs on, so that RSS and CPU compare alike
            env = dict(os.environ, LD_PRELOAD=a.malloc)
    elif c["mode"] == "asio-tickwheel":  # links the tickwheel library, and with it its allocator
        cmd = [a.asio_tickwheel, "--tick-us", str(c["tick_us"])] + common
    else:
        mode = "manual" if c["mode"].startswith("manual") else "workers"
        cmd = [a.server, "--mode", mode, "--tick-us", str(c["tick_us"])] + common
        if mode == "manual":
            cmd += ["--wait", "ms" if c["mode"] == "manual-ms" else "ns"]
    if a.rt_priority:
        cmd = ["chrt", "-f", str(a.rt_priority)] + cmd
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    line = server.stdout.readline()
    if not line.startswith("port "):
        server.kill()
        server.wait()
        return {"error": f"the server did not start: {' '.join(cmd)}"}
    port = line.split()[1]
    rate = c["connections"] * c["per_conn"]
    load_cmd = [a.load, "--port", port, "--connections", str(c["connections"]), "--rate", str(rate),
                "--seconds", str(a.seconds), "--timeout-us", str(a.timeout_us), "--idle-ms", str(a.idle_ms),
                "--json", load_json]
    try:
        load_rc = subprocess.run(load_cmd, timeout=a.seconds + a.idle_ms / 1000 + 60).returncode
    except subprocess.TimeoutExpired:
        load_rc = "timeout"
    server.send_signal(signal.SIGTERM)
    try:
        server_rc = server.wait(timeout=60)
    except subprocess.TimeoutExpired:
        server.kill()
        server_rc = "timeout"
    result = {"server_rc": server_rc, "load_rc": load_rc, "server_cmd": cmd, "load_cmd": load_cmd}
    try:
        with open(server_json) as f:
            result["server"] = json.load(f)
        with open(load_json) as f:
            result["load"] = json.load(f)
    except (OSError, ValueError) as e:
        result["error"] = f"a report is missing or unreadable: {e}"
    return result


def metrics(r):
    """The table's numbers of one run, and its correctness counts."""
    s, l = r["server"], r["load"]
    v = dict(s["violations"])
    v.update(l["violations"])
    v["exit_status"] = int(r["server_rc"] != 0 or r["load_rc"] != 0)
    m = {
        "rps": l["replies_per_s"],
        "cpu_us_per_req": 1e6 * s["cpu_s"] / max(s["counts"]["requests"], 1),
        "rss_mb": s["max_rss_kb"] / 1024,
        "timeouts": s["lateness"]["count"],
        "wakeups_per_s": s.get("wakeups", 0) / max(l["seconds"], 1e-9),
    }
    for h in ("lateness", "past_tick"):
        if h in s:
            for q in ("p50", "p99", "p999", "max"):
                m[f"{h}_{q}_us"] = s[h][f"{q}_ns"] / 1000
    return m, v


def median_of(runs, key):
    vals = [m[key] for m, _ in runs if key in m]
    return statistics.median(vals) if vals else None


def fmt(x, digits=0):
    if x is None:
        return "-"
    return f"{x:,.{digits}f}"


def table(configs, results):
    head = ("| configuration | req/s | lateness p50 / p99 / p99.9 / max (us) | past the tick p50 / p99 / "
            "p99.9 / max (us) | CPU us/req | max RSS MB | violations |")
    rows = [head, "|" + "---|" * 7]
    for c in configs:
        runs = results[c["slug"]]["metrics"]
        med = results[c["slug"]]["median"]

        def quad(h):
            if med.get(f"{h}_p50_us") is None:
                return "-"
            return " / ".join(fmt(med[f"{h}_{q}_us"]) for q in ("p50", "p99", "p999", "max"))
        bad = sum(sum(v.values()) for _, v in runs) + results[c["slug"]]["errors"]
        rows.append(f"| {c['name']} | {fmt(med['rps'])} | {quad('lateness')} | {quad('past_tick')} | "
                    f"{fmt(med['cpu_us_per_req'], 1)} | {fmt(med['rss_mb'], 1)} | {bad} |")
    return "\n".join(rows)


def targets(configs, results):
    """The performance targets, tickwheel beside Asio, per shape and tick (the Asio server with
    tickwheel timers: lateness and CPU; it holds the same records as the Asio server, so its memory
    is Asio's plus the engine's)."""
    lines = []
    by = {(c["shape"], c["mode"], c["tick_us"]): results[c["slug"]]["median"] for c in configs}
    for c in configs:
        if c["mode"] not in ("manual", "workers", "asio-tickwheel"):
            continue
        asio = by.get((c["shape"], "asio", 0))
        if asio is None:
            continue
        tw = by[(c["shape"], c["mode"], c["tick_us"])]
        checks = [
            ("past-the-tick p99 <= Asio's lateness p99", tw["past_tick_p99_us"], asio["lateness_p99_us"],
             tw["past_tick_p99_us"] <= asio["lateness_p99_us"], "us"),
            ("CPU per request <= Asio's", tw["cpu_us_per_req"], asio["cpu_us_per_req"],
             tw["cpu_us_per_req"] <= asio["cpu_us_per_req"], "us"),
        ]
        if c["mode"] != "asio-tickwheel":
            checks.append(("max RSS within 10% of Asio's", tw["rss_mb"], asio["rss_mb"],
                           abs(tw["rss_mb"] - asio["rss_mb"]) <= 0.10 * asio["rss_mb"], "MB"))
        for what, ours, theirs, ok, unit in checks:
            lines.append(f"| {c['name']} | {what} | {ours:,.1f} {unit} | {theirs:,.1f} {unit} | "
                         f"{'met' if ok else 'MISSED'} |")
    if not lines:
        return ""
    return "\n".join(["| configuration | target | tickwheel | Asio | |", "|---|---|---|---|---|"] + lines)


# ---- The SVG: lateness percentile curves, one panel per shape, drawn by stress/plot.py ----

PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "stress", "plot.py")


def curves(results, c):
    """The median run's curves of a configuration, as stress/plot.py reads them."""
    run = results[c["slug"]].get("median_run")
    if run is None:
        return {}
    server = run["server"]
    # The maximum comes at 100%: drawn at 99.999%, as far right as the plot's last decade.
    return {what: [{"percentile": min(p, 99.999), "ns": ns} for p, ns in server[what]["curve"]]
            for what in ("lateness", "past_tick") if what in server}


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "model": model, "kernel": platform.release(),
            "loadavg_at_start": os.getloadavg()[0]}


def main():
    a = parse_args()
    configs = configurations(a)
    os.makedirs(a.out, exist_ok=True)
    biggest = max(c["connections"] for c in configs)
    raise_fd_limit(biggest + biggest // 100 + 256)
    results = {c["slug"]: {"runs": [], "metrics": [], "errors": 0} for c in configs}
    host = machine()
    a.malloc = linked_malloc(a.server)
    host["malloc"] = os.path.basename(a.malloc) if a.malloc else "glibc"
    print(f"run_gateway.py: {len(configs)} configurations x {a.runs} runs of {a.seconds:g} s, "
          f"{a.loops} loop(s); machine: {host['cpus']} CPUs, {host['model']}, load {host['loadavg_at_start']:.1f}; "
          f"malloc: {host['malloc']}" + (" (preloaded into the Asio server too)" if a.malloc else ""),
          flush=True)
    for run in range(a.runs):
        order = configs[run % len(configs):] + configs[:run % len(configs)]
        for c in order:
            r = run_one(a, c, run, a.out)
            slot = results[c["slug"]]
            slot["runs"].append(r)
            if "error" in r:
                slot["errors"] += 1
                print(f"  run {run + 1}: {c['name']}: FAILED: {r['error']}", flush=True)
                continue
            m, v = metrics(r)
            slot["metrics"].append((m, v))
            bad = {k: x for k, x in v.items() if x}
            print(f"  run {run + 1}: {c['name']}: {m['rps']:,.0f} req/s, lateness p99 "
                  f"{m['lateness_p99_us']:,.0f} us" +
                  (f", past the tick p99 {m['past_tick_p99_us']:,.0f} us" if "past_tick_p99_us" in m else "") +
                  f", {m['cpu_us_per_req']:.1f} us CPU/req" +
                  (f", {m['wakeups_per_s']:,.0f} engine wake-ups/s" if c["mode"] != "asio" else "") +
                  (f", VIOLATIONS {bad}" if bad else ""), flush=True)
    for c in configs:
        slot = results[c["slug"]]
        keys = set().union(*(m.keys() for m, _ in slot["metrics"])) if slot["metrics"] else set()
        slot["median"] = {k: median_of(slot["metrics"], k) for k in keys}
        # The run whose request-timeout p99 is the median one draws the curve.
        good = [r for r in slot["runs"] if "error" not in r]
        if good:
            good.sort(key=lambda r: r["server"]["lateness"]["p99_ns"])
            slot["median_run"] = good[(len(good) - 1) // 2]
    violations = sum(sum(v.values()) for c in configs for _, v in results[c["slug"]]["metrics"])
    errors = sum(results[c["slug"]]["errors"] for c in configs)

    command = " ".join(sys.argv)
    tab, tgt = table(configs, results), targets(configs, results)
    print()
    print(tab)
    if tgt:
        print()
        print(tgt)
    title = (f"tickwheel gateway vs Boost.Asio: {a.loops} loop(s), timeout {a.timeout_us} us, "
             f"{a.runs} run(s) of {a.seconds:g} s, {host['cpus']} CPUs")
    report = {
        "command": command, "title": title, "machine": host,
        "parameters": {k: getattr(a, k) for k in ("shapes", "ticks", "seconds", "runs", "loops", "timeout_us",
                                                  "idle_ms", "service_us", "drop", "seed", "rt_priority")},
        "configurations": [
            {**c, "median": results[c["slug"]]["median"], "curves": curves(results, c),
             "runs": [{"metrics": m, "violations": v} for m, v in results[c["slug"]]["metrics"]],
             "errors": results[c["slug"]]["errors"]}
            for c in configs],
        "violations": violations, "errors": errors, "table": tab, "targets": tgt,
    }
    json_path, svg_path = os.path.join(a.out, "gateway.json"), os.path.join(a.out, "gateway.svg")
    with open(json_path, "w") as f:
        json.dump(report, f, indent=2)
    plotted = subprocess.run([sys.executable, PLOT, "gateway", json_path, "--svg", svg_path], check=False).returncode
    print(f"\nrun_gateway.py: wrote {json_path}" + (f" and {svg_path}" if plotted == 0 else ", no SVG (above)"))
    if a.check_files:
        with open(json_path) as f:
            json.load(f)
        if plotted != 0:
            print("run_gateway.py: FAILED: --check-files asked for the SVG")
            return 1
        ET.parse(svg_path)
    if violations or errors:
        print(f"run_gateway.py: FAILED: {violations} correctness violations, {errors} runs that did not complete")
        return 1
    print("run_gateway.py: every correctness count is 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
