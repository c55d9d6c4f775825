// stress/clock.hpp — the harness's time source: std::chrono::steady_clock read as integer
// nanoseconds since its epoch, the axis the engine works on.
//
// Why this axis: Engine::schedule_at() takes steady_clock time points, and the engine's workers
// read CLOCK_MONOTONIC, which is what steady_clock reads in libstdc++ on Linux. So a deadline the
// harness computes, the deadline the engine stores and the clock read a callback makes at its start
// are all on one axis, with no offset to estimate. monotonic_offset_ns() measures that claim rather
// than assuming it, and the report prints the measurement.
//
// Every figure the harness reports costs at least one read of this clock (each fire reads it once,
// each timed batch twice), so the cost of one read is measured at start-up and printed beside them.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace tickwheel::stress {

// Durations on that axis, in ns, and a time that never comes.
inline constexpr std::int64_t kMs = 1'000'000;
inline constexpr std::int64_t kSecond = 1'000 * kMs;
inline constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

struct Clock {
  // Nanoseconds since steady_clock's epoch. One steady_clock::now() (vDSO, no system call).
  static std::int64_t now() noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  // Blocks until now() >= t (at once if it already is), retrying after signals. The kernel's timer
  // slack of the calling thread applies (50 us by default): the harness's own threads sleep with
  // it, since only the engine's workers are on the measured path.
  static void sleep_until(std::int64_t t) noexcept;

  // |CLOCK_MONOTONIC - steady_clock| in ns from reads taken back to back: the smallest gap of a few
  // tries, so an upper bound on the true offset (plus at most one read).
  static std::int64_t monotonic_offset_ns() noexcept;

  // ns per now() call: the median of `rounds` timed loops of `reads` calls each.
  static double measure_read_cost(unsigned rounds = 5, unsigned reads = 1'000'000) noexcept;
};

}  // namespace tickwheel::stress
