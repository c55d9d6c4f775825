// stress/driver.hpp — drives one tickwheel::Wheel against the real monotonic clock and measures it.
//
// The run, on the calling thread (the wheel is single-threaded; the later multicore harness runs
// one driver loop per shard and merges the reports' histograms):
//   1. Schedules Options::timers timers, each at the current clock reading plus a delay uniform in
//      [delay_min, delay_max], in batches of at most Options::batch between advance() passes: all up
//      front when schedule_rate is 0, else paced at that rate.
//   2. Picks each timer for cancellation with probability cancel_share, at a time uniform between
//      its schedule and its deadline, so every cancel targets a timer that should still be pending
//      (cancels due in an iteration run before that iteration's advance()).
//   3. Loops: cancels due, schedules due, one advance(now) pass, then either sleeps until the
//      earliest of next_deadline(), the next paced schedule and the next status line, or spins.
//      (A cancel never needs its own wake-up: it is due before its timer's deadline, so it is made
//      by the wake-up for that deadline at the latest.) Ends when every timer is scheduled and
//      none is pending.
// Each callback reads the clock as it starts, records its lateness, and checks its own timer's
// state in a per-timer byte (double fire, fire after cancel) and the contract of advance() (never
// in a pass whose now is before the deadline rounded up to the tick, always in the first pass whose
// now reaches it). After the run every id is cancelled once more (a stale cancel must return false)
// and the per-timer states are counted against the counters and the wheel's own stats().
#pragma once

#include <ostream>

#include "options.hpp"
#include "report.hpp"

namespace tickwheel::stress {

// Runs the stress test described above and returns its measurements, with report.failures filled.
// Status lines (one per second unless options.quiet) go to `status`. Throws std::invalid_argument
// for options the wheel refuses (its message names the value) and std::runtime_error when the
// sleep clock cannot be used.
Report run_stress(const Options& options, std::ostream& status);

}  // namespace tickwheel::stress
