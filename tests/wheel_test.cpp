// The Wheel's contract, one test (or a few) per rule of include/tickwheel/wheel.hpp and status.hpp:
// construction, ids, tick rounding, past deadlines, the horizon clamp, max_pending, cancel (incl.
// stale and garbage ids), re-entrant callbacks, the expiry limit, throwing callbacks,
// next_deadline(), empty-time jumps, callable lifetimes and the stats counters. Time is driven by
// hand; nothing sleeps and nothing reads a clock.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <vector>

#include "support.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

constexpr std::int64_t kMaxNs = std::numeric_limits<std::int64_t>::max();

std::uint32_t index_of(TimerId id) { return static_cast<std::uint32_t>(id.raw()); }

// ---------------------------------------------------------------------------------------------
// Construction and options

TEST(WheelOptions, DefaultsAndAcceptedBoundaries) {
  Wheel def;
  EXPECT_EQ(def.tick(), 1ms);
  EXPECT_EQ(def.now(), 0ns);
  EXPECT_EQ(def.pending_count(), 0u);
  EXPECT_FALSE(def.next_deadline().has_value());

  Wheel min_tick({.tick = Wheel::kMinTick});
  EXPECT_EQ(min_tick.tick(), 1us);
  Wheel max_tick({.tick = Wheel::kMaxTick});
  EXPECT_EQ(max_tick.tick(), 1h);
  Wheel late({.tick = 1ms, .start = 5s});
  EXPECT_EQ(late.now(), 5s);
  Wheel at_end({.tick = 1ms, .start = Nanos::max()});
  EXPECT_EQ(at_end.now(), Nanos::max());
  Wheel big_limit({.max_pending = std::size_t{0xFFFFFFFFu}});
  EXPECT_EQ(big_limit.pending_count(), 0u);
}

// The constructor must throw std::invalid_argument whose message names the bad value.
void expect_rejected(WheelOptions opts, const std::string& value_text) {
  try {
    Wheel w(opts);
    ADD_FAILURE() << "constructor accepted a bad option (expected the message to name " << value_text << ")";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(value_text), std::string::npos)
        << "message does not name the bad value " << value_text << ": " << e.what();
  } catch (...) {
    ADD_FAILURE() << "threw something other than std::invalid_argument for " << value_text;
  }
}

TEST(WheelOptions, RejectsBadTickStartAndMaxPendingNamingTheValue) {
  expect_rejected({.tick = 0ns}, "0");
  expect_rejected({.tick = -5ns}, "-5");
  expect_rejected({.tick = -1ms}, "-1000000");
  expect_rejected({.tick = 999ns}, "999");
  expect_rejected({.tick = 1h + 1ns}, "3600000000001");
  expect_rejected({.tick = Nanos::max()}, std::to_string(kMaxNs));
  expect_rejected({.tick = 1ms, .start = -1ns}, "-1");
  expect_rejected({.tick = 1ms, .start = -123456789ns}, "-123456789");
  expect_rejected({.tick = 1ms, .start = 0ns, .max_pending = std::size_t{1} << 32}, "4294967296");
  expect_rejected({.tick = 1ms, .start = 0ns, .max_pending = std::numeric_limits<std::size_t>::max()},
                  std::to_string(std::numeric_limits<std::size_t>::max()));
}

// ---------------------------------------------------------------------------------------------
// TimerId and Status

TEST(TimerIdTest, DefaultIsFalseWithNoTimer) {
  constexpr TimerId id;
  static_assert(!id);
  static_assert(id.status() == Status::no_timer);
  static_assert(id.raw() == 0);
  static_assert(TimerId::from_raw(0) == id);
  static_assert(std::is_trivially_copyable_v<TimerId>);
  EXPECT_FALSE(id);
  EXPECT_EQ(id.status(), Status::no_timer);
}

TEST(TimerIdTest, RawRoundTripsForLiveFailedAndDefaultIds) {
  Wheel w({.max_pending = 2});
  const TimerId a = w.schedule_after(1ms, [] {});
  const TimerId b = w.schedule_after(2ms, [] {});
  const TimerId failed = w.schedule_after(3ms, [] {});
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  ASSERT_FALSE(failed);
  EXPECT_NE(a, b);
  EXPECT_EQ(a.status(), Status::ok);
  EXPECT_EQ(failed.status(), Status::max_pending_reached);
  for (TimerId id : {a, b, failed, TimerId{}}) {
    EXPECT_EQ(TimerId::from_raw(id.raw()), id);
    EXPECT_EQ(TimerId::from_raw(id.raw()).raw(), id.raw());
    EXPECT_EQ(TimerId::from_raw(id.raw()).status(), id.status());
  }
  // A round-tripped id still cancels its timer.
  EXPECT_TRUE(w.cancel(TimerId::from_raw(a.raw())));
  EXPECT_FALSE(w.cancel(a));
}

TEST(StatusTest, NamesAreStable) {
  EXPECT_EQ(to_string(Status::ok), "ok");
  EXPECT_EQ(to_string(Status::no_timer), "no_timer");
  EXPECT_EQ(to_string(Status::max_pending_reached), "max_pending_reached");
  EXPECT_EQ(to_string(Status::out_of_memory), "out_of_memory");
}

TEST(CheckedTest, PassesGoodIdsAndThrowsScheduleErrorWithTheReason) {
  Wheel w({.max_pending = 1});
  const TimerId good = w.schedule_after(1ms, [] {});
  EXPECT_EQ(checked(good), good);
  try {
    static_cast<void>(checked(w.schedule_after(1ms, [] {})));
    ADD_FAILURE() << "checked() did not throw for a refused schedule";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.status(), Status::max_pending_reached);
    EXPECT_NE(std::string(e.what()).find("max_pending_reached"), std::string::npos) << e.what();
  }
  try {
    static_cast<void>(checked(TimerId{}));
    ADD_FAILURE() << "checked() did not throw for a default id";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.status(), Status::no_timer);
  }
  EXPECT_EQ(w.pending_count(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Tick rounding

TEST(WheelRounding, FiresAtFirstAdvanceAtOrPastDeadlineRoundedUp) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  ASSERT_TRUE(w.schedule_at(1500us, [&] { ++ran; }));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(2ms));
  EXPECT_EQ(w.advance(1500us), 0u);  // past the deadline, not past its tick
  EXPECT_EQ(w.advance(1999999ns), 0u);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(w.advance(2ms), 1u);
  EXPECT_EQ(ran, 1);
}

TEST(WheelRounding, NeverFiresOneNanosecondBeforeTheRoundedDeadline) {
  std::vector<std::int64_t> ks = boundary_ticks(2);
  ks.push_back(2);
  ks.push_back(70000);
  for (Nanos tick : {Nanos(1us), Nanos(1ms), Nanos(1234567ns), Nanos(1h)}) {
    SCOPED_TRACE("tick " + std::to_string(tick.count()) + "ns");
    for (std::int64_t k : ks) {
      if (k >= max_ticks(tick)) continue;
      for (Nanos offset : {Nanos(0), Nanos(1), tick / 2, tick - Nanos(1)}) {
        Wheel w({.tick = tick});
        // deadline in (k-1 .. k] ticks: it must fire exactly at k ticks.
        const Nanos deadline = k * tick - offset;
        int ran = 0;
        ASSERT_TRUE(w.schedule_at(deadline, [&] { ++ran; }));
        EXPECT_EQ(w.advance(k * tick - 1ns), 0u) << "k=" << k << " offset=" << offset.count();
        EXPECT_EQ(ran, 0);
        EXPECT_EQ(w.advance(k * tick), 1u) << "k=" << k << " offset=" << offset.count();
        EXPECT_EQ(ran, 1);
      }
    }
  }
}

TEST(WheelRounding, UnalignedNowRoundsTheZeroDelayDeadlineUp) {
  // now = 1.5 ms: schedule_after(0) has deadline 1.5 ms, which rounds up to 2 ms.
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(1500us), 0u);
  int ran = 0;
  ASSERT_TRUE(w.schedule_after(0ns, [&] { ++ran; }));
  EXPECT_EQ(w.advance(1500us), 0u);
  EXPECT_EQ(w.advance(1999999ns), 0u);
  EXPECT_EQ(w.advance(2ms), 1u);
  EXPECT_EQ(ran, 1);
}

TEST(WheelRounding, TimeNeverGoesBack) {
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(10ms), 0u);
  EXPECT_EQ(w.now(), 10ms);
  EXPECT_EQ(w.advance(5ms), 0u);
  EXPECT_EQ(w.now(), 10ms);
  int ran = 0;
  ASSERT_TRUE(w.schedule_after(1ms, [&] { ++ran; }));  // deadline 11 ms, not 6 ms
  EXPECT_EQ(w.advance(7ms), 0u);
  EXPECT_EQ(w.advance(10ms), 0u);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(w.advance(11ms), 1u);
}

// ---------------------------------------------------------------------------------------------
// Deadlines at or before the current tick

TEST(WheelPast, PastZeroAndNegativeDeadlinesFireOnTheNextAdvanceEvenWithTheSameNow) {
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(10ms), 0u);
  int ran = 0;
  ASSERT_TRUE(w.schedule_at(3ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(10ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(0ns, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(-5s, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(Nanos::min(), [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_after(0ns, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_after(-1ns, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_after(-3ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_after(Nanos::min(), [&] { ++ran; }));  // saturates, no overflow
  EXPECT_EQ(w.pending_count(), 9u);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(10ms), 9u);
  EXPECT_EQ(ran, 9);
  EXPECT_EQ(w.pending_count(), 0u);
}

TEST(WheelPast, ZeroDelayAtStartFiresOnAdvanceOfStart) {
  for (Nanos start : {Nanos(0), Nanos(7ms), Nanos(123456789ms)}) {
    Wheel w({.tick = 1ms, .start = start});
    int ran = 0;
    ASSERT_TRUE(w.schedule_after(0ns, [&] { ++ran; }));
    EXPECT_EQ(w.advance(start), 1u) << "start " << start.count();
    EXPECT_EQ(ran, 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Overflow and the horizon

TEST(WheelHorizon, HorizonIsTheLastTickNanosCanHold) {
  for (Nanos tick : {Nanos(1us), Nanos(1ms), Nanos(1234567ns), Nanos(1h)}) {
    Wheel w({.tick = tick});
    EXPECT_EQ(w.horizon().count(), max_ticks(tick) * tick.count()) << tick.count();
    EXPECT_LE(w.horizon(), Nanos::max());
    EXPECT_GT(tick.count(), kMaxNs - w.horizon().count()) << "one more tick would not fit";
  }
}

TEST(WheelHorizon, ScheduleAfterMaxSaturatesToTheHorizonAndNeverFiresEarly) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  const TimerId id = w.schedule_after(Nanos::max(), [&] { ++ran; });
  ASSERT_TRUE(id);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_GT(*w.next_deadline(), w.now());
  EXPECT_LE(*w.next_deadline(), w.horizon());
  const Nanos year = std::chrono::duration_cast<Nanos>(std::chrono::years(1));
  EXPECT_EQ(w.advance(year), 0u);
  EXPECT_EQ(w.advance(w.now() + year), 0u);
  EXPECT_EQ(w.advance(100 * year), 0u);
  EXPECT_EQ(w.advance(w.horizon() / 2), 0u);
  EXPECT_EQ(w.advance(w.horizon() - 1ms), 0u);
  EXPECT_EQ(w.advance(w.horizon() - 1ns), 0u);
  EXPECT_EQ(ran, 0);
  // Within level 0 of its tick now: next_deadline() is exact.
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(w.horizon()));
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.next_deadline().has_value());
}

TEST(WheelHorizon, HugeDeadlinesClampToTheHorizonAndFireAtAdvanceOfMax) {
  for (Nanos tick : {Nanos(1us), Nanos(1ms), Nanos(1h)}) {
    SCOPED_TRACE("tick " + std::to_string(tick.count()));
    Wheel w({.tick = tick});
    int ran = 0;
    ASSERT_TRUE(w.schedule_at(Nanos::max(), [&] { ++ran; }));
    ASSERT_TRUE(w.schedule_at(w.horizon() + 1ns, [&] { ++ran; }));
    ASSERT_TRUE(w.schedule_at(w.horizon(), [&] { ++ran; }));
    ASSERT_TRUE(w.schedule_after(Nanos::max(), [&] { ++ran; }));
    EXPECT_EQ(w.advance(w.horizon() - 1ns), 0u);
    EXPECT_EQ(ran, 0);
    EXPECT_EQ(w.advance(Nanos::max()), 4u);
    EXPECT_EQ(ran, 4);
  }
}

TEST(WheelHorizon, WheelStartingNearTheEndOfNanos) {
  const Nanos tick = 1ms;
  const Nanos horizon = Nanos(max_ticks(tick) * tick.count());
  Wheel w({.tick = tick, .start = horizon - 50ms});
  EXPECT_EQ(w.horizon(), horizon);
  int near = 0, far = 0, huge = 0;
  ASSERT_TRUE(w.schedule_after(10ms, [&] { ++near; }));
  ASSERT_TRUE(w.schedule_after(Nanos::max(), [&] { ++far; }));  // now + max overflows: saturates
  ASSERT_TRUE(w.schedule_after(1h, [&] { ++huge; }));           // past the horizon: clamped
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(horizon - 40ms));
  EXPECT_EQ(w.advance(horizon - 40ms - 1ns), 0u);
  EXPECT_EQ(w.advance(horizon - 40ms), 1u);
  EXPECT_EQ(near, 1);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(horizon));
  EXPECT_EQ(w.advance(horizon - 1ns), 0u);
  EXPECT_EQ(w.advance(Nanos::max()), 2u);
  EXPECT_EQ(far, 1);
  EXPECT_EQ(huge, 1);
  // At the end of time every new timer is due at once.
  ASSERT_TRUE(w.schedule_after(1h, [&] { ++huge; }));
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  EXPECT_EQ(huge, 2);
}

TEST(WheelHorizon, WheelStartingAtNanosMaxFiresEverythingOnTheNextAdvance) {
  Wheel w({.tick = 1ms, .start = Nanos::max()});
  int ran = 0;
  ASSERT_TRUE(w.schedule_after(1ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_after(Nanos::max(), [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(0ns, [&] { ++ran; }));
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(Nanos::max()), 3u);
  EXPECT_EQ(ran, 3);
}

// ---------------------------------------------------------------------------------------------
// max_pending

TEST(WheelMaxPending, RefusesPastTheBoundAndRecovers) {
  Wheel w({.tick = 1ms, .max_pending = 3});
  LiveCount lc;
  int ran = 0;
  const TimerId a = w.schedule_at(1ms, [&ran, c = Counted(&lc)] { ++ran; });
  const TimerId b = w.schedule_at(2ms, [&ran, c = Counted(&lc)] { ++ran; });
  const TimerId c3 = w.schedule_at(3ms, [&ran, c = Counted(&lc)] { ++ran; });
  ASSERT_TRUE(a && b && c3);
  EXPECT_EQ(lc.live, 3);

  const TimerId refused = w.schedule_at(1ms, [&ran, c = Counted(&lc)] { ran += 100; });
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.status(), Status::max_pending_reached);
  EXPECT_EQ(w.pending_count(), 3u);
  EXPECT_EQ(lc.live, 3) << "a refused callable must not be kept (nor destroyed twice)";
  EXPECT_FALSE(w.cancel(refused));
  EXPECT_EQ(w.stats().rejected, 1u);
  EXPECT_EQ(w.stats().scheduled, 3u);

  EXPECT_EQ(w.advance(1ms), 1u);  // a fires; the refused one must not
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(w.pending_count(), 2u);
  const TimerId d = w.schedule_at(4ms, [&ran, c = Counted(&lc)] { ++ran; });
  EXPECT_TRUE(d) << "a slot freed by a fire must be reusable";
  EXPECT_FALSE(w.schedule_at(4ms, [&ran, c = Counted(&lc)] { ran += 100; }));
  EXPECT_TRUE(w.cancel(b));
  const TimerId e = w.schedule_at(5ms, [&ran, c = Counted(&lc)] { ++ran; });
  EXPECT_TRUE(e) << "a slot freed by a cancel must be reusable";
  EXPECT_EQ(w.pending_count(), 3u);

  EXPECT_EQ(w.advance(10ms), 3u);
  EXPECT_EQ(ran, 4);
  EXPECT_EQ(lc.live, 0);
  expect_counts(w, {.scheduled = 5, .fired = 4, .cancelled = 1, .rejected = 2});
}

TEST(WheelMaxPending, RefusedScheduleFromACallback) {
  Wheel w({.tick = 1ms, .max_pending = 2});
  TimerId inner;
  int ran = 0;
  ASSERT_TRUE(w.schedule_at(5ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(1ms, [&] {
    ++ran;
    // The firing timer no longer counts as pending, so exactly one more fits.
    inner = w.schedule_at(2ms, [&] { ++ran; });
    EXPECT_TRUE(inner);
    EXPECT_EQ(w.schedule_at(3ms, [&] { ran += 100; }).status(), Status::max_pending_reached);
  }));
  EXPECT_EQ(w.advance(10ms), 3u);
  EXPECT_EQ(ran, 3);
}

// ---------------------------------------------------------------------------------------------
// cancel

TEST(WheelCancel, TrueOnceThenFalseAndTheTimerNeverFires) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  const TimerId id = w.schedule_after(5ms, [&] { ++ran; });
  ASSERT_TRUE(id);
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_TRUE(w.cancel(id));
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.next_deadline().has_value());
  EXPECT_FALSE(w.cancel(id));
  EXPECT_EQ(w.advance(1s), 0u);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(w.stats().cancelled, 1u);
}

// The unlink's cases, each through the public API: a node first, in the middle and last in its
// sub-list, and the one whose cancel empties the sub-list and the slot (whose bits must clear, or
// next_deadline() would still report the slot). A group of timers on one tick is cancelled in
// many orders, in one sub-list (a small wheel) and spread over all eight (a wheel with a reserve of
// 2,048 or more), in level 0 and in level 1, unlinked at once (the default below L2) and queued
// where the node is not first (cancel_batch_from = 1). The timer outside the group must still
// fire, alone.
TEST(WheelCancel, EveryPositionInASubListUnlinksExactly) {
  struct Place {
    Nanos group;  // the group's deadline, on a tick
    Nanos other;  // one more timer, in a later slot
    Nanos crowd;  // next_deadline() while more than kDeadlineScan of the group are pending
  };
  // next_deadline() is the group's deadline while any of it is pending, then the other timer's;
  // but a level-1 slot (256 ticks a unit at 1 ms) of more than kDeadlineScan timers reports the
  // start of its unit.
  const std::vector<Place> places = {{5ms, 9ms, 5ms}, {2000ms, 3000ms, 1792ms}};
  std::mt19937 rng(20261127);
  for (const Place& place : places) {
    for (const std::size_t reserve : {std::size_t{0}, std::size_t{4096}}) {
      for (const std::size_t batch_from : {std::size_t{0}, std::size_t{1}}) {
        // Spread over eight sub-lists, 24 timers put three in each.
        const std::size_t group = reserve == 0 ? 4 : 24;
        for (int round = 0; round < 24; ++round) {
          SCOPED_TRACE(::testing::Message() << "group at " << place.group.count() << "ns, reserve " << reserve
                                            << ", cancel_batch_from " << batch_from << ", round " << round);
          Wheel w({.tick = 1ms, .reserve = reserve, .cancel_batch_from = batch_from});
          int group_ran = 0;
          int other_ran = 0;
          std::vector<TimerId> ids;
          for (std::size_t i = 0; i < group; ++i) {
            ids.push_back(w.schedule_at(place.group, [&] { ++group_ran; }));
          }
          ASSERT_TRUE(w.schedule_at(place.other, [&] { ++other_ran; }));
          std::shuffle(ids.begin(), ids.end(), rng);
          for (std::size_t i = 0; i < ids.size(); ++i) {
            ASSERT_TRUE(w.cancel(ids[i]));
            EXPECT_EQ(w.pending_count(), group - i);
            const std::size_t left = ids.size() - i - 1;
            EXPECT_EQ(w.next_deadline(), left == 0                     ? place.other
                                         : left > Wheel::kDeadlineScan ? place.crowd
                                                                       : place.group);
          }
          w.advance(place.other);
          EXPECT_EQ(group_ran, 0);
          EXPECT_EQ(other_ran, 1);
          EXPECT_EQ(w.pending_count(), 0u);
        }
      }
    }
  }
}

TEST(WheelCancel, FalseForFiredDefaultAndFailedIds) {
  Wheel w({.tick = 1ms});
  const TimerId id = w.schedule_after(1ms, [] {});
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_FALSE(w.cancel(id));
  EXPECT_FALSE(w.cancel(TimerId{}));
  EXPECT_FALSE(w.cancel(TimerId::from_raw(static_cast<std::uint64_t>(Status::max_pending_reached))));
  EXPECT_FALSE(w.cancel(TimerId::from_raw(static_cast<std::uint64_t>(Status::out_of_memory))));
  EXPECT_EQ(w.stats().cancelled, 0u);
}

TEST(WheelCancel, StaleIdWhoseNodeWasReusedCancelsNothing) {
  Wheel w({.tick = 1ms});
  int a_ran = 0, b_ran = 0;
  const TimerId a = w.schedule_after(5ms, [&] { ++a_ran; });
  ASSERT_TRUE(w.cancel(a));
  // A cancelled node goes back to the pool when its unlink is done: at the latest by the next
  // advance() (a call that moves no time and runs nothing here).
  EXPECT_EQ(w.advance(w.now()), 0u);
  const TimerId b = w.schedule_after(5ms, [&] { ++b_ran; });
  ASSERT_TRUE(b);
  ASSERT_EQ(index_of(a), index_of(b)) << "precondition: the pool hands the freed node back out";
  EXPECT_NE(a, b);
  EXPECT_FALSE(w.cancel(a));
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.advance(5ms), 1u);
  EXPECT_EQ(a_ran, 0);
  EXPECT_EQ(b_ran, 1);

  // Same after a fire instead of a cancel: the fired id must not cancel the node's next timer.
  const TimerId c = w.schedule_after(1ms, [&] { ++a_ran; });
  ASSERT_TRUE(c);
  EXPECT_EQ(w.advance(6ms), 1u);
  const TimerId d = w.schedule_after(1ms, [&] { ++b_ran; });
  ASSERT_EQ(index_of(c), index_of(d));
  EXPECT_FALSE(w.cancel(c));
  EXPECT_FALSE(w.cancel(b));
  EXPECT_EQ(w.advance(7ms), 1u);
  EXPECT_EQ(b_ran, 2);
}

TEST(WheelCancel, ManyReusesOfOneNodeNeverConfuseIds) {
  Wheel w({.tick = 1ms});
  std::vector<TimerId> old;
  for (int i = 0; i < 1000; ++i) {
    const TimerId id = w.schedule_after(3ms, [] {});
    ASSERT_TRUE(id);
    for (TimerId o : old) ASSERT_NE(o, id);
    if (i % 2 == 0) {
      ASSERT_TRUE(w.cancel(id));
    } else {
      ASSERT_EQ(w.advance(w.now() + 3ms), 1u);
    }
    if (old.size() < 64) old.push_back(id);
  }
  int ran = 0;
  const TimerId live = w.schedule_after(3ms, [&] { ++ran; });
  for (TimerId o : old) EXPECT_FALSE(w.cancel(o));
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_TRUE(w.cancel(live));
}

TEST(WheelCancel, GarbageIdsCancelNothing) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  std::unordered_set<std::uint64_t> live;
  std::vector<TimerId> ids;
  for (int i = 0; i < 3000; ++i) {
    const TimerId id = w.schedule_after(Nanos(1ms) * (1 + i % 500), [&] { ++ran; });
    ASSERT_TRUE(id);
    ids.push_back(id);
  }
  // Churn a little so generations are not all the same.
  for (int i = 0; i < 1000; i += 3) ASSERT_TRUE(w.cancel(ids[static_cast<std::size_t>(i)]));
  std::size_t expected_pending = w.pending_count();
  for (int i = 0; i < 1000; i += 3) {
    ids[static_cast<std::size_t>(i)] = w.schedule_after(700ms, [&] { ++ran; });
  }
  expected_pending = w.pending_count();
  for (TimerId id : ids) live.insert(id.raw());

  std::mt19937_64 rng(20240611);
  std::size_t tried = 0;
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t raw = 0;
    switch (i % 4) {
      case 0: raw = rng(); break;                                 // anything
      case 1: raw = (rng() << 32) | (rng() % 4096); break;        // a real index
      case 2: raw = ((rng() % 8) << 32) | (rng() % 4096); break;  // a real index, low gen
      case 3: raw = (rng() % 4096) | (std::uint64_t{0xFFFFFFFFu} << 32); break;
    }
    if (live.count(raw) != 0) continue;
    ++tried;
    ASSERT_FALSE(w.cancel(TimerId::from_raw(raw))) << "garbage raw id " << raw << " cancelled a timer";
  }
  EXPECT_GT(tried, 190000u);
  EXPECT_EQ(w.pending_count(), expected_pending);
  EXPECT_EQ(w.stats().cancelled, 334u);

  // Free nodes (cancelled or fired, not reused yet) and every small generation of every index:
  // an id forged from a dead one (gen + 1, gen + 2, ...) must not match a free node either.
  std::vector<TimerId> extra;
  for (int i = 0; i < 200; ++i) extra.push_back(w.schedule_after(900ms, [&] { ++ran; }));
  for (int i = 0; i < 200; i += 2) ASSERT_TRUE(w.cancel(extra[static_cast<std::size_t>(i)]));
  for (int i = 1; i < 200; i += 2) live.insert(extra[static_cast<std::size_t>(i)].raw());
  expected_pending = w.pending_count();
  const std::uint64_t cancelled_before = w.stats().cancelled;
  for (std::uint64_t index = 0; index < 3300; ++index) {
    for (std::uint64_t gen = 0; gen < 16; ++gen) {
      const std::uint64_t raw = (gen << 32) | index;
      if (live.count(raw) != 0) continue;
      ASSERT_FALSE(w.cancel(TimerId::from_raw(raw))) << "forged id index " << index << " gen " << gen;
    }
  }
  for (int i = 0; i < 200; i += 2) {
    const std::uint64_t raw = extra[static_cast<std::size_t>(i)].raw();
    for (std::uint64_t delta = 1; delta < 4; ++delta) {
      ASSERT_FALSE(w.cancel(TimerId::from_raw(raw + (delta << 32))))
          << "dead id + " << delta << " generations";
    }
  }
  EXPECT_EQ(w.stats().cancelled, cancelled_before);
  EXPECT_EQ(w.pending_count(), expected_pending);
  EXPECT_EQ(w.advance(1s), expected_pending);
  EXPECT_EQ(static_cast<std::size_t>(ran), expected_pending);
}

// ---------------------------------------------------------------------------------------------
// Callbacks: re-entrancy

TEST(WheelCallbacks, CancellingAnotherTimerDueInTheSamePassStopsIt) {
  Wheel w({.tick = 1ms});
  // Two timers on one tick that each cancel the other: whichever runs first wins, the other
  // must not run.
  struct Pair {
    Wheel* w;
    TimerId x, y;
    int x_ran = 0, y_ran = 0;
    int cancels_true = 0;
  } p{&w, {}, {}};
  p.x = w.schedule_at(3ms, [&p] {
    ++p.x_ran;
    p.cancels_true += p.w->cancel(p.y) ? 1 : 0;
  });
  p.y = w.schedule_at(3ms, [&p] {
    ++p.y_ran;
    p.cancels_true += p.w->cancel(p.x) ? 1 : 0;
  });
  // And across ticks: a at 1 ms cancels b at 2 ms, both inside one advance.
  int b_ran = 0;
  bool a_cancel = false;
  TimerId b = w.schedule_at(2ms, [&] { ++b_ran; });
  ASSERT_TRUE(w.schedule_at(1ms, [&] { a_cancel = w.cancel(b); }));
  EXPECT_EQ(w.advance(10ms), 2u);
  EXPECT_EQ(p.x_ran + p.y_ran, 1);
  EXPECT_EQ(p.cancels_true, 1);
  EXPECT_TRUE(a_cancel);
  EXPECT_EQ(b_ran, 0);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.stats().cancelled, 2u);
  EXPECT_EQ(w.stats().fired, 2u);
}

TEST(WheelCallbacks, CancellingItselfReturnsFalse) {
  Wheel w({.tick = 1ms});
  struct Self {
    Wheel* w;
    TimerId id;
    std::optional<bool> result;
    LiveCount lc;
  } st{&w, {}, {}, {}};
  st.id = w.schedule_at(1ms, [&st, c = Counted(&st.lc)] {
    st.result = st.w->cancel(st.id);
    EXPECT_EQ(st.lc.live, 1) << "the running callable must not be destroyed by its own cancel";
  });
  EXPECT_EQ(w.advance(1ms), 1u);
  ASSERT_TRUE(st.result.has_value());
  EXPECT_FALSE(*st.result);
  EXPECT_EQ(st.lc.live, 0);
  EXPECT_EQ(w.stats().cancelled, 0u);
  EXPECT_EQ(w.stats().fired, 1u);
}

TEST(WheelCallbacks, ScheduledAtOrBeforeTheTickBeingProcessedRunsInTheNextCall) {
  Wheel w({.tick = 1ms});
  std::vector<std::string> log;
  ASSERT_TRUE(w.schedule_at(5ms, [&] {
    log.push_back("a");
    EXPECT_TRUE(w.schedule_at(5ms, [&] { log.push_back("same-tick"); }));
    EXPECT_TRUE(w.schedule_at(4500us, [&] { log.push_back("same-tick-rounded"); }));
    EXPECT_TRUE(w.schedule_at(1ms, [&] { log.push_back("past"); }));
    EXPECT_TRUE(w.schedule_at(-1s, [&] { log.push_back("negative"); }));
  }));
  EXPECT_EQ(w.advance(10ms), 1u);
  EXPECT_EQ(log, std::vector<std::string>{"a"});
  EXPECT_EQ(w.pending_count(), 4u);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(10ms), 4u);
  EXPECT_EQ(log.size(), 5u);
}

TEST(WheelCallbacks, ScheduledLaterWithinThePassRunsInThisPass) {
  Wheel w({.tick = 1ms});
  std::vector<std::string> log;
  ASSERT_TRUE(w.schedule_at(5ms, [&] {
    log.push_back("a");
    EXPECT_TRUE(w.schedule_at(6ms, [&] { log.push_back("next-tick"); }));
    EXPECT_TRUE(w.schedule_at(9500us, [&] { log.push_back("last-tick"); }));
    EXPECT_TRUE(w.schedule_at(200ms, [&] { log.push_back("beyond-now"); }));
    EXPECT_TRUE(w.schedule_at(10ms + 1ns, [&] { log.push_back("just-beyond-now"); }));
  }));
  EXPECT_EQ(w.advance(10ms), 3u);
  EXPECT_EQ(log, (std::vector<std::string>{"a", "next-tick", "last-tick"}));
  EXPECT_EQ(w.advance(11ms), 1u);
  EXPECT_EQ(log.back(), "just-beyond-now");
  EXPECT_EQ(w.advance(200ms), 1u);
  EXPECT_EQ(log.back(), "beyond-now");
}

TEST(WheelCallbacks, SelfRearmAtZeroDelayDoesNotLivelock) {
  Wheel w({.tick = 1ms});
  int runs = 0;
  struct Rearm {
    Wheel* w;
    int* runs;
    void operator()() const {
      ++*runs;
      EXPECT_TRUE(w->schedule_at(w->now() - 1s, Rearm{w, runs}));
    }
  };
  ASSERT_TRUE(w.schedule_at(1ms, Rearm{&w, &runs}));
  for (int i = 1; i <= 5; ++i) {
    EXPECT_EQ(w.advance(1ms), 1u);
    EXPECT_EQ(runs, i);
  }
  EXPECT_EQ(w.pending_count(), 1u);
}

TEST(WheelCallbacks, AdvanceFromInsideACallbackIsRefused) {
  Wheel w({.tick = 1ms});
  std::optional<std::size_t> inner;
  int later = 0;
  ASSERT_TRUE(w.schedule_at(1ms, [&] { inner = w.advance(1h); }));
  ASSERT_TRUE(w.schedule_at(1s, [&] { ++later; }));
  const std::uint64_t passes_before = w.stats().passes;
  EXPECT_EQ(w.advance(2ms), 1u);
  ASSERT_TRUE(inner.has_value());
  EXPECT_EQ(*inner, 0u);
  EXPECT_EQ(later, 0) << "the refused inner advance(1h) must not run anything";
  EXPECT_EQ(w.now(), 2ms) << "the refused inner advance(1h) must not move time";
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_GE(w.stats().passes, passes_before + 1);
  EXPECT_EQ(w.advance(1s), 1u);
  EXPECT_EQ(later, 1);
}

// ---------------------------------------------------------------------------------------------
// The expiry limit

TEST(WheelLimit, TenOnOneTickRunThreeAtATime) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.schedule_at(4ms, [&] { ++ran; }));
  EXPECT_EQ(w.advance(4ms, 3), 3u);
  EXPECT_EQ(w.pending_count(), 7u);
  EXPECT_EQ(w.advance(4ms, 3), 3u);
  EXPECT_EQ(w.advance(4ms, 3), 3u);
  EXPECT_EQ(w.advance(4ms, 3), 1u);
  EXPECT_EQ(w.advance(4ms, 3), 0u);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(w.pending_count(), 0u);
}

TEST(WheelLimit, EarliestTickFirst) {
  Wheel w({.tick = 1ms});
  std::vector<int> order;
  for (int t = 10; t >= 1; --t)
    ASSERT_TRUE(w.schedule_at(Nanos(1ms) * t, [&order, t] { order.push_back(t); }));
  ASSERT_TRUE(w.schedule_at(15ms, [&order] { order.push_back(15); }));
  EXPECT_EQ(w.advance(10ms, 5), 5u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5}));
  // The leftovers of 10 ms come before anything due later, even when the next call reaches it.
  EXPECT_EQ(w.advance(20ms, 3), 3u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(w.advance(20ms, 5), 3u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 15}));
}

TEST(WheelLimit, ZeroLimitRunsNothingAndLosesNothing) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(w.schedule_at(Nanos(1ms) * i, [&] { ++ran; }));
  EXPECT_EQ(w.advance(10ms, 0), 0u);
  EXPECT_EQ(ran, 0);
  EXPECT_EQ(w.pending_count(), 4u);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(10ms), 4u);
}

TEST(WheelLimit, PastDueTimerScheduledAfterALimitHitRunsBeforeLaterTicks) {
  Wheel w({.tick = 1ms});
  std::vector<int> order;
  for (int t = 1; t <= 6; ++t)
    ASSERT_TRUE(w.schedule_at(Nanos(1ms) * t, [&order, t] { order.push_back(t); }));
  EXPECT_EQ(w.advance(10ms, 2), 2u);  // ran 1, 2; the wheel stops at tick 3, where callbacks wait
  // A late timer counts as due at the tick being processed (3): it runs in the next call, together
  // with tick 3's timers (in either order), and before ticks 4..6.
  ASSERT_TRUE(w.schedule_at(0ns, [&order] { order.push_back(0); }));
  EXPECT_EQ(w.advance(10ms, 2), 2u);
  ASSERT_EQ(order.size(), 4u);
  std::vector<int> second_call(order.begin() + 2, order.end());
  std::sort(second_call.begin(), second_call.end());
  EXPECT_EQ(second_call, (std::vector<int>{0, 3}));
  EXPECT_EQ(w.advance(10ms), 3u);
  EXPECT_EQ(std::vector<int>(order.begin() + 4, order.end()), (std::vector<int>{4, 5, 6}));
}

// A timer a callback schedules at or before the tick being processed "counts as due at that tick"
// and runs in the next call. When that first call also hits its limit at a later tick, the next
// call must still go earliest tick first: the deferred timer (tick 5) before the leftover of
// tick 7. The wheel runs the leftover batch before the due slot, so tick 7 runs before tick 5.
// Inputs: tick 1 ms; A at 5 ms schedules D at 5 ms; B, C at 7 ms; E at 8 ms;
// advance(10ms, 2) runs A, B; advance(10ms, 1) must run D (it runs C); advance(10ms) runs the rest.
TEST(WheelLimit, TimerDeferredByACallbackRunsBeforeLaterLeftoversInTheNextCall) {
  Wheel w({.tick = 1ms});
  std::vector<int> order;
  ASSERT_TRUE(w.schedule_at(5ms, [&] {
    order.push_back(5);
    EXPECT_TRUE(w.schedule_at(5ms, [&] { order.push_back(-5); }));  // deferred: counts as due at 5
  }));
  ASSERT_TRUE(w.schedule_at(7ms, [&order] { order.push_back(7); }));
  ASSERT_TRUE(w.schedule_at(7ms, [&order] { order.push_back(7); }));
  ASSERT_TRUE(w.schedule_at(8ms, [&order] { order.push_back(8); }));
  EXPECT_EQ(w.advance(10ms, 2), 2u);
  EXPECT_EQ(order, (std::vector<int>{5, 7}));
  EXPECT_EQ(w.advance(10ms, 1), 1u);
  EXPECT_EQ(order, (std::vector<int>{5, 7, -5}))
      << "tick 5's deferred timer must run before tick 7's leftover";
  EXPECT_EQ(w.advance(10ms), 2u);
  EXPECT_EQ(order.size(), 5u);
}

TEST(WheelLimit, OneBigJumpRunsCallbacksInNonDecreasingTickOrder) {
  Wheel w({.tick = 1ms});
  std::mt19937_64 rng(7);
  struct Log {
    Nanos pass_now{0};
    bool early = false;
    std::vector<std::int64_t> ticks_run;
  } log;
  auto record = [&log](Nanos deadline) {
    return [&log, deadline] {
      if (log.pass_now < deadline) log.early = true;
      log.ticks_run.push_back(ceil_ticks(deadline, 1ms));
    };
  };
  for (int i = 0; i < 20000; ++i) {
    const Nanos deadline = Nanos(static_cast<std::int64_t>(rng() % 600'000'000'000ull));  // 10 min
    ASSERT_TRUE(w.schedule_at(deadline, record(deadline)));
  }
  log.pass_now = 10min;
  EXPECT_EQ(w.advance(10min), 20000u);
  EXPECT_FALSE(log.early);
  ASSERT_EQ(log.ticks_run.size(), 20000u);
  EXPECT_TRUE(std::is_sorted(log.ticks_run.begin(), log.ticks_run.end()));
  // Same with a limit: each call continues where the last one stopped.
  log.ticks_run.clear();
  for (int i = 0; i < 5000; ++i) {
    const Nanos deadline = 10min + Nanos(static_cast<std::int64_t>(rng() % 60'000'000'000ull));
    ASSERT_TRUE(w.schedule_at(deadline, record(deadline)));
  }
  log.pass_now = 11min;
  std::size_t total = 0;
  for (int i = 0; i < 100 && total < 5000; ++i) total += w.advance(11min, 97);
  EXPECT_EQ(total, 5000u);
  EXPECT_FALSE(log.early);
  EXPECT_TRUE(std::is_sorted(log.ticks_run.begin(), log.ticks_run.end()));
}

// ---------------------------------------------------------------------------------------------
// Throwing callbacks

TEST(WheelThrow, ExceptionPropagatesTimerCountsAsFiredRestRunsNextCall) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  std::vector<int> order;
  ASSERT_TRUE(w.schedule_at(1ms, [&order, c = Counted(&lc)] { order.push_back(1); }));
  const TimerId thrower = w.schedule_at(2ms, [&order, c = Counted(&lc)] {
    order.push_back(2);
    throw std::runtime_error("boom");
  });
  ASSERT_TRUE(w.schedule_at(3ms, [&order, c = Counted(&lc)] { order.push_back(3); }));
  ASSERT_TRUE(w.schedule_at(3ms, [&order, c = Counted(&lc)] { order.push_back(3); }));
  ASSERT_TRUE(w.schedule_at(50ms, [&order, c = Counted(&lc)] { order.push_back(50); }));
  EXPECT_THROW(w.advance(5ms), std::runtime_error);
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  EXPECT_EQ(w.stats().fired, 2u);
  EXPECT_EQ(w.pending_count(), 3u);
  EXPECT_EQ(lc.live, 3) << "the thrower's callable must be destroyed, the others kept";
  EXPECT_FALSE(w.cancel(thrower));
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), 5ms);
  EXPECT_EQ(w.advance(5ms), 2u);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3, 3}));
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.advance(50ms), 1u);
  EXPECT_EQ(lc.live, 0);
  EXPECT_EQ(w.stats().fired, 5u);
  // The thrower's node went back to the pool like any other: nothing leaked.
  const std::uint64_t nodes = w.stats().pool_nodes;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.schedule_after(1ms, [] {}));
  EXPECT_EQ(w.stats().pool_nodes, nodes);
}

TEST(WheelThrow, ThrowerAmongManyOnOneTick) {
  Wheel w({.tick = 1ms});
  int ran = 0;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(w.schedule_at(2ms, [&] { ++ran; }));
  ASSERT_TRUE(w.schedule_at(2ms, [&] {
    ++ran;
    throw 42;
  }));
  int thrown = 0;
  std::size_t total = 0;
  for (int i = 0; i < 3; ++i) {
    try {
      total += w.advance(2ms);
    } catch (int v) {
      EXPECT_EQ(v, 42);
      ++thrown;
    }
  }
  EXPECT_EQ(thrown, 1);
  EXPECT_EQ(ran, 10);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.stats().fired, 10u);
  EXPECT_LE(total, 9u);  // the throwing call returns nothing
}

// ---------------------------------------------------------------------------------------------
// next_deadline()

TEST(WheelNextDeadline, NulloptWhenEmpty) {
  Wheel w({.tick = 1ms});
  EXPECT_FALSE(w.next_deadline().has_value());
  const TimerId id = w.schedule_after(5ms, [] {});
  EXPECT_TRUE(w.next_deadline().has_value());
  ASSERT_TRUE(w.cancel(id));
  EXPECT_FALSE(w.next_deadline().has_value());
  ASSERT_TRUE(w.schedule_after(5ms, [] {}));
  EXPECT_EQ(w.advance(5ms), 1u);
  EXPECT_FALSE(w.next_deadline().has_value());
}

TEST(WheelNextDeadline, ExactForTimersLessThanKSlotsTicksAhead) {
  const Nanos tick = 1ms;
  Wheel w({.tick = tick});
  // Positions reached by advancing (so the wheel has moved through its levels) and by start.
  std::vector<std::int64_t> positions = boundary_ticks(2);
  positions.insert(positions.begin(), 0);
  positions.push_back(positions.back() + 999999);  // well past every boundary, off any of them
  for (std::int64_t cur : positions) {
    EXPECT_EQ(w.advance(Nanos(cur * tick.count())), 0u);
    for (std::int64_t d = 1; d < std::int64_t{Wheel::kSlots}; ++d) {
      for (Nanos off : {Nanos(0), Nanos(1), tick - Nanos(1)}) {
        const Nanos deadline = (cur + d) * tick - off;
        const TimerId id = w.schedule_at(deadline, [] {});
        ASSERT_TRUE(id);
        ASSERT_EQ(w.next_deadline(), std::optional<Nanos>((cur + d) * tick))
            << "cur " << cur << " d " << d << " off " << off.count();
        ASSERT_TRUE(w.cancel(id));
      }
    }
  }
  Wheel late({.tick = tick, .start = 123456789 * tick + 17ns});
  for (std::int64_t d = 1; d < std::int64_t{Wheel::kSlots}; ++d) {
    const TimerId id = late.schedule_at((123456789 + d) * tick, [] {});
    ASSERT_EQ(late.next_deadline(), std::optional<Nanos>((123456789 + d) * tick)) << d;
    ASSERT_TRUE(late.cancel(id));
  }
}

// A timer 512 ticks out or more when scheduled stays in level 1 until its 256-tick unit begins, so
// it can be fewer than 512 ticks away and still above level 0; the answer is its deadline all the
// same, not the start of its unit (512 ms here).
TEST(WheelNextDeadline, ExactForATimerStillInAnUpperLevel) {
  Wheel w({.tick = 1ms});
  ASSERT_TRUE(w.schedule_at(700ms, [] {}));
  EXPECT_EQ(w.advance(300ms), 0u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(700ms));
  EXPECT_EQ(w.advance(699ms), 0u);
  EXPECT_EQ(w.advance(700ms), 1u);
}

// The contract's one exception: an upper level's earliest slot of more than kDeadlineScan timers
// reports the start of its unit, a lower bound; one timer fewer and it is exact again: the least
// deadline left, that of the timer scheduled first (the last in its sub-list, as links go to the
// head), at every level a Nanos reaches with a 1 ms tick.
TEST(WheelNextDeadline, LowerBoundOnlyForACrowdedUpperSlot) {
  const Nanos tick = 1ms;
  for (unsigned level = 1; level < Wheel::kLevels - 1; ++level) {
    SCOPED_TRACE(::testing::Message() << "level " << level);
    const std::int64_t start = std::int64_t{3} << (Wheel::kLevelBits * level);  // 3 units ahead
    Wheel w({.tick = tick});
    std::vector<TimerId> crowd;
    for (std::int64_t i = 1; i <= std::int64_t{Wheel::kDeadlineScan} + 1; ++i) {
      crowd.push_back(w.schedule_at((start + i) * tick, [] {}));
      ASSERT_TRUE(crowd.back());
    }
    EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(start * tick)) << "a crowd: its unit's start";
    ASSERT_TRUE(w.cancel(crowd.back()));
    EXPECT_EQ(w.next_deadline(), std::optional<Nanos>((start + 1) * tick)) << "kDeadlineScan timers: exact";
  }
}

// The exception's other half: a crowded slot counts as its unit's start even where the earliest
// deadline is another level's. Nine timers at 256.608 s are placed from 0 in level 2 (unit 3, from
// 196.608 s; unit 2 would be paced down from 65.536 s on); one at 200 s, placed from 70 s, is 508
// level-1 units ahead, so in level 1, and is the earliest.
TEST(WheelNextDeadline, ACrowdedSlotThatStartsEarlierIsTheAnswer) {
  Wheel w({.tick = 1ms});
  std::vector<TimerId> crowd;
  for (unsigned i = 0; i <= Wheel::kDeadlineScan; ++i) {
    crowd.push_back(w.schedule_at(256608ms + i * 1ms, [] {}));
    ASSERT_TRUE(crowd.back());
  }
  EXPECT_EQ(w.advance(70s), 0u);
  ASSERT_TRUE(w.schedule_at(200s, [] {}));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(196608ms)) << "the crowded slot's start";
  ASSERT_TRUE(w.cancel(crowd.back()));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(200s)) << "no crowd: the earliest deadline";
}

TEST(WheelNextDeadline, EarliestOfSeveral) {
  Wheel w({.tick = 1ms});
  ASSERT_TRUE(w.schedule_at(100ms, [] {}));
  ASSERT_TRUE(w.schedule_at(1h, [] {}));
  const TimerId mid = w.schedule_at(40500us, [] {});
  ASSERT_TRUE(w.schedule_at(120ms, [] {}));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(41ms));
  ASSERT_TRUE(w.cancel(mid));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(100ms));
  EXPECT_EQ(w.advance(100ms), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(120ms));
}

TEST(WheelNextDeadline, LowerBoundForFarTimersAndNeverAtOrBeforeNowUnlessDue) {
  std::vector<std::int64_t> aheads;
  for (std::int64_t t : boundary_ticks(3)) {
    if (t >= std::int64_t{Wheel::kSlots}) aheads.push_back(t);
  }
  for (std::int64_t t : {std::int64_t{1000}, std::int64_t{100000}, std::int64_t{2000000},
                         std::int64_t{1} << 31, std::int64_t{1} << 40}) {
    aheads.push_back(t);
  }
  for (Nanos tick : {Nanos(1us), Nanos(1ms), Nanos(1h)}) {
    for (std::int64_t ticks_ahead : aheads) {
      Wheel w({.tick = tick, .start = 3 * tick});
      if (ticks_ahead > max_ticks(tick) - 10) continue;
      const Nanos deadline = (3 + ticks_ahead) * tick - tick / 3;
      const Nanos rounded = (3 + ticks_ahead) * tick;
      int ran = 0;
      ASSERT_TRUE(w.schedule_at(deadline, [&] { ++ran; }));
      // Follow next_deadline() like an event loop: each step is a valid lower bound, never in the
      // past while nothing is due, and the timer fires after a handful of wake-ups.
      int wakeups = 0;
      while (ran == 0 && wakeups < 64) {
        const std::optional<Nanos> nd = w.next_deadline();
        ASSERT_TRUE(nd.has_value());
        ASSERT_LE(*nd, rounded) << "tick " << tick.count() << " ahead " << ticks_ahead;
        ASSERT_GT(*nd, w.now()) << "tick " << tick.count() << " ahead " << ticks_ahead;
        w.advance(*nd);
        ++wakeups;
      }
      EXPECT_EQ(ran, 1);
      EXPECT_EQ(w.now(), rounded) << "it fired exactly at its rounded deadline";
      EXPECT_LE(wakeups, static_cast<int>(2 * Wheel::kLevels + 2)) << "ahead " << ticks_ahead;
    }
  }
}

TEST(WheelNextDeadline, AtOrBeforeNowWhenATimerIsDue) {
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(50ms), 0u);
  ASSERT_TRUE(w.schedule_at(10ms, [] {}));
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(50ms), 1u);
  // Leftovers of a limit hit are due too.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.schedule_at(60ms, [] {}));
  EXPECT_EQ(w.advance(70ms, 2), 2u);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.now());
}

// Inline advance() calls that meet nothing move only the wheel's time, not its processing tick
// (engine/wheel/wheel_impl.hpp, I1). What is scheduled after them must behave as if they had moved it:
// a deadline they passed is due, runs at the start of the next call and makes next_deadline()
// now(); one after now() runs at its own tick.
TEST(WheelAdvance, ADeadlineThatQuietStepsPassedIsDueAtOnce) {
  Wheel w({.tick = 1ms});
  std::vector<int> ran;
  ASSERT_TRUE(w.schedule_at(10s, [&ran] { ran.push_back(0); }));
  for (int i = 1; i <= 100; ++i) ASSERT_EQ(w.advance(i * 1ms), 0u);
  ASSERT_TRUE(w.schedule_at(50ms, [&ran] { ran.push_back(1); }));   // passed
  ASSERT_TRUE(w.schedule_at(100ms, [&ran] { ran.push_back(2); }));  // now()'s own tick
  ASSERT_TRUE(w.schedule_at(101ms, [&ran] { ran.push_back(3); }));
  EXPECT_EQ(w.next_deadline(), w.now());
  EXPECT_EQ(w.advance(100ms), 2u);
  std::sort(ran.begin(), ran.end());
  EXPECT_EQ(ran, (std::vector<int>{1, 2}));
  EXPECT_EQ(w.next_deadline(), 101ms);
  EXPECT_EQ(w.advance(101ms), 1u);
  EXPECT_EQ(ran.back(), 3);
}

// The same, for next_deadline()'s exactness: a timer less than 512 ticks ahead of now() is exact
// however many quiet steps came before its schedule (it must not be measured from a processing
// tick those steps left behind, which would put it in level 1, where the answer is its slot's
// start).
TEST(WheelNextDeadline, ExactForATimerLessThanKSlotsTicksAheadAfterQuietSteps) {
  Wheel w({.tick = 1ms});
  ASSERT_TRUE(w.schedule_at(10s, [] {}));
  for (int i = 1; i <= 200; ++i) ASSERT_EQ(w.advance(i * 1ms), 0u);
  ASSERT_TRUE(w.schedule_at(700ms, [] {}));
  EXPECT_EQ(w.next_deadline(), 700ms);
  EXPECT_EQ(w.advance(699ms), 0u);
  EXPECT_EQ(w.advance(700ms), 1u);
}

// A call that runs exactly `limit` callbacks, or one whose callback throws, stops the pass at that
// callback's tick, so the wheel's processing tick lags behind now() until the next call even when
// nothing is due. A timer scheduled in that state must not be measured from the lagging tick: it
// would land in an upper level, and next_deadline() would answer that slot's start, which lies in
// the past although nothing is due (an event loop would then wake at once for nothing). With a 1 ms
// tick and 512 slots, now = 10.247 s and a timer at 10.252 s: its level-1 slot starts at 10.240 s.
// Each test below reaches the lag its own way at kLagNow, with nothing pending, and then checks
// that a timer 5 ticks ahead is exact.
constexpr Nanos kLagTick = 1ms;
constexpr Nanos kLagNow = kLagTick * (20 * std::int64_t{Wheel::kSlots} + 7);  // inside a level-1 unit

void expect_exact_next_deadline_after_a_lag(Wheel& w) {
  ASSERT_EQ(w.pending_count(), 0u);
  int ran = 0;
  const Nanos deadline = kLagNow + 5 * kLagTick;
  ASSERT_TRUE(w.schedule_at(deadline, [&] { ++ran; }));
  const std::optional<Nanos> nd = w.next_deadline();
  ASSERT_TRUE(nd.has_value());
  EXPECT_GT(*nd, w.now()) << "nothing is due, yet next_deadline() " << nd->count() << "ns is before now() "
                          << w.now().count() << "ns";
  EXPECT_EQ(*nd, deadline) << "a timer 5 ticks ahead should be exact";
  EXPECT_EQ(w.advance(deadline - 1ns), 0u);
  EXPECT_EQ(w.advance(deadline), 1u);
  EXPECT_EQ(ran, 1);
}

TEST(WheelNextDeadline, AfterALimitHitThatLeftNothingDueIsExactAndNotInThePast) {
  Wheel w({.tick = kLagTick});
  ASSERT_TRUE(w.schedule_at(kLagTick, [] {}));
  ASSERT_EQ(w.advance(kLagNow, 1), 1u);  // ran == limit, nothing else pending
  expect_exact_next_deadline_after_a_lag(w);
}

// The call hits its limit with a due timer left over (the wheel stops at that timer's tick), then
// the user cancels the leftover.
TEST(WheelNextDeadline, AfterALimitHitWhoseLeftoversWereCancelledIsNotInThePast) {
  Wheel w({.tick = kLagTick});
  ASSERT_TRUE(w.schedule_at(kLagTick, [] {}));
  const TimerId leftover = w.schedule_at(2 * kLagTick, [] {});
  ASSERT_EQ(w.advance(kLagNow, 1), 1u);  // ran == limit; the timer at 2 ms is left over, due
  ASSERT_TRUE(w.cancel(leftover));
  expect_exact_next_deadline_after_a_lag(w);
}

// The pass stops at the thrower's tick and the exception propagates.
TEST(WheelNextDeadline, AfterAThrowingCallbackIsExactAndNotInThePast) {
  Wheel w({.tick = kLagTick});
  ASSERT_TRUE(w.schedule_at(kLagTick, [] { throw std::runtime_error("boom"); }));
  EXPECT_THROW(w.advance(kLagNow), std::runtime_error);
  expect_exact_next_deadline_after_a_lag(w);
}

// ---------------------------------------------------------------------------------------------
// Empty time is free

TEST(WheelEmptyTime, AYearAtOneMicrosecondTickIsAHandfulOfMoves) {
  const Nanos tick = 1us;
  const Nanos year = std::chrono::duration_cast<Nanos>(std::chrono::years(1));
  {
    Wheel w({.tick = tick});
    int ran = 0;
    ASSERT_TRUE(w.schedule_after(year, [&] { ++ran; }));
    EXPECT_EQ(w.advance(year - 1ns), 0u);
    EXPECT_EQ(ran, 0);
    EXPECT_EQ(w.advance(year), 1u);
    EXPECT_EQ(ran, 1);
    const WheelStats s = w.stats();
    // 3.2e13 ticks crossed; the timer can only move down through the levels once each.
    EXPECT_LE(s.moved, Wheel::kLevels);
    EXPECT_LE(s.max_pass_work, Wheel::kLevels + 1);
    EXPECT_EQ(s.passes, 2u);
    EXPECT_EQ(s.fired, 1u);
  }
  {
    // Same gap crossed a day at a time: 365 calls, each with nothing or almost nothing to do.
    Wheel w({.tick = tick});
    int ran = 0;
    ASSERT_TRUE(w.schedule_after(year, [&] { ++ran; }));
    const Nanos day = std::chrono::duration_cast<Nanos>(std::chrono::days(1));
    Nanos t{0};
    while (t + day < year) {
      t += day;
      EXPECT_EQ(w.advance(t), 0u);
    }
    EXPECT_EQ(w.advance(year), 1u);
    EXPECT_LE(w.stats().moved, Wheel::kLevels);
    EXPECT_LE(w.stats().max_pass_work, Wheel::kLevels + 1);
  }
}

// ---------------------------------------------------------------------------------------------
// Callable lifetimes (counting test types)

TEST(WheelLifetime, DestroyedExactlyOnceOnFire) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  int ran = 0;
  ASSERT_TRUE(w.schedule_after(1ms, [&ran, c = Counted(&lc)] { ++ran; }));
  EXPECT_EQ(lc.live, 1);
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(lc.live, 0);
}

TEST(WheelLifetime, DestroyedBeforeCancelReturns) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  const TimerId id = w.schedule_after(1ms, [c = Counted(&lc)] {});
  EXPECT_EQ(lc.live, 1);
  EXPECT_TRUE(w.cancel(id));
  EXPECT_EQ(lc.live, 0);
  EXPECT_FALSE(w.cancel(id));
  EXPECT_EQ(lc.live, 0);
  EXPECT_EQ(w.advance(1s), 0u);
  EXPECT_EQ(lc.live, 0);
}

TEST(WheelLifetime, WheelDestructorDestroysPendingCallablesWithoutRunningThem) {
  LiveCount lc;
  int ran = 0;
  auto token = std::make_shared<int>(7);
  {
    Wheel w({.tick = 1ms});
    for (int i = 0; i < 10000; ++i) {
      ASSERT_TRUE(w.schedule_after(Nanos(1ms) * (1 + i), [&ran, c = Counted(&lc)] { ++ran; }));
    }
    std::vector<TimerId> shared_ids;
    for (int i = 0; i < 100; ++i) {
      shared_ids.push_back(w.schedule_after(Nanos(1ms) * (1 + i * 1000), [token, &ran] { ++ran; }));
      ASSERT_TRUE(shared_ids.back());
    }
    EXPECT_EQ(token.use_count(), 101);
    EXPECT_EQ(w.advance(100ms), 100u + 1u);  // ticks 1..100, plus the shared one at tick 1
    for (int i = 0; i < 50; ++i) EXPECT_TRUE(w.cancel(shared_ids[static_cast<std::size_t>(i + 50)]));
    EXPECT_EQ(token.use_count(), 101 - 1 - 50);
    EXPECT_EQ(lc.live, 10000 - 100);
  }
  EXPECT_EQ(lc.live, 0);
  EXPECT_EQ(lc.constructed > 0, true);
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(ran, 101);
}

// The destructor skips its look for pending callables while none ever had a destructor: a periodic
// timer's callable with one, among trivially destructible one-shots, must still be found.
TEST(WheelLifetime, WheelDestructorFindsAPeriodicCallableAmongTriviallyDestructibleOnes) {
  auto token = std::make_shared<int>(7);
  int ran = 0;
  {
    Wheel w({.tick = 1ms});
    for (int i = 0; i < 1000; ++i) ASSERT_TRUE(w.schedule_after(Nanos(1ms) * (1 + i), [&ran] { ++ran; }));
    ASSERT_TRUE(w.schedule_every(1h, [token] {}));
    EXPECT_EQ(w.advance(10ms), 10u);
    EXPECT_EQ(token.use_count(), 2);
  }
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(ran, 10);
}

TEST(WheelLifetime, WheelDestructorDestroysDueAndLeftoverTimersToo) {
  // Timers in every place a pending timer can be: upper levels, level 0, due for the next call
  // (scheduled in the past), and left over by a pass cut short by its limit.
  LiveCount lc;
  int ran = 0;
  {
    Wheel w({.tick = 1ms});
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.schedule_at(5ms, [&ran, c = Counted(&lc)] { ++ran; }));
    ASSERT_TRUE(w.schedule_at(1h, [&ran, c = Counted(&lc)] { ++ran; }));
    ASSERT_TRUE(w.schedule_at(100ms, [&ran, c = Counted(&lc)] { ++ran; }));
    EXPECT_EQ(w.advance(10ms, 3), 3u);  // 7 left over from tick 5
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(w.schedule_at(1ms, [&ran, c = Counted(&lc)] { ++ran; }));
    EXPECT_EQ(lc.live, 7 + 2 + 4);
  }
  EXPECT_EQ(lc.live, 0);
  EXPECT_EQ(ran, 3);
}

TEST(WheelLifetime, CancelledTimersAreNotDestroyedAgainByTheWheel) {
  // cancel() destroys the callable at once; the wheel may finish the unlink later (in batches). A
  // wheel destroyed, or advanced, with such cancels outstanding must not destroy them again.
  for (int cancels : {1, 5, 31, 32, 33, 100}) {
    LiveCount lc;
    auto token = std::make_shared<int>(0);
    {
      Wheel w({.tick = 1ms});
      std::vector<TimerId> ids;
      for (int i = 0; i < 200; ++i) {
        ids.push_back(w.schedule_after(Nanos(1ms) * (1 + i % 50), [token, c = Counted(&lc)] { ++*token; }));
        ASSERT_TRUE(ids.back());
      }
      for (int i = 0; i < cancels; ++i) ASSERT_TRUE(w.cancel(ids[static_cast<std::size_t>(i * 2)]));
      EXPECT_EQ(lc.live, 200 - cancels) << cancels;
      EXPECT_EQ(token.use_count(), 1 + 200 - cancels);
      if (cancels % 2 == 1) {
        // Half of the cases advance before the wheel goes: no cancelled timer may run.
        const std::size_t ran = w.advance(10ms);
        EXPECT_EQ(static_cast<long>(ran), *token);
        EXPECT_EQ(lc.live, 200 - cancels - *token);
      }
    }
    EXPECT_EQ(lc.live, 0) << "after " << cancels << " cancels: a callable destroyed twice or never";
    EXPECT_EQ(token.use_count(), 1);
  }
}

TEST(WheelLifetime, SharedPtrCaptureAcrossEveryExit) {
  auto token = std::make_shared<int>(0);
  Wheel w({.tick = 1ms});
  const TimerId fire = w.schedule_after(1ms, [token] { ++*token; });
  const TimerId cancel = w.schedule_after(1ms, [token] { ++*token; });
  auto moved = token;
  const TimerId by_move = w.schedule_after(2ms, [t = std::move(moved)] { ++*t; });
  ASSERT_TRUE(fire && cancel && by_move);
  EXPECT_EQ(token.use_count(), 4);
  EXPECT_TRUE(w.cancel(cancel));
  EXPECT_EQ(token.use_count(), 3);
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_EQ(token.use_count(), 2);
  EXPECT_EQ(w.advance(2ms), 1u);
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_EQ(*token, 2);
}

// ---------------------------------------------------------------------------------------------
// stats()

TEST(WheelStatsTest, CountersAgreeWithWhatHappened) {
  Wheel w({.tick = 1ms, .max_pending = 1000});
  std::mt19937_64 rng(99);
  std::vector<TimerId> live;
  std::uint64_t scheduled = 0, rejected = 0, cancelled = 0, fired = 0, calls = 0;
  for (int round = 0; round < 200; ++round) {
    for (int i = 0; i < 20; ++i) {
      const TimerId id = w.schedule_after(Nanos(static_cast<std::int64_t>(rng() % 20'000'000'000ull)),
                                          [&fired] { ++fired; });
      if (id) {
        ++scheduled;
        live.push_back(id);
      } else {
        EXPECT_EQ(id.status(), Status::max_pending_reached);
        ++rejected;
      }
    }
    for (int i = 0; i < 8 && !live.empty(); ++i) {
      const std::size_t k = rng() % live.size();
      if (w.cancel(live[k])) ++cancelled;
      live[k] = live.back();
      live.pop_back();
    }
    w.advance(w.now() + 37ms);
    ++calls;
    const WheelStats s = w.stats();
    ASSERT_EQ(s.scheduled, scheduled);
    ASSERT_EQ(s.rejected, rejected);
    ASSERT_EQ(s.cancelled, cancelled);
    ASSERT_EQ(s.fired, fired);
    ASSERT_LE(s.passes, calls);  // calls that only moved time on are not counted
    ASSERT_EQ(w.pending_count(), scheduled - cancelled - fired);
    ASSERT_GE(s.pool_nodes, w.pending_count());
    ASSERT_GE(s.pool_capacity, s.pool_nodes);
    ASSERT_GE(s.pool_segments, 1u);
    ASSERT_GE(s.bytes, s.pool_nodes * sizeof(detail::Node));
    ASSERT_LE(s.moved_ahead, s.moved);
  }
  EXPECT_GT(rejected, 0u);
  EXPECT_GT(cancelled, 0u);
  EXPECT_GT(fired, 0u);
}

// A callback that schedules above the highest level in use when the pass began. The pass must see
// the new level, both to fire the timer within its range and to keep moving that level's slots down
// at their boundaries.
TEST(WheelCallbacks, ScheduleAboveThePassesStartingTopLevelRunsInTheSamePass) {
  Wheel w({.tick = 1ms});
  Nanos fired_at{-1};
  ASSERT_TRUE(w.schedule_at(10ms, [&w, &fired_at] {
    const Nanos far = Nanos(std::int64_t{Wheel::kSlots} << Wheel::kLevelBits) * 1'000'000 * 2;  // level 2
    ASSERT_TRUE(w.schedule_at(far, [&w, &fired_at] { fired_at = w.now(); }));
  }));
  const Nanos end = Nanos(std::int64_t{Wheel::kSlots} << Wheel::kLevelBits) * 1'000'000 * 3;
  EXPECT_EQ(w.advance(end), 2u);
  EXPECT_EQ(fired_at, end);
  EXPECT_EQ(w.pending_count(), 0u);
}

}  // namespace
}  // namespace tickwheel::test
