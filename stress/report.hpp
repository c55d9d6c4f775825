// stress/report.hpp — everything a stress run measured, the accounting rules that judge it, and the
// JSON document, from which stress/plot.py prints the text report and draws the SVG plot. Every
// figure is filled in by the driver from a count, a clock read, the engine's stats() or a system
// call made during the run; none is derived from the options alone.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cyclictest.hpp"
#include "histogram.hpp"
#include "options.hpp"
#include "placement.hpp"
#include "platform.hpp"
#include "repeated.hpp"
#include "tickwheel/engine.hpp"
#include "workload.hpp"

namespace tickwheel::stress {

// One line of the per-second series (and of the status line).
struct Sample {
  double t_s = 0;               // seconds since the producers started
  std::uint64_t scheduled = 0;  // schedule calls that returned a timer, so far (all threads)
  std::uint64_t cancelled = 0;  // cancel() calls that returned true, so far
  std::uint64_t fired = 0;      // callbacks run, so far
  double schedule_rate = 0;     // per second over the interval since the previous sample
  double cancel_rate = 0;
  double fire_rate = 0;
  std::uint64_t pending = 0;  // Engine::stats(): in the wheels
  std::uint64_t queued = 0;   // Engine::stats(): hand-offs not yet moved into a wheel
  std::uint64_t p99_ns = 0;   // lateness of the interval's fires (bucket bounds, see since())
  std::uint64_t max_ns = 0;
  std::uint64_t p99_so_far_ns = 0;  // lateness of every fire so far
  std::uint64_t rss_bytes = 0;
  std::uint64_t transfer_cap_hits = 0;  // so far
  std::uint64_t executing = 0;          // Engine::stats(): handed to the executor, not yet returned
  std::uint64_t control_p99_ns = 0;     // the control thread's wake-ups of the interval
  std::uint64_t probe_p99_ns = 0;       // the tick probes' runs of the interval, every shard
};

// What one thread that ran callbacks recorded (one Recorder, see workload.hpp).
struct ThreadReport {
  // With the inline executor, the shard whose worker this is: the shard of the first timer it ran.
  // -1 with a pool (a pool thread runs every shard's timers).
  std::int64_t shard = -1;
  std::uint64_t fired = 0;
  std::uint64_t periodic_runs = 0;
  Histogram lateness;  // both kinds
};

// A thread of the run, with its context switches since it started (read at the end of the run,
// before anything was stopped).
struct ThreadInfo {
  std::string role;  // worker, poller, producer, canceller, control, pool
  std::size_t index = 0;
  pid_t tid = 0;
  std::string cpus;  // where the harness placed it: a CPU list, or "any"
  ThreadSwitches switches;
};

// What one shard's tick probe measured (workload.hpp, ProbeState).
struct ShardProbe {
  Histogram lag;             // a probe run's start behind its tick boundary, one per tick
  Histogram fires_per_tick;  // inline executor: callbacks the worker ran between two probe runs
};

// Every pass of one shard, from the engine's on_pass hook (passes.hpp), copied after stop().
struct ShardPasses {
  std::uint64_t passes = 0;
  std::uint64_t early = 0;      // started before their planned wake-up: not in tick_lag
  std::uint64_t unplanned = 0;  // had no planned wake-up: not in tick_lag
  Histogram tick_lag;           // start - planned, ns, the other passes
  Histogram duration;           // end - start, ns, every pass
  Histogram fired;              // per pass: callbacks run (or handed to the executor)
  Histogram moved;              // per pass: timers moved down a level
  Histogram transferred;        // per pass: hand-offs moved into the wheel
  Histogram cancels;            // per pass: cancel records taken
  std::uint64_t fired_total = 0;
  std::uint64_t moved_total = 0;
  std::uint64_t transferred_total = 0;
  std::uint64_t cancels_total = 0;
};

// One kind of periodic timer (PeriodicPolicy), over the run.
struct PolicyReport {
  std::uint64_t timers = 0;        // started (schedule_every returned a timer)
  std::uint64_t runs = 0;          // runs recorded against the kind's bound
  std::uint64_t before_bound = 0;  // of those, started before the policy let them (a broken rule)
  std::uint64_t forced = 0;        // forced misfires (--misfire-every)
};

// The interrupts one CPU of the run took during it.
struct CpuIrq {
  std::string role;  // "worker 0", "control", "worker 0, control"
  CpuInterrupts irq;
};

struct Report {
  Options options;     // as run: the profile's values under the explicit options
  std::string config;  // describe() of the configuration with shards and producers resolved

  // Environment, measured before the run.
  double clock_read_ns = 0;                    // one steady_clock::now(), median of timed loops
  std::int64_t clock_monotonic_offset_ns = 0;  // |steady_clock - CLOCK_MONOTONIC|
  unsigned hardware_threads = 0;
  std::size_t shards = 0;  // Engine::shard_count()
  unsigned producers = 0;
  unsigned cancellers = 0;

  // The machine and where the run's threads went (platform.hpp, placement.hpp).
  Platform platform;
  Placement placement;
  std::string fitted;  // what --fit chose, "" if nothing
  std::vector<CpuIrq> interrupts;
  std::vector<ThreadInfo> threads;
  double start_epoch_s = 0;  // the producers' start, seconds since the Unix epoch

  // The platform's floor and the engine's tick lag, side by side (control.hpp, workload.hpp).
  bool control_ran = false;
  Histogram control;                     // the control thread's wake-up lateness
  CyclictestResult cyclictest;           // beside the control thread (cyclictest.hpp)
  std::vector<ShardProbe> shard_probes;  // per shard
  Histogram probe_lag;                   // every shard's probe lag together
  std::uint64_t tick_probes = 0;         // probe timers scheduled (one per shard)
  std::string hlog;                      // the HdrHistogram interval log, if --hlog
  // Every pass of every shard (EngineOptions::on_pass), per shard, and the tick lag of all together.
  std::vector<ShardPasses> shard_passes;
  Histogram pass_lag;

  // Run.
  double run_s = 0;   // producers started .. stop requested
  double stop_s = 0;  // time inside Engine::stop()

  // Schedules, all by producers: one-shots, periodic timers (once each: the engine re-arms them),
  // bursts. Time inside the calls is measured per batch (see producer.hpp).
  std::uint64_t schedule_calls = 0;  // by producers
  std::uint64_t scheduled = 0;       // by producers, successful
  std::uint64_t schedule_batches = 0;
  std::uint64_t schedule_ns = 0;
  std::uint64_t periodic_started = 0;
  std::uint64_t periodic_inexact = 0;  // of those, first grid point known only as a lower bound
  StatusCounts rejected{};             // refused schedules, by Status
  std::uint64_t probes = 0;            // one per producer: scheduled and cancelled at once
  std::uint64_t bursts = 0;
  std::uint64_t burst_calls = 0;
  std::uint64_t burst_ns = 0;
  std::uint64_t max_burst_ns = 0;

  // Cancels.
  std::uint64_t cancel_calls = 0;
  std::uint64_t cancelled = 0;    // returned true
  std::uint64_t cancel_lost = 0;  // returned false: the fire won
  std::uint64_t cancel_batches = 0;
  std::uint64_t cancel_ns = 0;
  std::uint64_t cancels_by_cancellers = 0;  // of cancel_calls, made by canceller threads

  // Reschedules, all by producers (workload.hpp, "Reschedules"), and the fires of the timers they
  // moved, each judged against the deadlines the moves left it.
  std::uint64_t reschedule_calls = 0;
  std::uint64_t rescheduled = 0;         // returned true
  std::uint64_t reschedule_refused = 0;  // returned false: the timer had fired or was firing
  std::uint64_t reschedule_batches = 0;
  std::uint64_t reschedule_ns = 0;
  std::uint64_t moved_fires = 0;  // fires of timers some reschedule() moved, judged
  std::uint64_t moved_raced = 0;  // of those, at the deadline before the last move (allowed: it had come)

  // Fires.
  std::uint64_t fired = 0;          // callbacks run, periodic runs included
  std::uint64_t periodic_runs = 0;  // each followed by the timer's next period, or its end by a cancel
  Histogram lateness;               // callback start - deadline (early fires as 0), every fire
  Histogram oneshot_lateness;       // the same, one-shot and burst timers only
  Histogram periodic_lateness;      // periodic runs only, each against its own grid point (workload.hpp)
  Histogram lateness_past_tick;     // callback start - deadline rounded up to the tick, every fire
  std::int64_t min_lateness_ns = 0;

  // Periodic timers by kind, and their cancels (workload.hpp).
  std::array<PolicyReport, kPeriodicKinds> policies{};
  std::uint64_t periodic_cancelled = 0;       // cancel() returned true on a periodic timer
  std::uint64_t periodic_cancel_refused = 0;  // ... returned false (a broken rule)
  std::uint64_t runs_after_cancel = 0;        // the run begun before such a cancel() returned
  std::uint64_t forced_skips = 0;             // skips forced misfires made certain
  std::uint64_t skip_bound = 0;               // most skips the skip timers' grids allow

  // RepeatedTimer, on an engine of its own (repeated.hpp).
  RepeatedReport repeated;

  // The engine's own counters, after stop() and its visitor, which cancelled every timer stop()
  // handed back (so pending is 0 and cancelled counts those cancels too).
  EngineStats engine;
  // Where callbacks ran: the largest Engine::stats().executing a sample saw (0 inline), and what
  // each thread that ran callbacks recorded, in the order of their first callback.
  std::uint64_t max_executing = 0;
  std::vector<ThreadReport> callback_threads;

  std::vector<Sample> series;

  // Memory. The baseline is taken with the engine started and every harness array allocated and
  // touched; the growth is read at the sample with the most timers pending, less what the
  // producers' agendas (the harness's only growing structure; JSON: calendar_bytes_at_peak) held then.
  std::uint64_t rss_base_bytes = 0;
  std::uint64_t rss_at_peak_bytes = 0;
  std::uint64_t calendar_bytes_at_peak = 0;
  std::uint64_t peak_pending = 0;    // in the wheels plus queued, at that sample
  std::uint64_t peak_rss_bytes = 0;  // getrusage ru_maxrss, whole process
  std::uint64_t harness_bytes = 0;   // slot table, rings and plans, allocated up front
  double bytes_per_pending() const noexcept;

  // Machine: what else was going on (getrusage deltas of this process, /proc/loadavg).
  std::uint64_t voluntary_switches = 0;
  std::uint64_t involuntary_switches = 0;
  double loadavg_start = -1;
  double loadavg_end = -1;

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
  std::uint64_t oneshot_cancelled() const noexcept { return cancelled - periodic_cancelled; }
  std::uint64_t total_rejected() const noexcept;
  std::uint64_t oneshot_fired() const noexcept { return fired - periodic_runs; }  // bursts included
};

// Fills report.failures from the accounting fields. Called once, after the run.
void check_accounting(Report& report);

// The whole report as one JSON document (the text report and the SVG are drawn from it).
std::string report_json(const Report& report);

}  // namespace tickwheel::stress
