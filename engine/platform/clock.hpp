// engine/platform/clock.hpp — the engine's clock: CLOCK_MONOTONIC, the clock std::chrono::steady_clock
// reads on Linux, so Engine::schedule_at() takes steady_clock time points as they are; and the
// cheaper upper bound of it that a schedule_after() places its deadline from.
#pragma once

#include <x86intrin.h>

#include <chrono>
#include <cstdint>

#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {

inline Nanos monotonic_now() noexcept {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

// A deadline needs now only to add a delay to it, and a deadline placed late by a small part of a
// tick changes nothing the tick did not already round away; placed early, a timer fires early.
// So schedule_after() reads an upper bound of CLOCK_MONOTONIC: the calling thread's last reading
// of it (its anchor) plus the time-stamp counter's ticks since, converted at the measured rate
// plus a 25% margin. Reading the TSC costs a fraction of reading the clock (a vDSO call that reads
// the TSC itself and then converts), and a thread re-reads the clock only when its anchor is older
// than 1/16 of the tick (1 ms at most). The bound is always at or after the true time:
//   - the anchor's TSC is read before its clock, so the ticks since it overstate the time since;
//   - the rate's calibration errs only high (ns_per_tsc_tick(), below), and the margin covers
//     the clock being slewed faster than the TSC (NTP: 500 ppm; chrony at its 8.3% maximum);
//   - it is used only where the kernel itself keeps time with the TSC (its clocksource is "tsc"):
//     then the TSC is invariant and synchronised across CPUs, so a thread that moves keeps its
//     anchor; a TSC behind the anchor is taken as a stale anchor.
// The deadline is late by at most 25% of the anchor's age, 1/64 of a tick, plus what a stalled
// calibration added to the rate. Ticks under 16 us (anchors too young to pay) and machines without
// the TSC clocksource read the clock every time.
struct DeadlineAnchor {
  std::uint64_t tsc = 0;
  std::int64_t ns = 0;
};
// The calling thread's anchor: one per thread, whatever the engine, as it is one clock.
inline thread_local DeadlineAnchor t_deadline_anchor;

// The TSC's rate against the clock: one TSC reading between two clock readings (a bracket) at each
// end of a span of at least `span_ns`, and ns per TSC tick from the outer clock readings. Their
// interval covers the one between the two TSC readings whatever stalls the thread between reads (a
// preemption, a VM exit), so the rate is never below the true one: a stall only raises it, which
// places deadlines later, never earlier. A bracket wider than kTightBracketNs is read again, a few
// times, so that a stall seldom costs the rate its precision. 0 if the TSC did not advance.
// Templated on the readers so that a test can drive it with a simulated clock and stalls.
inline constexpr std::int64_t kTightBracketNs = 10'000;
inline constexpr unsigned kBracketTries = 8;

struct TscBracket {
  std::int64_t before = 0;
  std::uint64_t tsc = 0;
  std::int64_t after = 0;
  std::int64_t width() const noexcept { return after - before; }
};

template <class ClockNs, class Tsc>
TscBracket read_bracket(ClockNs& clock, Tsc& tsc) {
  TscBracket best;
  for (unsigned i = 0; i < kBracketTries; ++i) {
    TscBracket b;
    b.before = clock();
    b.tsc = tsc();
    b.after = clock();
    if (i == 0 || b.width() < best.width()) best = b;
    if (best.width() <= kTightBracketNs) break;
  }
  return best;
}

template <class ClockNs, class Tsc, class Pause>
double ns_per_tsc_tick(ClockNs clock, Tsc tsc, Pause pause, std::int64_t span_ns) {
  const TscBracket start = read_bracket(clock, tsc);
  while (clock() - start.after < span_ns) pause();
  const TscBracket end = read_bracket(clock, tsc);
  if (end.tsc <= start.tsc) return 0;
  return static_cast<double>(end.after - start.before) / static_cast<double>(end.tsc - start.tsc);
}

class DeadlineClock {
 public:
  explicit DeadlineClock(Nanos tick) noexcept;

  Nanos upper_now() const noexcept {
    if (max_age_ == 0) return monotonic_now();
    DeadlineAnchor& a = t_deadline_anchor;
    const std::uint64_t since = __rdtsc() - a.tsc;  // wraps to huge if the anchor is ahead: stale
    if (since > max_age_) [[unlikely]] {
      a.tsc = __rdtsc();
      a.ns = monotonic_now().count();
      return Nanos(a.ns);
    }
    // `since` is at most 1 ms of ticks (~2^22 at 4 GHz) and mult_ under 2^32 (a TSC slower than
    // 1.25 GHz is not used): the product fits.
    return Nanos(a.ns + static_cast<std::int64_t>((since * mult_) >> 32));
  }

 private:
  std::uint64_t max_age_ = 0;  // TSC ticks an anchor is used for; 0: read the clock every time
  std::uint64_t mult_ = 0;     // ns per TSC tick, margin included, in 32.32 fixed point
};

}  // namespace tickwheel::detail
