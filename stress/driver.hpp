// stress/driver.hpp — runs one stress test: builds the Engine and the harness's slots, starts the
// producer and canceller threads, samples once a second (the status line and the per-second
// series), stops everything after the run's duration, and checks the accounting. Its steps, in
// order: docs/stress.md, "The run, step by step".
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
