// engine/wheel/cancel.hpp — the hierarchical wheel's cancel, reschedule and the queries: cancel (at
// once or batched), reschedule in place or queued, is_pending/deadline/remaining, and the flushes
// of the unlink and move queues. Out-of-line members of WheelCore<Policy>, included through
// engine/wheel/wheel_impl.hpp (whose invariants I1..I11 they keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <optional>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

// Bit w set <=> sub-list w of the slot is non-empty (I5: sub-list bits).
template <class Policy>
inline unsigned WheelCore<Policy>::ways_in_use(unsigned slot) const noexcept {
#ifndef NDEBUG
  unsigned mask = 0;
  const Slot& s = (*slots_)[slot];
  for (unsigned w = 0; w < kWays; ++w) mask |= static_cast<unsigned>(s.head[w] != nullptr) << w;
  assert(mask == ways_[slot]);
#endif
  return ways_[slot];
}

// Takes the first node of sub-list `way` of `slot`. Precondition: that sub-list is non-empty.
// The write to the successor's `pprev` is what brings the successor into cache: walks visit the
// sub-lists in turn, so it has the other sub-lists' pops' time to arrive before it is needed.
template <class Policy>
inline Node* WheelCore<Policy>::pop_head(unsigned slot, unsigned way) noexcept {
  Node** head = &(*slots_)[slot].head[way];
  Node* node = *head;
  Node* next = node->next;
  *head = next;
  node->pprev = nullptr;
  if (next != nullptr) {
    next->pprev = head;
  } else {
    note_way_empty(slot, way);
  }
  return node;
}

// cancel() of an id whose node is not pending in that lifetime. The one other state a live id can
// name is its periodic timer running, i.e. a cancel from inside its own callback: refuse the
// re-arm. The callable is in use, so the fire path destroys it when the callback returns (rearm());
// the timer no longer counts as pending.
template <class Policy>
bool WheelCore<Policy>::cancel_running(Node* node, std::uint32_t pending_gen) noexcept {
  if (node->gen.load(std::memory_order_relaxed) != detail::in_state(pending_gen, detail::kRunning)) {
    return false;
  }
  node->gen.store(detail::in_state(pending_gen, detail::kCancelled), std::memory_order_relaxed);
  --pending_;
  ++stats_.cancelled;
  return true;
}

// cancel() past its inline case: a callable with a destructor (run here), or a wheel whose cur_
// lags behind target_: inside a pass, or while the wheel waits at the leftovers of a pass cut short
// by its limit. There the node is unlinked at once; and if this took the last timer such a pass
// left waiting, the wheel catches up now, without firing, so that placement and next_deadline()
// are exact again.
template <class Policy>
bool WheelCore<Policy>::cancel_slow(Node* node) noexcept {
  detail::destroy_callable(node);
  if (cur_ == target_) return finish_cancel(node);
  --pending_;
  ++stats_.cancelled;
  unlink(node);
  pool_.release(node);
  if (!in_advance_ && !occupied(kBatchSlot) && !occupied(kLateSlot) && !occupied(kDueSlot)) step(target_, 0);
  return true;
}

// finish_cancel() with the unlink queue full: flushed, then the node queued.
template <class Policy>
bool WheelCore<Policy>::flush_and_queue(Node* node) noexcept {
  flush_unlinks();
  queue_unlink(node);
  return true;
}

// The node of a pending timer (linked, I10), or nullptr for any other id: only a pending
// generation matches, so a failed id (gen 0), a free node, a fired, cancelled or running timer and
// another lifetime's timer never do. The generation loads of the calls below are relaxed: they are
// for standalone wheels (reschedule() and clear() assert it), whose one thread wrote every value.
template <class Policy>
Node* WheelCore<Policy>::pending_node(TimerId id) const noexcept {
  Node* node = pool_.find(id.index_);
  if (node == nullptr || (id.gen_ & 3) != detail::kPending) return nullptr;
  return node->gen.load(std::memory_order_relaxed) == id.gen_ ? node : nullptr;
}

// Whether a node linked for `old_due` may stay where it is for `due`: the kernel's same-slot
// shortcut, in a form that needs no record of the slot. The node sits at level wheel_level(old_due)
// or above (the level a link picks only falls as cur_ moves on, and moves down go to the level of
// that moment), in the slot of old_due's unit there. If due has the same unit as old_due at the
// lowest level the node can be in, it has the same unit at the node's own level too, so the slot
// is one that holds due (I2, with the same difference of units), and the moves down that reach it
// later place it by its new due. At level 0 a unit is one tick, so only due == old_due qualifies.
// Only while the wheel is caught up (cur_ == target_): then every node due after cur_ is in a
// wheel slot; when it lags, the due slot can hold periodic timers due after cur_.
template <class Policy>
bool WheelCore<Policy>::in_place(std::uint64_t old_due, std::uint64_t due) const noexcept {
  if (cur_ != target_ || old_due <= cur_) return false;
  const unsigned shift = kLevelBits * wheel_level(old_due);
  return (due >> shift) == (old_due >> shift);
}

template <class Policy>
bool WheelCore<Policy>::reschedule(TimerId id, Nanos deadline) noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  assert(!Policy::kShared && "an Engine's wheel is rescheduled by its shard only");
  Node* node = pending_node(id);
  if (node == nullptr) return false;
  const std::uint64_t due = due_tick(deadline);
  ++stats_.rescheduled;
  if ((node->due & kMoving) != 0) {
    // Already queued to move (I11: a queued move): it moves once, to its latest deadline, when the queue is
    // flushed.
    node->due = due | kMoving;
    return true;
  }
  if (in_place(node->due, due)) {
    assert(due > cur_);
    node->due = due;
    ++stats_.rescheduled_in_place;
    return true;
  }
  if (cur_ == target_ && !in_advance_) {
    queue_move(node, id.gen_, due);
    return true;
  }
  // Inside a pass (the lists must be exact when the callback returns), or while the wheel lags
  // behind after a pass cut short: moved at once. It leaves its old slot's count_ an
  // over-estimate, as a cancel does (I4: occupancy).
  unlink(node);
  node->due = due;
  link(node, move_slot(node, due));
  // As in cancel(): if this took the last timer the wheel waited at after a pass cut short, it
  // catches up now, without firing.
  if (cur_ != target_ && !in_advance_ && !occupied(kBatchSlot) && !occupied(kLateSlot) &&
      !occupied(kDueSlot)) {
    step(target_, 0);
  }
  return true;
}

// Outside a pass, with the wheel caught up: a move is queued, like a cancel's unlink, so that the
// neighbours' misses overlap with the calls until the flush (flush_moves()); the node stays where
// it is, flagged, until then (I11: a queued move). Its new due is set now, for deadline() (release in an
// Engine's shard, whose Timer::deadline() reads it from other threads, see detail::store_due).
template <class Policy>
void WheelCore<Policy>::queue_move(Node* node, std::uint32_t gen, std::uint64_t due) noexcept {
  assert(cur_ == target_ && !in_advance_);
  detail::store_due(node, due | kMoving,
                    Policy::kShared ? std::memory_order_release : std::memory_order_relaxed);
  if (moves_queued_ == kUnlinkBatch) flush_moves();
  move_queue_[moves_queued_] = node;
  move_gen_[moves_queued_++] = gen;
  detail::prefetch_neighbours(node);
  set_no_event_before(0);  // the next advance() moves it (I9: no event before)
}

template <class Policy>
bool WheelCore<Policy>::is_pending(TimerId id) const noexcept {
  const Node* node = pool_.find(id.index_);
  if (node == nullptr || (id.gen_ & 3) != detail::kPending) return false;
  const std::uint32_t gen = node->gen.load(std::memory_order_relaxed);
  // Pending, or (a periodic timer) running: the one state, besides pending, that a cancel stops.
  return gen == id.gen_ || gen == id.gen_ - detail::kPending + detail::kRunning;
}

template <class Policy>
std::optional<Nanos> WheelCore<Policy>::deadline(TimerId id) const noexcept {
  const Node* node = pending_node(id);
  if (node == nullptr) return std::nullopt;
  // No overflow: due <= ticks_.max_tick(), the last tick a Nanos can hold.
  return Nanos(static_cast<Nanos::rep>(node->due & ~kMoving) * tick_.count());
}

template <class Policy>
std::optional<Nanos> WheelCore<Policy>::remaining(TimerId id) const noexcept {
  const std::optional<Nanos> at = deadline(id);
  if (!at) return std::nullopt;
  return std::max(*at - now_, Nanos(0));  // both in [0, Nanos::max()]: no overflow
}

// Finishes what cancel() and reschedule() queued: the moves, then the unlinks of cancelled nodes,
// which it also frees. Each node's neighbours were prefetched when it was queued
// (prefetch_neighbours()). Adjacent queued nodes are fine: each unlink reads the links as the
// previous one left them.
template <class Policy>
void WheelCore<Policy>::flush_unlinks() noexcept {
  if (moves_queued_ != 0) flush_moves();
  // The count and each entry read once into locals: the stores into nodes could alias the queue
  // as far as the compiler can tell, and would make it load both again for every node.
  const unsigned queued = unlink_queued_;
  for (unsigned i = 0; i < queued; ++i) {
    Node* const node = unlink_queue_[i];
    unlink(node);
    pool_.release(node);
  }
  unlink_queued_ = 0;
}

// Moves the nodes reschedule() queued to the slots of their new deadlines (I11: a queued move). An entry
// whose node is no longer that pending lifetime (cancelled since; perhaps recycled for another timer) is
// skipped: a cancel unlinks it from where it still is. Runs only while the wheel is caught up
// (cur_ == target_; outside a pass, or at the start of advance() before anything moves), as when
// the moves were queued, so a one-shot and a periodic timer are placed alike.
template <class Policy>
void WheelCore<Policy>::flush_moves() noexcept {
  assert(cur_ == target_);
  for (unsigned i = 0; i < moves_queued_; ++i) {
    Node* node = move_queue_[i];
    if (node->gen.load(std::memory_order_relaxed) != move_gen_[i]) continue;
    assert((node->due & kMoving) != 0 && node->pprev != nullptr);
    unlink(node);
    // Release in an Engine's shard, whose owner queues moves too: Timer::deadline() may read `due`
    // from another thread (see detail::store_due); relaxed, a plain store, in a standalone wheel.
    detail::store_due(node, node->due & ~kMoving,
                      Policy::kShared ? std::memory_order_release : std::memory_order_relaxed);
    link(node, slot_for(node->due));
  }
  moves_queued_ = 0;
}

// Logically const: it changes no observable state. Nodes are queued only by cancel() and
// reschedule(), non-const calls, so a wheel with a non-empty queue was not defined const and the
// cast is sound.
template <class Policy>
void WheelCore<Policy>::finish_unlinks() const noexcept {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): sound, as said above
  if (unlink_queued_ != 0 || moves_queued_ != 0) const_cast<WheelCore*>(this)->flush_unlinks();
}

}  // namespace tickwheel::detail
