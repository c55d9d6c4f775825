// tests/fuzz/wheel/cancels.hpp — Wheel::cancel(id), from the top level and from callbacks: true
// exactly for a pending timer (a periodic timer wherever it is, a one-shot not yet firing), whose
// callable it destroys before returning (a periodic timer cancelling itself: when its callback
// returns). A cancel outside advance() that empties the place where a stopped wheel waits lets it
// step on.
#pragma once

#include <cstdint>

#include "tickwheel/wheel.hpp"

namespace tickwheel::fuzz::wheel {

class WheelRun;

class CancelOps {
 public:
  explicit CancelOps(WheelRun& run) noexcept : run_(run) {}

  void op_cancel();
  // From a callback: any id; the pass goes on where it stands.
  void nested_cancel(TimerId id);
  // Wheel::cancel(id), where the model expects the callable of `serial` (0: none) may die inside.
  bool cancel(TimerId id, std::uint32_t serial);
  // The model's side of a cancel that returned true.
  void cancelled(std::uint32_t serial);

 private:
  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
