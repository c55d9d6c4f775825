// stress/report.hpp — everything a stress run measured, and its two renderings: the text report on
// stdout and the JSON dump (--json). Every figure here is filled in by the driver from a count, a
// clock read or a system call made during the run; nothing is derived from the options alone.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "histogram.hpp"
#include "options.hpp"

namespace tickwheel::stress {

struct Report {
  Options options;

  // Environment, measured before the run.
  double clock_read_ns = 0;               // one steady_clock::now(), median of timed loops
  std::int64_t clock_monotonic_offset_ns = 0;  // |steady_clock - CLOCK_MONOTONIC|
  std::int64_t timer_slack_ns = -1;       // PR_GET_TIMERSLACK after the run's setup

  // Run.
  double run_s = 0;                       // first schedule to last timer resolved
  bool gave_up = false;                   // stopped with timers pending (see Options::give_up_ns)

  // Schedule and cancel throughput: time spent inside schedule_at() / cancel() batches, each batch
  // bracketed by two clock reads.
  std::uint64_t scheduled = 0;
  std::uint64_t schedule_batches = 0;
  std::int64_t schedule_ns = 0;
  std::uint64_t rejected = 0;             // schedules that returned a false id
  std::string reject_reason;              // status() of the first one
  std::uint64_t cancel_calls = 0;         // cancel() calls on picked timers
  std::uint64_t cancelled = 0;            // of those, returned true
  std::uint64_t cancel_false = 0;         // of those, returned false
  std::uint64_t cancel_batches = 0;
  std::int64_t cancel_ns = 0;
  std::uint64_t cancels_unattempted = 0;  // picks whose timer was resolved before the cancel time

  // Firing. Lateness is the callback's own clock read minus the timer's deadline; the second
  // histogram measures from the deadline rounded up to the tick, i.e. the part the tick does not
  // explain.
  std::uint64_t fired = 0;
  Histogram lateness;                     // ns after the deadline (early fires recorded as 0)
  Histogram lateness_past_tick;           // ns after the deadline rounded up to the tick
  std::int64_t min_lateness_ns = 0;       // signed: negative = an early fire

  // Passes. Tick lag: a pass's start minus the first due deadline as next_deadline() reported it,
  // for passes that had work due.
  std::uint64_t passes = 0;
  std::uint64_t passes_due = 0;           // passes with work due when they started
  std::uint64_t wakeups = 0;              // returns from clock_nanosleep (sleep mode)
  std::uint64_t wakeups_for_wheel = 0;    // of those, aimed at next_deadline() (the rest at a
                                          // paced schedule or a status line)
  Histogram tick_lag;
  Histogram pass_cost;                    // ns from a due pass's start to advance() returning
  Histogram oversleep;                    // ns a wake-up came after the time it asked for

  // Memory.
  std::uint64_t peak_pending = 0;         // largest wheel.pending() seen after a pass or batch
  std::uint64_t wheel_bytes = 0;          // wheel.stats().bytes at the end
  std::uint64_t pool_nodes = 0;
  std::uint64_t pool_capacity = 0;
  std::uint64_t pool_segments = 0;
  std::uint64_t moved = 0;
  std::uint64_t moved_ahead = 0;
  std::uint64_t max_pass_work = 0;
  std::uint64_t harness_bytes = 0;        // the harness's own per-timer arrays and cancel queue
  std::uint64_t peak_rss_bytes = 0;       // getrusage ru_maxrss, whole process

  // What else the machine was doing: preemption shows as involuntary context switches of this
  // process during the run (getrusage deltas), and as the 1-minute load average (/proc/loadavg).
  std::uint64_t voluntary_switches = 0;
  std::uint64_t involuntary_switches = 0;
  double loadavg_start = -1;              // -1 where /proc/loadavg cannot be read
  double loadavg_end = -1;

  // Exactly-once accounting. Each counter but the first four must end at zero.
  std::uint64_t pending_end = 0;          // wheel.pending() at the end
  std::uint64_t double_fires = 0;         // a callback ran for a timer that had already fired
  std::uint64_t fired_after_cancel = 0;   // a callback ran for a timer cancel() said was stopped
  std::uint64_t early_fires = 0;          // callback clock read < deadline
  std::uint64_t fired_before_tick = 0;    // fired in an advance(now) with now < rounded deadline
  std::uint64_t fired_a_pass_late = 0;    // not fired in the first pass with now >= rounded deadline
  std::uint64_t cancel_true_not_pending = 0;  // cancel() true for a timer not pending
  std::uint64_t cancel_false_pending = 0;     // cancel() false for a timer still pending
  std::uint64_t stale_cancels = 0;        // cancel() on every id after the run ...
  std::uint64_t stale_cancel_true = 0;    // ... of which returned true (must be 0)
  std::uint64_t state_fired = 0;          // per-timer states counted after the run
  std::uint64_t state_cancelled = 0;
  std::uint64_t state_other = 0;          // neither fired nor cancelled (must be 0)
  std::uint64_t ran_before_next_deadline = 0;  // advance(now) ran callbacks, next_deadline() > now
  std::uint64_t next_deadline_missing = 0;     // next_deadline() empty while pending() > 0
  std::uint64_t pending_mismatch = 0;     // status lines where pending() != scheduled - resolved
  // The wheel's own counters at the end, which must agree with the harness's.
  std::uint64_t wheel_scheduled = 0;
  std::uint64_t wheel_fired = 0;
  std::uint64_t wheel_cancelled = 0;
  std::uint64_t wheel_rejected = 0;
  std::uint64_t wheel_passes = 0;

  // One line per broken rule; empty iff the run passed.
  std::vector<std::string> failures;
  bool ok() const noexcept { return failures.empty(); }
};

// Fills report.failures from the accounting fields. Called once, after the run.
void check_accounting(Report& report);

void print_report(const Report& report, std::ostream& out);
void write_json(const Report& report, std::ostream& out);

// "1ms", "100us", "20s": the shortest exact rendering of a duration, as --help and the report
// print the options.
std::string format_duration(std::int64_t ns);

}  // namespace tickwheel::stress
