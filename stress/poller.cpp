// stress/poller.cpp — the caller-driven polling loops.
#include "poller.hpp"

#include <sys/prctl.h>

#include <chrono>
#include <stdexcept>

#include "clock.hpp"
#include "placement.hpp"
#include "platform.hpp"

namespace tickwheel::stress {

Pollers::Pollers(Engine& engine, const Options& o, const std::vector<unsigned>& cpus)
    : engine_(engine),
      spin_(o.wait == WaitStrategy::spin),
      tick_ns_(o.tick_ns),
      cpus_(cpus),
      tids_(std::make_unique<std::atomic<pid_t>[]>(engine.shard_count())),
      errors_(engine.shard_count()) {
  for (std::size_t i = 0; i < engine.shard_count(); ++i) threads_.emplace_back([this, i] { run(i); });
  std::string errors;
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    while (tids_[i].load(std::memory_order_acquire) == 0)
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (!errors_[i].empty()) errors += (errors.empty() ? "" : "; ") + errors_[i];
  }
  if (!errors.empty()) {
    stop();
    throw std::runtime_error(errors);
  }
  while (!started_.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
}

Pollers::~Pollers() { stop(); }

void Pollers::stop() {
  stop_.store(true, std::memory_order_relaxed);
  started_.store(true, std::memory_order_release);  // a thread still waiting for it ends too
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

std::vector<pid_t> Pollers::tids() const {
  std::vector<pid_t> out;
  for (std::size_t i = 0; i < threads_.size(); ++i) out.push_back(tids_[i].load(std::memory_order_acquire));
  return out;
}

void Pollers::run(std::size_t shard) noexcept {
  if (!cpus_.empty()) {
    const unsigned cpu = cpus_[shard % cpus_.size()];
    if (std::string why = bind_thread(pthread_self(), {cpu}); !why.empty()) {
      errors_[shard] = "polling thread " + std::to_string(shard) + " cannot be bound to CPU " +
                       std::to_string(cpu) + ": " + why;
    }
  }
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  // as the engine's workers
  const bool failed = !errors_[shard].empty();
  tids_[shard].store(current_tid(), std::memory_order_release);  // the constructor reads errors_ after it
  if (failed) return;
  if (shard == 0) {
    engine_.start();
    started_.store(true, std::memory_order_release);
  }
  while (!started_.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  while (!stop_.load(std::memory_order_relaxed)) {
    engine_.poll(shard);
    if (spin_) {
      __builtin_ia32_pause();
      continue;
    }
    const std::int64_t now = Clock::now();
    std::int64_t until = now + tick_ns_;
    if (const std::optional<Nanos> next = engine_.next_deadline(shard); next && next->count() < until) {
      until = next->count();
    }
    if (until > now) Clock::sleep_until(until);
  }
}

}  // namespace tickwheel::stress
