// stress/options.hpp — the stress run's configuration: one plain struct whose member initialisers
// are the only place the defaults live (main.cpp prints them in --help from these values).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace tickwheel::stress {

// How the driving thread waits between advance() passes.
enum class WaitMode {
  sleep,  // clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until the next thing due, timer slack 1 ns
  spin,   // busy-poll: read the clock and advance() in a loop, never block
};

constexpr std::string_view name_of(WaitMode m) noexcept {
  return m == WaitMode::sleep ? "sleep" : "spin";
}

struct Options {
  std::uint64_t timers = 1'000'000;  // timers scheduled in the run
  double cancel_share = 0.5;         // probability that a timer is picked for cancellation
  // Each timer's delay is uniform in [delay_min, delay_max]; with the defaults and all timers
  // scheduled up front, the whole population is pending at the start and drains over ~20 s.
  std::int64_t delay_min_ns = std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
  std::int64_t delay_max_ns = std::chrono::nanoseconds(std::chrono::seconds(20)).count();
  std::int64_t tick_ns = std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
  WaitMode wait = WaitMode::sleep;
  double schedule_rate = 0;          // timers per second; 0 = as fast as possible (all up front)
  std::uint64_t batch = 1024;        // most timers scheduled, or cancelled, between two passes
  std::uint64_t seed = 1;            // seeds the delays and the cancel picks (not the timing)
  // A run whose timers are all scheduled gives up this long after the last deadline if timers are
  // still pending (a lost timer), so a broken wheel fails the run instead of hanging it.
  std::int64_t give_up_ns = std::chrono::nanoseconds(std::chrono::seconds(10)).count();
  bool quiet = false;                // no per-second status lines
  std::string json_path;             // empty = no JSON report
};

}  // namespace tickwheel::stress
