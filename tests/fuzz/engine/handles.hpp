// tests/fuzz/engine/handles.hpp — what a Timer handle does to its timer, from the top level, a
// callback or a walk's visitor: cancel() (of a pending, fired, running or cancelled timer, a
// default or a failed handle), reschedule() / reschedule_after() (any timer, any deadline, past,
// far and saturating ones included) and deadline() / remaining(); each through the handle itself
// or the one timer_from_raw() gives back for its raw(), which names the same timer in every state.
//
// cancel() wins iff the timer may still run (EngineModel::is_pending): a one-shot not yet claimed,
// a periodic timer wherever it is, after which no run of it starts. reschedule() on the shard's own
// thread (but in a walk of it) moves the timer there and then and returns true exactly when it is
// pending between runs; from elsewhere (another shard's callback, the top level of a thread not the
// owner, a walk's visitor) it returns true iff the timer was pending between runs and stop() had
// not begun, and posts the move (see model.hpp). deadline() / remaining(), from any thread, give
// the due tick's time (less the clock, or zero) iff the timer is pending between runs, else
// nullopt; pending() is exact in every state (a one-shot asking about itself in its callback:
// false; a periodic timer: true until cancelled).
#pragma once

#include <cstdint>

#include "engine/model.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class HandleOps {
 public:
  explicit HandleOps(EngineRun& run) noexcept : run_(run) {}

  void op_cancel();
  void op_reschedule();
  void op_deadline();

  // Each on a recorded timer: through its handle, what timer_from_raw() gives back for its raw()
  // (bit 0 of `how`, or of `how` >> 1 for reschedule), or `use` (a walk's own Timer).
  void cancel(std::uint32_t serial, unsigned how = 0, const tickwheel::Timer* use = nullptr);
  void reschedule(std::uint32_t serial, std::uint8_t how, const tickwheel::Timer* use = nullptr);
  void check_deadline(std::uint32_t serial, unsigned how, const tickwheel::Timer* use = nullptr);

 private:
  tickwheel::Timer handle(const Rec& r, unsigned how);
  void check_empty_handles();

  EngineRun& run_;
};

}  // namespace tickwheel::fuzz::engine
