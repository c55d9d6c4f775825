// tests/fuzz/wheel/callbacks.hpp — the timers' callables: each run is checked against the model
// (in an advance() call, in the group the model's pass is at, never early, within the limit), then
// does what a byte from the back of the input says: nothing, cancel a timer (itself included),
// schedule a one-shot or periodic timer, try a nested advance() (which runs nothing), throw. Their
// lifetimes: each stored callable is destroyed exactly once, a cancel destroys it before returning
// (a periodic timer cancelling itself: when its callback returns), clear() destroys every pending
// one, and ~Wheel destroys the rest without running them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include "tickwheel/wheel.hpp"
#include "wheel/model.hpp"

namespace tickwheel::fuzz::wheel {

class WheelRun;

class Callbacks {
 public:
  explicit Callbacks(WheelRun& run) noexcept : run_(run) {}

  void on_fire(std::uint32_t serial);
  void born(std::uint32_t serial) { alive.insert(serial); }
  void died(std::uint32_t serial);

  std::set<std::uint32_t> alive;  // serials whose callable exists
  bool destroying = false;        // inside ~Wheel
  std::uint32_t cancelling = 0;   // the timer a cancel() in progress may destroy
  bool clearing = false;          // inside clear(): any pending timer's callable may die

 private:
  void check_may_run(std::uint32_t serial, const ModelTimer& t);
  bool act(std::uint32_t serial, TimerId self_id, bool periodic);

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
