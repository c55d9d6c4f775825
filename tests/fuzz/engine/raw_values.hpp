// tests/fuzz/engine/raw_values.hpp — Timer::raw() and Engine::timer_from_raw() on values of every
// kind: a timer's in any state, garbled, forged, another lifetime of its node, 0, random. A raw()
// round trip names the same timer in every state; timer_from_raw() of 0 or of a locator no node
// has is empty, and a handle from any other value answers pending() iff the model has a timer
// pending with exactly that raw value, and otherwise cancels, moves and reads nothing.
#pragma once

#include <cstdint>

namespace tickwheel::fuzz::engine {

class EngineRun;

class RawValues {
 public:
  explicit RawValues(EngineRun& run) noexcept : run_(run) {}

  void op_raw();

 private:
  // What a raw value names: no node (a handle must not come back), a node this engine handed out
  // (one must), or either (a garbled or random value).
  enum class Named : std::uint8_t { nothing, node, either };

  void check_raw(std::uint64_t raw, Named named);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
