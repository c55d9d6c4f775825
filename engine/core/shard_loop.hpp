// engine/core/shard_loop.hpp — a caller-driven shard (EngineOptions::threads == Threads::manual):
// the polling loop's pass and its side of the wake-up protocol, and a thread's ownership of the
// shard (Engine::own_shard).
//
// Threads: the loop's thread, one at a time: polling_ is held by a poll while it runs and by an
// owner from own() to disown(), so that two threads never drive one wheel; wait_out_driver() is the
// stopping thread's.
#pragma once

#include <atomic>
#include <cstddef>
#include <optional>

#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {

class Shard;

class ShardLoop {
 public:
  explicit ShardLoop(Shard& shard) noexcept : shard_(shard) {}

  // Prepares the shard on the calling thread, binds nothing. Throws std::bad_alloc, with nothing
  // changed, if the reserve's queue token cannot be had.
  void start();
  // One pass at `now` on the calling thread, at most `limit` callbacks; returns how many ran.
  // Throws std::logic_error if another thread is polling this shard; 0 once stop() began.
  std::size_t poll(Nanos now, std::size_t limit);
  // The wheel's next deadline, or now if work waits in the inbox. The polling thread only.
  std::optional<Nanos> next_deadline(Nanos now) const noexcept;
  // The polling loop's side of the wake-up protocol (Engine::prepare_wait, finish_wait; see
  // wakeup.hpp): false, with no plan left published, when work already waits.
  bool prepare_wait(std::optional<Nanos> until) noexcept;
  void finish_wait() noexcept;
  // The calling thread becomes the shard's owner (Engine::own_shard): it holds the shard as a poll
  // does, from now until disown() (release_shard(), or its own stop()), its exit, or its first
  // poll() after stop() began. Throws std::logic_error if another thread polls or owns it, this
  // thread owns another shard, or the engine is stopping.
  void own();
  void disown() noexcept;  // by the owner
  // stop(): waits out a poll in progress, and an owner until it lets go (its next poll() or its own
  // stop() does). seq_cst, paired with poll()'s and own()'s exchange of polling_ and their load of
  // the shard's stopping flag: either they see the flag, or this sees them holding the shard.
  void wait_out_driver() const noexcept;

 private:
  Shard& shard_;
  std::atomic<bool> polling_{false};
  bool in_pass_ = false;  // inside poll()'s pass (the polling thread)
};

}  // namespace tickwheel::detail
