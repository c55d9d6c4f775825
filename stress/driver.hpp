// stress/driver.hpp — runs one stress test: builds the Engine and the harness's slots, starts the
// producer and canceller threads, samples once a second (the status line and the per-second
// series), stops everything after the run's duration, and checks the accounting.
//
// The run, in order:
//   1. measures the clock's read cost; builds the executor's thread pool (--executor pool), then
//      builds and starts the engine (its workers bind to their cores and first-touch their node
//      reserves); allocates and touches the slot table and every
//      per-producer array; takes the RSS baseline;
//   2. starts the producers, which each probe their home shard (see producer.hpp), then the
//      cancellers, then lets the producers go: they arm the periodic timers and fill their
//      one-shot slots (a tight loop unless --schedule-rate paces it), then keep them armed;
//   3. once a second reads the threads' live counters, the recorders' histograms and the engine's
//      stats(), prints the status line and keeps the sample;
//   4. after --duration: stops and joins the producers, then the cancellers (which finish the
//      cancels handed to them), then calls Engine::stop() (which joins the workers and waits for
//      every task handed to the pool) and keeps what it returns;
//   5. checks, with every thread joined: each slot whose instance is still pending must be among
//      the returned timers (every returned timer's cancel() returns true, after which every
//      pending slot's handle reports cancelled()); every resolved slot's last handle must refuse a
//      second cancel; the harness's totals must balance and agree with Engine::stats().
#pragma once

#include <ostream>

#include "options.hpp"
#include "report.hpp"

namespace tickwheel::stress {

// Runs the stress test and returns its measurements, with report.failures filled. The status line
// goes to `status` once a second unless options.quiet; `in_place` rewrites it with a carriage return
// (a terminal), otherwise each is its own line. Throws std::invalid_argument for options the
// engine refuses (its message names the value) and std::runtime_error for a setup the system
// refuses.
Report run_stress(const Options& options, std::ostream& status, bool in_place);

}  // namespace tickwheel::stress
