// stress/cyclictest.hpp — cyclictest (Debian's rt-tests) run beside the control thread, so that the
// report shows the floor the field trusts beside ours; where it cannot run, the result says why and
// the run goes on. See docs/stress.md, "cyclictest beside the control thread".
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
