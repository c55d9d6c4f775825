// tests/fuzz/wheel/checks.hpp — what is checked after every operation: pending(), now(), every
// WheelStats counter the model can count (scheduled, rejected, cancelled, fired, rearmed, skipped,
// rescheduled; passes at most one per call) and the identity scheduled + rearmed == fired +
// skipped + cancelled + pending, next_deadline() (nullopt iff nothing is pending; now() while
// something waits in late/due or at the tick the wheel stopped at; otherwise in (P, earliest due],
// and exactly the earliest due when no level boundary lies before it), and the callables alive.
#pragma once

namespace tickwheel::fuzz::wheel {

class WheelRun;

class WheelChecks {
 public:
  explicit WheelChecks(WheelRun& run) noexcept : run_(run) {}

  void check_all();

 private:
  void check_stats();
  void check_next_deadline();

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
