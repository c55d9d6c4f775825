// engine/core/admission.hpp — a shard's admission for EngineOptions::max_pending_per_shard: the
// places its timers hold, counted from any thread without a lock.
//
// Threads: any. admit() and unadmit() are called by whichever thread schedules onto the shard,
// free_place() by whichever thread wins a cancel, the counts read by stats().
//
// A timer holds its place from its admission until it is claimed to run (a one-shot: the shard's
// claims counter, read here), its cancel wins (free_place()), or its schedule fails (unadmit()).
// The ends are read before the admission's increment, so the limit is never exceeded; it is reached
// early only by the schedules other threads have admitted and not yet finished or failed.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "tickwheel/detail/node.hpp"

namespace tickwheel::detail {

class Admission {
 public:
  // `claimed` is the shard's count of one-shot timers claimed to run (release increments).
  Admission(std::size_t max_pending, const std::atomic<std::uint64_t>& claimed) noexcept
      : max_pending_(max_pending), claimed_(claimed) {}

  // Whether a limit is set: with none, admission does nothing and costs one compare.
  bool limited() const noexcept { return max_pending_ != 0; }
  // False (and counted as rejected) if the shard is full.
  bool admit() noexcept { return max_pending_ == 0 || admit_limited(); }
  // A schedule admitted and then failed gives its place back.
  void unadmit() noexcept {
    if (max_pending_ != 0) admitted_.fetch_sub(1, std::memory_order_relaxed);
  }
  // A cancel won on one of the shard's timers (n of them, by a clear): their places are free at once.
  void free_place(std::uint64_t n = 1) noexcept {
    // Release: pairs with admit_limited()'s acquire load, as the claims counter does.
    if (max_pending_ != 0) freed_.fetch_add(n, std::memory_order_release);
  }
  // Relaxed: a count for stats(), ordering nothing.
  void count_rejected() noexcept { rejected_.fetch_add(1, std::memory_order_relaxed); }
  std::uint64_t rejected() const noexcept { return rejected_.load(std::memory_order_relaxed); }
  // A cancel won by a thread that has no producer state to count it in (out of memory on its first
  // use). Release/acquire: as a producer's own cancel count (see EngineCore::pending()).
  void count_orphan_cancel() noexcept { orphan_cancels_.fetch_add(1, std::memory_order_release); }
  std::uint64_t orphan_cancels() const noexcept { return orphan_cancels_.load(std::memory_order_acquire); }

 private:
  bool admit_limited() noexcept {
    // Holding a place = admitted - (claimed + cancels won). The ends are read first, with acquire:
    // each pairs with the release that counted it, after the timer's own admission, so this
    // fetch_add then comes after that admission too and the difference never counts an end without
    // its start. Ends counted meanwhile are missed: an overestimate, so the limit is never exceeded.
    const std::uint64_t ended =
        claimed_.load(std::memory_order_acquire) + freed_.load(std::memory_order_acquire);
    const std::uint64_t before = admitted_.fetch_add(1, std::memory_order_relaxed);
    if (before - std::min(before, ended) < max_pending_) return true;
    admitted_.fetch_sub(1, std::memory_order_relaxed);
    count_rejected();
    return false;
  }

  const std::size_t max_pending_;
  const std::atomic<std::uint64_t>& claimed_;
  // Written by producers and cancellers; a line of its own so that it does not bounce the
  // counters the shard's thread writes.
  alignas(kCacheLine) std::atomic<std::uint64_t> admitted_{0};
  std::atomic<std::uint64_t> freed_{0};
  std::atomic<std::uint64_t> rejected_{0};
  std::atomic<std::uint64_t> orphan_cancels_{0};
};

}  // namespace tickwheel::detail
