// engine/core/producer.hpp — the threads that schedule and cancel on an engine from outside its passes:
// each thread's state (its queue tokens, node caches, overflow pool and counters) and the registry
// that finds it without a lock.
//
// A thread's first schedule or cancel on an engine (or, on an executor thread, its first task)
// registers it: under a mutex, once, it gets a ProducerState holding, per shard, a moodycamel
// producer token for each of the shard's three queues (hand-offs, cancels, returned nodes), a cache
// of move records (move_queue.hpp), a node cache and an overflow pool. Afterwards the thread finds
// its state in a 4-entry thread-local table keyed by the engine's unique id (never reused, so an
// entry left by a destroyed engine never matches), with no lock. A state belongs to the engine and lives
// until it is destroyed; a new thread that gets an exited thread's id takes over its state (its tokens and
// cached nodes).
//
// Home shard. schedule_after() and schedule_at() without a shard go to the thread's home shard,
// dealt round robin on the thread's first such schedule (not on registration: a thread that only
// cancels, or an executor thread giving nodes back, takes no turn), and kept: one thread's timers
// stay on one shard, in order, behind one producer token.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/directory.hpp"
#include "core/move_queue.hpp"
#include "core/shard.hpp"
#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/pool.hpp"

namespace tickwheel::detail {

// Whether the CPU has PREFETCHW (x86-64: CPUID 0x80000001, ECX bit 8); false elsewhere.
bool cpu_has_prefetchw() noexcept;

struct ProducerState {
  static constexpr std::size_t kCache = 64;         // nodes per shard taken from its reserve at a time
  static constexpr std::size_t kPrefetchAhead = 4;  // schedules between a node's prefetch and its use
  // Hand-offs and cancels a thread posts to a shard between two nudges of its worker (see
  // Wakeup::nudge): what bounds the backlog a sleeping worker can leave in its queues.
  static constexpr std::uint32_t kNudgeEvery = 4096;
  static constexpr std::size_t kNoHome = ~std::size_t{0};

  struct PerShard {
    std::unique_ptr<moodycamel::ProducerToken> transfer;
    std::unique_ptr<moodycamel::ProducerToken> cancel;
    std::unique_ptr<moodycamel::ProducerToken> returned;  // an executor thread's node returns
    std::array<Node*, kCache> cache{};
    std::size_t cached = 0;
    std::uint32_t posted = 0;  // hand-offs, cancels and moves since this thread last nudged the worker
    // This thread's schedules that stand on the shard (counted before the hand-off, taken back if
    // it fails) and cancels it won there: EngineCore::stats() sums them into `pending`. Only the
    // owning thread writes them; the cancel count with release, read with acquire (see there).
    std::atomic<std::uint64_t> scheduled{0};
    std::atomic<std::uint64_t> cancels{0};
    // Of those schedules, the due ones this thread claimed and handed to the executor itself
    // (EngineCore::claim_due): an end for `pending`, a start for the tasks stop() waits for. Only
    // the owning thread writes it, with release, as `cancels`.
    std::atomic<std::uint64_t> dispatched{0};
    // (Below the fields every schedule and cancel touches, which stay together.)
    MoveRecordCache moves;  // Timer::reschedule()'s records (move_queue.hpp)
    // Nodes of last resort for this shard, used when its reserve is empty (a burst, or a worker
    // held up by a long callback): a producer never waits for a worker. Its nodes join the shard's
    // free list once used, and its memory lives as long as the engine. One pool per shard, so that
    // a node serves one shard for its whole life (the directory maps its chunk to that shard).
    NodePool overflow;
    NodeDirectory::PoolMap overflow_map;  // the overflow pool's locators (see directory.hpp)
  };

  // Throws std::bad_alloc if a queue token cannot be had (moodycamel leaves it invalid instead).
  ProducerState(std::thread::id id, const std::vector<std::unique_ptr<Shard>>& all);

  // Posted one more hand-off or cancel to `shard`: nudges its worker once per kNudgeEvery.
  static void posted_to(Shard& shard, PerShard& mine) noexcept {
    if (++mine.posted == kNudgeEvery) [[unlikely]] {
      mine.posted = 0;
      shard.inbox.wake().nudge();
    }
  }

  std::thread::id owner;
  const bool prefetchw = cpu_has_prefetchw();  // see prefetch_to_write()
  std::uint64_t serial = 0;      // the owning thread's serial (see thread_serial() in producer.cpp)
  std::size_t home = kNoHome;    // dealt by ProducerRegistry::home() on the first schedule that needs it
  std::vector<PerShard> shards;  // one per shard, in shard order
};

struct ProducerTlsEntry {
  std::uint64_t engine_uid = 0;
  ProducerState* state = nullptr;
};
// The calling thread's states on the last engines it used.
inline thread_local std::array<ProducerTlsEntry, 4> t_producer_states;

class ProducerRegistry {
 public:
  // `shards` is the engine's, filled before any thread registers and fixed from then on.
  ProducerRegistry(std::uint64_t engine_uid, const std::vector<std::unique_ptr<Shard>>& shards) noexcept
      : uid_(engine_uid), shards_(shards) {}

  // The calling thread's state, registered on its first use; null if that ran out of memory.
  // Lock-free after the first use (unless 4 other engines evicted it from the thread's table).
  ProducerState* mine() noexcept {
    for (const ProducerTlsEntry& e : t_producer_states) {
      if (e.engine_uid == uid_) return e.state;
    }
    return enroll();
  }
  // The state's home shard, dealt round robin the first time. Only its owning thread asks.
  std::size_t home(ProducerState& state) noexcept {
    if (state.home == ProducerState::kNoHome) [[unlikely]] {
      // Relaxed: a ticket, ordering nothing.
      state.home = next_home_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
    }
    return state.home;
  }
  // fn(const ProducerState&) for every registered state, under the registry's mutex (stats()).
  template <class Fn>
  void for_each(Fn&& fn) const {
    std::lock_guard lock(mutex_);
    for (const auto& state : states_) fn(*state);
  }
  // Destroys every producer token: they point into the shards' queues, which go first.
  void drop_tokens() noexcept;

 private:
  ProducerState* enroll() noexcept;

  const std::uint64_t uid_;
  const std::vector<std::unique_ptr<Shard>>& shards_;
  mutable std::mutex mutex_;  // registration, and the readers of every state
  std::vector<std::unique_ptr<ProducerState>> states_;
  std::atomic<std::size_t> next_home_{0};
};

// A node from the thread's overflow pool for `shard`, its locator given if it is fresh; null if the
// pool cannot grow. Off the steady-state path: only when the shard's reserve is empty.
inline Node* take_overflow_node(ProducerState::PerShard& mine, Shard& shard) noexcept {
  const std::uint32_t before = mine.overflow.touched();
  Node* node = mine.overflow.acquire();
  if (node != nullptr && mine.overflow.touched() != before) {
    mine.overflow_map.shard = static_cast<std::uint32_t>(shard.index());
    shard.host().directory().stamp(mine.overflow, mine.overflow_map, before, before + 1);
  }
  return node;
}

// Starts moving a node's line to this core for writing. The node was last written by the worker,
// on another core: a read prefetch (what __builtin_prefetch(p, 1) emits without -mprfchw) brings
// the line shared, and the schedule's first store then waits to take it over, behind the hand-off's
// fence. PREFETCHW asks for it exclusive; `exclusive` says the CPU has it (cpu_has_prefetchw()).
inline void prefetch_to_write(const Node* node, bool exclusive) noexcept {
#if defined(__x86_64__)
  if (exclusive) {
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(static_cast<const void*>(node))));
    return;
  }
#endif
  (void)exclusive;
  __builtin_prefetch(node, 1);
}

// A node for a schedule on `shard` from a thread that is not its worker: from the thread's cache
// for the shard, refilled in bulk from the shard's reserve, else from the thread's overflow pool.
// Null if the overflow pool cannot grow. The nodes of the next kPrefetchAhead schedules are
// prefetched, so that each line has come from the worker's core by the time its schedule writes it.
inline Node* take_node(ProducerState& state, Shard& shard) noexcept {
  constexpr std::size_t kAhead = ProducerState::kPrefetchAhead;
  ProducerState::PerShard& mine = state.shards[shard.index()];
  if (mine.cached == 0) {
    mine.cached = shard.inbox.take_nodes(mine.cache.data(), mine.cache.size());
    for (std::size_t i = 1; i < kAhead && i < mine.cached; ++i) {  // the first is taken now
      prefetch_to_write(mine.cache[mine.cached - 1 - i], state.prefetchw);
    }
  }
  Node* node = mine.cached != 0 ? mine.cache[--mine.cached] : take_overflow_node(mine, shard);
  if (mine.cached >= kAhead) prefetch_to_write(mine.cache[mine.cached - kAhead], state.prefetchw);
  return node;
}

}  // namespace tickwheel::detail
