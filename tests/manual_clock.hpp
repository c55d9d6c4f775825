// tests/manual_clock.hpp — the injected clock of the caller-driven Engine tests (Threads::manual),
// the options that use it, and an engine whose shard the test thread owns. One clock per test
// executable: tests only move it forward, and each Engine starts at the clock's now, so no test
// depends on where an earlier one left it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "tickwheel/engine.hpp"

namespace tickwheel::test {

// Starts far from zero, on a tick boundary, so that no now or deadline is 0.
inline std::atomic<std::int64_t> g_fake_ns{1'000'000'000'000};
inline Nanos fake_now() noexcept { return Nanos(g_fake_ns.load(std::memory_order_relaxed)); }
// Moves the clock forward by `by`; returns the new now.
inline Nanos advance_clock(Nanos by) {
  return Nanos(g_fake_ns.fetch_add(by.count(), std::memory_order_relaxed) + by.count());
}

// Caller-driven options on the injected clock.
inline EngineOptions manual(std::size_t shards = 1, Nanos tick = std::chrono::milliseconds(1)) {
  EngineOptions o;
  o.shards = shards;
  o.tick = tick;
  o.threads = Threads::manual;
  o.clock = &fake_now;
  return o;
}

// A caller-driven engine on the injected clock whose shard 0 the test thread owns, and the clock's
// time when it took ownership.
struct OwnedEngine {
  explicit OwnedEngine(std::size_t shards = 1) : engine(manual(shards)), start(fake_now()) {
    engine.own_shard(0);
  }
  Engine engine;
  Nanos start;
};

}  // namespace tickwheel::test
