#!/usr/bin/env python3
"""stress/check_report.py — CTest check of a tickwheel-stress JSON report, and of its SVG plot.

Usage: check_report.py REPORT.json [--svg PLOT.svg] [--expect-bursts] [--expect-executor KIND]
                       [--expect-threads workers|manual] [--hlog LOG] [--expect-control]
                       [--expect-misfires]
       check_report.py --compare BINARY A.json B.json PLOT.svg
       check_report.py --refused BINARY MESSAGE [--unprivileged] [--memlock BYTES] -- ARGS...
       check_report.py --no-matplotlib BINARY REPORT.json
       check_report.py --no-cyclictest BINARY

The report must parse and hold every section and field the program promises, with numbers where
numbers belong, and its figures must agree with each other: ok with no failures; scheduled +
periodic runs == fired + cancelled + returned at stop; every exactly-once counter zero (a rescheduled
timer's fire before its new deadline and a reschedule refused while pending among them); reschedule
calls == true + false, the engine's applied moves no more than the true ones less those a fire won,
and, with --reschedule-share, moved timers whose fires were checked; the
engine's own counters equal to the harness's (rearmed == periodic runs + skipped, skipped within
what forced misfires made certain and what the skip timers' grids allow, nothing executing after
stop, nothing pending once stop()'s visitor cancelled what it handed back); percentiles in order;
one entry per shard and per second; the callback threads within the workers and the pool, their
fires adding up; the periodic policies' timers and runs adding up to the periodic ones, every run
within its policy's bound; the repeated timers' calls made, runs seen and their engine's counters
closing with nothing handed back. With --expect-misfires (a run with --misfire-every) every
fixed-rate policy must have had forced misfires, the engine must have skipped periods, and with
the inline executor at least one skip must have been certain. With --svg
the plot must be well-formed XML (xml.etree), an <svg> root with a title, every panel (the tick-lag
one with every pass's curve) and a drawn curve. With --expect-bursts (the burst case) bursts must
have run (whether one outran the transfer cap is timing, which engine tests check deterministically
instead); with --expect-executor the run must have used that
executor (inline or pool); with --expect-threads, caller-driven (manual: polling threads) or not.
The platform, placement, control, cyclictest, tick-lag and floor sections must be there and agree
(cyclictest either ran on the control thread's CPU and recorded wake-ups, or says why it did not): one tick
probe per shard, each with samples; the floor's rows in percentile order, each difference the
probe's (or past-the-tick) figure minus the control's; the passes section (every pass, from the
engine's on_pass hook) with one entry per shard whose pass count is the engine's stats().passes for
that shard, whose worst tick lag is its max_tick_lag_ns, whose fires per pass add up to its fired,
with one duration and work sample per pass and lagged + early + unplanned passes adding up to all of
them; the threads listed with their roles (a worker or polling thread per shard when the harness can
name them, one entry per producer). With --expect-control the control thread must have run and
recorded wake-ups. With --hlog the HdrHistogram interval log is decoded as HdrHistogram's own
reader would (base64, the compressed V2 cookie, zlib, the V2 header with 2 significant digits,
ZigZag LEB128 counts with zero runs) and its intervals must add up to no more than the report's
totals, with the same maximum bucket as the log's Interval_Max says.
--no-matplotlib runs stress/plot.py and BINARY --svg-from where matplotlib cannot be imported and
checks that the text report is still printed, no plot is written, and both say so and fail.
--no-cyclictest runs BINARY on a PATH without cyclictest and checks that the run passes and its
report says cyclictest is not installed.
--compare runs BINARY --compare A B --svg PLOT and checks the side-by-side text (every section) and
the plot (both runs' curves in each panel). --refused runs BINARY ARGS and checks that it exits
non-zero, before running anything, with MESSAGE in its output; with --memlock, under an
RLIMIT_MEMLOCK of BYTES (prlimit); with --unprivileged, as the user nobody without capabilities,
for what only privilege permits. As root that means setpriv, and a copy of BINARY in a
world-readable directory of its own (made with tempfile, removed after), since nobody may not be
able to enter the tree (a clone in a 0700 directory such as /root or mktemp -d's); if nobody cannot
start the copy even so (no setpriv, a private TMPDIR, a noexec mount, a library only the tree holds)
the check is skipped: exit 77, CTest's SKIP_RETURN_CODE for it, never a pass.
Exit 0 iff every check holds; each failed check is printed.
"""
import argparse
import base64
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
import zlib

HISTOGRAM = ["count", "min", "mean", "p50", "p90", "p99", "p99_9", "p99_99", "max"]
FIELDS = {
    "options": ["profile", "timers", "producers", "schedule_rate", "cancel_share", "reschedule_share", "cancellers",
                "delay", "delay_min_ns", "delay_max_ns", "delay_mean_ns", "delay_short_ns",
                "delay_long_ns", "short_share", "periodic", "period_ns", "burst", "burst_every_ns",
                "duration_ns", "seed", "shards", "tick_ns", "wait", "transfer_cap", "pin",
                "periodic_policy", "periodic_cancel", "misfire_every_ns", "repeated",
                "max_pending", "executor", "pool_threads", "threads", "lead_ns", "rearm", "fit",
                "worker_cpus", "producer_cpus", "control_cpu", "control", "rt_priority", "mlock"],
    "platform": ["kernel", "clocksource", "isolcpus", "nohz_full", "rcu_nocbs", "isolated", "governor", "thp",
                 "rt_runtime_us", "rt_period_us", "rt_known", "allowed_cpus", "smt_siblings", "loadavg_start",
                 "loadavg_end", "interrupts", "threads"],
    "placement": ["workers", "load", "control", "fitted", "warnings"],
    "control": ["ran", "mode", "cpu", "lateness_ns", "curve"],
    "cyclictest": ["ran", "command", "reason", "overflows", "latency_ns", "curve"],
    "tick_lag": ["probes", "lag_ns", "curve", "shards"],
    "passes": ["count", "tick_lag_ns", "curve", "shards"],
    "environment": ["clock_read_ns", "clock_monotonic_offset_ns", "hardware_threads", "shards",
                    "producers", "cancellers"],
    "run": ["seconds", "stop_seconds"],
    "schedule": ["calls", "scheduled", "per_second", "batches", "ns", "ns_per_call", "rejected",
                 "periodic_started", "periodic_inexact", "probes", "tick_probes", "bursts"],
    "cancel": ["calls", "returned_true", "returned_false", "by_cancellers", "per_second", "batches",
               "ns", "ns_per_call"],
    "reschedule": ["calls", "returned_true", "returned_false", "per_second", "batches", "ns", "ns_per_call",
                   "moved_fires", "raced"],
    "fire": ["count", "per_second", "periodic_runs", "min_lateness_ns", "lateness_ns", "oneshot_lateness_ns",
             "periodic_lateness_ns", "lateness_past_tick_ns", "lateness_curve"],
    "engine": ["scheduled", "fired", "fired_at_schedule", "cancelled", "rejected", "rearmed", "skipped", "rescheduled", "executing",
               "pending", "queue_depth",
               "transfer_cap_hits", "passes", "wakeups", "wakeups_per_second", "callback_errors",
               "max_tick_lag_ns"],
    "memory": ["rss_base_bytes", "rss_at_peak_bytes", "calendar_bytes_at_peak", "peak_pending",
               "bytes_per_pending", "peak_rss_bytes", "harness_bytes"],
    "machine": ["voluntary_switches", "involuntary_switches", "loadavg_start", "loadavg_end"],
    "executor": ["kind", "pool_threads", "max_executing", "threads"],
    "periodic": ["policies", "cancelled", "cancel_refused", "runs_after_cancel", "forced_skips", "skip_bound"],
    "repeated": ["timers", "starts", "stops", "restarts", "resets", "refused", "runs", "begun_before_call",
                 "too_early", "while_stopped", "engine"],
    "accounting": ["scheduled", "rearmed", "fired", "cancelled", "returned_at_stop", "stop_returned", "rejected",
                   "probes", "double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires",
                   "early_fires", "fired_before_tick", "cancel_true_not_pending", "moved_early",
                   "refused_pending", "off_shard", "probe_failures", "unrecorded_fires", "pending_slots", "returned_cancel_false", "pending_not_returned",
                   "stale_cancels", "stale_cancel_true", "callback_errors", "periodic_cancel_refused",
                   "periodic_before_bound", "repeated_too_early", "repeated_while_stopped", "repeated_refused"],
}
POLICIES = ["catch_up", "fire_once_now", "skip", "fixed_delay"]
POLICY = ["policy", "timers", "runs", "before_bound", "forced_misfires"]
REPEATED_ENGINE = ["scheduled", "fired", "cancelled", "rejected", "pending", "returned_at_stop", "callback_errors"]
SHARD = ["index", "binding", "bound_cpu", "scheduled", "fired", "fired_at_schedule", "cancelled", "rearmed", "rejected",
         "transfer_cap_hits", "passes", "wakeups", "wakeups_per_second", "max_tick_lag_ns"]
THREAD = ["shard", "fired", "periodic_runs", "lateness_ns"]
PASS_HISTOGRAMS = ["tick_lag_ns", "duration_ns", "fired", "moved", "transferred", "cancels"]
PASS_SHARD = ["index", "count", "per_second", "early", "unplanned", *PASS_HISTOGRAMS, "totals", "curve"]
PASS_TOTALS = ["fired", "moved", "transferred", "cancels"]
SECOND = ["t_s", "scheduled_per_s", "cancelled_per_s", "fired_per_s", "pending", "queued",
          "lateness_p99_ns", "lateness_max_ns", "lateness_p99_so_far_ns", "rss_bytes",
          "transfer_cap_hits", "executing", "control_p99_ns", "probe_p99_ns"]
FLOOR = ["percentile", "past_tick_ns", "tick_probe_ns", "control_ns", "cyclictest_ns", "probe_minus_control_ns",
         "past_tick_minus_control_ns"]
FLOOR_ROWS = ["p50", "p90", "p99", "p99_9", "p99_99", "max"]
THREAD_INFO = ["role", "index", "tid", "cpus", "known", "voluntary_switches", "involuntary_switches", "last_cpu"]
MUST_BE_ZERO = ["double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires",
                "early_fires", "fired_before_tick", "cancel_true_not_pending", "moved_early", "refused_pending",
                "off_shard",
                "probe_failures", "unrecorded_fires", "returned_cancel_false",
                "pending_not_returned", "stale_cancel_true", "callback_errors", "periodic_cancel_refused",
                "periodic_before_bound", "repeated_too_early", "repeated_while_stopped", "repeated_refused"]
STRINGS = {("options", "profile"), ("options", "delay"), ("options", "wait"), ("options", "periodic_policy"),
           ("options", "executor"), ("executor", "kind"), ("options", "threads"), ("options", "worker_cpus"),
           ("options", "producer_cpus"), ("control", "mode"), ("placement", "workers"), ("placement", "load"),
           ("placement", "fitted"), ("cyclictest", "command"), ("cyclictest", "reason")} | {("platform", f) for f in ["kernel", "clocksource", "isolcpus", "nohz_full",
                                                                 "rcu_nocbs", "isolated", "governor", "thp",
                                                                 "allowed_cpus"]}
BOOLEANS = {("options", "pin"), ("options", "rearm"), ("options", "fit"), ("options", "control"),
            ("options", "mlock"), ("control", "ran"), ("cyclictest", "ran"),
            ("platform", "rt_known")}
OBJECTS = {("schedule", "rejected"), ("schedule", "bursts"), ("executor", "threads"),
           ("fire", "lateness_ns"), ("fire", "oneshot_lateness_ns"), ("fire", "periodic_lateness_ns"),
           ("fire", "lateness_past_tick_ns"), ("fire", "lateness_curve"), ("platform", "smt_siblings"),
           ("platform", "interrupts"), ("platform", "threads"), ("placement", "warnings"),
           ("control", "lateness_ns"), ("control", "curve"), ("tick_lag", "lag_ns"), ("tick_lag", "curve"),
           ("tick_lag", "shards"), ("periodic", "policies"), ("repeated", "engine"), ("passes", "tick_lag_ns"),
           ("passes", "curve"), ("passes", "shards"), ("cyclictest", "latency_ns"), ("cyclictest", "curve")}

errors = []
SKIPPED = 77  # the tests' SKIP_RETURN_CODE (stress/CMakeLists.txt)
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"]


def check(ok, message):
    if not ok:
        errors.append(message)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_histogram(name, h):
    for field in HISTOGRAM:
        check(is_number(h.get(field)), f"{name}.{field} is a number")
    if all(is_number(h.get(f)) for f in HISTOGRAM) and h["count"] > 0:
        chain = [h["min"], h["p50"], h["p90"], h["p99"], h["p99_9"], h["p99_99"], h["max"]]
        check(chain == sorted(chain), f"{name}: percentiles in order: {chain}")


def check_floor(report):
    """The platform's floor beside the engine: control, tick probes, and their differences."""
    env, control, lag = report["environment"], report["control"], report["tick_lag"]
    check_histogram("control.lateness_ns", control["lateness_ns"])
    check_histogram("tick_lag.lag_ns", lag["lag_ns"])
    check(lag["probes"] == env["shards"], f"one tick probe per shard: {lag['probes']} for {env['shards']}")
    check(report["schedule"]["tick_probes"] == env["shards"], "schedule.tick_probes is one per shard")
    check(len(lag["shards"]) == env["shards"], "one tick_lag entry per shard")
    for i, shard in enumerate(lag["shards"]):
        for field in ["index", "lag_ns", "fires_per_tick", "curve"]:
            check(field in shard, f"tick_lag.shards[{i}].{field} missing")
        if "lag_ns" in shard:
            check_histogram(f"tick_lag.shards[{i}].lag_ns", shard["lag_ns"])
            check(shard["lag_ns"]["count"] > 0, f"shard {i}'s tick probe ran")
    check(sum(s["lag_ns"]["count"] for s in lag["shards"] if "lag_ns" in s) == lag["lag_ns"]["count"],
          "the shards' probe samples add up to tick_lag.lag_ns.count")
    check(lag["lag_ns"]["count"] <= report["fire"]["periodic_runs"], "probe runs are periodic runs")
    floor = report.get("floor")
    check(isinstance(floor, list) and [r.get("percentile") for r in floor] == FLOOR_ROWS,
          f"floor rows are {FLOOR_ROWS}")
    for row in floor if isinstance(floor, list) else []:
        for field in FLOOR[1:]:
            check(is_number(row.get(field)), f"floor.{row.get('percentile')}.{field} is a number")
    if errors:
        return
    for row in floor:
        name = "max" if row["percentile"] == "max" else row["percentile"]
        check(row["tick_probe_ns"] == lag["lag_ns"][name], f"floor {name}: the probe column is tick_lag's")
        check(row["control_ns"] == control["lateness_ns"][name], f"floor {name}: the control column is control's")
        check(row["past_tick_ns"] == report["fire"]["lateness_past_tick_ns"][name],
              f"floor {name}: the past-tick column is fire.lateness_past_tick_ns's")
        if control["ran"]:
            check(row["probe_minus_control_ns"] == row["tick_probe_ns"] - row["control_ns"],
                  f"floor {name}: probe - control is the difference")
            check(row["past_tick_minus_control_ns"] == row["past_tick_ns"] - row["control_ns"],
                  f"floor {name}: past tick - control is the difference")
    check(len(control["curve"]) > 0 or not control["ran"], "the control's curve is drawn when it ran")
    check_cyclictest(report)


def check_cyclictest(report):
    """cyclictest beside the control thread: its floor in the floor table, or the reason it is not."""
    cyclic = report["cyclictest"]
    check_histogram("cyclictest.latency_ns", cyclic["latency_ns"])
    if cyclic["ran"]:
        check(cyclic["reason"] == "" and cyclic["command"].startswith("cyclictest "),
              f"cyclictest ran with its command and no reason: {cyclic['command']!r}, {cyclic['reason']!r}")
        check(cyclic["latency_ns"]["count"] > 0 and len(cyclic["curve"]) > 0, "cyclictest recorded wake-ups")
        check(report["control"]["ran"], "cyclictest ran only beside the control thread")
        if report["options"]["control_cpu"] >= 0 or report["control"]["cpu"] >= 0:
            check(f"-a{report['control']['cpu']}" in cyclic["command"].split(),
                  f"cyclictest on the control thread's CPU {report['control']['cpu']}: {cyclic['command']}")
        check(cyclic["overflows"] <= cyclic["latency_ns"]["count"], "cyclictest's overflows are among its samples")
    else:
        check(cyclic["reason"] != "", "where cyclictest did not run, the report says why")
        check(cyclic["latency_ns"]["count"] == 0, "no cyclictest samples where it did not run")
    for row in report["floor"]:
        name = row["percentile"]
        check(row["cyclictest_ns"] == cyclic["latency_ns"][name], f"floor {name}: the cyclictest column is its own")


def check_curve(name, curve):
    check(isinstance(curve, list), f"{name} is a list")
    points = [(p.get("percentile"), p.get("ns")) for p in curve] if isinstance(curve, list) else []
    check(all(is_number(p) and is_number(v) for p, v in points), f"{name}: points are numbers")
    check([v for _, v in points] == sorted(v for _, v in points), f"{name} never goes down")


def check_passes(report):
    """Every pass of every shard (the engine's on_pass hook) against the engine's own counters."""
    passes, env, shards = report["passes"], report["environment"], report["shards"]
    check_histogram("passes.tick_lag_ns", passes["tick_lag_ns"])
    check_curve("passes.curve", passes["curve"])
    entries = passes["shards"]
    check(isinstance(entries, list) and len(entries) == env["shards"], "one passes entry per shard")
    for i, p in enumerate(entries if isinstance(entries, list) else []):
        for field in PASS_SHARD:
            check(field in p, f"passes.shards[{i}].{field} missing")
        for field in PASS_HISTOGRAMS:
            if field in p:
                check_histogram(f"passes.shards[{i}].{field}", p[field])
        for field in PASS_TOTALS:
            check(is_number(p.get("totals", {}).get(field)), f"passes.shards[{i}].totals.{field} is a number")
        if "curve" in p:
            check_curve(f"passes.shards[{i}].curve", p["curve"])
    if errors:
        return
    check(passes["count"] == sum(p["count"] for p in entries), "passes.count is the shards' passes summed")
    check(passes["tick_lag_ns"]["count"] == sum(p["tick_lag_ns"]["count"] for p in entries),
          "passes.tick_lag_ns holds every shard's lag samples")
    check(passes["tick_lag_ns"]["max"] == max([p["tick_lag_ns"]["max"] for p in entries] or [0]),
          "passes.tick_lag_ns.max is the worst shard's")
    for i, (p, engine) in enumerate(zip(entries, shards)):
        name = f"passes.shards[{i}]"
        check(p["index"] == i, f"{name}.index is {i}")
        check(p["count"] > 0, f"{name}: the hook saw passes")
        # Each pass counts itself in stats().passes and then calls the hook; stats() is read after
        # stop() joined the pass threads, so the two agree exactly.
        check(p["count"] == engine["passes"],
              f"{name}: {p['count']} passes recorded, the engine counted {engine['passes']}")
        for field in PASS_HISTOGRAMS[1:]:
            check(p[field]["count"] == p["count"], f"{name}.{field}: one sample per pass")
        check(p["tick_lag_ns"]["count"] + p["early"] + p["unplanned"] == p["count"],
              f"{name}: passes with a lag + early + unplanned == every pass")
        # The engine keeps the worst lag of the same passes (start after the planned wake-up).
        check(p["tick_lag_ns"]["max"] == engine["max_tick_lag_ns"],
              f"{name}: worst tick lag {p['tick_lag_ns']['max']} == the engine's {engine['max_tick_lag_ns']}")
        # A timer due when scheduled may go to an any_thread executor from its scheduling thread:
        # fired, in no pass.
        check(p["totals"]["fired"] + engine["fired_at_schedule"] == engine["fired"],
              f"{name}: fires per pass and at schedule add up to the shard's fired "
              f"({p['totals']['fired']} + {engine['fired_at_schedule']}, {engine['fired']})")
        check(p["totals"]["transferred"] <= engine["scheduled"],
              f"{name}: no more hand-offs moved in than timers scheduled")
        for field in PASS_TOTALS:
            check(p[field]["max"] <= p["totals"][field], f"{name}: {field} of one pass within the total")
            check((p["totals"][field] == 0) == (p[field]["max"] == 0), f"{name}: {field} total 0 iff no pass had any")
        check(p["duration_ns"]["max"] > 0, f"{name}: passes take time")
    if report["fire"]["count"] > 0:
        check(sum(p["totals"]["fired"] for p in entries) + report["engine"]["fired_at_schedule"]
              == report["engine"]["fired"] > 0, "the passes' fires and those at schedule add up to engine.fired")
        check(passes["tick_lag_ns"]["count"] > 0, "passes with a planned wake-up had their lag measured")


def check_platform(report, expect_threads):
    platform, options, env = report["platform"], report["options"], report["environment"]
    for key in ["kernel", "clocksource", "thp", "governor"]:
        check(platform[key] != "", f"platform.{key} is filled (a fact or 'unknown')")
    threads = platform["threads"]
    for i, t in enumerate(threads):
        for field in THREAD_INFO:
            check(field in t, f"platform.threads[{i}].{field} missing")
    if errors:
        return
    roles = [t["role"] for t in threads]
    check(roles.count("producer") == env["producers"], "one thread entry per producer")
    check(roles.count("canceller") == env["cancellers"], "one thread entry per canceller")
    check(roles.count("control") == (1 if report["control"]["ran"] else 0), "the control thread is listed iff it ran")
    driving = "poller" if options["threads"] == "manual" else "worker"
    if options["threads"] == "manual" or options["executor"] == "inline":
        check(roles.count(driving) == env["shards"], f"one {driving} entry per shard: {roles}")
    for t in threads:
        if t["known"]:
            check(t["voluntary_switches"] + t["involuntary_switches"] > 0, f"{t['role']} {t['index']} switched")
    for i, irq in enumerate(platform["interrupts"]):
        for field in ["cpu", "role", "known", "total", "top"]:
            check(field in irq, f"platform.interrupts[{i}].{field} missing")
    check(isinstance(report["placement"]["warnings"], list), "placement.warnings is a list")
    if expect_threads:
        check(options["threads"] == expect_threads, f"options.threads is {expect_threads}")


def check_report(report, expect_bursts, expect_executor, expect_threads=None, expect_control=False,
                 expect_misfires=False):
    check(report.get("tool") == "tickwheel-stress", "tool is tickwheel-stress")
    check(report.get("ok") is True, "ok is true")
    check(report.get("failures") == [], f"failures is empty: {report.get('failures')}")
    check(isinstance(report.get("config"), str) and report["config"], "config is a string")
    check(isinstance(report.get("notices"), list), "notices is a list")
    for section, fields in FIELDS.items():
        body = report.get(section)
        if not isinstance(body, dict):
            errors.append(f"section {section} missing")
            continue
        for field in fields:
            if field not in body:
                errors.append(f"{section}.{field} missing")
            elif (section, field) in STRINGS:
                check(isinstance(body[field], str), f"{section}.{field} is a string")
            elif (section, field) in BOOLEANS:
                check(isinstance(body[field], bool), f"{section}.{field} is a boolean")
            elif (section, field) not in OBJECTS:
                check(is_number(body[field]), f"{section}.{field} is a number")
    if errors:
        return

    env = report["environment"]
    shards = report.get("shards")
    check(isinstance(shards, list) and len(shards) == env["shards"], "one entry per shard")
    for i, shard in enumerate(shards or []):
        for field in SHARD:
            check(field in shard, f"shards[{i}].{field} missing")
    series = report.get("series")
    check(isinstance(series, list) and len(series) >= 1, "at least one second in the series")
    for i, second in enumerate(series or []):
        for field in SECOND:
            check(is_number(second.get(field)), f"series[{i}].{field} is a number")

    fire = report["fire"]
    for name in ["lateness_ns", "oneshot_lateness_ns", "periodic_lateness_ns", "lateness_past_tick_ns"]:
        check_histogram(f"fire.{name}", fire[name])
    curve = fire["lateness_curve"]
    check(isinstance(curve, list), "fire.lateness_curve is a list")
    points = [(p.get("percentile"), p.get("ns")) for p in curve]
    check(all(is_number(p) and is_number(v) for p, v in points), "curve points are numbers")
    check([v for _, v in points] == sorted(v for _, v in points), "the curve never goes down")
    check(fire["count"] == fire["lateness_ns"]["count"], "one lateness sample per fire")
    check(fire["lateness_ns"]["count"] == fire["oneshot_lateness_ns"]["count"] +
          fire["periodic_lateness_ns"]["count"], "every fire is a one-shot or a periodic one")
    check(fire["min_lateness_ns"] >= 0, "no early fire")

    check(fire["periodic_runs"] == fire["periodic_lateness_ns"]["count"],
          "one periodic lateness sample per periodic run")

    acc = report["accounting"]
    check(acc["scheduled"] + acc["rearmed"] ==
          acc["fired"] + acc["cancelled"] + acc["returned_at_stop"],
          "scheduled + rearmed (periodic runs) == fired + cancelled + returned at stop")
    check(acc["rearmed"] == fire["periodic_runs"], "accounting.rearmed is the periodic runs")
    check(acc["pending_slots"] == acc["returned_at_stop"], "every pending slot was returned")
    check(acc["probes"] == env["producers"], "one probe per producer")
    for field in MUST_BE_ZERO:
        check(acc[field] == 0, f"accounting.{field} == 0 (is {acc[field]})")
    engine = report["engine"]
    for name in ["scheduled", "fired", "cancelled", "rejected"]:
        check(engine[name] == acc[name], f"engine.{name} {engine[name]} == accounting.{name} {acc[name]}")
    check(engine["rearmed"] == acc["rearmed"] + engine["skipped"], "engine.rearmed == periodic runs + skipped")
    periodic = report["periodic"]
    check(periodic["forced_skips"] <= engine["skipped"] <= periodic["skip_bound"],
          f"forced skips {periodic['forced_skips']} <= engine.skipped {engine['skipped']} <= the skip timers' "
          f"bound {periodic['skip_bound']}")
    check(engine["executing"] == 0, "engine.executing == 0 after stop")
    check(engine["pending"] == 0, "engine.pending == 0 once stop()'s visitor cancelled every timer handed back")
    check(acc["stop_returned"] == acc["returned_at_stop"], "stop(visit) returned what it handed to the visitor")
    check(engine["scheduled"] + engine["rearmed"] == engine["fired"] + engine["skipped"] +
          engine["cancelled"] + engine["pending"] + acc["returned_at_stop"],
          "engine: scheduled + rearmed == fired + skipped + cancelled + pending + the visitor's cancels")
    check_reschedule(report)
    check_periodic(report)
    check_repeated(report)
    check_executor(report)
    check_floor(report)
    check_passes(report)
    check_platform(report, expect_threads)
    if expect_control:
        check(report["control"]["ran"] and report["control"]["lateness_ns"]["count"] > 0,
              "the control thread ran and recorded wake-ups")
    if expect_executor:
        check(report["executor"]["kind"] == expect_executor,
              f"executor.kind is {expect_executor} (is {report['executor']['kind']})")
    check(report["schedule"]["scheduled"] > 0, "something was scheduled")
    check(report["memory"]["peak_rss_bytes"] > 0, "peak RSS measured")
    check(env["clock_read_ns"] > 0, "clock read cost measured")
    if expect_misfires:
        check_misfires(report)
    if expect_bursts:
        check(report["schedule"]["bursts"]["count"] > 0, "bursts ran")


def check_periodic(report):
    """The periodic timers by policy, their cancels, and what forced misfires must have made happen."""
    periodic, options, fire = report["periodic"], report["options"], report["fire"]
    policies = periodic["policies"]
    check([p.get("policy") for p in policies] == POLICIES, f"periodic.policies are {POLICIES}")
    for i, p in enumerate(policies):
        for field in POLICY[1:]:
            check(is_number(p.get(field)), f"periodic.policies[{i}].{field} is a number")
    if errors:
        return
    check(sum(p["timers"] for p in policies) == report["schedule"]["periodic_started"],
          "the policies' timers add up to schedule.periodic_started")
    check(sum(p["runs"] for p in policies) == fire["periodic_runs"] - report["tick_lag"]["lag_ns"]["count"],
          "the policies' runs add up to the periodic runs other than the tick probes'")
    if options["periodic_policy"] != "all":
        check(all(p["timers"] == 0 for p in policies if p["policy"] != options["periodic_policy"]),
              f"only {options['periodic_policy']} timers")
    check(policies[3]["forced_misfires"] == 0, "no forced misfire on fixed_delay timers")
    check(periodic["cancelled"] <= report["accounting"]["cancelled"], "periodic cancels are among the cancels")
    check(periodic["runs_after_cancel"] <= periodic["cancelled"], "at most one run after each periodic cancel")
    if options["periodic_cancel"] * report["schedule"]["periodic_started"] >= 20:
        check(periodic["cancelled"] > 0, "periodic timers were cancelled during the run")


def check_reschedule(report):
    """The reschedules (docs/stress.md, "Reschedules"): calls add up, the engine applied no more moves
    than returned true and no more than those less the ones a fire at the deadline before won, and
    a run asked to reschedule did."""
    move, engine, options = report["reschedule"], report["engine"], report["options"]
    check(move["calls"] == move["returned_true"] + move["returned_false"],
          "reschedule: calls == returned true + returned false")
    check(engine["rescheduled"] + move["raced"] <= move["returned_true"],
          f"engine.rescheduled {engine['rescheduled']} + raced {move['raced']} <= reschedules that returned "
          f"true {move['returned_true']} (a move that a fire won is dropped)")
    check(move["raced"] <= move["moved_fires"], "raced fires are among the moved timers' fires")
    check(move["moved_fires"] <= report["fire"]["count"] - report["fire"]["periodic_runs"],
          "the moved timers' fires are one-shot fires")
    if options["reschedule_share"] * report["schedule"]["scheduled"] >= 100:
        check(move["returned_true"] > 0 and move["moved_fires"] > 0,
              "a run with --reschedule-share moved timers and checked their fires")


def check_misfires(report):
    periodic, engine = report["periodic"], report["engine"]
    for p in periodic["policies"][:3]:
        check(p["forced_misfires"] > 0, f"{p['policy']}: forced misfires happened")
    check(engine["skipped"] > 0, "the engine skipped periods of the skip timers")
    if report["options"]["executor"] == "inline":
        check(periodic["forced_skips"] > 0, "forced misfires made skips certain (inline)")


def check_repeated(report):
    repeated, options = report["repeated"], report["options"]
    check(repeated["timers"] == options["repeated"], "repeated.timers is --repeated")
    rt_engine = repeated["engine"]
    for field in REPEATED_ENGINE:
        check(is_number(rt_engine.get(field)), f"repeated.engine.{field} is a number")
    if errors or repeated["timers"] == 0:
        return
    check(repeated["starts"] + repeated["restarts"] > 0, "the repeated timers were started")
    check(repeated["runs"] > 0, "the repeated timers ran")
    check(repeated["begun_before_call"] <= repeated["runs"], "the allowed runs are among the runs")
    check(rt_engine["fired"] >= repeated["runs"], "their engine fired once at least per run")
    check(rt_engine["scheduled"] == rt_engine["fired"] + rt_engine["cancelled"],
          "their engine: scheduled == fired + cancelled once every timer is destroyed")
    check(rt_engine["returned_at_stop"] == 0 and rt_engine["pending"] == 0, "their engine handed nothing back")


def check_executor(report):
    options, executor = report["options"], report["executor"]
    shards = report["environment"]["shards"]
    pool = executor["kind"] == "pool"
    check(executor["kind"] in ("inline", "pool"), f"executor.kind is inline or pool: {executor['kind']}")
    check(executor["kind"] == options["executor"], "executor.kind == options.executor")
    check(executor["pool_threads"] == (options["pool_threads"] if pool else 0),
          "executor.pool_threads is the pool's size (0 inline)")
    if not pool:
        check(executor["max_executing"] == 0, "nothing handed to an executor without one")
    threads = executor["threads"]
    check(isinstance(threads, list), "executor.threads is a list")
    if not isinstance(threads, list):
        return
    check(len(threads) <= shards + executor["pool_threads"],
          f"{len(threads)} callback threads, at most {shards} workers + {executor['pool_threads']} pool")
    for i, thread in enumerate(threads):
        for field in THREAD:
            check(field in thread, f"executor.threads[{i}].{field} missing")
        if "lateness_ns" in thread:
            check_histogram(f"executor.threads[{i}].lateness_ns", thread["lateness_ns"])
    if errors:
        return
    fire = report["fire"]
    check(sum(t["fired"] for t in threads) == fire["count"], "the threads' fires add up to fire.count")
    check(sum(t["periodic_runs"] for t in threads) == fire["periodic_runs"],
          "the threads' periodic runs add up to fire.periodic_runs")
    check(sum(t["lateness_ns"]["count"] for t in threads) == fire["count"],
          "one lateness sample per fire, over the threads")
    named = [t["shard"] for t in threads]  # a worker that first ran its shard's tick probe names it too
    if pool:
        check(all(s == -1 for s in named), "pool threads name no shard")
    else:
        check(all(0 <= s < shards for s in named) and len(set(named)) == len(named),
              f"each worker names its own shard: {named}")


def check_svg(path):
    """The plot stress/plot.py draws with matplotlib: its panels, legends and curves as SVG elements."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        errors.append(f"{path} is not well-formed XML: {e}")
        return
    ns = "{http://www.w3.org/2000/svg}"
    check(root.tag == ns + "svg", f"the root is <svg> (is {root.tag})")
    check(root.find(ns + "title") is not None, "the plot has a <title>")
    texts = ["".join(t.itertext()) for t in root.iter(ns + "text")]
    check(any("Lateness by percentile" in t for t in texts), "the percentile panel is there")
    check(any("Lateness over time" in t for t in texts), "the time panel is there")
    check(any(t.startswith("Tick lag by percentile") for t in texts), "the tick-lag panel is there")
    check(any("every pass, every shard" in t for t in texts), "the tick-lag panel has every pass's curve")
    check(any(t.startswith("profile ") or t.startswith("A: profile ") for t in texts),
          "the title holds the configuration")
    lines = [g for g in root.iter(ns + "g") if g.get("id", "").startswith("line2d") and g.find(ns + "path") is not None]
    check(len(lines) >= 1, "at least one curve is drawn")
    return texts


def read_leb128_zigzag(data, pos):
    value, shift = 0, 0
    for i in range(9):
        b = data[pos]
        pos += 1
        if i == 8:
            value |= b << 56
            break
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            break
    return (value >> 1) ^ -(value & 1), pos


def decode_hdr(text):
    """An HdrHistogram compressed V2 histogram, as HdrHistogram's decoder reads it: (counts, header)."""
    raw = base64.b64decode(text)
    cookie, length = struct.unpack(">iI", raw[:8])
    if cookie != 0x1c849314:
        raise ValueError(f"compressed cookie {cookie:#x}, want 0x1c849314")
    inner = zlib.decompress(raw[8:8 + length])
    cookie, payload, offset, digits, lowest, highest, ratio = struct.unpack(">iIiIqqd", inner[:40])
    if cookie != 0x1c849313:
        raise ValueError(f"encoding cookie {cookie:#x}, want 0x1c849313")
    if (offset, digits, lowest, ratio) != (0, 2, 1, 1.0):
        raise ValueError(f"header {(offset, digits, lowest, ratio)}, want (0, 2, 1, 1.0)")
    data, pos, counts = inner[40:40 + payload], 0, []
    while pos < len(data):
        v, pos = read_leb128_zigzag(data, pos)
        counts.extend([0] * -v if v < 0 else [v])
    return counts, highest


def bucket_high(index):
    """The top of bucket `index` in the 2-digit HdrHistogram layout (256 exact, then 128 per octave)."""
    shift = max(0, (index >> 7) - 1)
    return ((index - (shift << 7)) << shift) + (1 << shift) - 1


def check_hlog(path, report):
    try:
        with open(path, encoding="ascii") as f:
            lines = f.read().splitlines()
    except OSError as e:
        errors.append(f"{path}: {e}")
        return
    check(any(l.startswith("#[Histogram log format version 1.3]") for l in lines), "the hlog declares format 1.3")
    check(any(l.startswith("#[StartTime: ") for l in lines), "the hlog has a StartTime")
    totals = {}
    for line in lines:
        if line.startswith("#") or line.startswith('"'):
            continue
        tag = ""
        if line.startswith("Tag="):
            tag, line = line[4:].split(",", 1)
        start, length, interval_max, data = line.split(",")
        try:
            counts, _ = decode_hdr(data)
        except (ValueError, zlib.error, struct.error) as e:
            errors.append(f"hlog {tag or 'untagged'} at {start}: {e}")
            continue
        totals[tag] = totals.get(tag, 0) + sum(counts)
        if sum(counts):
            top = bucket_high(max(i for i, c in enumerate(counts) if c))
            check(abs(float(interval_max) - top / 1e6) <= 0.0011 + top / 1e6 / 128,
                  f"hlog {tag} at {start}: Interval_Max {interval_max} ms is its top bucket ({top} ns)")
    check(set(totals) >= {"", "past_tick", "tick_probe"}, f"the hlog has every tag: {sorted(totals)}")
    fire = report["fire"]["lateness_ns"]["count"]
    check(0 < totals.get("", 0) <= fire, f"hlog lateness samples {totals.get('', 0)} within the run's {fire}")
    check(totals.get("tick_probe", 0) <= report["tick_lag"]["lag_ns"]["count"], "hlog probe samples within the run's")
    if report["control"]["ran"]:
        check(0 < totals.get("control", 0) <= report["control"]["lateness_ns"]["count"],
              "hlog control samples within the run's")


def check_compare(binary, a, b, svg):
    run = subprocess.run([binary, "--compare", a, b, "--svg", svg], capture_output=True, text=True, check=False)
    check(run.returncode == 0, f"--compare exits 0 (is {run.returncode}: {run.stderr.strip()})")
    out = run.stdout
    for needle in ["compare     A " + a, "lateness, callback start - deadline, every fire (us)",
                   "past the tick, every fire (us)", "tick probes, every shard (us)",
                   "every pass's tick lag, every shard (us)",
                   "control thread (the platform's floor) (us)", "tick probe - control (us)",
                   "throughput (per second)", "accounting  A PASS, B PASS", "differences (A | B)",
                   "options.wait: sleep | spin", "platform.loadavg_start"]:
        check(needle in out, f"the compare output has '{needle}'")
    for key in ["p50", "p99", "max"]:
        check(any(line.startswith(f"  {key} ") for line in out.splitlines()), f"a {key} row")
    texts = check_svg(svg) or []
    for legend in ["A: every fire", "B: every fire", "A: p99 of the second", "B: p99 of the second",
                   "A: tick probes, every shard", "B: tick probes, every shard",
                   "A: every pass, every shard: start - planned wake-up",
                   "B: every pass, every shard: start - planned wake-up",
                   "A: control thread (the platform's floor)", "B: control thread (the platform's floor)"]:
        check(legend in texts, f"the compare plot's legend has '{legend}'")


def check_no_matplotlib(binary, report):
    """Where matplotlib cannot be imported (a module of that name that refuses to load, first on every
    interpreter's path): the text report still printed, no SVG, the reason said, exit 3 from plot.py;
    tickwheel-stress --svg-from exits 2, its plot having been asked for."""
    with tempfile.TemporaryDirectory() as blocked:
        with open(os.path.join(blocked, "matplotlib.py"), "w", encoding="ascii") as f:
            f.write("raise ImportError('matplotlib blocked by check_report.py')\n")
        env = {**os.environ, "PYTHONPATH": blocked}
        svg = os.path.join(blocked, "plot.svg")
        plot = os.path.join(os.path.dirname(os.path.abspath(__file__)), "plot.py")
        run = subprocess.run([sys.executable, plot, "stress", report, "--text", "--svg", svg], env=env,
                             capture_output=True, text=True, check=False)
        check(run.returncode == 3, f"plot.py without matplotlib exits 3 (is {run.returncode}: {run.stderr.strip()})")
        check("matplotlib cannot be imported" in run.stderr, f"plot.py says why: {run.stderr.strip()}")
        check("accounting  scheduled" in run.stdout, "the text report is printed without matplotlib")
        check(not os.path.exists(svg), "no SVG is written without matplotlib")
        run = subprocess.run([binary, "--svg-from", report, "--svg", svg], env=env, capture_output=True,
                             text=True, check=False)
        check(run.returncode == 2, f"--svg-from without matplotlib exits 2 (is {run.returncode})")


def check_no_cyclictest(binary):
    """A run on a PATH without cyclictest (only the Python that prints the report): it passes, and its
    report says cyclictest is not installed, in the JSON and in the text."""
    with tempfile.TemporaryDirectory() as bare:
        os.symlink(sys.executable, os.path.join(bare, "python3"))
        json_path = os.path.join(bare, "report.json")
        run = subprocess.run([binary, "--profile", "idle", "--duration", "1s", "--quiet", "--json", json_path,
                              "--svg", ""], env={**os.environ, "PATH": bare}, capture_output=True, text=True,
                             check=False)
        check(run.returncode == 0, f"a run without cyclictest passes (exit {run.returncode}: {run.stderr.strip()})")
        check("cyclictest  not run: not installed" in run.stdout, "the text says cyclictest is not installed")
        try:
            with open(json_path, encoding="utf-8") as f:
                cyclic = json.load(f)["cyclictest"]
        except (OSError, ValueError, KeyError) as e:
            errors.append(f"the report of a run without cyclictest: {e}")
            return
        check(not cyclic["ran"] and cyclic["reason"].startswith("not installed"),
              f"the JSON says cyclictest is not installed: {cyclic}")


def check_refused(command, message, rest):
    run = subprocess.run([*command, *rest, "--quiet"], capture_output=True, text=True, check=False, cwd="/")
    check(run.returncode != 0, f"{rest} exits non-zero (is {run.returncode})")
    check(message in run.stdout + run.stderr, f"{rest}: the message says '{message}': {run.stderr.strip()}")
    check("files       JSON" not in run.stdout, f"{rest}: nothing ran")


def check_refused_as_nobody(binary, message, limit, rest):
    """check_refused() as nobody, on a copy of binary that nobody can reach wherever the tree lives.
    Returns why it was skipped, or None once it ran."""
    if shutil.which("setpriv") is None:
        return "setpriv is not installed, so root cannot run the harness as nobody"
    with tempfile.TemporaryDirectory(prefix="tickwheel-nobody-") as directory:
        os.chmod(directory, 0o755)
        copy = os.path.join(directory, os.path.basename(binary))
        shutil.copyfile(binary, copy)
        os.chmod(copy, 0o755)
        # --help starts the program and does nothing else: as root it must work (else the binary
        # is broken, a failure); as nobody, through the run's own command, it fails only where
        # nobody cannot reach the copy or a library it loads, which says nothing of the harness.
        as_root = subprocess.run([copy, "--help"], capture_output=True, text=True, check=False, cwd="/")
        check(as_root.returncode == 0, f"{binary} --help exits {as_root.returncode}: {as_root.stderr.strip()}")
        if as_root.returncode != 0:
            return None
        as_nobody = subprocess.run([*NOBODY, *limit, copy, "--help"], capture_output=True, text=True, check=False,
                                   cwd="/")
        if as_nobody.returncode != 0:
            return f"nobody cannot start {copy} (exit {as_nobody.returncode}): {as_nobody.stderr.strip()}"
        check_refused([*NOBODY, *limit, copy], message, rest)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?")
    parser.add_argument("--svg")
    parser.add_argument("--expect-bursts", action="store_true")
    parser.add_argument("--expect-executor", choices=["inline", "pool"])
    parser.add_argument("--expect-threads", choices=["workers", "manual"])
    parser.add_argument("--expect-control", action="store_true")
    parser.add_argument("--expect-misfires", action="store_true")
    parser.add_argument("--hlog")
    parser.add_argument("--compare", nargs=4, metavar=("BINARY", "A", "B", "SVG"))
    parser.add_argument("--refused", nargs=2, metavar=("BINARY", "MESSAGE"))
    parser.add_argument("--no-matplotlib", metavar="BINARY")
    parser.add_argument("--no-cyclictest", metavar="BINARY")
    parser.add_argument("--unprivileged", action="store_true")
    parser.add_argument("--memlock", type=int, metavar="BYTES")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    if args.refused:
        binary, message = args.refused
        limit = [] if args.memlock is None else ["prlimit", f"--memlock={args.memlock}"]
        if args.unprivileged and os.geteuid() == 0:
            skipped = check_refused_as_nobody(binary, message, limit, rest)
            if skipped:
                print(f"check_report: SKIPPED: {skipped}")
                return SKIPPED
        else:
            check_refused([*limit, binary], message, rest)
        name = f"--refused {' '.join(rest)}"
    elif args.compare:
        check_compare(*args.compare)
        name = "--compare"
    elif args.no_cyclictest:
        check_no_cyclictest(args.no_cyclictest)
        name = "--no-cyclictest"
    elif args.no_matplotlib:
        check_no_matplotlib(args.no_matplotlib, args.report)
        name = f"--no-matplotlib {args.report}"
    else:
        name = args.report
        try:
            with open(args.report, encoding="utf-8") as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            errors.append(f"{args.report} does not parse: {e}")
        else:
            check_report(report, args.expect_bursts, args.expect_executor, args.expect_threads,
                         args.expect_control, args.expect_misfires)
            if args.hlog and not errors:
                check_hlog(args.hlog, report)
        if args.svg:
            check_svg(args.svg)
    for e in errors:
        print(f"check_report: FAIL: {e}")
    if not errors:
        print(f"check_report: OK: {name}" + (f" and {args.svg}" if args.svg else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
