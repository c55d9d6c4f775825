// tickwheel/detail/own_lane.hpp — the shortcut by which Engine's inline schedule links a timer
// into the calling thread's own shard (engine.hpp). Not public API.
#pragma once

#include <atomic>
#include <cstddef>

#include "tickwheel/detail/pool.hpp"

namespace tickwheel::detail {

class Shard;

// What a schedule on a shard's own thread needs to skip the engine's out-of-line admission: whose
// shard this is, its pool, and whether the shortcut is open. It is shut while admission has work
// to do (max_pending_per_shard set) and from stop() on; the schedule then takes the full path,
// which refuses or admits as it always did. Written by the shard's engine; read by its own thread.
struct OwnLane {
  const void* engine = nullptr;  // the engine's core, as its Engine knows it
  Shard* shard = nullptr;
  std::size_t index = 0;
  NodePool* pool = nullptr;  // the shard's wheel's pool: the shard's own thread only
  // Relaxed: stop() shuts it from another thread, and a schedule that still sees it open lands
  // in the wheel before the owner lets go, which stop() waits for and hands back, as before.
  std::atomic<bool> open{false};
};

// The lane of the shard whose wheel the calling thread may change directly: the shard whose pass
// it is in (a callback), else the one it owns (Engine::own_shard); null otherwise. Constant-
// initialised, so one load; written only by the shard's code.
inline thread_local OwnLane* t_own_lane = nullptr;

}  // namespace tickwheel::detail
