#!/usr/bin/env python3
"""stress/check_report.py — CTest check of a tickwheel-stress JSON report, and of its SVG plot.

Usage: check_report.py REPORT.json [--svg PLOT.svg] [--expect-cap-hits] [--expect-executor KIND]

The report must parse and hold every section and field the program promises, with numbers where
numbers belong, and its figures must agree with each other: ok with no failures; scheduled +
periodic runs == fired + cancelled + returned at stop; every exactly-once counter zero; the
engine's own counters equal to the harness's (rearmed == periodic runs, nothing skipped, nothing
executing after stop, pending == returned); percentiles in order; one entry per shard and per
second; the callback threads within the workers and the pool, their fires adding up. With --svg
the plot must be well-formed XML (xml.etree), an <svg> root with a title, both panels and a drawn
curve. With --expect-cap-hits (the burst case) the transfer-cap hit counter must have moved; with
--expect-executor the run must have used that executor (inline or pool).
Exit 0 iff every check holds; each failed check is printed.
"""
import argparse
import json
import sys
import xml.etree.ElementTree as ET

HISTOGRAM = ["count", "min", "mean", "p50", "p90", "p99", "p99_9", "p99_99", "max"]
FIELDS = {
    "options": ["profile", "timers", "producers", "schedule_rate", "cancel_share", "cancellers",
                "delay", "delay_min_ns", "delay_max_ns", "delay_mean_ns", "delay_short_ns",
                "delay_long_ns", "short_share", "periodic", "period_ns", "burst", "burst_every_ns",
                "duration_ns", "seed", "shards", "tick_ns", "wait", "transfer_cap", "pin",
                "max_pending", "executor", "pool_threads"],
    "environment": ["clock_read_ns", "clock_monotonic_offset_ns", "hardware_threads", "shards",
                    "producers", "cancellers"],
    "run": ["seconds", "stop_seconds"],
    "schedule": ["calls", "scheduled", "per_second", "batches", "ns", "ns_per_call", "rejected",
                 "periodic_started", "periodic_inexact", "probes", "bursts"],
    "cancel": ["calls", "returned_true", "returned_false", "by_cancellers", "per_second", "batches",
               "ns", "ns_per_call"],
    "fire": ["count", "per_second", "periodic_runs", "min_lateness_ns", "lateness_ns", "oneshot_lateness_ns",
             "periodic_lateness_ns", "lateness_past_tick_ns", "lateness_curve"],
    "engine": ["scheduled", "fired", "cancelled", "rejected", "rearmed", "skipped", "executing",
               "pending", "queue_depth",
               "transfer_cap_hits", "passes", "wakeups", "wakeups_per_second", "callback_errors",
               "max_tick_lag_ns"],
    "memory": ["rss_base_bytes", "rss_at_peak_bytes", "calendar_bytes_at_peak", "peak_pending",
               "bytes_per_pending", "peak_rss_bytes", "harness_bytes"],
    "machine": ["voluntary_switches", "involuntary_switches", "loadavg_start", "loadavg_end"],
    "executor": ["kind", "pool_threads", "max_executing", "threads"],
    "accounting": ["scheduled", "rearmed", "fired", "cancelled", "returned_at_stop", "rejected",
                   "probes", "double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires",
                   "early_fires", "fired_before_tick", "cancel_true_not_pending", "off_shard",
                   "probe_failures", "unrecorded_fires", "pending_slots", "returned_cancel_false", "pending_not_returned",
                   "stale_cancels", "stale_cancel_true", "callback_errors"],
}
SHARD = ["index", "binding", "bound_cpu", "scheduled", "fired", "cancelled", "rearmed", "rejected",
         "transfer_cap_hits", "passes", "wakeups", "wakeups_per_second", "max_tick_lag_ns"]
THREAD = ["shard", "fired", "periodic_runs", "lateness_ns"]
SECOND = ["t_s", "scheduled_per_s", "cancelled_per_s", "fired_per_s", "pending", "queued",
          "lateness_p99_ns", "lateness_max_ns", "lateness_p99_so_far_ns", "rss_bytes",
          "transfer_cap_hits", "executing"]
MUST_BE_ZERO = ["double_fires", "overlapping_runs", "fired_after_cancel", "stray_fires",
                "early_fires", "fired_before_tick", "cancel_true_not_pending", "off_shard",
                "probe_failures", "unrecorded_fires", "returned_cancel_false",
                "pending_not_returned", "stale_cancel_true", "callback_errors"]
STRINGS = {("options", "profile"), ("options", "delay"), ("options", "wait"),
           ("options", "executor"), ("executor", "kind")}
BOOLEANS = {("options", "pin")}
OBJECTS = {("schedule", "rejected"), ("schedule", "bursts"), ("executor", "threads"),
           ("fire", "lateness_ns"), ("fire", "oneshot_lateness_ns"), ("fire", "periodic_lateness_ns"),
           ("fire", "lateness_past_tick_ns"), ("fire", "lateness_curve")}

errors = []


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


def check_report(report, expect_cap_hits, expect_executor):
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
    for name in ["scheduled", "rearmed", "fired", "cancelled", "rejected"]:
        check(engine[name] == acc[name], f"engine.{name} {engine[name]} == accounting.{name} {acc[name]}")
    check(engine["skipped"] == 0, "engine.skipped == 0 (catch_up never skips)")
    check(engine["executing"] == 0, "engine.executing == 0 after stop")
    check(engine["pending"] == acc["returned_at_stop"], "engine.pending == accounting.returned_at_stop")
    check(engine["scheduled"] + engine["rearmed"] == engine["fired"] + engine["skipped"] +
          engine["cancelled"] + engine["pending"],
          "engine: scheduled + rearmed == fired + skipped + cancelled + pending")
    check_executor(report)
    if expect_executor:
        check(report["executor"]["kind"] == expect_executor,
              f"executor.kind is {expect_executor} (is {report['executor']['kind']})")
    check(report["schedule"]["scheduled"] > 0, "something was scheduled")
    check(report["memory"]["peak_rss_bytes"] > 0, "peak RSS measured")
    check(env["clock_read_ns"] > 0, "clock read cost measured")
    if expect_cap_hits:
        check(report["schedule"]["bursts"]["count"] > 0, "bursts ran")
        check(engine["transfer_cap_hits"] > 0,
              "the transfer-cap hit counter moved (a burst larger than the cap, within a tick)")


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
    named = [t["shard"] for t in threads]
    if pool:
        check(all(s == -1 for s in named), "pool threads name no shard")
    else:
        check(all(0 <= s < shards for s in named) and len(set(named)) == len(named),
              f"each worker names its own shard: {named}")


def check_svg(path):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        errors.append(f"{path} is not well-formed XML: {e}")
        return
    ns = "{http://www.w3.org/2000/svg}"
    check(root.tag == ns + "svg", f"the root is <svg> (is {root.tag})")
    check(root.find(ns + "title") is not None, "the plot has a <title>")
    texts = [t.text or "" for t in root.iter(ns + "text")]
    check(any("Lateness by percentile" in t for t in texts), "the percentile panel is there")
    check(any("Lateness over time" in t for t in texts), "the time panel is there")
    check(any(t.startswith("profile ") for t in texts), "the title holds the configuration")
    check(len(list(root.iter(ns + "polyline"))) >= 1, "at least one curve is drawn")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("--svg")
    parser.add_argument("--expect-cap-hits", action="store_true")
    parser.add_argument("--expect-executor", choices=["inline", "pool"])
    args = parser.parse_args()
    try:
        with open(args.report, encoding="utf-8") as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        errors.append(f"{args.report} does not parse: {e}")
    else:
        check_report(report, args.expect_cap_hits, args.expect_executor)
    if args.svg:
        check_svg(args.svg)
    for e in errors:
        print(f"check_report: FAIL: {e}")
    if not errors:
        print(f"check_report: OK: {args.report}" + (f" and {args.svg}" if args.svg else ""))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
