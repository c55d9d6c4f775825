// The Wheel's memory: no heap allocation per timer. This file replaces every global operator new /
// delete (plain, array, sized, aligned, nothrow) with counting versions (counting_new.cpp), which is
// why it is built as its own executable, tickwheel-alloc-tests. It checks that
//   - a wheel warmed up to 100k pending timers runs 1M churn operations (cancel a random pending
//     timer, schedule a new one, advance one tick) with zero operator-new calls and no pool growth;
//   - on such a wheel, reschedules (within a slot's unit and to other slots), the queries
//     (is_pending, deadline, remaining), for_each_pending() and clear() with a refill call
//     operator new zero times and do not grow the pool;
//   - scheduling a million timers calls operator new zero times (the pool takes its segments from
//     map_memory(), which never calls it);
//   - 10k periodic timers of every cadence and misfire policy run 100k advances (a quarter of a
//     million periods) with zero operator-new calls and no pool growth: a period re-links the
//     timer's own node;
//   - the wheel's memory per pending timer at 1M pending (stats().bytes / pending) is one 64-byte
//     node plus its share of the slot arrays, with the slot-array size measured, not hard-coded;
//   - a wheel with a reserve of 1M takes no minor page fault (getrusage) across a million schedules,
//     and faults again, one segment further, past it; the same loop without a reserve faults.
// Counters only; nothing here depends on time.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "counting_new.hpp"
#include "support.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

TEST(AllocCounter, SeesEveryVariant) {
  // Direct calls of the allocation functions: unlike new-expressions, these cannot be elided.
  const std::uint64_t before = news();
  const auto a64 = std::align_val_t{64};
  ::operator delete(::operator new(8));
  ::operator delete[](::operator new[](8));
  ::operator delete(::operator new(8, std::nothrow), std::nothrow);
  ::operator delete[](::operator new[](8, std::nothrow), std::nothrow);
  ::operator delete(::operator new(64, a64), a64);
  ::operator delete[](::operator new[](128, a64), a64);
  ::operator delete(::operator new(64, a64, std::nothrow), a64, std::nothrow);
  ::operator delete[](::operator new[](64, a64, std::nothrow), a64, std::nothrow);
  EXPECT_EQ(news() - before, 8u) << "the replacement operators are not the ones in use";
  std::vector<int> v(100);  // and the library's allocations go through them too
  EXPECT_EQ(news() - before, 9u);
}

// Churn state: 100k slots, each holding one pending timer or free. Pre-sized, so the test itself
// does not allocate during the measured phase.
struct Churn {
  struct Slot {
    tickwheel::TimerId id;
    bool used = false;
  };
  std::vector<Slot> slots;
  std::vector<std::uint32_t> free_slots;
  std::uint64_t fired = 0;
  std::uint64_t cancel_mismatch = 0;
  std::uint64_t schedule_failed = 0;

  explicit Churn(std::size_t n) : slots(n) {
    free_slots.reserve(n);
    for (std::size_t i = n; i-- > 0;) free_slots.push_back(static_cast<std::uint32_t>(i));
  }
};

void fill(Wheel& w, Churn& c, std::mt19937_64& rng) {
  while (!c.free_slots.empty()) {
    const std::uint32_t i = c.free_slots.back();
    c.free_slots.pop_back();
    const Nanos delay = Nanos(1ms) * static_cast<std::int64_t>(1 + rng() % 100000);  // up to level 2
    const TimerId id = w.schedule_after(delay, [cp = &c, i] {
      cp->slots[i].used = false;
      cp->free_slots.push_back(i);
      ++cp->fired;
    });
    if (!id) {
      ++c.schedule_failed;
      c.free_slots.push_back(i);
      return;
    }
    c.slots[i] = {id, true};
  }
}

void churn(Wheel& w, Churn& c, std::mt19937_64& rng, std::uint64_t ops) {
  for (std::uint64_t op = 0; op < ops; ++op) {
    // Cancel a random pending timer.
    for (int tries = 0; tries < 16; ++tries) {
      const std::size_t i = rng() % c.slots.size();
      if (!c.slots[i].used) continue;
      if (!w.cancel(c.slots[i].id)) ++c.cancel_mismatch;
      c.slots[i].used = false;
      c.free_slots.push_back(static_cast<std::uint32_t>(i));
      break;
    }
    // Schedule new ones (the replacement, and one for each timer that fired), advance one tick.
    fill(w, c, rng);
    w.advance(w.now() + 1ms);
  }
  fill(w, c, rng);  // replace what the last advance fired
}

// A phase measured on a wheel: its operator-new calls, and the wheel's stats before and after.
struct Phase {
  WheelStats before;
  WheelStats after;
  std::uint64_t allocations;
};
template <class Run>
Phase measure(const Wheel& w, Run run) {
  const std::uint64_t news_before = news();
  const WheelStats before = w.stats();
  run();
  const WheelStats after = w.stats();
  return {before, after, news() - news_before};
}

// A wheel filled to kWarmPending timers by a Churn, then churned `warm_up` operations so that its
// pool has reached its high-water mark.
constexpr std::size_t kWarmPending = 100'000;
struct WarmWheel {
  WarmWheel(std::uint64_t seed, std::uint64_t warm_up) : rng(seed) {
    fill(w, c, rng);
    EXPECT_EQ(w.pending_count(), kWarmPending);
    churn(w, c, rng, warm_up);
  }
  Wheel w{{.tick = 1ms}};
  Churn c{kWarmPending};
  std::mt19937_64 rng;
};

TEST(WheelAlloc, SteadyStateChurnAllocatesNothing) {
  constexpr std::size_t kPending = kWarmPending;
  WarmWheel warm(31337, 300'000);
  Wheel& w = warm.w;
  Churn& c = warm.c;
  ASSERT_EQ(w.pending_count(), kPending);

  const auto [before, after, allocations] = measure(w, [&] { churn(w, c, warm.rng, 1'000'000); });

  EXPECT_EQ(allocations, 0u) << "operator new called during steady-state schedule/cancel/advance";
  EXPECT_EQ(after.pool_segments, before.pool_segments) << "the pool grew in steady state";
  EXPECT_EQ(after.pool_capacity, before.pool_capacity);
  EXPECT_EQ(c.cancel_mismatch, 0u) << "cancel of a pending timer returned false";
  EXPECT_EQ(c.schedule_failed, 0u);
  EXPECT_EQ(w.pending_count(), kPending);
  EXPECT_GT(after.fired - before.fired, 100'000u) << "the churn is meant to fire timers too";
  EXPECT_EQ(after.fired - before.fired + (after.cancelled - before.cancelled),
            after.scheduled - before.scheduled);
  EXPECT_GT(after.moved, before.moved) << "the churn is meant to cascade";
  EXPECT_LE(after.pool_nodes, kPending + 64) << "nodes are recycled, not leaked";
  RecordProperty("pool_nodes", std::to_string(after.pool_nodes));
}

// On a warm wheel: reschedule (near, mostly within the slot's unit, and far, to another slot), the
// queries, a walk of every pending timer, and clear() followed by a refill to the same population.
TEST(WheelAlloc, RescheduleQueriesWalkAndClearAllocateNothing) {
  constexpr std::size_t kPending = kWarmPending;
  WarmWheel warm(4242, 100'000);
  Wheel& w = warm.w;
  Churn& c = warm.c;
  std::mt19937_64& rng = warm.rng;
  ASSERT_EQ(w.pending_count(), kPending);

  std::uint64_t moves = 0;
  std::uint64_t moved = 0;
  std::uint64_t visited = 0;
  std::uint64_t cleared = 0;
  const auto [before, after, allocations] = measure(w, [&] {
    for (int round = 0; round < 3; ++round) {
      for (std::uint64_t op = 0; op < 300'000; ++op) {
        const std::size_t i = rng() % c.slots.size();
        if (!c.slots[i].used) continue;
        const TimerId id = c.slots[i].id;
        const std::optional<Nanos> at = w.deadline(id);
        if (!w.is_pending(id) || !at || !w.remaining(id)) {
          ++c.cancel_mismatch;
          continue;
        }
        const auto ms = [&rng](std::uint64_t up_to) {
          return Nanos(1ms) * static_cast<std::int64_t>(1 + rng() % up_to);
        };
        ++moves;
        moved += op % 2 == 0 ? w.reschedule(id, *at + ms(4)) : w.reschedule_after(id, ms(100'000));
        if (op % 64 == 0) w.advance(w.now() + 1ms);
        if (op % 1024 == 0) fill(w, c, rng);
      }
      fill(w, c, rng);
      w.for_each_pending([&visited](TimerId, Nanos) { ++visited; });
      cleared += w.clear();
      for (std::size_t i = 0; i < c.slots.size(); ++i) {
        if (!c.slots[i].used) continue;
        c.slots[i].used = false;
        c.free_slots.push_back(static_cast<std::uint32_t>(i));
      }
      fill(w, c, rng);
    }
  });

  EXPECT_EQ(allocations, 0u) << "operator new called by reschedule, a query, the walk or clear()";
  EXPECT_EQ(after.pool_segments, before.pool_segments) << "the pool grew";
  EXPECT_EQ(c.cancel_mismatch, 0u) << "a pending timer's queries said otherwise";
  EXPECT_EQ(moved, moves) << "a reschedule of a pending timer returned false";
  EXPECT_EQ(after.rescheduled - before.rescheduled, moves);
  EXPECT_GT(after.rescheduled_in_place - before.rescheduled_in_place, moves / 4);
  EXPECT_EQ(visited, 3 * kPending);
  EXPECT_EQ(cleared, 3 * kPending);
  EXPECT_EQ(w.pending_count(), kPending);
}

TEST(WheelAlloc, PeriodicTimersAllocateNothingPerPeriod) {
  constexpr std::size_t kTimers = 10'000;
  Wheel w({.tick = 1ms});
  std::mt19937_64 rng(2718);
  std::uint64_t runs = 0;
  for (std::size_t i = 0; i < kTimers; ++i) {
    const PeriodicOptions opts{.cadence = static_cast<Cadence>(i % 2),
                               .initial_delay = std::nullopt,
                               .misfire = static_cast<Misfire>(i % 3)};
    const Nanos period = Nanos(1ms) * static_cast<std::int64_t>(1 + rng() % 5000);  // up to level 1
    ASSERT_TRUE(w.schedule_every(
        period, [&runs] { ++runs; }, opts));
  }
  // Warm-up: every level the timers will use has been used, so the measured phase is steady.
  for (int step = 0; step < 10'000; ++step) w.advance(w.now() + 1ms);

  const std::uint64_t runs_before = runs;
  const auto [before, after, allocations] = measure(w, [&w] {
    for (int step = 0; step < 100'000; ++step) {
      w.advance(w.now() + Nanos(1ms) * static_cast<std::int64_t>(1 + step % 3));  // now and then a gap
    }
  });

  EXPECT_EQ(allocations, 0u) << "operator new called while periodic timers ran";
  EXPECT_EQ(after.pool_segments, before.pool_segments) << "the pool grew";
  EXPECT_EQ(after.pool_nodes, kTimers) << "one node per periodic timer, for its whole life";
  EXPECT_EQ(w.pending_count(), kTimers);
  EXPECT_GT(runs - runs_before, 200'000u) << "the phase is meant to run many periods";
  EXPECT_EQ(after.rearmed - before.rearmed, (after.fired - before.fired) + (after.skipped - before.skipped));
}

TEST(WheelAlloc, AMillionPendingCostOneNodeEachPlusTheSlotArrays) {
  constexpr std::size_t kPending = 1'000'000;
  const std::uint64_t news_ctor = news();
  Wheel w({.tick = 1ms});
  // The constructor maps the slot arrays (a mapping of their own, committed page by page as links
  // write them) and takes nothing from the heap for them.
  EXPECT_EQ(news() - news_ctor, 0u) << "the constructor took the slot arrays from the heap";
  const WheelStats empty = w.stats();
  // stats().bytes of an empty wheel: its slot arrays, at least one cache line per slot of every level.
  EXPECT_GE(empty.bytes, std::uint64_t{Wheel::kLevels} * Wheel::kSlots * 64);

  std::mt19937_64 rng(5);
  const std::uint64_t news_before = news();
  for (std::size_t i = 0; i < kPending; ++i) {
    const Nanos delay = Nanos(1us) * static_cast<std::int64_t>(1 + rng() % 3'600'000'000ull);  // up to 1 h
    ASSERT_TRUE(w.schedule_after(delay, [] {}));
  }
  EXPECT_EQ(news() - news_before, 0u) << "schedule allocated from the heap while the pool grew";
  ASSERT_EQ(w.pending_count(), kPending);

  const WheelStats s = w.stats();
  const std::uint64_t slot_arrays = empty.bytes;
  const double per_pending = static_cast<double>(s.bytes) / static_cast<double>(kPending);
  const double bound = static_cast<double>(sizeof(detail::Node)) +
                       static_cast<double>(slot_arrays) / static_cast<double>(kPending);
  RecordProperty("bytes_per_pending", std::to_string(per_pending));
  RecordProperty("slot_array_bytes", std::to_string(slot_arrays));
  std::printf("[ memory   ] %.2f bytes per pending timer at 1M pending (slot arrays %llu bytes)\n",
              per_pending, static_cast<unsigned long long>(slot_arrays));
  EXPECT_LE(per_pending, bound);
  EXPECT_GE(s.bytes, kPending * sizeof(detail::Node)) << "stats().bytes must count every node";
  EXPECT_GE(s.pool_capacity, kPending);
  EXPECT_EQ(s.pool_nodes, kPending);
}

// A million schedules into a fresh wheel, into an id array touched beforehand: what faults is the
// wheel's node memory, unless it was reserved. No allocation, no clock, no random numbers in the
// loop, so the count is the wheel's alone.
struct FreshMillion {
  static constexpr std::size_t kTimers = 1'000'000;
  std::vector<TimerId> ids = std::vector<TimerId>(kTimers);  // value-initialised: touched now
  std::uint64_t faults = 0;
  std::uint64_t scheduled = 0;

  void run(Wheel& w) {
    std::uint64_t fired = 0;
    const std::uint64_t before = minor_faults();
    for (std::size_t i = 0; i < kTimers; ++i) {
      // Deadlines over the first minute, as the benchmarks' (level 0 and level 1 slots).
      ids[i] =
          w.schedule_after(Nanos(1ms) * static_cast<std::int64_t>(1 + i % 60'000), [f = &fired] { ++*f; });
    }
    faults = minor_faults() - before;
    scheduled = 0;
    for (const TimerId id : ids) scheduled += id ? 1 : 0;
  }
};

TEST(WheelAlloc, AReservedWheelTakesNoPageFaultUntilItHoldsMoreThanItsReserve) {
  FreshMillion reserved;
  // A fresh reserved wheel per try (see fewest_minor_faults), each kept alive, so that no try
  // gets memory an earlier one committed; the last goes on below.
  std::deque<Wheel> tries;
  Wheel* w = nullptr;
  WheelStats at_start{};
  reserved.faults = fewest_minor_faults([&] {
    w = &tries.emplace_back(WheelOptions{.tick = 1ms, .reserve = FreshMillion::kTimers});
    at_start = w->stats();
    EXPECT_GE(at_start.pool_capacity, FreshMillion::kTimers);
    EXPECT_GE(at_start.bytes, FreshMillion::kTimers * sizeof(detail::Node)) << "the reserve is memory held";
    reserved.run(*w);
    EXPECT_EQ(reserved.scheduled, FreshMillion::kTimers);
    EXPECT_EQ(w->stats().pool_segments, at_start.pool_segments) << "the pool grew within its reserve";
    return reserved.faults;
  });
  EXPECT_EQ(reserved.faults, 0u) << "a schedule within the reserve took a page fault, on every try";

  // Past the reserve the pool grows as without one: its next segment, page by page.
  std::uint64_t fired = 0;
  const std::uint64_t before = minor_faults();
  for (std::size_t i = 0; i < 100'000; ++i) ASSERT_TRUE(w->schedule_after(1s, [f = &fired] { ++*f; }));
  EXPECT_GT(minor_faults() - before, 0u) << "memory past the reserve is touched as timers arrive";
  EXPECT_EQ(w->stats().pool_segments, at_start.pool_segments + 1) << "growth maps one segment at a time";

  // The control: the same loop into a wheel without a reserve faults its node memory in, so the
  // zero above is the reserve's doing, not a blind counter.
  FreshMillion lazy;
  Wheel l({.tick = 1ms});
  lazy.run(l);
  EXPECT_EQ(lazy.scheduled, FreshMillion::kTimers);
  EXPECT_GT(lazy.faults, 0u) << "the fault counter saw nothing: the test could not fail";
  RecordProperty("faults_without_reserve", std::to_string(lazy.faults));
  std::printf(
      "[ faults   ] 1M schedules into a fresh wheel: %llu minor faults with a reserve, %llu without\n",
      static_cast<unsigned long long>(reserved.faults), static_cast<unsigned long long>(lazy.faults));
}

}  // namespace
}  // namespace tickwheel::test
