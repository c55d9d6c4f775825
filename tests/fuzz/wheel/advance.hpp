// tests/fuzz/wheel/advance.hpp — Wheel::advance(now, limit): small steps, jumps through the upper
// levels, time going back, to next_deadline() (as an event loop does), to the end of time; with or
// without an expiry limit. The callbacks are followed as they run (Callbacks, WheelModel::reach);
// after the call, what it left: a call below its limit went through everything due, one cut short
// (by its limit or a throw) stopped where the model says (see model.hpp), and the Misfire::skip
// drops it made without a callback are read from WheelStats::skipped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tickwheel::fuzz::wheel {

class WheelRun;

class AdvanceOps {
 public:
  explicit AdvanceOps(WheelRun& run) noexcept : run_(run) {}

  void op_advance();

 private:
  void advance(std::int64_t target, std::size_t limit);
  void finish_call();
  void stop_call();
  std::uint64_t count_unseen_drops(std::uint64_t unseen, const char* what);

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
