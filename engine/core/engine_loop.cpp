// engine/core/engine_loop.cpp — EngineCore's side of a caller-driven engine (EngineOptions::threads
// == Threads::manual): the polling loop's calls, each checked against the mode and the shard index,
// and a thread's ownership of a shard. The loop's thread calls these; clock_moved() any thread.
#include <stdexcept>
#include <string>

#include "core/engine_core.hpp"

namespace tickwheel::detail {

Shard& EngineCore::polled_shard(std::size_t index, const char* call) const {
  if (opts_.threads != Threads::manual) {
    throw std::logic_error(std::string("tickwheel::Engine::") + call +
                           ": the engine has worker threads; this is for EngineOptions::threads = "
                           "Threads::manual");
  }
  if (index >= shards_.size()) {
    throw std::out_of_range(std::string("tickwheel::Engine::") + call + ": shard " + std::to_string(index) +
                            " of " + std::to_string(shards_.size()));
  }
  return *shards_[index];
}

std::size_t EngineCore::poll(std::size_t index, Nanos now, std::size_t limit) {
  Shard& shard = polled_shard(index);
  if (!started_.load(std::memory_order_acquire) && !stopped_.load(std::memory_order_relaxed)) start();
  return shard.loop.poll(now, limit);
}

std::optional<Nanos> EngineCore::next_deadline(std::size_t index) const {
  const Shard& shard = polled_shard(index, "next_deadline");
  // Once stop() has begun nothing runs here any more, so a loop that sleeps until the answer is
  // told there is nothing to wait for. Relaxed: only the flag's own value is used.
  if (stopped_.load(std::memory_order_relaxed)) return std::nullopt;
  return shard.loop.next_deadline(now());
}

int EngineCore::wakeup_fd(std::size_t index) const {
  const Shard& shard = polled_shard(index, "wakeup_fd");
  if (opts_.wake_loop) {
    throw std::logic_error(
        "tickwheel::Engine::wakeup_fd: EngineOptions::wake_loop is set, so producers call it instead of "
        "writing an eventfd; there is none");
  }
  return shard.inbox.wake().fd();
}

bool EngineCore::prepare_wait(std::size_t index, std::optional<Nanos> until) {
  Shard& shard = polled_shard(index, "prepare_wait");
  if (stopped_.load(std::memory_order_relaxed)) return false;  // nothing to wait for: poll, let go
  return shard.loop.prepare_wait(until);
}

void EngineCore::finish_wait(std::size_t index) { polled_shard(index, "finish_wait").loop.finish_wait(); }

void EngineCore::own_shard(std::size_t index) {
  Shard& shard = polled_shard(index, "own_shard");
  if (Shard* other = owned_shard(); other != nullptr && other != &shard && &other->host() == this) {
    throw std::logic_error("tickwheel::Engine::own_shard: this thread owns shard " +
                           std::to_string(other->index()) + " already; a thread owns one shard at a time");
  }
  if (!started_.load(std::memory_order_acquire) && !stopped_.load(std::memory_order_relaxed)) start();
  shard.loop.own();
}

void EngineCore::release_shard(std::size_t index) {
  Shard& shard = polled_shard(index, "release_shard");
  if (owned_shard() != &shard) {
    throw std::logic_error("tickwheel::Engine::release_shard: shard " + std::to_string(index) +
                           " is not owned by this thread");
  }
  shard.loop.disown();
}

void EngineCore::clock_moved() noexcept {
  for (auto& shard : shards_) shard->inbox.wake().signal();
}

}  // namespace tickwheel::detail
