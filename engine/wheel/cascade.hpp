// engine/wheel/cascade.hpp — the hierarchical wheel's cascading: moving an upper slot's nodes down,
// in full at its unit's start or a paced share ahead of it. Out-of-line members of
// WheelCore<Policy>, included through engine/wheel/wheel_impl.hpp (whose invariants I1..I11 they
// keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdint>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

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
        // are: next_event_ is at or before the event of the slot the node leaves (I7: the next event), itself
        // at or before the node's due; level 0 has no look-ahead slot to pace (I8: the pace mark); and every
        // caller runs with no_event_before_ 0 (a pass, a step) or sets it exactly after (quiet_advance(),
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

// Sets pace_at_ (I8: the pace mark) for where cur_ is now: for each occupied look-ahead slot, the tick by
// which its share since paced_ reaches kPaceBatch nodes (all of them, if it holds fewer), at the earliest the
// next tick. O(top), a division per occupied look-ahead slot.
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
      // count_ >= 1 for an occupied slot (I4: occupancy); the product is below 2^57 (a span below 2^54).
      const std::uint64_t count = std::max<std::uint64_t>((*count_)[slot], 1);
      when = std::max(when, from + std::min(count, kPaceBatch) * (start - from) / count);
    }
    at = std::min(at, when);
  }
  pace_at_ = at;
}

// At tick t, every upper-level slot whose unit starts at t moves down in full (I2: slot placement). Top level
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

}  // namespace tickwheel::detail
