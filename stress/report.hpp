// stress/report.hpp — everything a stress run measured, the accounting rules that judge it, and the
// JSON document, from which stress/plot.py prints the text report and draws the SVG plot. Every
// figure is filled in by the driver from a count, a clock read, the engine's stats() or a system
// call made during the run; none is derived from the options alone.
//
// The counters the rules read are fields; the sections only the reader needs (the machine, the
// threads, each shard's probe and passes, the per-second series) go straight into `sections` as the
// driver collects them, in the document's own shape (stress/check_report.py holds it to its schema).
#pragma once

#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cyclictest.hpp"
#include "histogram.hpp"
#include "options.hpp"
#include "repeated.hpp"
#include "tickwheel/engine.hpp"
#include "workload.hpp"

namespace tickwheel::stress {

using Json = nlohmann::ordered_json;

// {count, min, mean, p50, p90, p99, p99_9, p99_99, max}, in ns.
Json histogram_json(const Histogram& h);
// The same, of a snapshot of a histogram other threads may still write.
Json histogram_json(const ConcurrentHistogram& h);
// The percentile curve the plot draws (see report.cpp).
Json curve_json(const Histogram& h);

// Calls and the time inside them, summed over the threads that made them (producer.hpp, CallTimes).
struct CallTotals {
  std::uint64_t calls = 0, batches = 0, ns = 0;
};

struct Report {
  Options options;  // as run: the profile's values under the explicit options
  // Written by the driver in its final shape: config, platform, placement, tick_lag, passes,
  // environment, executor.threads, series (report_json() places each).
  Json sections = Json::object();

  std::size_t shards = 0;    // Engine::shard_count()
  double clock_read_ns = 0;  // one steady_clock::now(), median of timed loops
  double run_s = 0;          // producers started .. stop requested
  double stop_s = 0;         // time inside Engine::stop()
  std::string hlog;          // the HdrHistogram interval log, if --hlog

  // The platform's floor and the engine's tick lag, side by side (docs/stress.md, "Tick probes").
  bool control_ran = false;
  Histogram control;              // the control thread's wake-up lateness
  CyclictestResult cyclictest;    // beside the control thread (cyclictest.hpp)
  Histogram probe_lag;            // every shard's tick probe lag together
  std::uint64_t tick_probes = 0;  // probe timers scheduled (one per shard)

  // Schedules, all by producers: one-shots, periodic timers (once each: the engine re-arms them),
  // bursts. Time inside the calls is measured per batch (docs/stress.md).
  CallTotals schedule;
  std::uint64_t scheduled = 0;  // successful, tick probes included
  std::uint64_t periodic_started = 0;
  std::uint64_t periodic_inexact = 0;  // of those, first grid point known only as a lower bound
  StatusCounts rejected{};             // refused schedules, by Status
  std::uint64_t probes = 0;            // one per producer: scheduled and cancelled at once
  std::uint64_t bursts = 0, burst_calls = 0, burst_ns = 0, max_burst_ns = 0;

  CallTotals cancel;
  std::uint64_t cancelled = 0;    // returned true
  std::uint64_t cancel_lost = 0;  // returned false: the fire won
  std::uint64_t cancels_by_cancellers = 0;

  // Reschedules, all by producers (docs/stress.md, "Reschedules"), and the fires of the timers they
  // moved, each judged against the deadlines the moves left it.
  CallTotals reschedule;
  std::uint64_t rescheduled = 0;         // returned true
  std::uint64_t reschedule_refused = 0;  // returned false: the timer had fired or was firing
  std::uint64_t moved_fires = 0;         // fires of timers some reschedule() moved, judged
  std::uint64_t moved_raced = 0;  // of those, at the deadline before the last move (allowed: it had come)

  // Fires.
  std::uint64_t fired = 0;          // callbacks run, periodic runs included
  std::uint64_t periodic_runs = 0;  // each followed by the timer's next period, or its end by a cancel
  Histogram lateness;               // callback start - deadline (early fires as 0), every fire
  Histogram oneshot_lateness;       // the same, one-shot and burst timers only
  Histogram periodic_lateness;      // periodic runs only, each against its own grid point (docs/stress.md)
  Histogram lateness_past_tick;     // callback start - deadline rounded up to the tick, every fire
  std::int64_t min_lateness_ns = 0;

  // Periodic timers by kind, and their cancels (docs/stress.md).
  std::array<PolicyCounts, kPeriodicKinds> policies{};
  std::uint64_t periodic_cancelled = 0;       // cancel() returned true on a periodic timer
  std::uint64_t periodic_cancel_refused = 0;  // ... returned false (a broken rule)
  std::uint64_t runs_after_cancel = 0;        // the run begun before such a cancel() returned
  std::uint64_t forced_skips = 0;             // skips forced misfires made certain
  std::uint64_t skip_bound = 0;               // most skips the skip timers' grids allow

  RepeatedReport repeated;  // RepeatedTimer, on an engine of its own (repeated.hpp)

  // The engine's own counters, after stop() and its visitor, which cancelled every timer stop()
  // handed back (so pending is 0 and cancelled counts those cancels too).
  EngineStats engine;
  std::uint64_t max_executing = 0;  // the largest Engine::stats().executing a sample saw (0 inline)

  // Memory. The baseline is taken with the engine started and every harness array allocated and
  // touched; the growth is read at the sample with the most timers pending, less what the
  // producers' agendas (the harness's only growing structure; JSON: calendar_bytes_at_peak) held then.
  std::uint64_t rss_base_bytes = 0, rss_at_peak_bytes = 0, calendar_bytes_at_peak = 0;
  std::uint64_t peak_pending = 0;    // in the wheels plus queued, at that sample
  std::uint64_t peak_rss_bytes = 0;  // getrusage ru_maxrss, whole process
  std::uint64_t harness_bytes = 0;   // slot table, rings and plans, allocated up front
  // Machine: what else was going on (getrusage deltas of this process).
  std::uint64_t voluntary_switches = 0, involuntary_switches = 0;

  // Exactly-once accounting. Every counter from double_fires on must end at zero.
  std::uint64_t returned = 0;               // timers stop(visit) handed to the visitor
  std::uint64_t stop_returned = 0;          // what stop(visit) returned: how many it handed over
  std::uint64_t pending_slots = 0;          // slots whose instance was pending after stop()
  std::uint64_t returned_cancel_false = 0;  // cancel() on a returned timer returned false
  std::uint64_t pending_not_returned = 0;   // a pending slot's handle not cancelled by that
  std::uint64_t stale_cancels = 0;          // cancel() on every resolved slot's last handle ...
  std::uint64_t stale_cancel_true = 0;      // ... of which returned true
  std::uint64_t double_fires = 0;
  std::uint64_t overlapping_runs = 0;  // a periodic run that started while another one ran
  std::uint64_t fired_after_cancel = 0;
  std::uint64_t stray_fires = 0;
  std::uint64_t early_fires = 0;
  std::uint64_t fired_before_tick = 0;
  std::uint64_t cancel_true_not_pending = 0;
  std::uint64_t moved_early = 0;      // a moved timer fired before the deadline it must wait for
  std::uint64_t refused_pending = 0;  // reschedule() false for a timer no pass could have claimed
  std::uint64_t off_shard = 0;
  std::uint64_t probe_failures = 0;
  std::uint64_t unrecorded_fires = 0;  // callbacks on more threads than workers and pool threads

  std::vector<std::string> notices;  // the engine's log lines (binding refused, ...)

  // One line per broken rule; empty iff the run passed.
  std::vector<std::string> failures;
  bool ok() const noexcept { return failures.empty(); }

  // Totals the rules use. Every schedule and every periodic run (the period after it) is a link that
  // ends in exactly one fire or cancel, or is returned by stop():
  //     total_scheduled() + periodic_runs == fired + total_cancelled() + returned.
  std::uint64_t total_scheduled() const noexcept { return scheduled + probes; }
  std::uint64_t total_cancelled() const noexcept { return cancelled + probes - probe_failures; }
  std::uint64_t total_rejected() const noexcept {
    return std::accumulate(rejected.begin(), rejected.end(), std::uint64_t{0});
  }
};

// Fills report.failures from the accounting fields. Called once, after the run.
void check_accounting(Report& report);

// The whole report as one JSON document (the text report and the SVG are drawn from it).
std::string report_json(const Report& report);

}  // namespace tickwheel::stress
