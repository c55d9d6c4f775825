// engine/core/shard_worker.hpp — a shard's worker thread (EngineOptions::threads ==
// Threads::workers): created bound to its PU, it prepares the shard, then passes and waits (spin,
// sleep on a futex, or spin then sleep) until stop() is asked.
//
// Threads: start(), join() and ready() are the engine lifecycle's (the thread that starts or stops
// the engine); read() any thread's (stats()); the rest runs on the worker. In caller-driven mode
// there is no thread: the binding says so and mark_ready() is called by the shard's start.
#pragma once

#include <array>
#include <atomic>
#include <optional>
#include <thread>

#include "tickwheel/engine_options.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {

class Shard;

class ShardWorker {
 public:
  // The worker of `shard`, to be bound to PU `cpu` (if opts.pin_workers).
  ShardWorker(Shard& shard, unsigned cpu, const EngineOptions& opts) noexcept;

  // Creates the thread unless it runs already; the thread binds, prepares the shard, then runs.
  // What can fail is done here, on the calling thread, before the thread exists: throws
  // std::bad_alloc or std::system_error, with nothing changed, if the reserve's queue token or the
  // thread cannot be had. The thread itself allocates nothing until its first pass.
  void start();
  void join();
  // Whether the shard is prepared (its reserve filled): acquire, pairs with mark_ready().
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  void mark_ready() noexcept { ready_.store(true, std::memory_order_release); }
  // A caller-driven shard's binding text: there is no worker to bind.
  void describe_caller_driven() noexcept;
  // The binding, for stats(): the PU bound, and the text once ready().
  void read(ShardStats& s) const noexcept;

 private:
  void run(void* headroom);
  void bind() noexcept;  // to cpu_ if pin_, the result written as text in binding_
  void wait();
  void sleep_until(std::optional<Nanos> deadline);

  Shard& shard_;
  const WaitStrategy wait_strategy_;
  const Nanos hybrid_spin_;
  const bool pin_;
  const unsigned cpu_;
  std::thread thread_;
  // Written by the worker before ready_ (release), read by any thread after it (acquire).
  std::atomic<int> bound_cpu_{-1};
  std::atomic<bool> ready_{false};
  std::atomic<bool> warmed_{false};  // the thread has made its first allocation (see start())
  // How the worker is bound, as text formatted in place: a worker must not allocate before it runs.
  std::array<char, 160> binding_{};
};

}  // namespace tickwheel::detail
