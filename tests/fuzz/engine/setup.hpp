// tests/fuzz/engine/setup.hpp — the first bytes of an input: the engine's options. They pick the
// shards (one or two), the tick, transfer_cap, max_pending_per_shard, the clock's start, where
// callbacks run (inline, an InlineExecutor, or the target's own queueing executor, whose
// any_thread() the input picks) and whether on_callback_error is set; now and then a raw set of
// options whose validation is checked instead, before the engine the run drives is built.
// Threads::manual always: the fuzz thread is every shard's loop.
#pragma once

#include <cstdint>

#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class EngineSetup {
 public:
  explicit EngineSetup(EngineRun& run) noexcept : run_(run) {}

  // Decodes the options, builds the engine and starts the model.
  void build();

 private:
  std::uint8_t decode_config();
  EngineOptions options(std::uint8_t c);
  void check_option_validation();

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
