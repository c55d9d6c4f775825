// engine/core/shard_counters.hpp — a shard's counters: written by the shard's own thread (its
// worker, or the thread in its poll or owning it; one at a time), read by any thread (stats(), the
// engine's pending count). Each has one writer, so it is bumped by a load and a store, never a
// read-modify-write that only readers would need.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/engine_options.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {

// Adds n to a counter only the calling thread writes, with `order` on the store.
inline void bump(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1,
                 std::memory_order order = std::memory_order_relaxed) noexcept {
  counter.store(counter.load(std::memory_order_relaxed) + n, order);
}

struct ShardCounters {
  // Copies the wheel's own counts, for other threads to read: relaxed snapshots, ordering nothing.
  void publish(const WheelStats& w) noexcept {
    scheduled.store(w.scheduled, std::memory_order_relaxed);
    fired.store(w.fired, std::memory_order_relaxed);
    cancelled.store(w.cancelled, std::memory_order_relaxed);
    rearmed.store(w.rearmed, std::memory_order_relaxed);
    skipped.store(w.skipped, std::memory_order_relaxed);
    rescheduled.store(w.rescheduled, std::memory_order_relaxed);
  }
  // Fills what these counters know of `s`; `claimed_elsewhere` (tasks other threads handed to the
  // executor) count as scheduled, fired and, until they return, executing.
  void read(ShardStats& s, std::uint64_t claimed_elsewhere) const noexcept {
    s.scheduled = scheduled.load(std::memory_order_relaxed) + claimed_elsewhere;
    s.fired = fired.load(std::memory_order_relaxed) + claimed_elsewhere;
    s.fired_at_schedule = claimed_elsewhere;
    s.cancelled = cancelled.load(std::memory_order_relaxed);
    s.rearmed = rearmed.load(std::memory_order_relaxed);
    s.skipped = skipped.load(std::memory_order_relaxed);
    s.rescheduled = rescheduled.load(std::memory_order_relaxed);
    s.clears = clears.load(std::memory_order_relaxed);
    s.cleared = cleared.load(std::memory_order_relaxed);
    s.transfer_cap_hits = cap_hits.load(std::memory_order_relaxed);
    s.passes = passes.load(std::memory_order_relaxed);
    s.wakeups = wakeups.load(std::memory_order_relaxed);
    s.callback_errors = callback_errors.load(std::memory_order_relaxed);
    const std::uint64_t done = completed.load(std::memory_order_relaxed);
    const std::uint64_t handed = dispatched.load(std::memory_order_relaxed) + claimed_elsewhere;
    s.executing = handed - std::min(handed, done);  // two snapshots: never negative
    s.max_tick_lag_ns = max_lag_ns.load(std::memory_order_relaxed);
  }
  // The ends and the starts the shard's thread counted (EngineCore::pending()): one-shot timers
  // claimed, timers a clear cancelled and the owner's own cancels; timers scheduled straight into
  // the wheel. Acquire: each pairs with the release store that counted it, so a reader that sees
  // an end also sees the schedule that preceded it.
  std::uint64_t ended() const noexcept {
    return claimed.load(std::memory_order_acquire) + cleared.load(std::memory_order_acquire) +
           own_cancels.load(std::memory_order_acquire);
  }
  std::uint64_t started() const noexcept { return direct.load(std::memory_order_acquire); }
  // A pass that began `lag_ns` after the time its wait aimed at.
  void note_lag(std::int64_t lag_ns) noexcept {
    if (lag_ns > max_lag_ns.load(std::memory_order_relaxed)) {
      max_lag_ns.store(lag_ns, std::memory_order_relaxed);
    }
  }

  // Relaxed snapshots of the wheel's counts (publish()).
  alignas(kCacheLine) std::atomic<std::uint64_t> scheduled{0};
  std::atomic<std::uint64_t> fired{0};
  std::atomic<std::uint64_t> cancelled{0};
  std::atomic<std::uint64_t> rearmed{0};
  std::atomic<std::uint64_t> skipped{0};
  std::atomic<std::uint64_t> rescheduled{0};
  // Counted as each happens, not at the end of a pass, each with a release store that readers pair
  // with acquire (EngineCore::pending()), so that a reader that sees an end also sees the schedule
  // that preceded it: one-shot timers claimed to run (the wheel stores it before the callback
  // starts), timers a callback or owner scheduled straight into the wheel (after the link), timers
  // a clear cancelled, and cancels the owner won and retired itself.
  std::atomic<std::uint64_t> claimed{0};
  std::atomic<std::uint64_t> direct{0};
  std::atomic<std::uint64_t> cleared{0};
  std::atomic<std::uint64_t> own_cancels{0};
  // Relaxed counts for stats(), ordering nothing.
  std::atomic<std::uint64_t> clears{0};      // clears served
  std::atomic<std::uint64_t> dispatched{0};  // tasks handed to the executor
  std::atomic<std::uint64_t> passes{0};
  std::atomic<std::uint64_t> wakeups{0};
  std::atomic<std::uint64_t> cap_hits{0};
  std::atomic<std::uint64_t> callback_errors{0};  // any thread that runs a callback: fetch_add
  std::atomic<std::int64_t> max_lag_ns{0};
  // Written by executor threads: tasks run and returned. Release (each increment comes after the
  // task's node is on the returned queue), so the stopping thread, reading it with acquire, then
  // finds every returned node in the queue. A line apart: other threads write it.
  alignas(kCacheLine) std::atomic<std::uint64_t> completed{0};
};

}  // namespace tickwheel::detail
