// engine/core/shard_driver.cpp — a caller-driven shard (EngineOptions::threads == Threads::manual):
// the polling loop's pass and its side of the wake-up protocol, and a thread's ownership of the
// shard (Engine::own_shard). The calling thread is the loop's, one at a time (polling_ says which).
#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/shard.hpp"

namespace tickwheel::detail {
namespace {

// Lets go of the shard the calling thread owns (t_owned_shard) when the thread exits: an owner that
// ends without release_shard() must not leave stop() waiting for it forever. Armed by Shard::own(),
// whose use of it registers the destructor.
struct ReleaseAtExit {
  bool armed = false;
  ReleaseAtExit() = default;
  ReleaseAtExit(const ReleaseAtExit&) = delete;
  ReleaseAtExit& operator=(const ReleaseAtExit&) = delete;
  ReleaseAtExit(ReleaseAtExit&&) = delete;
  ReleaseAtExit& operator=(ReleaseAtExit&&) = delete;
  ~ReleaseAtExit() {
    if (armed && t_owned_shard != nullptr) t_owned_shard->disown();
  }
};
thread_local ReleaseAtExit t_release_at_exit;

}  // namespace

void Shard::start_manual() {
  inbox_.make_reserve_token();
  (void)std::snprintf(binding_.data(), binding_.size(), "caller-driven (no worker thread)");
  prepare();
}

std::size_t Shard::poll(Nanos now, std::size_t limit) {
  const bool owner = t_owned_shard == this;  // holds polling_ already, from own() until it lets go
  // walking_ and in_poll_pass_ are read only by the shard's owner: a walk from a callback is inside
  // a poll, caught by the first test; the owner's poll from a callback of another shard polled
  // inside this one's pass (t_current_shard is that other shard) by the second; any other
  // thread's poll is refused by polling_, which the owner or the outer poll holds.
  if (t_current_shard == this || (owner && (walking_ || in_poll_pass_)) ||
      (!owner && polling_.exchange(true, std::memory_order_seq_cst))) {
    throw std::logic_error("tickwheel::Engine::poll: shard " + std::to_string(index_) +
                           " is being polled by another thread, owned by one, or polled from one of its own "
                           "callbacks or from a for_each_pending() visitor; each shard must have one polling "
                           "thread at a time");
  }
  std::size_t ran = 0;
  if (!stopping_.load(std::memory_order_seq_cst)) {  // see request_stop()
    // Callbacks run on this thread: a schedule on this shard from one goes straight into the wheel,
    // and stop() from one is refused, as on a worker. (A callback may poll another engine.)
    Shard* const outer = t_current_shard;
    t_current_shard = this;
    aim_lane();
    in_poll_pass_ = true;
    ran = pass(now, limit);  // noexcept: the flags are restored
    in_poll_pass_ = false;
    t_current_shard = outer;
    aim_lane();
    planned_ns_ = wheel_.next_deadline();  // the tick lag of the next poll is measured against it
  }
  if (!owner) {
    // Release: the next poll, from whichever thread, sees this one's wheel.
    polling_.store(false, std::memory_order_release);
  } else if (stopping_.load(std::memory_order_seq_cst)) {
    disown();  // stop() waits for the owner to let go (it woke the owner's loop to get here)
  }
  return ran;
}

std::optional<Nanos> Shard::next_deadline(Nanos now) const noexcept {
  if (inbox_.work_waiting()) return now;  // a hint, as the sizes; the poll that follows drains with acquire
  return wheel_.next_deadline();
}

bool Shard::prepare_wait(std::optional<Nanos> until) noexcept {
  (void)inbox_.wake().prepare(wake_plan(until));
  if (nothing_waits()) return true;
  inbox_.wake().finish();
  return false;
}

void Shard::finish_wait() noexcept {
  inbox_.wake().finish();
  bump(counters_.wakeups);
  loop_now_ = std::max(loop_now_, clock_now());  // the loop's time after its wait (see loop_now())
}

void Shard::own() {
  if (t_owned_shard == this) return;
  if (t_owned_shard != nullptr) {
    throw std::logic_error("tickwheel::Engine::own_shard: this thread owns shard " +
                           std::to_string(t_owned_shard->index_) +
                           " already; a thread owns one shard at a time");
  }
  if (polling_.exchange(true, std::memory_order_seq_cst)) {  // as poll() takes it
    throw std::logic_error("tickwheel::Engine::own_shard: shard " + std::to_string(index_) +
                           " is owned or being polled by another thread");
  }
  if (stopping_.load(std::memory_order_seq_cst)) {
    polling_.store(false, std::memory_order_release);
    throw std::logic_error("tickwheel::Engine::own_shard: the engine is stopped");
  }
  t_owned_shard = this;
  aim_lane();
  t_release_at_exit.armed = true;
  loop_now_ = std::max(loop_now_, clock_now());
}

void Shard::disown() noexcept {
  t_owned_shard = nullptr;
  aim_lane();
  // Release: whoever polls or stops next sees everything this owner did to the wheel.
  polling_.store(false, std::memory_order_release);
}

}  // namespace tickwheel::detail
