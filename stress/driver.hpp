// stress/driver.hpp — runs one stress test: builds the Engine and the harness's slots, starts the
// producer and canceller threads, samples once a second (the status line and the per-second
// series), stops everything after the run's duration, and checks the accounting.
//
// The run, in order:
//   1. measures the clock's read cost; locks memory (--mlock); reads the platform and plans where
//      every thread goes (placement.hpp); builds the executor's thread pool (--executor pool), then
//      builds the engine with its on_pass hook and one pass recorder per shard (passes.hpp), then
//      starts it (its workers bind to their planned cores and first-touch their node reserves) or,
//      caller-driven, starts one polling thread per shard (poller.hpp);
//      allocates and touches the slot table and every per-producer array; builds the repeated
//      timers' engine and timers (repeated.hpp);
//   2. arms one tick probe per shard and waits for each to run once (the thread that ran it is the
//      shard's worker: SCHED_FIFO goes to it with --rt-priority); starts the control thread
//      (control.hpp); reads /proc/interrupts and takes the RSS baseline;
//   3. starts the producers, which each probe their home shard (see producer.hpp), then the
//      cancellers and the repeated timers' control thread, binds them to the load CPUs, then lets
//      the producers go: they arm the periodic timers and fill their one-shot slots (a tight loop
//      unless --schedule-rate paces it), then keep them armed (or, --no-rearm, leave each slot
//      once resolved);
//   4. once a second reads the threads' live counters, the recorders', probes' and control's
//      histograms and the engine's stats(), prints the status line, keeps the sample and, with
//      --hlog, writes the second's histograms to the interval log;
//   5. after --duration, before anything stops: reads every thread's context switches and the
//      interrupts each measured CPU took; then stops and joins the producers, then the cancellers
//      (which finish the cancels handed to them), the repeated timers (destroyed, their engine
//      stopped), the control thread and the polling threads, then calls Engine::stop(visit) (which
//      joins the workers and waits for every task handed to the pool), whose visitor cancels each
//      timer it hands back: no cancelling thread is left to race it, so each cancel() must win;
//   6. checks, with every thread joined: each slot whose instance is still pending must be among
//      the timers handed back (after the visitor's cancels every pending slot's handle reports
//      cancelled()); every resolved slot's last handle must refuse a second cancel; the
//      periodic and repeated timers' rules must have held; the harness's totals must balance and
//      agree with Engine::stats(). The shards' pass recorders are copied into the report then,
//      exact since their writers were joined by stop().
#pragma once

#include <ostream>

#include "options.hpp"
#include "report.hpp"

namespace tickwheel::stress {

// Runs the stress test and returns its measurements, with report.failures filled. The status line
// goes to `status` once a second unless options.quiet; `in_place` rewrites it with a carriage return
// (a terminal), otherwise each is its own line. Throws std::invalid_argument for options the
// engine refuses (its message names the value) and std::runtime_error for a setup the system
// refuses (a binding, --rt-priority or --mlock not permitted: the message says which and why).
Report run_stress(const Options& options, std::ostream& status, bool in_place);

}  // namespace tickwheel::stress
