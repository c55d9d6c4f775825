// stress/clock.hpp — the harness's time source: std::chrono::steady_clock as integer nanoseconds
// since an origin taken when the Clock is made, and an absolute sleep on the same clock.
//
// The wheel is driven in these nanoseconds (its start is 0 = the origin), so a deadline, a
// callback's clock read and the `now` given to advance() are all on one axis. The sleep uses
// clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME), which is the same clock only if steady_clock
// reads CLOCK_MONOTONIC (it does in libstdc++ on Linux); monotonic_offset_ns() measures that
// instead of assuming it, and the driver refuses to sleep on a clock that does not match.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace tickwheel::stress {

class Clock {
 public:
  Clock() noexcept : origin_(std::chrono::steady_clock::now()) {}

  // Takes the origin again: now() reads 0 from here on.
  void restart() noexcept { origin_ = std::chrono::steady_clock::now(); }

  // Nanoseconds since the origin. One steady_clock read (see measure_read_cost()).
  std::int64_t now() const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                origin_)
        .count();
  }

  // Blocks until now() >= t (returns at once if it already is), retrying after signals.
  void sleep_until(std::int64_t t) const noexcept;

  // |CLOCK_MONOTONIC - steady_clock| in ns, from reads taken back to back (the smallest gap of a
  // few tries, so it is an upper bound on the true offset plus one read).
  std::int64_t monotonic_offset_ns() const noexcept;

  // ns per steady_clock::now() call: the median of `rounds` timed loops of `reads` calls each.
  static double measure_read_cost(unsigned rounds = 5, unsigned reads = 1'000'000) noexcept;

 private:
  std::chrono::steady_clock::time_point origin_;
};

}  // namespace tickwheel::stress
