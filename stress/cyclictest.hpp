// stress/cyclictest.hpp — cyclictest (Debian's rt-tests) run beside the control thread, so that the
// report shows the floor the field trusts beside ours.
//
// One cyclictest thread, started with the control thread and stopped with it (SIGINT, on which it
// writes its --json results), under the same placement and priority: the control thread's CPU
// (`-a`), SCHED_FIFO at --rt-priority (`-p`) or else SCHED_OTHER (`--policy=other`), `-m` with
// --mlock, one wake-up per engine tick (`-i`, whole microseconds). It always sleeps
// (clock_nanosleep to an absolute time), as the control thread does unless the workers spin: then
// the control thread spins on that CPU and each cyclictest wake-up takes the CPU from it, which
// both floors show (the text report says so). Its histogram has 1 us buckets up to 100 ms, and a
// wake-up past that is counted at its maximum.
// `--laptop` keeps it from writing /dev/cpu_dma_latency, which the engine and the control thread
// do not touch either: both measure the same platform.
//
// Where cyclictest is not installed, cannot start, or exits with an error (SCHED_FIFO refused, a
// CPU it may not use), the result says why and the run goes on: the engine's figures do not depend
// on it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "histogram.hpp"

namespace tickwheel::stress {

struct CyclictestResult {
  bool ran = false;             // started and wrote its results
  std::string command;          // the command line it ran, "" if none
  std::string reason;           // why it did not run, or what it said when it failed; "" when it ran
  Histogram latency;            // its wake-up latency, ns (1 us buckets)
  std::uint64_t overflows = 0;  // of those, past its histogram (recorded at its maximum)
};

class Cyclictest {
 public:
  // tick_ns > 0; cpu < 0: not bound; rt_priority 0: SCHED_OTHER.
  Cyclictest(std::int64_t tick_ns, int cpu, int rt_priority, bool mlock);
  ~Cyclictest();
  Cyclictest(const Cyclictest&) = delete;
  Cyclictest& operator=(const Cyclictest&) = delete;

  // Starts cyclictest, if it can be found; never throws for its absence.
  void start();
  // Stops it and reads its results. Call once, after start().
  CyclictestResult stop();

 private:
  CyclictestResult result_;
  std::vector<std::string> args_;
  std::string dir_;  // its JSON results and its output, removed by the destructor
  pid_t pid_ = -1;
};

}  // namespace tickwheel::stress
