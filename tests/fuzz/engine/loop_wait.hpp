// tests/fuzz/engine/loop_wait.hpp — the loop's sleep: Engine::prepare_wait(shard, until) and
// finish_wait(shard). The fuzz thread, the loop that polls every shard, announces a sleep (until
// none, before, at or after now) or ends it, and meanwhile schedules as the loop's other threads
// would. prepare_wait() sleeps iff no hand-off (a cancelled one too), returned node, posted move or
// posted clear waits and stop() has not begun, which the model knows exactly; a poll ends the sleep
// first (finish_wait), as a loop does, and so the loop time becomes the clock's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace tickwheel::fuzz::engine {

class EngineRun;

class LoopWait {
 public:
  explicit LoopWait(EngineRun& run) noexcept : run_(run) {}

  // From the top level: a sleep or its end, as byte-coded by the input.
  void op_wait();
  // The loop of shard s, awake, announces a sleep until `until` (none: until woken).
  void sleep(std::size_t s, std::optional<std::int64_t> until);
  // The loop's wait ends: from here its shard's loop time is the clock's (Shard::loop_now()).
  void wake(std::size_t s);

 private:
  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
