#!/usr/bin/env python3
"""stress/plot.py — the plots of tickwheel's reports, a stress run's text report, and two runs side by side.

  plot.py stress REPORT.json [--text] [--svg PLOT.svg]
                                                 a stress run's text report (tickwheel-stress prints
                                                 it on stdout) and its plot (tickwheel-stress --svg)
  plot.py compare A.json B.json [--svg PLOT.svg] two stress runs side by side: the text on stdout,
                                                 both runs in one plot (tickwheel-stress --compare)
  plot.py gateway GATEWAY.json --svg PLOT.svg    the reference gateway's lateness curves
                                                 (examples/gateway/run_gateway.py)

The stress plot has three panels, titled with the run's configuration: the lateness percentile
curve (x: 1 / (1 - p) on a log axis, labelled 0%, 90%, 99%, ...; y: lateness, log), the p99 and
maximum of each second's fires beside the control thread's p99, and the tick lag of every pass and
of each shard's tick probe against the control thread and cyclictest (the platform's floor, dashed
and dotted): the gap between them is what the engine adds. A dashed grey line marks one tick.

Drawn with matplotlib (Debian: python3-matplotlib), whose module Debian installs for its own
/usr/bin/python3 only: run under another interpreter that cannot import it, the script runs itself
again under /usr/bin/python3. Where no interpreter can, it says so on stderr and exits 3 (the
compare text is still printed); a report it cannot read exits 2.
"""
import argparse
import json
import os
import sys
import textwrap

MATPLOTLIB_MISSING = 3
SYSTEM_PYTHON = "/usr/bin/python3"

PERCENTILES = ["p50", "p90", "p99", "p99_9", "p99_99", "max", "mean"]


def pyplot():
    """matplotlib.pyplot with the SVG backend, or None once this interpreter has been replaced."""
    try:
        import matplotlib
    except ImportError:
        if os.path.realpath(sys.executable) != os.path.realpath(SYSTEM_PYTHON) and os.access(SYSTEM_PYTHON,
                                                                                               os.X_OK):
            sys.stdout.flush()
            os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON, os.path.abspath(__file__), *sys.argv[1:]])
        return None
    matplotlib.use("svg")
    matplotlib.rcParams.update({"svg.fonttype": "none", "svg.hashsalt": "tickwheel", "font.size": 9})
    import matplotlib.pyplot as plt
    return plt


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def curve(points):
    """A percentile curve of the report (percentile, ns) as x = 1 / (1 - p), y = microseconds."""
    return [1 / (1 - p["percentile"] / 100) for p in points], [max(p["ns"], 1) / 1e3 for p in points]


def per_second(report, key):
    return [s["t_s"] for s in report["series"]], [max(s[key], 1) / 1e3 for s in report["series"]]


def percentile_axis(ax, title, tick_ns):
    ax.set_title(title, loc="left", pad=4)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(lambda x, _: "0%" if x <= 1 else f"{100 - 100 / x:g}%")
    ax.set_xlabel("percentile (log of 1 / (1 - p); each curve ends at its maximum)")
    ax.set_ylabel("us")
    if tick_ns:
        ax.axhline(tick_ns / 1e3, color="#999999", dashes=(4, 3), linewidth=1, label="one tick")
    ax.grid(True, which="major", color="#eeeeee")


def lag_lines(ax, report, who="", colour=None, light=None):
    """The tick-lag panel's lines of one report: passes, probes, the control thread, cyclictest."""
    if "passes" in report:
        ax.plot(*curve(report["passes"]["curve"]), color=light or "#1f5fa8", marker=".",
                label=who + "every pass, every shard: start - planned wake-up")
    shards = report["tick_lag"]["shards"]
    if colour is None and len(shards) <= 6:
        for s in shards:
            ax.plot(*curve(s["curve"]), marker=".", label=f"tick probe, shard {s['index']}")
    else:
        ax.plot(*curve(report["tick_lag"]["curve"]), color=colour or "#2e8b57", marker=".",
                label=who + "tick probes, every shard")
    if report["control"]["ran"]:
        ax.plot(*curve(report["control"]["curve"]), color=colour or "#555555", dashes=(5, 3),
                label=who + "control thread (the platform's floor)")
    cyclic = report.get("cyclictest", {})
    if cyclic.get("ran"):
        ax.plot(*curve(cyclic["curve"]), color=colour or "#000000", dashes=(1, 2),
                label=who + "cyclictest (the platform's floor)")


def figure(plt, title, config, summary):
    fig, axes = plt.subplots(3, 1, figsize=(11, 14), layout="constrained")
    fig.suptitle("\n".join([title] + textwrap.wrap(config, 140) + [summary]), x=0.01, ha="left", fontsize=10)
    return fig, axes


def finish(plt, fig, axes, svg, title):
    for ax in axes:
        ax.legend(loc="upper left", fontsize=8)
    fig.savefig(svg, format="svg", metadata={"Title": title, "Date": None})
    plt.close(fig)


def us(ns):
    return f"{ns / 1e3:.1f} us" if ns < 1e6 else f"{ns / 1e6:.2f} ms"


def plot_stress(plt, report, svg):
    fire = report["fire"]
    lat = fire["lateness_ns"]
    title = (f"tickwheel-stress: lateness of {fire['count']} fires "
             f"(accounting {'PASS' if report['ok'] else 'FAIL'})")
    summary = (f"p50 {us(lat['p50'])}, p99 {us(lat['p99'])}, p99.9 {us(lat['p99_9'])}, "
               f"p99.99 {us(lat['p99_99'])}, max {us(lat['max'])}, over {report['run']['seconds']:.1f} s")
    tick = report["options"]["tick_ns"]
    fig, axes = figure(plt, title, report["config"], summary)
    percentile_axis(axes[0], "Lateness by percentile (callback start - deadline)", tick)
    axes[0].plot(*curve(fire["lateness_curve"]), color="#1f5fa8", marker=".",
                 label="every fire: callback start - deadline")
    time_axis(axes[1], tick)
    axes[1].plot(*per_second(report, "lateness_max_ns"), color="#c0392b", label="max of the second")
    axes[1].plot(*per_second(report, "lateness_p99_ns"), color="#1f5fa8", label="p99 of the second")
    if report["control"]["ran"]:
        axes[1].plot(*per_second(report, "control_p99_ns"), color="#555555", dashes=(5, 3),
                     label="control thread p99 of the second")
    percentile_axis(axes[2], "Tick lag by percentile: every pass and the tick probes against the control "
                    "thread and cyclictest (the floor)", tick)
    lag_lines(axes[2], report)
    finish(plt, fig, axes, svg, title)


def time_axis(ax, tick_ns):
    ax.set_title("Lateness over time, per second", loc="left")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since the producers started")
    ax.set_ylabel("us")
    ax.axhline(tick_ns / 1e3, color="#999999", dashes=(4, 3), linewidth=1, label="one tick")
    ax.grid(True, color="#eeeeee")


def plot_compare(plt, a, b, a_name, b_name, svg):
    title = f"tickwheel-stress: A {a_name} against B {b_name}"
    p99 = lambda r: us(r["fire"]["lateness_ns"]["p99"])  # noqa: E731
    fig, axes = figure(plt, title, f"A: {a['config']} | B: {b['config']}", f"lateness p99: A {p99(a)}, B {p99(b)}")
    tick = a["options"]["tick_ns"]
    percentile_axis(axes[0], "Lateness by percentile (callback start - deadline)", tick)
    time_axis(axes[1], tick)
    percentile_axis(axes[2], "Tick lag by percentile: every pass and the tick probes against the control "
                    "thread and cyclictest (the floor)", tick)
    for who, r, colour, light in (("A", a, "#1f5fa8", "#85c1e9"), ("B", b, "#c0392b", "#f1948a")):
        axes[0].plot(*curve(r["fire"]["lateness_curve"]), color=colour, marker=".", label=f"{who}: every fire")
        axes[1].plot(*per_second(r, "lateness_p99_ns"), color=colour, label=f"{who}: p99 of the second")
        lag_lines(axes[2], r, f"{who}: ", colour, light)
    finish(plt, fig, axes, svg, title)


def row(a, b, scale):
    ratio = f"{b / a:.2f}x" if a > 0 and b >= 0 else "-"
    return f"{a / scale:12.1f} {b / scale:12.1f} {(b - a) / scale:+12.1f} {ratio:>8}"


def histogram_rows(title, a, b):
    return [title + " (us)"] + [f"  {key:<8}" + row(a[key], b[key], 1e3) for key in PERCENTILES]


def value_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + "; ".join(e if isinstance(e, str) else "..." for e in v) + "]"
    if isinstance(v, (int, float)):
        return f"{v:g}"
    return "null" if v is None else str(v)


def differences(section, a, b):
    """Every scalar member of two objects whose values differ (the load average always), as text."""
    lines = []
    for key, va in a.items():
        if isinstance(va, dict) or (isinstance(va, list) and key not in ("smt_siblings", "warnings")):
            continue
        ta = value_text(va)
        tb = value_text(b[key]) if key in b else "(absent)"
        if ta != tb or key in ("loadavg_start", "loadavg_end"):
            lines.append(f"  {section}.{key}: {ta} | {tb}")
    return lines


def floor_rows(title, a, b, key):
    lines = [title]
    for ra, rb in zip(a["floor"], b["floor"]):
        lines.append(f"  {ra['percentile']:<8}" + row(ra[key], rb[key], 1e3))
    return lines


def compare_text(a, b, a_name, b_name):
    out = [f"compare     A {a_name}", f"            B {b_name}", f"A           {a['config']}",
           f"B           {b['config']}", f"{'':<10} {'A':>12} {'B':>12} {'B - A':>12} {'B / A':>8}"]
    out += histogram_rows("lateness, callback start - deadline, every fire", a["fire"]["lateness_ns"],
                          b["fire"]["lateness_ns"])
    out += histogram_rows("past the tick, every fire", a["fire"]["lateness_past_tick_ns"],
                          b["fire"]["lateness_past_tick_ns"])
    out += histogram_rows("tick probes, every shard", a["tick_lag"]["lag_ns"], b["tick_lag"]["lag_ns"])
    if "passes" in a and "passes" in b:
        out += histogram_rows("every pass's tick lag, every shard", a["passes"]["tick_lag_ns"],
                              b["passes"]["tick_lag_ns"])
    if a["control"]["ran"] and b["control"]["ran"]:
        out += histogram_rows("control thread (the platform's floor)", a["control"]["lateness_ns"],
                              b["control"]["lateness_ns"])
        out += floor_rows("tick probe - control (us): what the engine adds above the platform", a, b,
                          "probe_minus_control_ns")
    else:
        out.append("control thread: not run in both, no floor to compare")
    if a.get("cyclictest", {}).get("ran") and b.get("cyclictest", {}).get("ran"):
        out += histogram_rows("cyclictest (the platform's floor)", a["cyclictest"]["latency_ns"],
                              b["cyclictest"]["latency_ns"])
    out.append("throughput (per second)")
    for section in ("schedule", "cancel", "fire"):
        out.append(f"  {section:<8}" + row(a[section]["per_second"], b[section]["per_second"], 1))
    out.append(f"accounting  A {'PASS' if a['ok'] else 'FAIL'}, B {'PASS' if b['ok'] else 'FAIL'}")
    out.append("differences (A | B)")
    diff = []
    for section in ("options", "platform", "placement"):
        diff += differences(section, a[section], b[section])
    out += diff or ["  none"]
    for who, r in (("A", a), ("B", b)):
        out += [f"WARNING     {who}: {w}" for w in r["placement"]["warnings"]]
    return "\n".join(out) + "\n"


# ---- The text report (tickwheel-stress prints it from its JSON report) ----

KEYS = ["p50", "p90", "p99", "p99_9", "p99_99"]


def rate(count, seconds):
    return count / seconds if seconds > 0 else 0.0


def percentile_line(h):
    """"p50 12.345  p90 ...  max ...  mean ...  (n = ...)" in microseconds."""
    if h["count"] == 0:
        return "none"
    return ("".join(f"{k} {h[k] / 1e3:.3f}  " for k in KEYS) +
            f"max {h['max'] / 1e3:.3f}  mean {h['mean'] / 1e3:.3f}  (n = {h['count']})")


def platform_text(r):
    p, pl, o = r["platform"], r["placement"], r["options"]
    unset = lambda v: v or "not set"  # noqa: E731
    rt = (" RT throttling: sched_rt_runtime_us %d of sched_rt_period_us %d%s" %
          (p["rt_runtime_us"], p["rt_period_us"], " (off)" if p["rt_runtime_us"] < 0 else "")
          if p["rt_known"] else " RT throttling: unknown")
    if not r["control"]["ran"]:
        control = "off"
    else:
        control = (("spinning" if o["wait"] == "spin" else "sleeping") +
                   (f" on CPU {pl['control']}" if pl["control"] >= 0 else " on any CPU"))
    out = [f"platform    kernel {p['kernel']}; clocksource {p['clocksource']}; THP {p['thp']}",
           f"            isolcpus {unset(p['isolcpus'])}, nohz_full {unset(p['nohz_full'])}, rcu_nocbs "
           f"{unset(p['rcu_nocbs'])} (isolated CPUs: {p['isolated']}); governor {p['governor']}",
           f"            allowed CPUs {p['allowed_cpus']}; SMT siblings:" +
           "".join(f" {s};" for s in p["smt_siblings"]) + rt,
           "placement   workers on " + ("any CPU (not pinned)" if pl["workers"] == "any" else f"CPUs {pl['workers']}") +
           ", producers and cancellers on " + ("any CPU" if pl["load"] == "any" else f"CPUs {pl['load']}") +
           ", control thread " + control + (f", SCHED_FIFO {o['rt_priority']}" if o["rt_priority"] > 0 else "") +
           (", memory locked" if o["mlock"] else "")]
    if pl["fitted"]:
        out.append("            " + pl["fitted"])
    out += [f"WARNING     {w}" for w in pl["warnings"]]
    if not pl["warnings"]:
        out.append("            no warning: every busy thread had a CPU of its own, and nothing else took it")
    return out


def calls_text(r):
    o, env, run, s, c, m = r["options"], r["environment"], r["run"], r["schedule"], r["cancel"], r["reschedule"]
    secs = run["seconds"]
    per_batch = lambda calls, batches: calls / batches if batches else 0.0  # noqa: E731
    mps = lambda ns: 1e3 / ns if ns > 0 else 0.0  # noqa: E731
    rejected = ", ".join(f"{n} {k}" for k, n in s["rejected"].items() if n) or "none"
    out = [f"clock       steady_clock::now() costs {env['clock_read_ns']:.1f} ns per read (median of 5 loops of 1M "
           f"reads); |steady_clock - CLOCK_MONOTONIC| {env['clock_monotonic_offset_ns']} ns. Every fire's lateness "
           "includes one read, every timed batch one more",
           f"run         {secs:.3f} s of load ({env['producers']} producers, {env['cancellers']} cancellers, "
           f"{env['shards']} shards, {env['hardware_threads']} hardware threads); Engine::stop() took "
           f"{run['stop_seconds'] * 1e3:.3f} ms",
           f"schedule    {s['calls']} calls by producers, {s['scheduled']} scheduled ({s['per_second']:.0f}/s over the "
           f"run), rejected: {rejected}",
           f"            inside schedule_at() and schedule_every(): {s['ns_per_call']:.1f} ns per call net of the "
           f"clock = {mps(s['ns_per_call']):.2f} M/s per producer thread ({per_batch(s['calls'], s['batches']):.1f} "
           "calls per timed batch: up to 256, a burst whole, a periodic start alone; small batches pay cold caches)",
           f"            periodic: {s['periodic_started']} started with schedule_every, {s['periodic_inexact']} of "
           "them with their first grid point a lower bound (its schedule call took a tick or more)"]
    b, hits = s["bursts"], r["engine"]["transfer_cap_hits"]
    if b["count"]:
        out.append(f"            bursts: {b['count']}, {b['calls']} schedules in all, each one tight loop of "
                   f"{b['ns'] / b['count'] / 1e6:.2f} ms on average ({b['calls'] / (b['ns'] / 1e9) / 1e6 if b['ns'] else 0:.1f}"
                   f" M/s), the longest {b['max_ns'] / 1e6:.2f} ms = {b['max_ns'] / o['tick_ns']:.2f} ticks; the "
                   "transfer-cap hit counter " +
                   ("moved" if hits else "did not move: no pass found more than the cap queued") +
                   f" ({hits} hits, cap {o['transfer_cap']})")
    own_cancelled = c["returned_true"] - r["periodic"]["cancelled"]
    resolved = own_cancelled + r["fire"]["count"] - r["fire"]["periodic_runs"]
    out += [f"cancel      {c['calls']} calls ({c['per_second']:.0f}/s), {c['by_cancellers']} of them from canceller "
            f"threads: {c['returned_true']} true, {c['returned_false']} false (the fire won: the cancel came at or "
            "after the deadline)",
            f"            inside cancel(): {c['ns_per_call']:.1f} ns per call net of the clock = "
            f"{mps(c['ns_per_call']):.2f} M/s per thread ({per_batch(c['calls'], c['batches']):.1f} calls per timed "
            f"batch); cancelled share of resolved one-shots {own_cancelled / resolved if resolved else 0:.3f} "
            f"(asked {o['cancel_share']:g})",
            f"reschedule  {m['calls']} calls ({m['per_second']:.0f}/s), all from producers (each posted to the "
            f"shard): {m['returned_true']} true, {m['returned_false']} false (the timer had fired or was firing); the "
            f"engine applied {r['engine']['rescheduled']} moves (asked {o['reschedule_share']:g} of one-shots)",
            f"            inside reschedule(): {m['ns_per_call']:.1f} ns per call net of the clock "
            f"({per_batch(m['calls'], m['batches']):.1f} calls per timed batch); {m['moved_fires']} fires of moved "
            f"timers checked against the deadline they had, {m['raced']} of them at the deadline before the last "
            "move, which had come while the move was on its way (allowed)"]
    return out


def fire_text(r):
    f, secs = r["fire"], r["run"]["seconds"]
    out = [f"fire        {f['count']} callbacks ({f['per_second']:.0f}/s), of which {f['periodic_runs']} periodic "
           f"runs ({rate(f['periodic_runs'], secs):.0f}/s)",
           "  lateness, callback start - deadline (us), every fire:", "    " + percentile_line(f["lateness_ns"]),
           "  one-shot timers only:", "    " + percentile_line(f["oneshot_lateness_ns"]),
           "  periodic runs only, each against its own point on the timer's grid (or the earliest its policy lets "
           "it run):", "    " + percentile_line(f["periodic_lateness_ns"]),
           "  past the tick, callback start - deadline rounded up to the tick (us):",
           "    " + percentile_line(f["lateness_past_tick_ns"])]
    out += policies_text(r)
    out.append("tick lag    a pass's start behind the deadline it waited (or spun) for, the worst per shard "
               "(Engine::stats(); every pass's below, under passes):" +
               ",".join(f" shard {s['index']} {s['max_tick_lag_ns'] / 1e3:.1f} us" for s in r["shards"]))
    return out


def policies_text(r):
    p, rt = r["periodic"], r["repeated"]
    out = ["periodic    policy           timers       runs  before bound  forced misfires (each run checked against "
           "the earliest its policy lets it start)"]
    out += [f"            {k['policy']:<14} {k['timers']:8d} {k['runs']:10d} {k['before_bound']:13d} "
            f"{k['forced_misfires']:16d}" for k in p["policies"]]
    out.append(f"            skipped by the engine {r['engine']['skipped']} (at least the {p['forced_skips']} forced "
               f"misfires made certain, at most the {p['skip_bound']} grid points skip timers passed without a run); "
               f"cancelled during the run {p['cancelled']} (cancel() true), {p['runs_after_cancel']} of them with a "
               "run begun before cancel() returned, that ran after it as allowed; "
               f"{p['cancel_refused']} returned false")
    if rt["timers"] == 0:
        return out + ["repeated    none (--repeated 0)"]
    e = rt["engine"]
    return out + [
        f"repeated    {rt['timers']} RepeatedTimers on an engine of their own: {rt['starts']} starts, {rt['stops']} "
        f"stops, {rt['restarts']} restarts, {rt['resets']} resets ({rt['refused']} refused); {rt['runs']} runs, "
        f"{rt['begun_before_call']} of them begun before the control call they followed; too early "
        f"{rt['too_early']}, while stopped {rt['while_stopped']}",
        f"            their engine: scheduled {e['scheduled']}, fired {e['fired']}, cancelled {e['cancelled']}, "
        f"handed back at stop {e['returned_at_stop']}, callback errors {e['callback_errors']}"]


def floor_text(r):
    ran, ct = r["control"]["ran"], r["cyclictest"]
    out = ["floor       what the engine adds above the platform (us): the tick probes (one timer per shard due on "
           "every tick, one sample per tick) and every fire past its tick, against the control thread "
           "(cyclictest-style, same tick, same run) and cyclictest itself"]
    if not ran:
        out.append("            no control thread (--no-control): the engine's figures stand alone")
    out.append("            pct        past tick   tick probe      control   cyclictest  probe-control  past "
               "tick-control")
    for row in r["floor"]:
        cell = lambda v, fmt, on: (fmt % (v / 1e3)) if on else "-"  # noqa: E731
        out.append(f"            {row['percentile']:<7} {row['past_tick_ns'] / 1e3:12.1f} "
                   f"{row['tick_probe_ns'] / 1e3:12.1f} {cell(row['control_ns'], '%.1f', ran):>12} "
                   f"{cell(row['cyclictest_ns'], '%.1f', ct['ran']):>12} "
                   f"{cell(row['tick_probe_ns'] - row['control_ns'], '%+.1f', ran):>14} "
                   f"{cell(row['past_tick_ns'] - row['control_ns'], '%+.1f', ran):>18}")
    out.append(f"            samples: {r['fire']['lateness_past_tick_ns']['count']} fires, "
               f"{r['tick_lag']['lag_ns']['count']} probe runs, {r['control']['lateness_ns']['count']} control "
               f"wake-ups, {ct['latency_ns']['count']} cyclictest wake-ups")
    if ct["ran"]:
        out.append(f"cyclictest  beside the control thread, same CPU and priority, 1 us buckets ({ct['overflows']} "
                   f"past its 100 ms histogram, counted at its maximum): {ct['command']}")
    else:
        out.append(f"cyclictest  not run: {ct['reason']}" + (f" (command: {ct['command']})" if ct["command"] else ""))
    for s in r["tick_lag"]["shards"]:
        lag, fires = s["lag_ns"], s["fires_per_tick"]
        out.append(f"tick probe  shard {s['index']}: lag p50 {lag['p50'] / 1e3:.1f} p99 {lag['p99'] / 1e3:.1f} p99.9 "
                   f"{lag['p99_9'] / 1e3:.1f} max {lag['max'] / 1e3:.1f} us (n = {lag['count']})" +
                   (f"; fires per tick p50 {fires['p50']} p99 {fires['p99']} max {fires['max']}"
                    if fires["count"] else ""))
    return out


def passes_text(r):
    out = ["passes      every pass of each shard, from the engine's on_pass hook: tick lag = start - the wake-up the "
           "wait before it planned, for the passes that had one and started at or after it (those woken before it, "
           "by a hand-off, a spin or a poll, are counted as early, not as a negative lag); duration = end - start "
           "(us); work per pass in counts"]
    for p in r["passes"]["shards"]:
        i, lag, d = p["index"], p["tick_lag_ns"], p["duration_ns"]
        work = "; ".join(f"{name} p50 {p[key]['p50']} p99 {p[key]['p99']} max {p[key]['max']} (total "
                         f"{p['totals'][key]})"
                         for name, key in (("fires", "fired"), ("moves", "moved"), ("transfers", "transferred"),
                                           ("cancels", "cancels")))
        out += [f"            shard {i}: {p['count']} passes ({p['per_second']:.0f}/s): {lag['count']} with a tick "
                f"lag, {p['early']} early, {p['unplanned']} with no wake-up planned",
                f"            shard {i}: tick lag p50 {lag['p50'] / 1e3:.1f} p90 {lag['p90'] / 1e3:.1f} p99 "
                f"{lag['p99'] / 1e3:.1f} p99.9 {lag['p99_9'] / 1e3:.1f} max {lag['max'] / 1e3:.1f} us; duration "
                f"p50 {d['p50'] / 1e3:.1f} p99 {d['p99'] / 1e3:.1f} max {d['max'] / 1e3:.1f} us",
                f"            shard {i}: per pass {work}"]
    return out


def engine_text(r):
    o, e, secs = r["options"], r["engine"], r["run"]["seconds"]
    out = [f"engine      transfer-cap hits {e['transfer_cap_hits']} (passes that moved {o['transfer_cap']} hand-offs "
           f"and left more); passes {e['passes']} ({rate(e['passes'], secs):.0f}/s); wake-ups {e['wakeups']} "
           f"({e['wakeups_per_second']:.0f}/s); callback errors {e['callback_errors']}",
           "shards      shard  scheduled      fired  cancelled  rearmed  rejected  cap-hits   passes  wake-ups  "
           "wake-ups/s  binding"]
    out += [f"            {s['index']:5d}  {s['scheduled']:9d}  {s['fired']:9d}  {s['cancelled']:9d}  "
            f"{s['rearmed']:7d}  {s['rejected']:8d}  {s['transfer_cap_hits']:8d}  {s['passes']:7d}  "
            f"{s['wakeups']:8d}  {s['wakeups_per_second']:10.0f}  {s['binding']}" for s in r["shards"]]
    if o["executor"] == "pool":
        n = o["pool_threads"]
        out.append(f"executor    pool: a ThreadPoolExecutor of {n} thread{'' if n == 1 else 's'} (not pinned) ran "
                   f"the callbacks; at most {r['executor']['max_executing']} handed over and not yet returned at a "
                   f"sample (Engine::stats().executing), {e['executing']} after stop()")
    else:
        out.append("executor    inline: each shard's worker ran its callbacks in its pass")
    out.append("threads     thread  shard      fired  periodic runs  lateness p50/p99/max us")
    for i, t in enumerate(r["executor"]["threads"]):
        lat = t["lateness_ns"]
        shard = str(t["shard"]) if t["shard"] >= 0 else "pool"
        out.append(f"            {i:6d}  {shard:>5}  {t['fired']:9d}  {t['periodic_runs']:13d}  "
                   f"{lat['p50'] / 1e3:.1f}/{lat['p99'] / 1e3:.1f}/{lat['max'] / 1e3:.1f}")
    return out


def memory_text(r):
    m, mc = r["memory"], r["machine"]
    mib = lambda b: b / (1024 * 1024)  # noqa: E731
    return [f"memory      {m['bytes_per_pending']:.1f} B per pending timer: RSS grew "
            f"{mib(max(m['rss_at_peak_bytes'] - m['rss_base_bytes'], 0)):.1f} MiB from the baseline to the second "
            f"with the most timers pending ({m['peak_pending']}), less {mib(m['calendar_bytes_at_peak']):.1f} MiB of "
            "the producers' agendas",
            f"            peak RSS {mib(m['peak_rss_bytes']):.1f} MiB (whole process; the harness's own arrays "
            f"{mib(m['harness_bytes']):.1f} MiB, allocated before the baseline)",
            f"machine     context switches during the run: {mc['voluntary_switches']} voluntary, "
            f"{mc['involuntary_switches']} involuntary (preempted); load average (1 min) {mc['loadavg_start']:.2f} "
            f"at the start, {mc['loadavg_end']:.2f} at the end"]


def threads_text(r):
    out = ["os threads  role       #      tid  placed  last CPU  voluntary  involuntary (context switches since the "
           "thread started, read before the stop)"]
    for t in r["platform"]["threads"]:
        known = t["known"]
        out.append(f"            {t['role']:<9} {t['index']:2d} {t['tid']:8d}  {t['cpus']:>6}  "
                   f"{str(t['last_cpu']) if t['last_cpu'] >= 0 else '?':>8}  "
                   f"{str(t['voluntary_switches']) if known else 'unknown':>9}  "
                   f"{str(t['involuntary_switches']) if known else 'unknown':>11}")
    for c in r["platform"]["interrupts"]:
        if not c["known"]:
            out.append(f"interrupts  CPU {c['cpu']} ({c['role']}): unknown (/proc/interrupts unreadable)")
            continue
        out.append(f"interrupts  CPU {c['cpu']} ({c['role']}): {c['total']} during the run "
                   f"({rate(c['total'], r['run']['seconds']):.0f}/s)" +
                   "".join(f"; {name} {n}" for name, n in c["top"].items()))
    return out + [f"notice      {n}" for n in r["notices"]]


def accounting_text(r):
    a, e = r["accounting"], r["engine"]
    out = [f"accounting  scheduled {a['scheduled']} + periodic runs {a['rearmed']} = fired {a['fired']} + cancelled "
           f"{a['cancelled']} + returned at stop {a['returned_at_stop']} (probes {a['probes']} included; rejected "
           f"{a['rejected']} accounted separately)",
           f"            double fires {a['double_fires']}, overlapping periodic runs {a['overlapping_runs']}, fired "
           f"after cancel {a['fired_after_cancel']}, stray fires {a['stray_fires']}, early fires {a['early_fires']} "
           f"(min lateness {r['fire']['min_lateness_ns'] / 1e3:.3f} us), fired before the tick "
           f"{a['fired_before_tick']}, cancel true on a fired timer {a['cancel_true_not_pending']}, fired before a "
           f"rescheduled deadline {a['moved_early']}, reschedule false while pending {a['refused_pending']}, "
           f"off-shard {a['off_shard']}, unrecorded callbacks {a['unrecorded_fires']}",
           f"            at stop: {a['pending_slots']} slots pending, {a['returned_at_stop']} timers handed to "
           f"stop()'s visitor (stop(visit) returned {a['stop_returned']}), {a['returned_cancel_false']} of them "
           f"refused cancel(), {a['pending_not_returned']} pending slots not among them; stale cancels "
           f"{a['stale_cancels']}, of which true {a['stale_cancel_true']}",
           f"            Engine::stats(): scheduled {e['scheduled']}, fired {e['fired']}, cancelled {e['cancelled']}, "
           f"rejected {e['rejected']}, rearmed {e['rearmed']}, skipped {e['skipped']}, pending {e['pending']}, "
           f"executing {e['executing']}, callback errors {e['callback_errors']}"]
    warnings = r["placement"]["warnings"]
    if warnings:
        out.append(f"WARNING     {len(warnings)} warning(s) above: the lateness tail of this run measures the "
                   "machine's scheduling as much as the engine")
    if r["ok"]:
        return out + ["result      PASS: every timer fired exactly once, was cancelled, or was returned by stop()"]
    return out + [f"result      FAIL: {len(r['failures'])} rule(s) broken"] + [f"  - {f}" for f in r["failures"]]


def report_text(r):
    """The text report of one run, every figure from its JSON report."""
    lines = [f"tickwheel-stress: {r['config']}"]
    for section in (platform_text, calls_text, fire_text, floor_text, passes_text, engine_text, memory_text,
                    threads_text, accounting_text):
        lines += section(r)
    return "\n".join(lines) + "\n"


GATEWAY_COLOURS = {"manual": "#1f77b4", "workers": "#2ca02c", "manual-ms": "#9467bd", "asio": "#d62728",
                   "asio-tickwheel": "#ff7f0e"}


def plot_gateway(plt, report, svg):
    """One panel per shape: each configuration's request-timeout lateness curve (its median run)."""
    configs = [c for c in report["configurations"] if c.get("curves")]
    shapes = list(dict.fromkeys(c["shape"] for c in report["configurations"]))
    fig, axes = plt.subplots(1, len(shapes), figsize=(7 * len(shapes), 6), layout="constrained", squeeze=False)
    title = report["title"]
    note = ("request-timeout lateness (fire time - deadline): solid; tickwheel past the tick: dotted; a 100 us "
            "tick: thinner. Each configuration's run with the median p99.")
    fig.suptitle("\n".join([title] + textwrap.wrap(note, 60 * len(shapes))), x=0.01, ha="left", fontsize=10)
    for ax, shape in zip(axes[0], shapes):
        percentile_axis(ax, f"{shape} (connections x req/s each)", None)
        for c in configs:
            if c["shape"] != shape:
                continue
            name = c["mode"] + (f" tick {c['tick_us']}us" if c["tick_us"] else "")
            width = 1.0 if c["tick_us"] == 100 else 1.8
            for what, dashes in (("lateness", None), ("past_tick", (1, 2))):
                if what in c["curves"]:
                    ax.plot(*curve(c["curves"][what]), color=GATEWAY_COLOURS[c["mode"]], linewidth=width,
                            label=f"{name}, {what.replace('_', ' ')}", **({"dashes": dashes} if dashes else {}))
    finish(plt, fig, axes[0], svg, title)


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="kind", required=True)
    stress = sub.add_parser("stress", help="one stress report: its text, its plot")
    stress.add_argument("report")
    stress.add_argument("--text", action="store_true", help="print the text report")
    stress.add_argument("--svg", default="")
    compare = sub.add_parser("compare", help="two stress reports side by side")
    compare.add_argument("a")
    compare.add_argument("b")
    compare.add_argument("--svg", default="")
    gateway = sub.add_parser("gateway", help="the gateway report of run_gateway.py")
    gateway.add_argument("report")
    gateway.add_argument("--svg", required=True)
    return parser.parse_args()


def main():
    args = parse_args()
    plt = pyplot() if args.svg else None
    try:
        reports = [load(p) for p in ([args.a, args.b] if args.kind == "compare" else [args.report])]
        if args.kind == "compare":
            sys.stdout.write(compare_text(*reports, args.a, args.b))
        if args.kind == "stress" and args.text:
            sys.stdout.write(report_text(reports[0]))
        if not args.svg:
            return 0
        if plt is None:
            print(f"plot.py: no plot written to {args.svg}: matplotlib cannot be imported by {sys.executable} "
                  f"(nor {SYSTEM_PYTHON}); Debian's package is python3-matplotlib", file=sys.stderr)
            return MATPLOTLIB_MISSING
        if args.kind == "stress":
            plot_stress(plt, reports[0], args.svg)
        elif args.kind == "compare":
            plot_compare(plt, *reports, args.a, args.b, args.svg)
        else:
            plot_gateway(plt, reports[0], args.svg)
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"plot.py: {args.kind}: {type(e).__name__}: {e}", file=sys.stderr)
        return 2
    if args.kind == "compare":
        print(f"files       SVG: {args.svg}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
