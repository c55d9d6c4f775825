// engine/wheel/occupancy.hpp — the hierarchical wheel's the occupancy bitmaps and the next event:
// bit scans over the slots, the next tick at which anything happens, next_deadline() and stats().
// Out-of-line members of WheelCore<Policy>, included through engine/wheel/wheel_impl.hpp (whose
// invariants I1..I11 they keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

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

// I6, for debug assertions: the summary word says which bitmap words are non-zero.
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
// lower bound of those dues (I2: slot placement), only when it holds more than kDeadlineScan nodes.
// next_event_ and the passes step by the events, which a unit start must stop, since the slot moves down
// there. O(levels * kDeadlineScan).
template <class Policy>
std::uint64_t WheelCore<Policy>::next_event_tick(unsigned top, bool dues) const noexcept {
  std::uint64_t best = ~std::uint64_t{0};
  if (!level_empty(0)) {
    best = next_level0_tick();  // a level-0 slot's tick is its nodes' due (I2: slot placement)
    // An upper level's events are starts of its units after cur_'s (I2: slot placement), all multiples of 256
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
      assert((node->due & kMoving) == 0 &&
             node->due >= start);  // the move queue is flushed (I11: a queued move)
      best = std::min(best, node->due);
    }
  }
  return best;
}

template <class Policy>
std::optional<Nanos> WheelCore<Policy>::next_deadline() const noexcept {
  // Queued unlinks leave slots marked occupied by dead nodes; finish them so the answer is exact.
  finish_unlinks();
  if (pending_ == 0) return std::nullopt;
  // From inside a callback, the rest of the tick being run may still sit in its level-0 slot
  // (step() runs a slot in place when its limit allows); outside a pass that slot is empty (I2: slot
  // placement).
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
  // the identity holds whenever this can be called, from a callback too. A count of its own would
  // be one more wheel field read and written by every schedule, for a number only stats() needs.
  s.scheduled = pending_ + s.cancelled + s.fired + s.skipped - s.rearmed;
  s.pool_nodes = pool_.touched();
  s.pool_capacity = pool_.capacity();
  s.pool_segments = pool_.segments();
  s.bytes = pool_.bytes_touched() + kSlotBytes + sizeof(std::uint32_t) * kAllSlots;
  return s;
}

}  // namespace tickwheel::detail
