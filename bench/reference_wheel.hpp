// bench/reference_wheel.hpp — the second baseline: the plain hierarchical timing wheel a user writes
// in an afternoon, so that the wheel is measured in the same run against the kind of wheel it must
// beat, not only against a heap.
//
// The design is ratas's (jsnell/ratas): 8 levels of 256 slots, one intrusive doubly linked list per
// slot, new timers at the head, a cancel that unlinks at once, an advance that walks one tick at a
// time and moves a level's slot down whole when its unit starts. Nothing else:
// no bitmaps, no sub-lists, no pacing of the cascade, no batching, no prefetch, and no generation:
// a handle is the timer's node itself, as a caller-owned event is in ratas, so a cancel is an
// unlink with no lookup and no check. The price is ratas's contract: a handle whose timer fired or
// was cancelled must not be used again (its node may hold another timer by then). The benchmarks
// never do; a program that can afford no such rule is what the generation of TimerId is for.
//
// What it shares with the wheel, so that the difference is the algorithm: the node (one 64-byte
// line: links, deadline, 24 bytes of callable) and the pool (tickwheel/detail/pool.hpp: segments
// that double, huge-page advice, a LIFO free list, reserve()). ratas's own event is 48 bytes.
//
// Costs: schedule O(levels) (the level is found by a loop), cancel O(1), advance O(ticks + fired +
// moved). Not thread safe; benchmark use only.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/pool.hpp"

namespace tickwheel_bench {

class ReferenceWheel {
 public:
  using Nanos = std::chrono::nanoseconds;
  using Node = tickwheel::detail::Node;
  using Handle = Node*;  // nullptr when the schedule failed (the pool could not grow)

  static constexpr unsigned kLevels = 8;
  static constexpr unsigned kLevelBits = 8;
  static constexpr unsigned kSlots = 1U << kLevelBits;

  explicit ReferenceWheel(Nanos tick) : tick_(static_cast<std::uint64_t>(tick.count())) {}
  ReferenceWheel(const ReferenceWheel&) = delete;
  ReferenceWheel& operator=(const ReferenceWheel&) = delete;

  // Destroys the callables of pending timers without running them.
  ~ReferenceWheel() {
    for (auto& level : slots_) {
      for (Node*& head : level) {
        while (Node* node = head) {
          head = node->next;
          tickwheel::detail::destroy_callable(node);
        }
      }
    }
  }

  // Makes room for n timers now (tickwheel::detail::NodePool::reserve). Before the first schedule.
  void reserve(std::size_t n) {
    if (pool_.reserve(n, false) != 0) throw std::bad_alloc();
  }

  // Schedules fn() for the first advance() whose tick reaches the deadline's, rounded up to a
  // tick; a deadline at or before the current tick runs at the next one. nullptr if the pool
  // cannot grow.
  template <class F>
  [[nodiscard]] Handle schedule_at(Nanos deadline, F&& fn) noexcept {
    tickwheel::detail::check_callable<F>();
    Node* node = pool_.acquire();
    if (node == nullptr) return nullptr;
    tickwheel::detail::store_callable(node, std::forward<F>(fn));
    const auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(deadline.count(), 0));
    node->due = std::max((ns + tick_ - 1) / tick_, now_ + 1);
    link(node);
    ++pending_;
    return node;
  }

  // True iff the timer was pending; then it never runs. A handle of a timer that fired or was
  // cancelled is false until its node is handed out again (see the contract above).
  bool cancel(Handle node) noexcept {
    if (node == nullptr || node->pprev == nullptr) return false;
    unlink(node);
    tickwheel::detail::destroy_callable(node);
    pool_.release(node);
    --pending_;
    return true;
  }

  // The Wheel's prefetch() hint: the handle is the node, the line a cancel waits for.
  void prefetch(Handle node) const noexcept {
    if (node != nullptr) tickwheel::detail::prefetch_node(node);
  }

  // Runs every timer due up to now's tick, one tick at a time: at each tick the slots of the
  // levels whose unit starts there move down, then level 0's slot runs. Returns how many ran.
  std::size_t advance(Nanos now) {
    const std::uint64_t target = static_cast<std::uint64_t>(std::max<std::int64_t>(now.count(), 0)) / tick_;
    std::size_t ran = 0;
    while (now_ < target) {
      ++now_;
      for (unsigned level = kLevels - 1; level >= 1; --level) {
        const unsigned shift = kLevelBits * level;
        if ((now_ & ((std::uint64_t{1} << shift) - 1)) != 0) continue;
        Node*& head = slots_[level][(now_ >> shift) & (kSlots - 1)];
        Node* node = head;
        head = nullptr;
        while (node != nullptr) {
          Node* next = node->next;
          link(node);
          node = next;
        }
      }
      Node*& head = slots_[0][now_ & (kSlots - 1)];
      while (Node* node = head) {
        head = node->next;
        if (head != nullptr) head->pprev = &head;
        node->pprev = nullptr;
        --pending_;
        ++ran;
        tickwheel::detail::run_callable(node);  // runs, then destroys the callable
        pool_.release(node);
      }
    }
    return ran;
  }

  std::size_t pending_count() const noexcept { return pending_; }

  // Memory held for timers: every node handed out or reserved, plus the slot arrays.
  std::size_t bytes() const noexcept { return pool_.bytes_touched() + sizeof(slots_); }

 private:
  // Into the lowest level whose 256 slots reach the due tick from now_, at the head of its slot.
  void link(Node* node) noexcept {
    unsigned level = 0;
    while (level + 1 < kLevels &&
           (node->due >> (kLevelBits * level)) - (now_ >> (kLevelBits * level)) >= kSlots) {
      ++level;
    }
    Node*& head = slots_[level][(node->due >> (kLevelBits * level)) & (kSlots - 1)];
    node->next = head;
    if (head != nullptr) head->pprev = &node->next;
    head = node;
    node->pprev = &head;
  }

  static void unlink(Node* node) noexcept {
    *node->pprev = node->next;
    if (node->next != nullptr) node->next->pprev = node->pprev;
    node->pprev = nullptr;
  }

  std::uint64_t tick_;
  std::uint64_t now_ = 0;  // the current tick
  std::size_t pending_ = 0;
  std::array<std::array<Node*, kSlots>, kLevels> slots_{};
  tickwheel::detail::NodePool pool_;
};

}  // namespace tickwheel_bench
