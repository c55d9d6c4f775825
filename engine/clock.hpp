// engine/clock.hpp — the engine's clock: CLOCK_MONOTONIC, the clock std::chrono::steady_clock
// reads on Linux, so Engine::schedule_at() takes steady_clock time points as they are.
#pragma once

#include <chrono>

#include "tickwheel/wheel.hpp"

namespace tickwheel::detail {

inline Nanos monotonic_now() noexcept {
  return std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace tickwheel::detail
