// engine/wheel/lifecycle.hpp — the hierarchical wheel's construction, teardown and clear(): the
// constructor's checks, the destructor's walk of the pool, and clear(). Out-of-line members of
// WheelCore<Policy>, included through engine/wheel/wheel_impl.hpp (whose invariants I1..I11 they
// keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

inline std::string nanos_text(Nanos n) { return std::to_string(n.count()) + "ns"; }

// How many nodes fit in this core's L2: WheelOptions::cancel_batch_from's default. Read once, from
// CPUID leaf 0x80000006 (ECX[31:16]: the L2's KiB, on AMD and Intel alike); 1 MiB where the leaf
// is missing or the CPU is not x86. Not sysconf(_SC_LEVEL2_CACHE_SIZE): with glibc 2.36 its first
// call adds 64 KiB to the process's resident set, which a wheel of 10,000 timers carries as six
// bytes a timer.
inline std::size_t nodes_in_l2() noexcept {
  static const std::size_t nodes = [] {
    std::size_t bytes = std::size_t{1} << 20;
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0;
    unsigned ebx = 0;
    unsigned ecx = 0;
    unsigned edx = 0;
    if (__get_cpuid(0x80000006, &eax, &ebx, &ecx, &edx) != 0 && (ecx >> 16) != 0) {
      bytes = std::size_t{ecx >> 16} << 10;
    }
#endif
    return bytes / sizeof(Node);
  }();
  return nodes;
}

template <class Policy>
WheelCore<Policy>::WheelCore(WheelOptions opts, Policy policy)
    : tick_(opts.tick),
      now_(opts.start),
      max_pending_(opts.max_pending),
      cancel_batch_from_(opts.cancel_batch_from != 0 ? opts.cancel_batch_from : detail::nodes_in_l2()),
      queue_unlinks_from_(cancel_batch_from_),
      policy_(policy),
      ticks_(static_cast<std::uint64_t>(std::max<Nanos::rep>(opts.tick.count(), 1))) {  // checked below
  if (opts.tick < kMinTick || opts.tick > kMaxTick) {
    throw std::invalid_argument("tickwheel::Wheel: tick must be between 1us and 1h (" +
                                detail::nanos_text(kMinTick) + ".." + detail::nanos_text(kMaxTick) +
                                "), got " + detail::nanos_text(opts.tick));
  }
  if (opts.start.count() < 0) {
    throw std::invalid_argument("tickwheel::Wheel: start must not be negative, got " +
                                detail::nanos_text(opts.start));
  }
  constexpr std::uint64_t kPoolLimit = detail::NodePool::kMaxNodes - 1;
  if (opts.max_pending > kPoolLimit) {
    throw std::invalid_argument("tickwheel::Wheel: max_pending must be at most 2^32 - 1 (" +
                                std::to_string(kPoolLimit) + "), got " + std::to_string(opts.max_pending));
  }
  if (opts.reserve > kPoolLimit) {
    throw std::invalid_argument("tickwheel::Wheel: reserve must be at most 2^32 - 1 (" +
                                std::to_string(kPoolLimit) + "), got " + std::to_string(opts.reserve));
  }
  if (opts.max_pending != 0 && opts.reserve > opts.max_pending) {
    throw std::invalid_argument("tickwheel::Wheel: reserve must not exceed max_pending (" +
                                std::to_string(opts.max_pending) + "), got " + std::to_string(opts.reserve));
  }
  if (opts.lock_memory && opts.reserve == 0) {
    throw std::invalid_argument(
        "tickwheel::Wheel: lock_memory needs a reserve (it locks the reserve), got 0");
  }
  if (max_pending_ == 0) max_pending_ = kPoolLimit;
  cur_ = ticks_.floor(static_cast<std::uint64_t>(opts.start.count()));
  target_ = cur_;
  paced_ = cur_;
  // Zeroed memory holds null heads and zero counts: implicit-lifetime arrays of pointers and integers.
  arrays_.reset(static_cast<SlotArrays*>(detail::map_zeroed(sizeof(SlotArrays))));
  slots_ = &arrays_->heads;
  count_ = &arrays_->count;
  if (opts.reserve >= kSpreadFrom) way_mask_ = kWays - 1;
  if (opts.reserve != 0) {
    commit_slots();
    if (const int err = pool_.reserve(opts.reserve, opts.lock_memory); err != 0) {
      throw std::system_error(err, std::generic_category(),
                              "tickwheel::Wheel: " + pool_.describe_refusal(opts.reserve, err));
    }
  }
}

template <class Policy>
WheelCore<Policy>::~WheelCore() {
  flush_unlinks();
  // A standalone wheel's nodes all come from its pool. With no callable that has a destructor,
  // there is nothing to find.
  if (held_destructors_) destroy_linked_in(pool_);
}

template <class Policy>
void WheelCore<Policy>::destroy_linked_in(const NodePool& pool) const noexcept {
  assert(unlink_queued_ == 0 && moves_queued_ == 0);
  for (std::uint32_t i = 0; i < pool.touched(); ++i) {
    Node* const node = pool.at(i);
    if (node->pprev != nullptr) detail::destroy_callable(node);
  }
}

template <class Policy>
std::size_t WheelCore<Policy>::clear() noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  assert(!Policy::kShared && "an Engine's wheel is drained by its shard only");
  if (in_advance_) return 0;
  flush_unlinks();  // queued nodes are cancelled already: unlinked and recycled first
  std::size_t cleared = 0;
  for (unsigned w = 0; w < kBitmapWords; ++w) {
    for (std::uint64_t bits = occupied_[w]; bits != 0; bits &= bits - 1) {
      cleared += clear_slot(w * 64 + static_cast<unsigned>(std::countr_zero(bits)));
    }
    occupied_[w] = 0;
  }
  nonempty_words_ = 0;
  pace_at_ = ~std::uint64_t{0};
  // Outside advance() no periodic callback is running, so every pending timer was linked.
  assert(cleared == pending_);
  pending_ = 0;
  stats_.cancelled += cleared;
  cur_ = target_;  // nothing is left to wait at after a pass cut short by its limit
  catch_up();
  settle_no_event_before();
  return cleared;
}

// Ends the lifetime of every node of a slot, as a cancel does, and empties it (its occupancy bit
// is the caller's). The sub-lists are walked together, a node of each in turn with its successor
// prefetched, so that up to kWays misses are in flight instead of one chain's. Returns how many.
template <class Policy>
std::size_t WheelCore<Policy>::clear_slot(unsigned slot) noexcept {
  std::array<Node*, kWays> cursor = (*slots_)[slot].head;
  (*slots_)[slot].head.fill(nullptr);
  ways_[slot] = 0;
  (*count_)[slot] = 0;
  std::size_t cleared = 0;
  for (bool any = true; any;) {
    any = false;
    for (Node*& node : cursor) {
      if (node == nullptr) continue;
      Node* next = node->next;
      if (next != nullptr) detail::prefetch_node(next);
      // Every linked node is pending here (I10: the queue is flushed, no callback is running).
      const std::uint32_t gen = node->gen.load(std::memory_order_relaxed);
      assert((gen & 3) == detail::kPending);
      node->gen.store(gen - detail::kPending + detail::kCancelled, std::memory_order_relaxed);
      detail::destroy_callable(node);
      pool_.release(node);
      ++cleared;
      node = next;
      any = true;
    }
  }
  return cleared;
}

}  // namespace tickwheel::detail
