// tests/fuzz/engine/shard_ops.hpp — what acts on a whole shard: Engine::clear(shard),
// post_clear(shard) / post_clear_all(), for_each_pending(shard) and own_shard / release_shard.
//
// clear() and for_each_pending() run on the shard's own thread only (a callback of its pass, or
// its owner), not from a walk of it (std::logic_error), with std::out_of_range past the last shard;
// both first settle the shard (EngineModel::settle). clear() then cancels exactly the timers
// pending between runs there, returns how many, destroys their callables at once (never run), and
// leaves stats().cancelled counting every cancel the shard has met; the walk visits exactly those
// timers, once each, with the deadline deadline() reads, and its visitor's cancels and moves are
// posted. post_clear() / post_clear_all() (any thread, a visitor's included; std::out_of_range past
// the last shard) return false once stop() has begun, else true; the request waits for the shard's
// next pass (or stop()), which does what clear() does then; next_deadline() is "now" meanwhile, and
// ShardStats::clears and cleared count clears and what they cancelled. Before the engine's first
// start nothing is posted (there is nothing to clear). own_shard() makes the fuzz thread the
// shard's owner: its schedules without a shard go there, its schedules and cancels there go
// straight into the wheel, and it may read and walk the shard between polls.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class ShardOps {
 public:
  explicit ShardOps(EngineRun& run) noexcept : run_(run) {}

  void clear_shard(std::size_t s);
  void post_clear(std::uint8_t b, std::size_t own);
  void walk_shard(std::size_t s);
  void op_own();

 private:
  template <class Call>
  bool refused(std::size_t s, Call call, const char* past_last, const char* not_own);
  void visit(std::size_t s, std::uint32_t serial, const tickwheel::Timer& t, Nanos deadline);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
