// engine/wheel/advance.hpp — the hierarchical wheel's advance(): a pass from cur_ to a target tick,
// the quiet case that only moves now_, and the prefetch of upcoming slots. Out-of-line members of
// WheelCore<Policy>, included through engine/wheel/wheel_impl.hpp (whose invariants I1..I11 they
// keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

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
  set_no_event_before(0);  // for a step outside advance() (a cancel or move that ends a lag): I9
  lag_window_end_ = 0;
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
      // The budget covers every node the slot can hold (I4: occupancy), so the slot is run where it is and
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
// target still (I7: the next event).
template <class Policy>
void WheelCore<Policy>::quiet_advance(std::uint64_t target) noexcept {
  const unsigned top = top_level();
  if (target >= pace_at_) stats_.max_pass_work = std::max(stats_.max_pass_work, pace(target, top));
  cur_ = target;
  plan_pace(top);  // I8, for the new cur_
}

// Brings cur_ and target_ to now_'s tick where inline advance() calls left them behind (I1: the tick in
// process): first thing in advance_slow(), so that a pass starts where the wheel's time is, and in the
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
// or a target at or past no_event_before_. Leaves no_event_before_ exact for the next call (I9: no event
// before), unless a callback throws (then it stays 0 and the next call comes here).
template <class Policy>
std::size_t WheelCore<Policy>::advance_slow(Nanos now, std::size_t limit) {
  if (in_advance_) return 0;
  ++stats_.passes;
  if ((unlink_queued_ | moves_queued_) != 0) flush_unlinks();
  // Late timers run first at the tick of the old now, so that what their callbacks schedule at or
  // before it waits for the next call (I3: the due slot): cur_ catches up to it (I1: the tick in process).
  // Without them the pass steps from cur_ wherever it lags, as through any stretch with nothing on it.
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
    cur_ = target;  // no_event_before_ was low (an event cancelled since, or a unit crossed since a pass)
  }
  settle_no_event_before();
  return ran;
}

// The pass of an advance() that meets something on its way: callbacks, cascades, or leftovers.
template <class Policy>
std::size_t WheelCore<Policy>::pass(std::uint64_t target, std::size_t limit) {
  // From here callbacks run.
  const PassScope scope(*this);
  set_no_event_before(
      0);  // a nested advance() from a callback must not take the inline case (I9: no event before)
  lag_window_end_ = 0;  // and a callback's link is due by cur_, the tick being run (I1: the tick in process)
  const std::uint64_t moved_before = stats_.moved;
  // The staged prefetch hides DRAM misses; while the timers fit in L2 (the test cancel() makes)
  // it is only work, so it is skipped.
  const bool in_cache = pending_ < cancel_batch_from_;
  if (!in_cache) prefetch_upcoming(/*successors=*/true);

  std::size_t ran = 0;
  try {
    // First what is due at or before cur_: late timers (I3; those a cut-short call left and those
    // due since, merged, so that what this call's callbacks make due waits for the next call)
    // ahead of the leftovers of a pass cut short (I1: the tick in process). Then the ticks.
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
    // before it planned the look-ahead cascade: planned here (I8: the pace mark).
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
// due, and target in cur_'s level-1 unit, so that only level-0 slots hold events on the way (I2: slot
// placement) and no cascade is crossed; and next_event_ after cur_ (I7: the next event), which a step leaves
// it.
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
// over every level: the common tick costs what a tick of level 0 needs. A throw leaves the wheel
// as pass() leaves it after one. Always inlined into advance_slow(), its one caller: a call and a
// prologue fewer in every tick that fires.
template <class Policy>
inline std::size_t WheelCore<Policy>::pass_in_unit(std::uint64_t target) {
  const PassScope scope(*this);
  set_no_event_before(0);  // as in pass()
  lag_window_end_ = 0;
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
  cur_ = target;  // nothing is due on the rest of the way (I7: the next event)
  if (!in_cache) prefetch_upcoming(/*successors=*/false);
  stats_.max_pass_work = std::max<std::uint64_t>(stats_.max_pass_work, ran);
  return ran;
}

}  // namespace tickwheel::detail
