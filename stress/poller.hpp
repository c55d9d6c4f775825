// stress/poller.hpp — caller-driven mode (--threads manual): the harness's own loop in place of the
// engine's workers, one thread per shard calling Engine::poll(), as a trading loop that owns its
// thread would.
//
// Each thread binds itself to its CPU, sets its timer slack to 1 ns (as a worker does), and loops:
// poll its shard, then either spin (--wait spin) or sleep until the shard's next_deadline(), but at
// most one tick, since a hand-off that arrives meanwhile is not signalled to a polling loop (sleep
// and hybrid). Thread 0 calls Engine::start() once bound, so that the shards' reserves are filled
// from a polling thread (the engine's advice for caller-driven mode).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "options.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::stress {

class Pollers {
 public:
  // Starts one thread per shard, shard i on cpus[i % size] (none: unbound), and returns once the
  // engine is started. Throws std::runtime_error if a thread cannot be bound.
  Pollers(Engine& engine, const Options& o, const std::vector<unsigned>& cpus);
  ~Pollers();
  Pollers(const Pollers&) = delete;
  Pollers& operator=(const Pollers&) = delete;

  // Stops and joins the threads (before Engine::stop(), which waits for a poll under way). Idempotent.
  void stop();
  // The threads' kernel ids, shard order.
  std::vector<pid_t> tids() const;

 private:
  void run(std::size_t shard) noexcept;

  Engine& engine_;
  const bool spin_;
  const std::int64_t tick_ns_;
  const std::vector<unsigned> cpus_;
  std::unique_ptr<std::atomic<pid_t>[]> tids_;  // release by each thread once set up
  std::vector<std::string> errors_;             // one per thread, written before its tid
  std::atomic<bool> started_{false};            // release by thread 0 after Engine::start()
  std::atomic<bool> stop_{false};               // relaxed: a request, read once per loop
  std::vector<std::thread> threads_;
};

}  // namespace tickwheel::stress
