// tests/fuzz/engine/checks.hpp — what is checked after every operation: each shard's published
// counters (an owner's schedules, cancels and moves change its wheel at once, its counters only as
// the shard next publishes them), pending, executing, passes, transfer_cap hits and callback
// errors; next_deadline() within its bounds (see model.hpp); the callables alive; and a timer's
// handle: bool, status, shard, cancelled() / expired() (exact until its node is reused), pending()
// (exact always) and its raw() round trip.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class Invariants {
 public:
  explicit Invariants(EngineRun& run) noexcept : run_(run) {}

  void check_all();
  void check_handle(std::uint32_t serial);

 private:
  void check_shard(std::size_t s, const ShardStats& ss);
  void check_next_deadline(std::size_t s);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
