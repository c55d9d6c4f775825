// tests/fuzz/engine/clock.hpp — the engine's clock: a plain variable the target moves, forward
// only, read through the function pointer EngineOptions::clock takes.
#pragma once

#include <cstdint>

#include "fuzz_support.hpp"

namespace tickwheel::fuzz::engine {

inline std::int64_t g_clock = 0;
inline Nanos fuzz_clock() noexcept { return Nanos(g_clock); }

// Moves the clock as the input says: part of a tick, whole ticks, a big jump, the end of time.
inline void move_clock(Bytes& in, std::int64_t tick) {
  const std::uint8_t kind = in.u8();
  switch (kind % 4) {
    case 0: g_clock = sat_add(g_clock, (kind >> 2) * (tick / 4)); break;
    case 1: g_clock = sat_add(g_clock, sat_mul(in.u8(), tick)); break;
    case 2: g_clock = sat_add(g_clock, sat_mul(in.u16(), sat_mul(1 + in.u8() % 64, tick))); break;
    default: g_clock = (kind & 0xF0) == 0xF0 ? kI64Max : sat_add(g_clock, sat_mul(in.u16(), tick)); break;
  }
  TICKWHEEL_FUZZ_TRACE("clock -> %lld", ll(g_clock));
}

}  // namespace tickwheel::fuzz::engine
