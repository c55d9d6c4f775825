// tests/fuzz/engine/due_path.cpp — when the scheduling thread claims a due timer, and what the
// claim leaves behind.
#include "engine/due_path.hpp"

#include <poll.h>

#include <utility>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

void DuePath::open(bool absolute) {
  QueueExecutor* executor = run_.executor.get();
  const bool window = absolute && executor != nullptr && executor->any_thread();
  if (executor != nullptr) executor->due_window = window;
  signalled_.clear();
  for (std::size_t s = 0; window && s < run_.config.shards; ++s) signalled_.push_back(readable(s));
}

void DuePath::close() {
  if (run_.executor) run_.executor->due_window = false;
}

std::uint64_t DuePath::take_handed() {
  return run_.executor ? std::exchange(run_.executor->due_handed, 0) : 0;
}

// An executor that takes tasks from any thread, no max_pending_per_shard (its places only a pass
// gives back), a shard whose loop has announced a sleep past the tick's end (Wakeup::sleeps_past:
// the hand-off would wake it), and the tick over by the engine's clock. One thread, no race: exact.
bool DuePath::claims(std::size_t s, std::uint64_t due) const {
  const EngineModel& model = run_.model;
  if (!run_.executor || !run_.executor->any_thread() || run_.config.max_pending != 0 || !model.shards[s].plan)
    return false;
  const auto end = static_cast<std::uint64_t>(model.ns_of(due));  // due <= max_tick: no overflow
  return end < *model.shards[s].plan && model.ns_of(due) <= g_clock;
}

// Claimed by this thread, as a pass claims: the timer has fired already, is counted in scheduled,
// fired and executing at once (the shard's counters, read live), and its task waits in the
// executor's queue; the shard meets its node only when a pass takes it back.
void DuePath::claimed(const tickwheel::Timer& t, std::uint32_t serial, Rec& r) {
  EngineModel& model = run_.model;
  const std::size_t s = r.shard;
  tickwheel::Timer copy = t;
  check(!t.cancelled() && t.expired() && !t.is_pending() && !copy.cancel(),
        "a timer the due path claimed is not expired, or its cancel() won", serial);
  check(!no_nudge_ || signalled_[s] || !readable(s), "the due path woke the shard's loop", serial);
  ShardModel& m = model.shards[s];
  ++m.scheduled;
  ++m.published_scheduled;
  ++m.fired;
  ++m.executing;
  r.where = Where::handed;
  r.fired = true;
  r.ended_at = model.schedules_ok;
  TICKWHEEL_FUZZ_TRACE("  #%u claimed by its scheduler: handed to the executor at once", serial);
}

bool DuePath::readable(std::size_t s) const {
  pollfd p{.fd = run_.engine->wakeup_fd(s), .events = POLLIN, .revents = 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

}  // namespace tickwheel::fuzz::engine
