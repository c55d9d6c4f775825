#!/usr/bin/env python3
"""stress/plot.py — the plots of tickwheel's reports, and the side-by-side text of two stress runs.

  plot.py stress REPORT.json --svg PLOT.svg      the stress harness's plot (tickwheel-stress --svg)
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


GATEWAY_COLOURS = {"manual": "#1f77b4", "workers": "#2ca02c", "manual-ms": "#9467bd", "asio": "#d62728"}


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
    stress = sub.add_parser("stress", help="one stress report")
    stress.add_argument("report")
    stress.add_argument("--svg", required=True)
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
