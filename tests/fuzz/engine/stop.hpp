// tests/fuzz/engine/stop.hpp — Engine::stop(), from the top level (a callback's is refused, see
// Callbacks). It waits for every task handed over, so the queue runs first, on the fuzz thread, or
// meanwhile, on a helper thread whose callbacks take no action. It must return exactly the timers
// neither fired (one-shot) nor cancelled, hand-offs still queued and periodic timers between runs
// included; then every shard's counters are its whole history. Cancelling what it returned
// destroys that timer's callable at once.
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class StopOp {
 public:
  explicit StopOp(EngineRun& run) noexcept : run_(run) {}

  void op_stop();

 private:
  // What stop() returned per shard, and what the model expected.
  struct Tally {
    std::vector<std::size_t> expected;
    std::vector<std::size_t> returned;
  };

  std::thread run_queue();
  std::vector<tickwheel::Timer> call_stop();
  void drain_after_stop();
  Tally check_returned(const std::vector<tickwheel::Timer>& left);
  void check_stats(const std::vector<tickwheel::Timer>& left, const Tally& tally);
  void cancel_returned(tickwheel::Timer& t);

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
