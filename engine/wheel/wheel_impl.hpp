// engine/wheel/wheel_impl.hpp — how the hierarchical timing wheel works: cancel, reschedule, the queries,
// clear, advance, cascading, next_deadline; the out-of-line members of WheelCore<Policy>. Included
// only by the two files that compile them, once per policy: engine/wheel/wheel.cpp (the standalone
// Wheel) and engine/core/shard_wheel.cpp (an Engine shard's wheel).
//
// Invariants (checked by assertions in debug builds and by tests/wheel_model_test.cpp outside):
//   I1  cur_ is the tick being processed. Every timer due before cur_ has run; the ones due at cur_
//       have run or sit in the batch slot (a pass cut short by its limit, or by a throw), or,
//       while step() runs them in place, in level-0 slot cur_ % S (for the callbacks' duration
//       only: outside a pass that slot is empty, by I2). A pass
//       that reaches its limit still moves cur_ on to the first tick with callbacks waiting (or to
//       its target), so cur_ lags behind target_ only where something is due. Both may also lag
//       behind now_'s tick after inline advance() calls, which met nothing on the way (I9) and
//       moved only now_: nothing is linked in that stretch (a link due in it counts as due and
//       goes to the due slot, due_now(): now_'s tick is below lag_bound_), and it lies before the
//       next unit boundary, so catch_up() may move both to now_'s tick at any time, and
//       advance_slow() does before it runs late timers.
//   I2  Let S = kSlots and b = kLevelBits. A node in level-0 slot i has due in (cur_, cur_ + S)
//       and due % S == i. A node in level L >= 1 has (due >> bL) - (cur_ >> bL) in [1, S - 1], in
//       the slot of that unit % S. So level L's slot for the current unit cur_ >> bL is empty: it
//       was moved down at the boundary that started the unit.
//   I3  The due slot holds timers scheduled (or rescheduled) at or before cur_ (outside advance(),
//       or by callbacks, which must not run in the pass that scheduled them), and periodic timers
//       re-armed (or rescheduled) at a tick at or before target_ (behind by a period: they run one
//       period per call). The next advance() merges them into the late slot and runs the late slot
//       first, then the batch. Nothing enters the late slot while it runs, so no call runs a timer
//       twice.
//   I4  occupied_ bit s is set iff slot s has a node; count_[s] >= the number of nodes in slot s.
//       (I4'') ways_[s] bit w is set iff sub-list w of slot s has a node, so occupied_ bit s is set
//       iff ways_[s] != 0.
//       (I4') nonempty_words_ bit w is set iff occupied_[w] != 0: every change of occupied_ goes
//       through set_occupied() / clear_occupied(), or clears it whole (clear()).
//   I7  next_event_ <= next_event_tick(): the first tick after cur_ at which a level-0 slot fires
//       or an upper-level slot's unit starts is never before it. step() sets it exactly whenever
//       cur_ reaches it (so after a pass it lies past cur_); link() lowers it to the event of the
//       slot it fills; a move down to level 0 leaves it (the slot the node left has an event at or
//       before the node's due); unlinks and cancels leave it, which can only make it early (then
//       advance() takes the full path, lands on the early tick with nothing to do, and sets it
//       again).
//   I8  pace_at_ is finite whenever an upper level's look-ahead slot (that of unit (cur_ >> bL) + 1)
//       has a node: link() lowers it to cur_ + 1 for a node linked there, and plan_pace() sets it
//       from the look-ahead slots wherever cur_ moves across a unit boundary (a pass, a quiet
//       advance() that crosses one) and after every pace(). It may be finite with no such node (a
//       cancel emptied the slot): pace() then finds nothing, and plan_pace() makes it UINT64_MAX.
//   I9  quiet_end_ <= quiet_end(): the least of next_event_, pace_at_ and the start of the level-1
//       unit after cur_'s, or 0 while the due, late or batch slot holds a node; and 0 throughout
//       a pass and while unlinks or moves are queued. quiet_end_ns_ == quiet_end_ * tick. So an
//       advance() to a now before quiet_end_ns_ meets nothing on its way, and its inline case
//       only moves now_ on. link() lowers it with the two bounds (and zeroes it for the due slot;
//       move_down() runs only where it is 0 or is set exactly afterwards, so a move to level 0
//       leaves it), queueing and step() zero it (outside advance(), a cancel or move that ends a
//       lag steps), advance_slow() and clear() set it exactly; everything else only raises what it
//       is made of.
//       And quiet_end_ <= lag_bound_, which only those two and a pass or step set (I1).
//   I5  A linked node (pprev != nullptr) holds a live callable and is pending (a periodic node only
//       between its runs: it is unlinked while it runs, state running), except: a node
//       cancelled by Wheel::cancel() (or by an Engine shard's owner, ShardWheel::cancel_own)
//       waiting in unlink_queue_ (callable gone; the queue is flushed
//       before anything walks the lists), and, in an Engine, a node another thread cancelled
//       (state kCancelled, callable alive) until its shard retires it or a walk meets it.
//   I6  A node whose due has the kMoving bit is pending, in move_queue_ and still in the slot of
//       its deadline before the reschedule() that queued it, not of its due: I2 holds for it only
//       once flush_moves() has moved it, which every walk, advance() and next_deadline() does
//       first. Moves are queued only while cur_ == target_ outside a pass, and nothing changes
//       cur_ or target_ before the queue is flushed. In an Engine's shard only its owner queues
//       moves (ShardWheel::move_own), outside a pass; a move applied meanwhile to a queued node
//       (ShardWheel::move) only changes its flagged due.
#pragma once

#include "tickwheel/detail/wheel_core.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>
#include <string>
#include <system_error>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

// Bit w set <=> sub-list w of the slot is non-empty (I4'').
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

// The node of a pending timer (linked, I5), or nullptr for any other id: only a pending
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
    // Already queued to move (I6): it moves once, to its latest deadline, when the queue is flushed.
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
  // over-estimate, as a cancel does (I4).
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
// it is, flagged, until then (I6). Its new due is set now, for deadline() (release in an Engine's
// shard, whose Timer::deadline() reads it from other threads, see detail::store_due).
template <class Policy>
void WheelCore<Policy>::queue_move(Node* node, std::uint32_t gen, std::uint64_t due) noexcept {
  assert(cur_ == target_ && !in_advance_);
  detail::store_due(node, due | kMoving,
                    Policy::kShared ? std::memory_order_release : std::memory_order_relaxed);
  if (moves_queued_ == kUnlinkBatch) flush_moves();
  move_queue_[moves_queued_] = node;
  move_gen_[moves_queued_++] = gen;
  detail::prefetch_neighbours(node);
  set_quiet_end(0);  // the next advance() moves it (I9)
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
  settle_quiet_end();
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
      // Every linked node is pending here (I5: the queue is flushed, no callback is running).
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

// Running -> pending, the generation unchanged (so the timer's id stays valid), and linked at
// `next`: in the wheel if that is after this call's now, else in the due slot, for the next call
// (I3), so a timer that is behind runs once per call and cannot livelock a pass. If a cancel came
// while the callback ran, the re-arm is refused and the lifetime ends here instead.
template <class Policy>
void WheelCore<Policy>::rearm(Node* node, std::uint32_t running, std::uint64_t next) noexcept {
  // Before the re-arm makes the timer pending again, so that an Engine's Timer::deadline() on
  // another thread, which reads `due` only while the generation is pending, never reads the run's
  // tick after the re-arm (the re-arm's release pairs with its acquire); release for the Engine,
  // relaxed for the standalone wheel (see detail::store_due).
  detail::store_due(node, next, Policy::kShared ? std::memory_order_release : std::memory_order_relaxed);
  if (!policy_.rearm(node, running)) {
    // A cancel took it during the run. One from another thread leaves the counting, and the
    // recycling, to this thread (its cancel record then finds the node unlinked); the standalone
    // wheel's own cancel() counted itself.
    if constexpr (Policy::kShared) {
      --pending_;
      ++stats_.cancelled;
    }
    detail::destroy_callable(node);
    pool_.release(node);
    return;
  }
  link(node, next <= target_ ? kDueSlot : wheel_slot(next));
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

// Moves the nodes reschedule() queued to the slots of their new deadlines (I6). An entry whose
// node is no longer that pending lifetime (cancelled since; perhaps recycled for another timer) is
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

// Moves up to `max_nodes` nodes of an upper-level slot to where they belong now, taking them
// round robin from the sub-lists. A node due at cur_ goes to level 0's slot for cur_, which the
// caller fires next. No callback runs here, so the mask of non-empty sub-lists stays exact and the
// slot's bit is settled once at the end. Returns how many moved.
template <class Policy>
std::uint64_t WheelCore<Policy>::move_down(unsigned slot, std::uint64_t max_nodes) noexcept {
  std::uint64_t moved = 0;
  Slot& from = (*slots_)[slot];
  unsigned ways = ways_in_use(slot);
  while (ways != 0 && moved < max_nodes) {
    for (unsigned round = ways; round != 0 && moved < max_nodes; round &= round - 1) {
      const auto way = static_cast<unsigned>(std::countr_zero(round));
      Node* node = from.head[way];
      Node* next = node->next;
      from.head[way] = next;
      // Without a branch on whether the sub-list goes on (at random below 100k timers, see
      // unlink()): has_next + 1 is 1 where it ends, 0 where it goes on.
      const std::uintptr_t has_next = if_node(next);
      *back_link_of(next, has_next) = &from.head[way];
      ways &= ~(static_cast<unsigned>(has_next + 1) << way);
      const std::uint64_t due = node->due;
      assert(due >= cur_);
      if (due - cur_ < kSlots) {
        // To level 0 (due at cur_: to its slot, which the caller fires next), where every move
        // from level 1 goes: push() is all of link() that applies. The event bounds stand as they
        // are: next_event_ is at or before the event of the slot the node leaves (I7), itself at
        // or before the node's due; level 0 has no look-ahead slot to pace (I8); and every
        // caller runs with quiet_end_ 0 (a pass, a step) or sets it exactly after (quiet_advance(),
        // I9). Fewer instructions a move: more moves in the window the core overlaps their
        // nodes' misses with.
        push(node, slot_of(0, due));
      } else {
        link(node, wheel_slot(due));
      }
      ++moved;
    }
  }
  ways_[slot] = static_cast<std::uint8_t>(ways);
  if (ways == 0) {
    clear_occupied(slot);
    (*count_)[slot] = 0;
  } else {
    (*count_)[slot] -= static_cast<std::uint32_t>(std::min<std::uint64_t>((*count_)[slot], moved));
  }
  stats_.moved += moved;
  return moved;
}

// Moves all nodes of `from` into `to`. If `to` is empty, O(kWays): sub-lists move whole. Otherwise
// each sub-list of `from` goes in front of the same sub-list of `to`, which costs a walk of `from`
// only: for the due slot that is one visit per link into it, never a second walk of leftovers.
template <class Policy>
void WheelCore<Policy>::merge(unsigned from, unsigned to) noexcept {
  if (!occupied(from)) return;
  if (!occupied(to)) return splice(from, to);
  Slot& src = (*slots_)[from];
  Slot& dst = (*slots_)[to];
  for (unsigned w = 0; w < kWays; ++w) {
    Node* first = src.head[w];
    if (first == nullptr) continue;
    Node* last = first;
    while (last->next != nullptr) last = last->next;
    last->next = dst.head[w];
    if (last->next != nullptr) last->next->pprev = &last->next;
    dst.head[w] = first;
    first->pprev = &dst.head[w];
    src.head[w] = nullptr;
  }
  ways_[to] |= ways_[from];
  ways_[from] = 0;
  clear_occupied(from);
  (*count_)[to] += (*count_)[from];
  (*count_)[from] = 0;
}

// Moves all nodes of `from` into the empty slot `to`. O(kWays): sub-lists move whole.
template <class Policy>
void WheelCore<Policy>::splice(unsigned from, unsigned to) noexcept {
  if (!occupied(from)) return;
  Slot& src = (*slots_)[from];
  Slot& dst = (*slots_)[to];
  for (unsigned w = 0; w < kWays; ++w) {
    assert(dst.head[w] == nullptr);
    if (Node* first = src.head[w]) {
      dst.head[w] = first;
      first->pprev = &dst.head[w];
      src.head[w] = nullptr;
    }
  }
  ways_[to] = ways_[from];
  ways_[from] = 0;
  clear_occupied(from);
  set_occupied(to);
  (*count_)[from] = 0;
}

// Runs the callbacks of a firing slot (late or batch), round robin over its sub-lists, until it is
// empty or `budget` have run. A callback may cancel nodes of the slot, so each head is re-read
// before it is taken; it cannot add to it (what it schedules goes to a wheel slot or the due slot).
template <class Policy>
std::size_t WheelCore<Policy>::fire(unsigned slot, std::size_t budget) {
  std::size_t ran = 0;
  for (unsigned ways = ways_in_use(slot); ways != 0 && ran < budget; ways = ways_in_use(slot)) {
    for (unsigned round = ways; round != 0 && ran < budget; round &= round - 1) {
      const auto way = static_cast<unsigned>(std::countr_zero(round));
      if ((*slots_)[slot].head[way] == nullptr) continue;  // a callback cancelled the rest of it
      Node* node = pop_head(slot, way);
      // The one question a periodic node adds to a one-shot fire: a tag in the node's own line.
      const std::uint64_t meta = detail::callable_meta(node);
      if (meta != 0) [[unlikely]] {
        ran += fire_periodic(node, meta);
        continue;
      }
      assert(node->due <= cur_);
      --pending_;
      if (!policy_.claim(node, node->gen.load(std::memory_order_relaxed), detail::kFired)) {
        // Cancelled from another thread after it was linked: the canceller's claim won, so it
        // never runs; recycled here, and the queued cancel record will find it gone.
        detail::destroy_callable(node);
        pool_.release(node);
        ++stats_.cancelled;
        continue;
      }
      ++stats_.fired;
      ++ran;
      if (policy_.dispatch(node)) continue;  // an executor runs it and gives the node back
      try {
        detail::run_callable(node);
      } catch (...) {
        pool_.release(node);  // the thunk destroyed the callable on its way out
        throw;
      }
      pool_.release(node);
    }
  }
  return ran;
}

// A periodic node taken from a firing slot: claims it, runs it (or drops the run, for Misfire::skip
// a whole period late) and re-arms it. Returns how many callbacks ran (0 or 1). A periodic timer
// stays in pending_ through its run; only a cancel takes it out. If the callback throws, the timer
// is re-armed first, then the exception leaves. With an executor the run is handed over instead,
// and the node, still running, comes back through rearm_returned().
template <class Policy>
std::size_t WheelCore<Policy>::fire_periodic(Node* node, std::uint64_t meta) {
  using Meta = detail::PeriodicMeta;
  const std::uint32_t gen = node->gen.load(std::memory_order_relaxed);
  if (!policy_.claim(node, gen, detail::kRunning)) {
    // Cancelled from another thread while linked, as in fire().
    detail::destroy_callable(node);
    pool_.release(node);
    --pending_;
    ++stats_.cancelled;
    return 0;
  }
  const std::uint32_t running = gen - detail::kPending + detail::kRunning;
  const std::uint64_t due = node->due;  // the tick this run is for: <= target_ (I3)
  assert(due <= target_);
  ++stats_.rearmed;  // the period after this run or skip: linked then, or taken by a cancel
  if (Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_rate) &&
      Meta::misfire(meta) == static_cast<unsigned>(Misfire::skip)) {
    const std::uint64_t period = Meta::period(meta) / static_cast<std::uint64_t>(tick_.count());
    if (target_ - due >= period) {
      ++stats_.skipped;
      rearm(node, running, first_grid_point_after_now(due, period));
      return 0;
    }
  }
  ++stats_.fired;
  if (policy_.dispatch(node)) return 1;
  // A fixed-delay run ends when its callback returns: when the policy says (read only for fixed
  // delay; an Engine reads its clock), else this call's now.
  const bool delay = Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay);
  const auto ran_until = [&]() noexcept { return delay ? policy_.run_end(now_) : now_; };
  try {
    detail::run_callable(node);
  } catch (...) {
    rearm(node, running, next_run(meta, due, ran_until()));
    throw;
  }
  rearm(node, running, next_run(meta, due, ran_until()));
  return 1;
}

// The tick of a periodic timer's next run after the run for tick `due` that ended at `ran_until`
// (see Cadence and Misfire in wheel.hpp), clamped to the horizon. An inline run ends at the
// policy's run_end(): an Engine's clock, a standalone wheel's the now of the advance() that ran it.
// (A run on an Engine's executor places its own next fixed-delay run: see ShardWheel.)
template <class Policy>
std::uint64_t WheelCore<Policy>::next_run(std::uint64_t meta, std::uint64_t due,
                                          Nanos ran_until) const noexcept {
  using Meta = detail::PeriodicMeta;
  const std::uint64_t period_ns = Meta::period(meta);
  if (Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay)) {
    return due_tick(detail::saturating_add(ran_until, Nanos(static_cast<Nanos::rep>(period_ns))));
  }
  // Fixed rate: period_ns is a whole number of ticks (periodic_meta()). No overflow: due and
  // target_ are below 2^63 / kMinTick < 2^54, the period in ticks below 2^60 / kMinTick.
  const std::uint64_t period = period_ns / static_cast<std::uint64_t>(tick_.count());
  const std::uint64_t next = due + period;
  if (next > target_ || Meta::misfire(meta) == static_cast<unsigned>(Misfire::catch_up)) {
    return std::min(next, ticks_.max_tick());
  }
  return first_grid_point_after_now(due, period);
}

// The first tick of the grid due, due + period, ... after target_, clamped to the horizon.
// Precondition: due <= target_.
template <class Policy>
std::uint64_t WheelCore<Policy>::first_grid_point_after_now(std::uint64_t due,
                                                            std::uint64_t period) const noexcept {
  return std::min(due + ((target_ - due) / period + 1) * period, ticks_.max_tick());
}

// Paced look-ahead cascade. For each upper level, the slot of the next unit (which must be empty
// when that unit starts, I2) gets a share of its nodes moved down now, in proportion to the part
// of the time left to that unit's start that passed since the last pace() (or since the current
// unit began, if that is later). Called every tick, a slot of n nodes is moved n / 256^L at a
// time; called rarely, proportionally more; plan_pace() says when the next call has a batch.
// Moved nodes are due after `target` by construction, so pacing never makes work due in this
// pass. Returns how many nodes moved.
template <class Policy>
std::uint64_t WheelCore<Policy>::pace(std::uint64_t target, unsigned top) noexcept {
  if (target <= cur_) return 0;
  std::uint64_t moved = 0;
  for (unsigned level = top; level >= 1; --level) {
    const unsigned shift = kLevelBits * level;
    const std::uint64_t unit = (cur_ >> shift) + 1;
    const unsigned slot = level * kSlots + static_cast<unsigned>(unit & (kSlots - 1));
    if (!occupied(slot)) continue;
    const std::uint64_t start = unit << shift;
    if (target >= start) continue;  // the pass crosses the boundary and moves the rest there
    // paced_ <= target (targets never go back), so from <= target < start.
    const std::uint64_t from = std::max(paced_, start - (std::uint64_t{1} << shift));
    const double share = static_cast<double>(target - from) / static_cast<double>(start - from);
    const auto quota = static_cast<std::uint64_t>(std::ceil(share * (*count_)[slot]));
    moved += move_down(slot, quota);
  }
  paced_ = target;
  stats_.moved_ahead += moved;
  return moved;
}

// Sets pace_at_ (I8) for where cur_ is now: for each occupied look-ahead slot, the tick by which
// its share since paced_ reaches kPaceBatch nodes (all of them, if it holds fewer), at the earliest
// the next tick. O(top), a division per occupied look-ahead slot.
template <class Policy>
void WheelCore<Policy>::plan_pace(unsigned top) noexcept {
  std::uint64_t at = ~std::uint64_t{0};
  for (unsigned level = 1; level <= top; ++level) {
    const unsigned shift = kLevelBits * level;
    const std::uint64_t unit = (cur_ >> shift) + 1;
    const unsigned slot = level * kSlots + static_cast<unsigned>(unit & (kSlots - 1));
    if (!occupied(slot)) continue;
    const std::uint64_t start = unit << shift;
    const std::uint64_t from = std::max(paced_, start - (std::uint64_t{1} << shift));
    std::uint64_t when = cur_ + 1;
    if (from < start) {  // else a pass cut short paced past cur_: pace again next tick
      // count_ >= 1 for an occupied slot (I4); the product is below 2^57 (a span below 2^54).
      const std::uint64_t count = std::max<std::uint64_t>((*count_)[slot], 1);
      when = std::max(when, from + std::min(count, kPaceBatch) * (start - from) / count);
    }
    at = std::min(at, when);
  }
  pace_at_ = at;
}

// At tick t, every upper-level slot whose unit starts at t moves down in full (I2). Top level
// first, so that its nodes can drop straight to the lowest level that holds them.
template <class Policy>
void WheelCore<Policy>::cascade_at(std::uint64_t t, unsigned top) noexcept {
  if ((t & ((std::uint64_t{1} << kLevelBits) - 1)) != 0) return;  // no unit of any level starts at t
  for (unsigned level = top; level >= 1; --level) {
    const unsigned shift = kLevelBits * level;
    if ((t & ((std::uint64_t{1} << shift) - 1)) != 0) continue;
    const unsigned slot = level * kSlots + static_cast<unsigned>((t >> shift) & (kSlots - 1));
    if (occupied(slot)) move_down(slot, ~std::uint64_t{0});
  }
}

template <class Policy>
typename WheelCore<Policy>::LevelWords WheelCore<Policy>::level_words(unsigned level) const noexcept {
  return std::span(occupied_).subspan(std::size_t{level} * kWordsPerLevel).template first<kWordsPerLevel>();
}

// Distance from bit `start` to the first set bit of a kSlots-bit ring (one level's bitmap), going
// up and wrapping; kSlots if none is set.
template <class Policy>
unsigned WheelCore<Policy>::find_from(LevelWords words, unsigned start) noexcept {
  const unsigned i = start / 64;
  const unsigned j = start % 64;
  if (const std::uint64_t a = words[i] >> j) return static_cast<unsigned>(std::countr_zero(a));
  unsigned distance = 64 - j;
  for (unsigned k = 1; k < kWordsPerLevel; ++k, distance += 64) {
    if (const std::uint64_t b = words[(i + k) % kWordsPerLevel]) {
      return distance + static_cast<unsigned>(std::countr_zero(b));
    }
  }
  const std::uint64_t low = j == 0 ? 0 : words[i] & ((std::uint64_t{1} << j) - 1);
  if (low != 0) return distance + static_cast<unsigned>(std::countr_zero(low));
  return kSlots;
}

template <class Policy>
bool WheelCore<Policy>::level_empty(unsigned level) const noexcept {
  constexpr std::uint64_t kLevelMask = (std::uint64_t{1} << kWordsPerLevel) - 1;
  return ((nonempty_words_ >> (level * kWordsPerLevel)) & kLevelMask) == 0;
}

// Whether an upper level up to `top` has a node in the slot of its next unit (a share for pace()
// to move), for I8's debug assertion. O(top).
template <class Policy>
bool WheelCore<Policy>::lookahead_occupied(unsigned top) const noexcept {
  for (unsigned level = 1; level <= top; ++level) {
    const unsigned shift = kLevelBits * level;
    if (occupied(level * kSlots + static_cast<unsigned>(((cur_ >> shift) + 1) & (kSlots - 1)))) return true;
  }
  return false;
}

// I4', for debug assertions: the summary word says which bitmap words are non-zero.
template <class Policy>
bool WheelCore<Policy>::summary_exact() const noexcept {
  std::uint64_t words = 0;
  for (unsigned w = 0; w < kBitmapWords; ++w) words |= static_cast<std::uint64_t>(occupied_[w] != 0) << w;
  return words == nonempty_words_;
}

// I2's consequence, for debug assertions: no upper level holds a node in its current unit's slot.
template <class Policy>
bool WheelCore<Policy>::current_units_empty(unsigned top) const noexcept {
  for (unsigned level = 1; level <= top; ++level) {
    const auto unit = static_cast<unsigned>((cur_ >> (kLevelBits * level)) & (kSlots - 1));
    if (occupied(level * kSlots + unit)) return false;
  }
  return true;
}

// The highest level with a timer in it (0 if none): every per-level loop stops there.
template <class Policy>
unsigned WheelCore<Policy>::top_level() const noexcept {
  constexpr std::uint64_t kWheelWords = (std::uint64_t{1} << (kLevels * kWordsPerLevel)) - 1;
  const std::uint64_t words = nonempty_words_ & kWheelWords;  // not the due, late and batch slots
  return words == 0 ? 0 : (static_cast<unsigned>(std::bit_width(words)) - 1) / kWordsPerLevel;
}

// The first tick after cur_ whose level-0 slot holds timers. Precondition: !level_empty(0).
template <class Policy>
std::uint64_t WheelCore<Policy>::next_level0_tick() const noexcept {
  const std::uint64_t from = cur_ + 1;
  return from + find_from(level_words(0), static_cast<unsigned>(from & (kSlots - 1)));
}

// The first tick after cur_ at which something happens: a level-0 slot fires, or an upper-level
// slot's unit starts. UINT64_MAX if the wheel levels are empty. O(levels).
// With `dues` (next_deadline() only), the earliest due of a node instead: an upper level's
// earliest slot is read for its nodes' dues (earliest_due()), and counts as its unit's start, a
// lower bound of those dues (I2), only when it holds more than kDeadlineScan nodes. next_event_
// and the passes step by the events, which a unit start must stop, since the slot moves down
// there. O(levels * kDeadlineScan).
template <class Policy>
std::uint64_t WheelCore<Policy>::next_event_tick(unsigned top, bool dues) const noexcept {
  std::uint64_t best = ~std::uint64_t{0};
  if (!level_empty(0)) {
    best = next_level0_tick();  // a level-0 slot's tick is its nodes' due (I2)
    // An upper level's events are starts of its units after cur_'s (I2), all multiples of 256
    // ticks: none comes before the next level-1 unit, so a level-0 event before it is the next.
    if (best < ((cur_ >> kLevelBits) + 1) << kLevelBits) return best;
  }
  for (unsigned level = 1; level <= top; ++level) {
    if (level_empty(level)) continue;
    const unsigned shift = kLevelBits * level;
    const std::uint64_t from = (cur_ >> shift) + 1;
    const unsigned d = find_from(level_words(level), static_cast<unsigned>(from & (kSlots - 1)));
    assert(d < kSlots);
    const std::uint64_t start = (from + d) << shift;
    // A level's later slots hold later units; a slot starting at or after `best` cannot beat it.
    if (start < best) best = dues ? std::min(best, earliest_due(slot_of(level, from + d), start)) : start;
  }
  return best;
}

// The least due of the nodes in wheel slot `slot`, whose unit starts at `start`; `start` if the
// slot holds more than kDeadlineScan nodes. Reads at most kDeadlineScan nodes.
template <class Policy>
std::uint64_t WheelCore<Policy>::earliest_due(unsigned slot, std::uint64_t start) const noexcept {
  std::uint64_t best = ~std::uint64_t{0};
  unsigned seen = 0;
  for (const Node* head : (*slots_)[slot].head) {
    for (const Node* node = head; node != nullptr; node = node->next) {
      if (seen++ == kDeadlineScan) return start;
      assert((node->due & kMoving) == 0 && node->due >= start);  // the move queue is flushed (I6)
      best = std::min(best, node->due);
    }
  }
  return best;
}

// The slots the next pass will walk first, given cur_: the next non-empty level-0 slot and the
// look-ahead slot of each upper level. Calls fn(slot) for each occupied one.
template <class Policy>
template <class Fn>
void WheelCore<Policy>::for_each_upcoming_slot(Fn&& fn) const noexcept {
  if (!level_empty(0)) {
    const auto from = static_cast<unsigned>((cur_ + 1) & (kSlots - 1));
    fn((from + find_from(level_words(0), from)) & (kSlots - 1));
  }
  for (unsigned level = 1, top = top_level(); level <= top; ++level) {
    const unsigned slot =
        level * kSlots + static_cast<unsigned>(((cur_ >> (kLevelBits * level)) + 1) & (kSlots - 1));
    if (occupied(slot)) fn(slot);
  }
}

// Staged prefetch: the end of a pass prefetches the first node of every sub-list the next pass
// will walk (stage 1); the start of the next pass, by when those have arrived, prefetches their
// successors (stage 2). Walks then find two nodes per sub-list in cache, and the misses of all the
// slots overlap instead of being taken slot by slot, one chain at a time.
template <class Policy>
void WheelCore<Policy>::prefetch_upcoming(bool successors) const noexcept {
  for_each_upcoming_slot([&](unsigned slot) {
    for (Node* head : (*slots_)[slot].head) {
      if (head == nullptr) continue;
      if (!successors) {
        detail::prefetch_node(head);
      } else if (Node* next = head->next) {
        detail::prefetch_node(next);
      }
    }
  });
}

// Steps cur_ from event to event up to `target`, running at most `budget` callbacks. Once the
// budget is spent the steps go on without running anything, cascading as they pass boundaries,
// until a tick with callbacks waiting (they stay in the batch for the next call) or the target:
// cur_ never lags behind time that holds nothing due, so placement and next_deadline() stay exact.
// The steps stop early while late timers wait in the due slot, so those keep their place ahead of
// later ticks. With budget 0 no callback runs and nothing can throw.
template <class Policy>
std::size_t WheelCore<Policy>::step(std::uint64_t target, std::size_t budget) {
  set_quiet_end(0);  // for a step outside advance() (a cancel or move that ends a lag): I9
  lag_bound_ = 0;
  std::size_t ran = 0;
  const std::uint64_t from = cur_;
  while (cur_ < target && !occupied(kBatchSlot) && !occupied(kLateSlot) &&
         (ran < budget || !occupied(kDueSlot))) {
    // Recomputed each step: a callback may have scheduled a timer above the previous top level.
    const unsigned top = top_level();
    // A bound after cur_ is used as it is (I7: nothing happens before it); if it is early, the
    // step lands on a tick with nothing to do and the next one computes it exactly.
    if (next_event_ <= cur_) next_event_ = next_event_tick(top);
    cur_ = std::min(next_event_, target);
    cascade_at(cur_, top);
    assert(current_units_empty(top));
    const auto slot = static_cast<unsigned>(cur_ & (kSlots - 1));
    if ((*count_)[slot] <= budget - ran) {
      // The budget covers every node the slot can hold (I4), so the slot is run where it is and
      // left empty: nothing a callback does can link into it (a due at or before cur_ goes to the
      // due slot, one after it to another slot). Only a throw leaves nodes in it, and they move
      // to the batch slot, where I1 keeps the leftovers of tick cur_.
      try {
        ran += fire(slot, budget - ran);
      } catch (...) {
        splice(slot, kBatchSlot);
        throw;
      }
    } else {
      splice(slot, kBatchSlot);
      ran += fire(kBatchSlot, budget - ran);
    }
  }
  // The event just processed (or a bound made early by unlinks) is not the next one: set it now,
  // so that the next advance() takes its quiet case unless something happens on its way. Without
  // this, every tick that fired cost two passes: its own and the next call's, which only found
  // the bound stale.
  const unsigned top = top_level();
  if (next_event_ <= cur_) next_event_ = next_event_tick(top);
  // I8: the look-ahead slots changed only if a unit boundary was crossed (links keep pace_at_).
  if (((from ^ cur_) >> kLevelBits) != 0) plan_pace(top);
  return ran;
}

// advance()'s quiet case when a look-ahead slot may need a share moved, or cur_ crosses a unit
// boundary on its way to target (and the look-ahead slots change). pace() moves only nodes due
// after target, to slots whose events link() keeps in next_event_, so nothing happens on the way to
// target still (I7).
template <class Policy>
void WheelCore<Policy>::quiet_advance(std::uint64_t target) noexcept {
  const unsigned top = top_level();
  if (target >= pace_at_) stats_.max_pass_work = std::max(stats_.max_pass_work, pace(target, top));
  cur_ = target;
  plan_pace(top);  // I8, for the new cur_
}

// Brings cur_ and target_ to now_'s tick where inline advance() calls left them behind (I1):
// first thing in advance_slow(), so that a pass starts where the wheel's time is, and in the
// Engine's re-arm of a periodic node an executor gave back (its misfire decision reads target_).
// Not after a pass cut short, where cur_ waits at what is due.
template <class Policy>
void WheelCore<Policy>::catch_up() noexcept {
  if (cur_ != target_) return;
  const std::uint64_t t = ticks_.floor(static_cast<std::uint64_t>(now_.count()));
  if (t <= cur_) return;
  assert(((t ^ cur_) >> kLevelBits) == 0 && next_event_tick(top_level()) > t);  // I1
  cur_ = t;
  target_ = t;
}

// advance() past its inline case: a nested call (refused), queued unlinks or moves to finish,
// or a target at or past quiet_end_. Leaves quiet_end_ exact for the next call (I9), unless a
// callback throws (then it stays 0 and the next call comes here).
template <class Policy>
std::size_t WheelCore<Policy>::advance_slow(Nanos now, std::size_t limit) {
  if (in_advance_) return 0;
  ++stats_.passes;
  if ((unlink_queued_ | moves_queued_) != 0) flush_unlinks();
  // Late timers run first at the tick of the old now, so that what their callbacks schedule at or
  // before it waits for the next call (I3): cur_ catches up to it (I1). Without them the pass
  // steps from cur_ wherever it lags, as through any stretch with nothing on it.
  if (((nonempty_words_ >> (kDueSlot / 64)) & 1) != 0) catch_up();
  assert(summary_exact());
  assert(next_event_ <= next_event_tick(top_level()));                        // I7
  assert(pace_at_ != ~std::uint64_t{0} || !lookahead_occupied(top_level()));  // I8
  if (now > now_) now_ = now;
  // now_ is in [0, Nanos::max()], so its tick is at most ticks_.max_tick().
  const std::uint64_t target = ticks_.floor(static_cast<std::uint64_t>(now_.count()));
  target_ = target;
  std::size_t ran = 0;
  if (!quiet_until(target)) {
    ran = pass_stays_in_unit(target, limit) ? pass_in_unit(target) : pass(target, limit);
  } else if (target >= pace_at_ || ((target ^ cur_) >> kLevelBits) != 0) {
    quiet_advance(target);
  } else {
    cur_ = target;  // quiet_end_ was low (an event cancelled since, or a unit crossed since a pass)
  }
  settle_quiet_end();
  return ran;
}

// The pass of an advance() that meets something on its way: callbacks, cascades, or leftovers.
template <class Policy>
std::size_t WheelCore<Policy>::pass(std::uint64_t target, std::size_t limit) {
  // From here callbacks run.
  const PassScope scope(*this);
  set_quiet_end(0);  // a nested advance() from a callback must not take the inline case (I9)
  lag_bound_ = 0;    // and a callback's link is due by cur_, the tick being run (I1)
  const std::uint64_t moved_before = stats_.moved;
  // The staged prefetch hides DRAM misses; while the timers fit in L2 (the test cancel() makes)
  // it is only work, so it is skipped.
  const bool in_cache = pending_ < cancel_batch_from_;
  if (!in_cache) prefetch_upcoming(/*successors=*/true);

  std::size_t ran = 0;
  try {
    // First what is due at or before cur_: late timers (I3; those a cut-short call left and those
    // due since, merged, so that what this call's callbacks make due waits for the next call)
    // ahead of the leftovers of a pass cut short (I1). Then the ticks.
    if (occupied(kDueSlot)) merge(kDueSlot, kLateSlot);
    if (occupied(kLateSlot)) ran = fire(kLateSlot, limit);
    if (!occupied(kLateSlot) && occupied(kBatchSlot)) ran += fire(kBatchSlot, limit - ran);
    const bool paced = target >= pace_at_ && !occupied(kLateSlot) && !occupied(kBatchSlot);
    if (paced) pace(target, top_level());
    ran += step(target, limit - ran);
    if (paced) plan_pace(top_level());  // I8 after the share moved (step() did, if it crossed a unit)
  } catch (...) {
    // The callback that threw counts as fired and the rest resume in the next call. As after a
    // pass cut short by its limit, step on without firing so that cur_ does not lag behind time
    // that holds nothing due. The throw may have left step() after it crossed a unit boundary and
    // before it planned the look-ahead cascade: planned here (I8).
    step(target, 0);
    plan_pace(top_level());
    throw;
  }
  if (!in_cache) prefetch_upcoming(/*successors=*/false);
  stats_.max_pass_work = std::max<std::uint64_t>(stats_.max_pass_work, ran + (stats_.moved - moved_before));
  return ran;
}

// Whether this call's pass is the common one of a loop that advances tick by tick, which
// pass_in_unit() runs: no limit (advance()'s default), no late, due or batch timers, no paced share
// due, and target in cur_'s level-1 unit, so that only level-0 slots hold events on the way (I2)
// and no cascade is crossed; and next_event_ after cur_ (I7), which a step leaves it.
template <class Policy>
bool WheelCore<Policy>::pass_stays_in_unit(std::uint64_t target, std::size_t limit) const noexcept {
  return limit == std::numeric_limits<std::size_t>::max() &&
         ((nonempty_words_ >> (kDueSlot / 64)) & 1) == 0 && target < pace_at_ &&
         ((target ^ cur_) >> kLevelBits) == 0 && next_event_ > cur_;
}

// pass() and step() for the case pass_stays_in_unit() describes: each level-0 slot with timers up
// to target is run in place, and the next found in level 0's bitmap alone, bounded by the start
// of the next level-1 unit (the earliest an upper level's event can be); the upper levels, the
// special slots, the cascade and the pacing are not looked at, and the bound is not recomputed
// over every level. callgrind on W3 at 10k: 625 -> 547 instructions per fired timer. A throw leaves
// the wheel as pass() leaves it after one. Always inlined into advance_slow(), its one caller: a
// call and a prologue fewer in every tick that fires (W3 at 10k: 534 -> 517 instructions).
template <class Policy>
inline std::size_t WheelCore<Policy>::pass_in_unit(std::uint64_t target) {
  const PassScope scope(*this);
  set_quiet_end(0);  // as in pass()
  lag_bound_ = 0;
  const bool in_cache = pending_ < cancel_batch_from_;
  if (!in_cache) prefetch_upcoming(/*successors=*/true);
  const std::uint64_t unit_end = ((cur_ >> kLevelBits) + 1) << kLevelBits;
  std::size_t ran = 0;
  while (next_event_ <= target) {
    cur_ = next_event_;
    const auto slot = static_cast<unsigned>(cur_ & (kSlots - 1));
    try {
      ran += fire(slot, std::numeric_limits<std::size_t>::max() - ran);
    } catch (...) {
      // What step() and then pass() do on a throw: the rest of the tick waits in the batch slot.
      splice(slot, kBatchSlot);
      step(target, 0);
      plan_pace(top_level());
      throw;
    }
    // What the callbacks linked is in the bitmap; what they unlinked can only make this early.
    next_event_ = level_empty(0) ? unit_end : std::min(unit_end, next_level0_tick());
  }
  cur_ = target;  // nothing is due on the rest of the way (I7)
  if (!in_cache) prefetch_upcoming(/*successors=*/false);
  stats_.max_pass_work = std::max<std::uint64_t>(stats_.max_pass_work, ran);
  return ran;
}

// Logically const: it changes no observable state. Nodes are queued only by cancel() and
// reschedule(), non-const calls, so a wheel with a non-empty queue was not defined const and the
// cast is sound.
template <class Policy>
void WheelCore<Policy>::finish_unlinks() const noexcept {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-const-cast): sound, as said above
  if (unlink_queued_ != 0 || moves_queued_ != 0) const_cast<WheelCore*>(this)->flush_unlinks();
}

template <class Policy>
std::optional<Nanos> WheelCore<Policy>::next_deadline() const noexcept {
  // Queued unlinks leave slots marked occupied by dead nodes; finish them so the answer is exact.
  finish_unlinks();
  if (pending_ == 0) return std::nullopt;
  // From inside a callback, the rest of the tick being run may still sit in its level-0 slot
  // (step() runs a slot in place when its limit allows); outside a pass that slot is empty (I2).
  if (occupied(kDueSlot) || occupied(kLateSlot) || occupied(kBatchSlot) ||
      occupied(static_cast<unsigned>(cur_ & (kSlots - 1)))) {
    return now_;
  }
  const std::uint64_t t = next_event_tick(top_level(), /*dues=*/true);
  // Nothing linked although pending_ > 0: the one pending timer is a periodic timer whose callback
  // is running (this is called from inside it); its next run is not known until it returns.
  if (t == ~std::uint64_t{0}) return std::nullopt;
  assert(t <= ticks_.max_tick());
  return Nanos(static_cast<Nanos::rep>(t) * tick_.count());
}

template <class Policy>
WheelStats WheelCore<Policy>::stats() const noexcept {
  WheelStats s = stats_;
  // `scheduled` is derived from the accounting identity (WheelStats), not counted: every timer
  // scheduled ends in a one-shot fire or a cancel, or is still pending, and fired - (rearmed -
  // skipped) is the one-shot fires (a periodic run or skip counts in rearmed, a run in fired too).
  // Each path that ends a timer changes pending_ and its own count with no callback in between, so
  // the identity holds whenever this can be called, from a callback too. A count of its own was
  // one more wheel field read and written by every schedule: taking it out made tickwheel-bench's
  // `schedule` 16% cheaper at 10k, 17% at 100k and 19% at 1M (9 alternations, medians 8.04 ->
  // 6.77, 8.31 -> 6.89, 9.02 -> 7.34 ns), with no instruction of the path otherwise changed.
  s.scheduled = pending_ + s.cancelled + s.fired + s.skipped - s.rearmed;
  s.pool_nodes = pool_.touched();
  s.pool_capacity = pool_.capacity();
  s.pool_segments = pool_.segments();
  s.bytes = pool_.bytes_touched() + kSlotBytes + sizeof(std::uint32_t) * kAllSlots;
  return s;
}

}  // namespace tickwheel::detail
