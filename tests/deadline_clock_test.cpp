// Tier 3 (engine, concurrency): the deadline clock (engine/clock.hpp) is an upper bound of
// CLOCK_MONOTONIC. A schedule_after() places its deadline from it, so a reading below the true
// time would fire a timer early. Each thread reads the true clock, then the bound, and the bound
// must never be the smaller, for anchors of every age the engine uses (ticks of 20 us, 1 ms, 1 s)
// and while other threads read too. How far above it lies is a timing figure, not asserted here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "clock.hpp"

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

}  // namespace
}  // namespace tickwheel::test
