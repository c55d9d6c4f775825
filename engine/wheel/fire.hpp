// engine/wheel/fire.hpp — the hierarchical wheel's running due timers: a slot's timers run, one-
// shot and periodic, and a periodic timer's next run. Out-of-line members of WheelCore<Policy>,
// included through engine/wheel/wheel_impl.hpp (whose invariants I1..I11 they keep).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

// Running -> pending, the generation unchanged (so the timer's id stays valid), and linked at
// `next`: in the wheel if that is after this call's now, else in the due slot, for the next call
// (I3: the due slot), so a timer that is behind runs once per call and cannot livelock a pass. If a cancel
// came while the callback ran, the re-arm is refused and the lifetime ends here instead.
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
  const std::uint64_t due = node->due;  // the tick this run is for: <= target_ (I3: the due slot)
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

}  // namespace tickwheel::detail
