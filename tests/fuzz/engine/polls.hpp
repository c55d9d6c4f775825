// tests/fuzz/engine/polls.hpp — a shard's pass: poll(shard) or poll(shard, now) with or without a
// limit (also of a shard that does not exist, and nested: a callback polls the other shard, or its
// own, which is refused), after which the loop may sleep until its next_deadline(). The model
// does what the pass does before anything runs (EngineModel::begin_pass), the callbacks are
// checked as they run (Callbacks), and the pass's outcome after it returns: its count, the timers
// it handed to the executor, the Misfire::skip timers it dropped, the shard's published counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "engine/model.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class PollOps {
 public:
  explicit PollOps(EngineRun& run) noexcept : run_(run) {}

  void op_poll(std::uint8_t op);
  void poll(std::size_t shard, std::optional<std::int64_t> now, std::size_t limit);

 private:
  void poll_missing(std::size_t shard, std::optional<std::int64_t> now, std::size_t limit);
  std::size_t run_pass(PollCtx& ctx, std::optional<std::int64_t> now);
  void finish_pass(const PollCtx& ctx, std::size_t got);
  void check_complete(const PollCtx& ctx);
  void check_published(std::size_t shard);
  std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>> due_for_hand_over(
      const PollCtx& ctx) const;
  void settle_hand_overs(const PollCtx& ctx, std::size_t got);
  void learn_periodic_hand_overs(const std::vector<std::uint32_t>& periodic, std::size_t rest);
  std::vector<std::uint32_t> settle_skips(const PollCtx& ctx, bool complete);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
