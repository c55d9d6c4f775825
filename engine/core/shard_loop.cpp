// engine/core/shard_loop.cpp — a caller-driven shard: the polling loop's pass and its side of the
// wake-up protocol, and a thread's ownership of the shard.
#include "core/shard_loop.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/shard.hpp"

namespace tickwheel::detail {
namespace {

// Lets go of the shard the calling thread owns (t_owned_shard) when the thread exits: an owner that
// ends without release_shard() must not leave stop() waiting for it forever. Armed by
// ShardLoop::own(), whose use of it registers the destructor.
struct ReleaseAtExit {
  bool armed = false;
  ReleaseAtExit() = default;
  ReleaseAtExit(const ReleaseAtExit&) = delete;
  ReleaseAtExit& operator=(const ReleaseAtExit&) = delete;
  ReleaseAtExit(ReleaseAtExit&&) = delete;
  ReleaseAtExit& operator=(ReleaseAtExit&&) = delete;
  ~ReleaseAtExit() {
    if (armed && t_owned_shard != nullptr) t_owned_shard->loop.disown();
  }
};
thread_local ReleaseAtExit t_release_at_exit;

}  // namespace

void ShardLoop::start() {
  shard_.inbox.make_reserve_token();
  shard_.worker.describe_caller_driven();
  shard_.prepare();
}

std::size_t ShardLoop::poll(Nanos now, std::size_t limit) {
  Shard* const self = &shard_;
  const bool owner = t_owned_shard == self;  // holds polling_ already, from own() until it lets go
  // The walk and pass flags are read only by the shard's owner: a walk from a callback is inside a
  // poll, caught by the first test; the owner's poll from a callback of another shard polled
  // inside this one's pass (t_current_shard is that other shard) by the second; any other
  // thread's poll is refused by polling_, which the owner or the outer poll holds.
  if (t_current_shard == self || (owner && (shard_.walking_ || in_pass_)) ||
      (!owner && polling_.exchange(true, std::memory_order_seq_cst))) {
    throw std::logic_error("tickwheel::Engine::poll: shard " + std::to_string(shard_.index()) +
                           " is being polled by another thread, owned by one, or polled from one of its own "
                           "callbacks or from a for_each_pending() visitor; each shard must have one polling "
                           "thread at a time");
  }
  std::size_t ran = 0;
  if (!shard_.stopping_.load(std::memory_order_seq_cst)) {  // see Shard::request_stop()
    // Callbacks run on this thread: a schedule on this shard from one goes straight into the wheel,
    // and stop() from one is refused, as on a worker. (A callback may poll another engine.)
    Shard* const outer = t_current_shard;
    t_current_shard = self;
    aim_own_lane();
    in_pass_ = true;
    ran = shard_.pass(now, limit);  // noexcept: the flags are restored
    in_pass_ = false;
    t_current_shard = outer;
    aim_own_lane();
    shard_.planned_ns_ = shard_.wheel_.next_deadline();  // the next poll's tick lag is measured against it
  }
  if (!owner) {
    // Release: the next poll, from whichever thread, sees this one's wheel.
    polling_.store(false, std::memory_order_release);
  } else if (shard_.stopping_.load(std::memory_order_seq_cst)) {
    disown();  // stop() waits for the owner to let go (it woke the owner's loop to get here)
  }
  return ran;
}

std::optional<Nanos> ShardLoop::next_deadline(Nanos now) const noexcept {
  // A hint, as the sizes it reads; the poll that follows drains with acquire.
  if (shard_.inbox.work_waiting()) return now;
  return shard_.wheel_.next_deadline();
}

bool ShardLoop::prepare_wait(std::optional<Nanos> until) noexcept {
  (void)shard_.inbox.wake().prepare(wake_plan(until));
  if (shard_.nothing_waits()) {
    shard_.loop_waits_ = true;
    return true;
  }
  shard_.inbox.wake().finish();
  return false;
}

void ShardLoop::finish_wait() noexcept {
  shard_.loop_waits_ = false;
  shard_.inbox.wake().finish();
  bump(shard_.counters.wakeups);
  // The loop's time after its wait (see Shard::loop_now()).
  shard_.loop_now_ = std::max(shard_.loop_now_, shard_.clock_now());
}

void ShardLoop::own() {
  if (t_owned_shard == &shard_) return;
  if (t_owned_shard != nullptr) {
    throw std::logic_error("tickwheel::Engine::own_shard: this thread owns shard " +
                           std::to_string(t_owned_shard->index()) +
                           " already; a thread owns one shard at a time");
  }
  if (polling_.exchange(true, std::memory_order_seq_cst)) {  // as poll() takes it
    throw std::logic_error("tickwheel::Engine::own_shard: shard " + std::to_string(shard_.index()) +
                           " is owned or being polled by another thread");
  }
  if (shard_.stopping_.load(std::memory_order_seq_cst)) {
    polling_.store(false, std::memory_order_release);
    throw std::logic_error("tickwheel::Engine::own_shard: the engine is stopped");
  }
  t_owned_shard = &shard_;
  aim_own_lane();
  t_release_at_exit.armed = true;
  shard_.loop_now_ = std::max(shard_.loop_now_, shard_.clock_now());
}

void ShardLoop::disown() noexcept {
  t_owned_shard = nullptr;
  aim_own_lane();
  // Release: whoever polls or stops next sees everything this owner did to the wheel.
  polling_.store(false, std::memory_order_release);
}

void ShardLoop::wait_out_driver() const noexcept {
  // A poll, or an owner on another thread until its next poll() or its own stop() (which lets the
  // shard go before it waits for the lifecycle mutex that the stopping thread holds).
  while (polling_.load(std::memory_order_seq_cst)) std::this_thread::yield();
}

}  // namespace tickwheel::detail
