// engine/engine_core.hpp — what an Engine is made of: the topology, the shards, the registry of
// producer threads, and the lifecycle (lazy start, stop).
//
// Producer threads. A thread's first schedule or cancel on an engine registers it: under a mutex,
// once, it gets a ProducerState holding a moodycamel producer token per shard for each of the two
// queues, a small node cache per shard, and an overflow pool. Afterwards the thread finds its state
// in a 4-entry thread-local table keyed by the engine's unique id (never reused, so an entry left
// by a destroyed engine never matches), with no lock. A state belongs to the engine and lives until
// it is destroyed; a new thread that gets an exited thread's id takes over its state (its tokens
// and cached nodes) and is given a home shard of its own.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "clock.hpp"
#include "shard.hpp"
#include "tickwheel/detail/pool.hpp"
#include "tickwheel/engine.hpp"
#include "topology.hpp"

namespace tickwheel::detail {

struct ProducerState {
  static constexpr std::size_t kCache = 64;  // nodes per shard taken from its reserve at a time
  // Hand-offs and cancels a thread posts to a shard between two nudges of its worker (see
  // Shard::nudge): what bounds the backlog a sleeping worker can leave in its queues.
  static constexpr std::uint32_t kNudgeEvery = 4096;

  struct PerShard {
    std::unique_ptr<moodycamel::ProducerToken> transfer;
    std::unique_ptr<moodycamel::ProducerToken> cancel;
    std::unique_ptr<moodycamel::ProducerToken> returned;  // an executor thread's node returns
    std::array<Node*, kCache> cache{};
    std::size_t cached = 0;
    std::uint32_t posted = 0;  // hand-offs and cancels since this thread last nudged the worker
  };

  ProducerState(std::thread::id id, std::vector<std::unique_ptr<Shard>>& all, std::size_t home_shard);

  std::thread::id owner;
  std::uint64_t serial = 0;  // the owning thread's serial (see thread_serial() in engine.cpp)
  std::size_t home;          // the shard its schedule_after/schedule_at go to
  // Nodes of last resort, used when a shard's reserve is empty (a burst, or a worker held up by a
  // long callback): a producer never waits for a worker. Its nodes join the shards' free lists
  // once used, and its memory lives as long as the engine.
  NodePool overflow;
  std::vector<PerShard> shards;  // one per shard, in shard order
};

class EngineCore {
 public:
  enum class Notice : unsigned {
    binding_refused,
    callback_threw,
    more_shards_than_cores,
    reserve_refused,
    count
  };

  explicit EngineCore(EngineOptions opts);
  // Stops as stop() does. Inside one of this engine's callbacks, which ~Engine's contract forbids,
  // stop() throws, and the exception leaving the destructor terminates: the answer intended, since
  // the join that stop() would do there could never return.
  ~EngineCore();  // NOLINT(bugprone-exception-escape): only on that misuse, as said above
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;

  const Topology& topology() const noexcept { return topology_; }
  unsigned cpu_for(std::size_t shard) const noexcept;
  void note_once(Notice kind, const std::string& message);

  Status acquire(std::size_t index, Node*& node, Shard*& target) noexcept;
  Timer commit(Shard* shard, Node* node, Nanos when, bool relative) noexcept;
  void post_cancel(Shard& shard, Node* node, std::uint32_t cancelled_gen) noexcept;
  // The calling thread's token for the shard's returned-node queue (registering the thread on its
  // first use), or null if it could not be had (out of memory).
  moodycamel::ProducerToken* returned_token(std::size_t shard) noexcept;
  // A callback threw (any thread): EngineOptions::on_callback_error, or a one-time notice.
  void report_callback_error(std::exception_ptr error) noexcept;

  void start();
  std::vector<Timer> stop();
  std::size_t poll(std::size_t index, Nanos now, std::size_t limit);
  std::optional<Nanos> next_deadline(std::size_t index) const;
  // The engine's clock: EngineOptions::clock, or CLOCK_MONOTONIC.
  Nanos now() const noexcept { return opts_.clock != nullptr ? opts_.clock() : monotonic_now(); }
  EngineStats stats() const;
  std::size_t shard_count() const noexcept { return shards_.size(); }
  Nanos tick() const noexcept { return opts_.tick; }

 private:
  ProducerState* producer() noexcept;
  ProducerState* register_producer() noexcept;
  // A hand-off that found stopped_ set once it was in the queue: it stands if stop() drained it,
  // else it is taken back and fails with Status::stopped.
  Timer settle_late(ProducerState& state, Shard* shard, Node* node, std::uint32_t gen) noexcept;
  // Undoes a schedule that handed nothing over: destroys the callable, keeps the node, counts it.
  static Timer fail(ProducerState& state, Shard* shard, Node* node, Status why) noexcept;
  static bool is_own_worker(const Shard* shard) noexcept;
  // Whether the calling thread is in a pass of one of this engine's shards (a worker, or a thread
  // inside poll()), i.e. running one of its callbacks inline.
  bool in_own_pass() const noexcept;
  Shard& polled_shard(std::size_t index) const;  // checks poll()'s preconditions

  EngineOptions opts_;
  const std::uint64_t uid_;
  Topology topology_;

  // Declared before the shards: their overflow pools hold nodes the wheels still link at teardown.
  // (Their tokens must die before the shards' queues: the destructor drops them first.)
  mutable std::mutex registry_mutex_;  // a thread's first use of the engine
  std::vector<std::unique_ptr<ProducerState>> producers_;
  std::vector<std::unique_ptr<Shard>> shards_;
  bool has_executor_ = false;  // tasks may be out on executor threads; fixed at construction

  // start(), stop(), and after stop() cancels and late hand-offs: never the hot path.
  std::mutex lifecycle_mutex_;
  bool joined_ = false;  // stop() has joined and drained the shards; under lifecycle_mutex_
  // started_: acquire on the schedule path, release in start(), so a producer that sees it also
  // sees the workers' reserves. stopped_: see the Dekker pairing in commit() and stop().
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<std::size_t> next_home_{0};
  std::array<std::atomic<bool>, static_cast<std::size_t>(Notice::count)> noticed_{};
};

}  // namespace tickwheel::detail
