// The Engine's deadline clock (engine/platform/clock.hpp), read by several threads: an upper bound
// of CLOCK_MONOTONIC. A schedule_after() places its deadline from it, so a reading below the true
// time would fire a timer early. Each thread reads the true clock, then the bound, and the bound
// must never be the smaller, for anchors of every age the engine uses (ticks of 20 us, 1 ms, 1 s)
// and while other threads read too. How far above it lies is a timing figure, not asserted here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "platform/clock.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

std::uint64_t below_true_time(const detail::DeadlineClock& clock, int reads) {
  std::uint64_t below = 0;
  for (int i = 0; i < reads; ++i) {
    const Nanos truth = detail::monotonic_now();
    below += clock.upper_now() < truth ? 1 : 0;
  }
  return below;
}

TEST(DeadlineClock, NeverReadsBelowTheMonotonicClock) {
  for (const Nanos tick : {Nanos(20us), Nanos(1ms), Nanos(1s), Nanos(1us)}) {
    const detail::DeadlineClock clock(tick);
    std::atomic<std::uint64_t> below{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] { below.fetch_add(below_true_time(clock, 500'000)); });
    }
    for (auto& t : threads) t.join();
    EXPECT_EQ(below.load(), 0u) << "tick " << tick.count() << " ns";
  }
}

// The calibration, on a simulated clock whose TSC ticks once a nanosecond: a stall between any two
// of its reads (a preemption, a VM exit) may make the rate high, never low, since a low rate would
// put upper_now() below the true time. Each case stalls one read of the run for 500 us, the
// stall that made the earlier calibration (TSC read outside the clock readings) 20% low.
struct SimulatedMachine {
  std::int64_t t = 1'000'000'000;  // true time, ns; the TSC reads it as ticks
  int reads = 0;
  int stall_at = -1;  // the read after which the thread stalls
  std::int64_t stall_ns = 500'000;
  void after_read() {
    t += 25;  // each read's own cost
    if (reads++ == stall_at) t += stall_ns;
  }
  double calibrate() {
    return detail::ns_per_tsc_tick(
        [this] {
          const std::int64_t v = t;
          after_read();
          return v;
        },
        [this] {
          const auto v = static_cast<std::uint64_t>(t);
          after_read();
          return v;
        },
        [this] { t += 1'000; }, 2'000'000);
  }
};

TEST(DeadlineClock, ACalibrationStalledAnywhereNeverMeasuresTheTscSlow) {
  SimulatedMachine unstalled;
  const double exact = unstalled.calibrate();
  EXPECT_GE(exact, 1.0);
  EXPECT_LT(exact, 1.001) << "with no stall the brackets are tight";
  ASSERT_GT(unstalled.reads, 6);
  for (int at = 0; at < unstalled.reads; ++at) {
    SimulatedMachine m;
    m.stall_at = at;
    const double rate = m.calibrate();
    EXPECT_GE(rate, 1.0) << "a stall after read " << at << " measured the TSC slow";
    EXPECT_LT(rate, 1.001) << "a stall after read " << at << " was not read around";
  }
}

}  // namespace
}  // namespace tickwheel::test
