// tickwheel/detail/wheel_hot_path.hpp — the hierarchical wheel's inline hot path: a node from the
// pool, the tick and slot of a deadline, the link, the cancel, and the advance() that only moves
// time on. Inline so that a schedule compiles down to straight-line code. Included by
// wheel_core.hpp, after WheelCore's definition; not to be included on its own.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

template <class Policy>
inline Node* WheelCore<Policy>::acquire_node() noexcept {
  if (pending_ >= max_pending_) [[unlikely]] {
    ++stats_.rejected;
    return nullptr;
  }
  Node* node = pool_.acquire();
  if (node == nullptr) [[unlikely]] {
    ++stats_.rejected;
  }
  return node;
}

template <class Policy>
inline Status WheelCore<Policy>::acquire_failure() const noexcept {
  return pending_ >= max_pending_ ? Status::max_pending_reached : Status::out_of_memory;
}

// Deadline -> tick, rounded up so that a timer never fires early, clamped to the horizon.
template <class Policy>
inline std::uint64_t WheelCore<Policy>::due_tick(Nanos deadline) const noexcept {
  return ticks_.due(deadline);
}

// The lowest level whose kSlots slots reach `due`: the least L with (due >> bL) - (cur_ >> bL) <
// kSlots (b = kLevelBits). Precondition: due > cur_.
template <class Policy>
inline unsigned WheelCore<Policy>::wheel_level(std::uint64_t due) const noexcept {
  const std::uint64_t delta = due - cur_;
  if (delta < kSlots) return 0;
  // delta < kSlots << (kLevelBits * L)  <=>  bit_width(delta) <= kSlotBits + kLevelBits * L; the
  // floor-shift difference can still be kSlots at that level, and then the next level holds it.
  unsigned level = (static_cast<unsigned>(std::bit_width(delta)) - kSlotBits + kLevelBits - 1) / kLevelBits;
  if ((due >> (kLevelBits * level)) - (cur_ >> (kLevelBits * level)) >= kSlots) ++level;
  return level;
}

// The slot of the lowest level whose kSlots slots reach `due`. Precondition: due > cur_. Levels 0
// and 1, where a 1 ms wheel keeps everything up to two minutes out, are tested first with constant
// shifts; wheel_level()'s bit scan only for the rest.
template <class Policy>
inline unsigned WheelCore<Policy>::wheel_slot(std::uint64_t due) const noexcept {
  if (due - cur_ < kSlots) return slot_of(0, due);
  return upper_slot(due);
}

// wheel_slot() for a due that level 0 does not reach: due - cur_ >= kSlots.
template <class Policy>
inline unsigned WheelCore<Policy>::upper_slot(std::uint64_t due) const noexcept {
  assert(due - cur_ >= kSlots);
  if ((due >> kLevelBits) - (cur_ >> kLevelBits) < kSlots) return slot_of(1, due >> kLevelBits);
  const unsigned level = wheel_level(due);
  return slot_of(level, due >> (kLevelBits * level));
}

// Puts a node at the head of its sub-list of `slot`, with the slot's bits and count (I4: occupancy).
template <class Policy>
inline void WheelCore<Policy>::push(Node* node, unsigned slot) noexcept {
  // The sub-list by the node's pool index: spread as evenly as a counter would spread it (a fresh
  // pool hands indices out in order), with no counter to load and store on every link.
  const unsigned way = node->index & way_mask_;
  Node** head = &(*slots_)[slot].head[way];
  Node* first = *head;
  node->next = first;
  node->pprev = head;
  *head = node;
  if (first != nullptr) {
    first->pprev = &node->next;  // the sub-list, so the slot, was in use: its bits are set (I4: occupancy)
  } else {
    ways_[slot] |= static_cast<std::uint8_t>(1U << way);
    set_occupied(slot);
  }
  ++(*count_)[slot];
}

template <class Policy>
inline void WheelCore<Policy>::link(Node* node, unsigned slot) noexcept {
  // Read before the first store: the stores below (64-bit and byte fields) could alias them as far
  // as the compiler can tell, and would make it load them again.
  const std::uint64_t due = node->due;
  const std::uint64_t cur = cur_;
  push(node, slot);
  if (slot <
      kWheelSlots) {  // the slot's event: its tick at level 0, its unit's start above (I7: the next event)
    const unsigned shift = kLevelBits * (slot >> kSlotBits);
    const std::uint64_t unit = due >> shift;
    const std::uint64_t event = unit << shift;
    // Branches, not a min and a store: a link rarely makes the earliest event. no_event_before_ <=
    // next_event_ (I9: no event before), so a link that leaves next_event_ leaves no_event_before_ too.
    assert(no_event_before_ <= next_event_);
    if (event < next_event_) [[unlikely]] {
      next_event_ = event;
      if (event < no_event_before_) set_no_event_before(event);  // I9
    }
    // A look-ahead slot is paced from the next tick on (I8: the pace mark). At level 0 this also holds for
    // the tick after cur_: a needless but harmless pace() call, cheaper than a test of the level.
    if (unit == (cur >> shift) + 1) [[unlikely]] {
      pace_at_ = std::min(pace_at_, cur + 1);
      if (cur + 1 < no_event_before_) set_no_event_before(cur + 1);
    }
  } else {
    set_no_event_before(0);  // something is due (I9: no event before)
  }
}

template <class Policy>
inline TimerId WheelCore<Policy>::commit(Node* node, Nanos deadline) noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  const std::uint64_t due = due_tick(deadline);
  // The id is built from registers: re-reading gen and index right after storing gen makes the
  // compiler merge them into one 8-byte load that the 4-byte store cannot forward to: a
  // store-forwarding stall on every schedule.
  const std::uint32_t gen = next_lifetime(node->gen.load(std::memory_order_relaxed));
  const std::uint32_t index = node->index;
  // Relaxed: in a standalone wheel only this thread reads it; an Engine publishes the node to
  // other threads only through its own synchronisation (the hand-off queue, or the caller's).
  node->gen.store(gen, std::memory_order_relaxed);
  node->due = due;
  link(node, slot_for(due));
  add_pending();  // and not stats_.scheduled, which stats() derives: see there
  return {index, gen};
}

template <class Policy>
inline bool WheelCore<Policy>::occupied(unsigned slot) const noexcept {
  return ((occupied_[slot / 64] >> (slot % 64)) & 1) != 0;
}

// Byte offset of a list link from the start of the slot array; a link inside a node (its `next`)
// gives an offset past the array, as unsigned arithmetic wraps.
template <class Policy>
inline std::uintptr_t WheelCore<Policy>::head_offset(Node* const* link) const noexcept {
  return reinterpret_cast<std::uintptr_t>(link) - reinterpret_cast<std::uintptr_t>(slots_->data());
}

template <class Policy>
inline bool WheelCore<Policy>::is_slot_head(Node* const* link) const noexcept {
  return head_offset(link) < kSlotBytes;
}

// Sub-list `way` of `slot` has just been emptied: clears its bit, and the slot's (and its count)
// if it was the last (I4, I5).
template <class Policy>
inline void WheelCore<Policy>::note_way_empty(unsigned slot, unsigned way) noexcept {
  assert((*slots_)[slot].head[way] == nullptr);
  ways_[slot] &= static_cast<std::uint8_t>(~(1U << way));
  if (ways_[slot] != 0) return;
  clear_occupied(slot);
  (*count_)[slot] = 0;
}

// Unlinks a node from whatever slot holds it. The slot is looked up (from `pprev`) only when the
// node was the last of its sub-list, the one case where the slot can have become empty.
template <class Policy>
inline void WheelCore<Policy>::unlink(Node* node) noexcept {
  Node* next = node->next;
  Node** pprev = node->pprev;
  *pprev = next;
  node->pprev = nullptr;
  // No branch on whether the node was last of its sub-list: with a few nodes a sub-list, as below
  // a million timers, that is at random, and the mispredictions cost a quarter of a cancel. The mask
  // that picks the back link to write also folds the two conditions of an emptied sub-list, the
  // node last and pprev a slot's head rather than a node's `next` (is_slot_head()), into one
  // rarely taken branch.
  const std::uintptr_t has_next = if_node(next);
  *back_link_of(next, has_next) = pprev;
  const std::uintptr_t offset = head_offset(pprev) | has_next;  // every bit set if there is a next
  if (offset < kSlotBytes) [[unlikely]] {
    note_way_empty(static_cast<unsigned>(offset / sizeof(Slot)),
                   static_cast<unsigned>(offset % sizeof(Slot) / (sizeof(Slot) / kWays)));
  }
}

template <class Policy>
inline bool WheelCore<Policy>::cancel(TimerId id) noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  // Only a pending generation matches (I10: linked means pending), so a failed id (gen 0) or a free node
  // never does; an index never handed out has no node. Tested before the node is formed, so that no null test
  // of its address follows.
  if (id.index_ >= pool_.touched() || (id.gen_ & 3) != kPending) [[unlikely]] {
    return false;
  }
  Node* node = pool_.at(id.index_);
  if (node->gen.load(std::memory_order_relaxed) != id.gen_) [[unlikely]] {
    return cancel_running(node, id.gen_);
  }
  node->gen.store(in_state(id.gen_, kCancelled), std::memory_order_relaxed);
  return cancel_marked(node);
}

// The rest of a cancel once the node is marked cancelled (cancel(), and an Engine shard's owner:
// ShardWheel::cancel_own). One branch for the two rare cases, both out of line: a callable with a
// destructor to run, and a wheel whose cur_ lags behind target_ (a pass under way, or one cut
// short by its limit).
template <class Policy>
inline bool WheelCore<Policy>::cancel_marked(Node* node) noexcept {
  if (((node->thunk & kDestructorTag) | (cur_ ^ target_)) != 0) [[unlikely]] {
    return cancel_slow(node);
  }
  return finish_cancel(node);
}

// The rest of a cancel once the node is marked cancelled and its callable is gone, in a wheel
// whose cur_ is target_. The unlink is done here, at once, while the population fits in L2 (the
// neighbours are in cache), during a pass (a walk may be under way: the lists must be exact when
// the callback returns; queue_unlinks_from_ says both), and for a node first in its sub-list
// (recently scheduled, with warm neighbours that batching would not help). Past L2 it is queued:
// the fewer instructions such a cancel takes, the more of the caller's next cancels the core
// overlaps with its node's miss. A full queue is flushed first, out of line.
template <class Policy>
inline bool WheelCore<Policy>::finish_cancel(Node* node) noexcept {
  assert(cur_ == target_);
  --pending_;
  ++stats_.cancelled;
  if (pending_ >= queue_unlinks_from_ && !is_slot_head(node->pprev)) {
    if (unlink_queued_ == kUnlinkBatch) [[unlikely]] {
      return flush_and_queue(node);
    }
    queue_unlink(node);
  } else {
    unlink(node);
    pool_.release(node);
  }
  return true;
}

// Whether advance() to `target` meets no callback and no cascade on the way: nothing due or left
// from a pass cut short (the due, late and batch slots, which share the last bitmap word) and no
// event up to target (I7: the next event). Then the call's only work is the look-ahead cascade's share
// (pace(), once target reaches pace_at_, or a unit boundary is crossed and the look-ahead slots change).
template <class Policy>
inline bool WheelCore<Policy>::quiet_until(std::uint64_t target) const noexcept {
  static_assert(kDueSlot / 64 == kBatchSlot / 64 && kDueSlot % 64 == 0, "the extra slots share one word");
  return target < next_event_ && ((nonempty_words_ >> (kDueSlot / 64)) & 1) == 0;
}

// The tick before which advance() has nothing to do but move time on (quiet_until() with no
// share for pace() and no unit boundary crossed): what advance_slow() leaves in no_event_before_ (I9: no
// event before).
template <class Policy>
inline std::uint64_t WheelCore<Policy>::no_event_before() const noexcept {
  if (((nonempty_words_ >> (kDueSlot / 64)) & 1) != 0) return 0;
  return std::min({next_event_, pace_at_, ((cur_ >> kLevelBits) + 1) << kLevelBits});
}

// Inline for the call that only moves time on, the common case of a loop that advances every
// tick or faster: one compare of the new now against no_event_before_ns_ (I9: no event before), and now_ is
// all it changes; cur_ catches up in the next call that meets something (I1: the tick in process). Everything
// else is out of line, in the library.
template <class Policy>
inline std::size_t WheelCore<Policy>::advance(Nanos now, std::size_t limit) {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  const Nanos latest = std::max(now, now_);
  if (static_cast<std::uint64_t>(latest.count()) < no_event_before_ns_) [[likely]] {
    assert(!in_advance_ && unlink_queued_ == 0 && moves_queued_ == 0 &&
           no_event_before_ <= no_event_before() && no_event_before_ <= lag_window_end_);  // I9
    // Not counted in stats().passes: see there.
    now_ = latest;
    return 0;
  }
  return advance_slow(now, limit);
}

}  // namespace tickwheel::detail
