#!/usr/bin/env python3
# stress/check_report.py — CTest check of a tickwheel-stress --json dump: it parses, has every
# section and field the report promises with the right types, and its figures agree with each other
# (ok with no failures, scheduled == fired + cancelled + pending with pending 0, percentiles in
# order). Usage: check_report.py FILE [--wait sleep|spin]. Exit 0 iff every check holds.
import json
import sys

HISTOGRAM = ["count", "min", "mean", "p50", "p90", "p99", "p99_9", "p99_99", "max"]
FIELDS = {
    "options": ["timers", "cancel_share", "delay_min_ns", "delay_max_ns", "tick_ns", "wait",
                "schedule_rate", "batch", "seed", "give_up_ns"],
    "clock": ["read_ns", "monotonic_offset_ns", "timer_slack_ns"],
    "run": ["seconds", "gave_up"],
    "schedule": ["count", "batches", "ns", "per_second", "per_second_net_of_clock", "rejected"],
    "cancel": ["calls", "returned_true", "returned_false", "batches", "ns", "per_second",
               "per_second_net_of_clock", "picks_found_resolved"],
    "fire": ["count", "min_lateness_ns", "lateness_ns", "lateness_past_tick_ns"],
    "passes": ["count", "with_work_due", "per_second", "wakeups", "wakeups_per_second", "wakeups_for_wheel",
               "tick_lag_ns", "pass_cost_ns", "oversleep_ns"],
    "memory": ["wheel_bytes", "peak_pending", "wheel_bytes_per_peak_pending", "pool_nodes",
               "pool_capacity", "pool_segments", "harness_bytes", "peak_rss_bytes"],
    "machine": ["voluntary_switches", "involuntary_switches", "loadavg_start", "loadavg_end"],
    "wheel": ["scheduled", "fired", "cancelled", "rejected", "passes", "moved", "moved_ahead",
              "max_pass_work"],
    "accounting": ["scheduled", "fired", "cancelled", "pending_end", "double_fires",
                   "fired_after_cancel", "early_fires", "fired_before_tick", "fired_a_pass_late",
                   "cancel_true_not_pending", "cancel_false_pending", "stale_cancels",
                   "stale_cancel_true", "state_fired", "state_cancelled", "state_other",
                   "ran_before_next_deadline", "next_deadline_missing", "pending_mismatch"],
}
HISTOGRAMS = [("fire", "lateness_ns"), ("fire", "lateness_past_tick_ns"), ("passes", "tick_lag_ns"),
              ("passes", "pass_cost_ns"), ("passes", "oversleep_ns")]

errors = []


def check(ok, message):
    if not ok:
        errors.append(message)


def is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main():
    if len(sys.argv) not in (2, 4) or (len(sys.argv) == 4 and sys.argv[2] != "--wait"):
        print(__doc__ or "usage: check_report.py FILE [--wait sleep|spin]", file=sys.stderr)
        return 2
    with open(sys.argv[1], encoding="utf-8") as f:
        report = json.load(f)

    check(report.get("tool") == "tickwheel-stress", "tool is tickwheel-stress")
    check(report.get("ok") is True, "ok is true")
    check(report.get("failures") == [], f"failures is empty: {report.get('failures')}")
    for section, fields in FIELDS.items():
        body = report.get(section)
        if not isinstance(body, dict):
            errors.append(f"section {section} missing")
            continue
        for field in fields:
            check(field in body, f"{section}.{field} missing")
    if errors:
        return finish()

    for section, name in HISTOGRAMS:
        h = report[section][name]
        for field in HISTOGRAM:
            check(is_number(h.get(field)), f"{section}.{name}.{field} is a number")
        if h["count"] > 0:
            chain = [h["min"], h["p50"], h["p90"], h["p99"], h["p99_9"], h["p99_99"], h["max"]]
            check(chain == sorted(chain), f"{section}.{name} percentiles are in order: {chain}")

    acc = report["accounting"]
    check(acc["scheduled"] == report["options"]["timers"], "every timer was scheduled")
    check(acc["scheduled"] == acc["fired"] + acc["cancelled"] + acc["pending_end"],
          "scheduled == fired + cancelled + pending_end")
    check(acc["pending_end"] == 0, "nothing pending at the end")
    for field in ["double_fires", "fired_after_cancel", "early_fires", "fired_before_tick",
                  "fired_a_pass_late", "cancel_true_not_pending", "cancel_false_pending",
                  "stale_cancel_true", "state_other", "ran_before_next_deadline",
                  "next_deadline_missing", "pending_mismatch"]:
        check(acc[field] == 0, f"accounting.{field} == 0 (is {acc[field]})")
    check(report["fire"]["count"] == acc["fired"] == report["fire"]["lateness_ns"]["count"],
          "one lateness sample per fire")
    check(report["fire"]["min_lateness_ns"] >= 0, "no early fire")
    check(report["schedule"]["per_second"] > 0, "schedule throughput measured")
    for name in ["scheduled", "fired", "cancelled", "passes"]:
        own = acc[name] if name != "passes" else report["passes"]["count"]
        check(report["wheel"][name] == own, f"wheel.{name} agrees with the harness")
    check(report["memory"]["peak_rss_bytes"] > 0, "peak RSS measured")
    check(report["clock"]["read_ns"] > 0, "clock read cost measured")
    if len(sys.argv) == 4:
        wait = sys.argv[3]
        check(report["options"]["wait"] == wait, f"options.wait is {wait}")
        if wait == "sleep":
            check(report["passes"]["wakeups"] > 0, "sleep mode woke up at least once")
            check(report["clock"]["timer_slack_ns"] == 1, "timer slack is 1 ns in sleep mode")
        else:
            check(report["passes"]["wakeups"] == 0, "spin mode never sleeps")
    return finish()


def finish():
    for e in errors:
        print(f"check_report: FAIL: {e}")
    if not errors:
        print(f"check_report: OK: {sys.argv[1]}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
