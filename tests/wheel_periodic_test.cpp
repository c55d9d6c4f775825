// The Wheel's periodic timers (Wheel::schedule_every), in two parts:
//   deterministic unit tests, one (or a few) per rule of the contract in wheel.hpp: the
//     fixed-rate grid, fixed delay, the initial delay, each misfire policy after a gap, cancel
//     between runs / from the timer's own callback / from another timer's callback, bad periods,
//     the 16-byte callable limit, throwing callbacks, the expiry limit, no livelock, the stats
//     counts, callable lifetimes, and the rule that no call runs a timer twice (the due slot).
//   a seeded model test: one-shot and periodic timers of every cadence and misfire policy,
//     scheduled, cancelled (also from callbacks) and advanced at random, against a plain reference
//     that predicts exactly which timers run in each advance() call. Seed from TICKWHEEL_SEED.
// Time is driven by hand; nothing sleeps and nothing reads a clock. The no-allocation check for
// periodic timers is in wheel_alloc_test.cpp (it replaces operator new, so it is its own binary).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "support.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

// now() in whole milliseconds (the tick of most tests here).
std::int64_t ms_now(const Wheel& w) { return w.now().count() / 1'000'000; }

// The accounting of WheelStats between advance() calls, against `scheduled`, the successful
// schedules the test has made on w. stats() derives its `scheduled` from the identity
// scheduled + rearmed == fired + skipped + cancelled + pending(), so only a match with the test's
// own count shows that those counters together account for every schedule, no more and no fewer.
void expect_accounting(const Wheel& w, std::uint64_t scheduled) {
  const WheelStats s = w.stats();
  EXPECT_EQ(s.scheduled, scheduled) << "scheduled " << s.scheduled << " rearmed " << s.rearmed << " fired "
                                    << s.fired << " skipped " << s.skipped << " cancelled " << s.cancelled
                                    << " pending " << w.pending_count();
}

// Advances one millisecond at a time through [from, to] ms, checking the accounting after each
// against `scheduled`, the successful schedules made on w so far.
void step_ms(Wheel& w, std::int64_t from, std::int64_t to, std::uint64_t scheduled) {
  for (std::int64_t t = from; t <= to; ++t) {
    w.advance(Nanos(1ms) * t);
    expect_accounting(w, scheduled);
  }
}

PeriodicOptions rate(Misfire m) {
  return {.cadence = Cadence::fixed_rate, .initial_delay = std::nullopt, .misfire = m};
}
PeriodicOptions delay_cadence() {
  return {.cadence = Cadence::fixed_delay, .initial_delay = std::nullopt, .misfire = {}};
}
PeriodicOptions first_after(Nanos initial) {
  return {.cadence = Cadence::fixed_rate, .initial_delay = initial, .misfire = {}};
}

using Ticks = std::vector<std::int64_t>;

// Schedules a periodic timer on w that records the ms_now() of each of its runs in `at`.
TimerId record_every(Wheel& w, Nanos period, Ticks& at, const PeriodicOptions& opts = {}) {
  return w.schedule_every(
      period, [&w, &at] { at.push_back(ms_now(w)); }, opts);
}

// Schedules a periodic timer on w that counts its runs in `runs`.
TimerId count_every(Wheel& w, Nanos period, int& runs, const PeriodicOptions& opts) {
  return w.schedule_every(
      period, [&runs] { ++runs; }, opts);
}

// ---------------------------------------------------------------------------------------------
// Fixed rate

TEST(WheelPeriodicRate, RunsAtDThenEveryPeriodWithOneId) {
  Wheel w({.tick = 1ms});
  Ticks at;
  const TimerId id = record_every(w, 10ms, at);
  ASSERT_TRUE(id);
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(10ms)) << "the first run is one period out by default";
  for (std::int64_t t = 1; t <= 50; ++t) {
    w.advance(Nanos(1ms) * t);
    EXPECT_EQ(w.pending_count(), 1u) << "a periodic timer counts once while it lives";
    expect_accounting(w, 1);
  }
  EXPECT_EQ(at, (Ticks{10, 20, 30, 40, 50}));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(60ms));
  const WheelStats s = w.stats();
  EXPECT_EQ(s.scheduled, 1u);
  EXPECT_EQ(s.fired, 5u);
  EXPECT_EQ(s.rearmed, 5u);
  EXPECT_EQ(s.skipped, 0u);
  EXPECT_EQ(s.moved, 0u) << "a 10-tick period stays in level 0";
  EXPECT_TRUE(w.cancel(id)) << "the id of the first run still names the timer after five runs";
  EXPECT_FALSE(w.cancel(id));
  EXPECT_EQ(w.pending_count(), 0u);
  expect_accounting(w, 1);
}

TEST(WheelPeriodicRate, GridStartsAtTheRoundedFirstRunAndIgnoresWhenTheCallerAdvances) {
  // now 0.5 ms, first run after 1 ms: deadline 1.5 ms, rounded up to tick 2. Then 5, 8, 11, ...
  // whatever sub-tick offset the caller's nows have.
  Wheel w({.tick = 1ms, .start = 500us});
  Ticks at;
  ASSERT_TRUE(record_every(w, 3ms, at, first_after(1ms)));
  for (std::int64_t t = 1; t <= 14; ++t) w.advance(Nanos(1ms) * t + 300us);
  EXPECT_EQ(at, (Ticks{2, 5, 8, 11, 14}));
}

TEST(WheelPeriodicRate, LongPeriodsMoveThroughTheUpperLevelsAndStayOnTheGrid) {
  const Nanos period = Nanos(1ms) * (3 * std::int64_t{Wheel::kSlots} + 17);  // a level-1 timer
  Wheel w({.tick = 1ms});
  Ticks at;
  ASSERT_TRUE(record_every(w, period, at));
  // An event loop driven by next_deadline(): it wakes a few times per period, never late.
  for (int wakeups = 0; wakeups < 200 && at.size() < 4; ++wakeups) {
    const std::optional<Nanos> nd = w.next_deadline();
    ASSERT_TRUE(nd.has_value());
    ASSERT_GT(*nd, w.now());
    w.advance(*nd);
  }
  const std::int64_t p = period.count() / 1'000'000;
  EXPECT_EQ(at, (Ticks{p, 2 * p, 3 * p, 4 * p}));
  EXPECT_GT(w.stats().moved, 0u);
}

TEST(WheelPeriodicRate, StaleIdAfterCancelNamesNothingWhenTheNodeIsReused) {
  Wheel w({.tick = 1ms});
  int a_runs = 0, b_runs = 0;
  const TimerId a = w.schedule_every(2ms, [&a_runs] { ++a_runs; });
  step_ms(w, 1, 4, 1);
  ASSERT_TRUE(w.cancel(a));
  EXPECT_EQ(w.advance(w.now()), 0u);  // finishes any batched unlink: the node is free again
  const TimerId b = w.schedule_every(2ms, [&b_runs] { ++b_runs; });
  ASSERT_EQ(a.raw() & 0xFFFFFFFFu, b.raw() & 0xFFFFFFFFu) << "precondition: the pool hands the node back out";
  EXPECT_NE(a, b);
  EXPECT_FALSE(w.cancel(a));
  step_ms(w, 5, 10, 2);
  EXPECT_EQ(a_runs, 2);
  EXPECT_EQ(b_runs, 3);
  EXPECT_TRUE(w.cancel(b));
}

// ---------------------------------------------------------------------------------------------
// Fixed delay

TEST(WheelPeriodicDelay, NextRunIsOnePeriodAfterTheNowOfTheCallThatRanIt) {
  Wheel w({.tick = 1ms});
  Ticks at;
  ASSERT_TRUE(record_every(w, 10ms, at, delay_cadence()));
  EXPECT_EQ(w.advance(10ms), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(20ms));
  EXPECT_EQ(w.advance(27ms), 1u);  // seven late: the next run is measured from 27
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(37ms));
  EXPECT_EQ(w.advance(36ms), 0u);
  EXPECT_EQ(w.advance(37ms), 1u);
  EXPECT_EQ(at, (Ticks{10, 27, 37}));
  expect_accounting(w, 1);
}

TEST(WheelPeriodicDelay, APeriodThatIsNoWholeNumberOfTicksRoundsEachDeadlineUp) {
  Wheel w({.tick = 1ms});
  Ticks at;
  ASSERT_TRUE(record_every(w, 2500us, at, delay_cadence()));
  step_ms(w, 1, 12, 1);
  // 2.5 -> 3; 3 + 2.5 = 5.5 -> 6; 8.5 -> 9; 11.5 -> 12.
  EXPECT_EQ(at, (Ticks{3, 6, 9, 12}));
}

TEST(WheelPeriodicDelay, MisfireDoesNotApplyAfterAGap) {
  for (Misfire m : {Misfire::catch_up, Misfire::fire_once_now, Misfire::skip}) {
    Wheel w({.tick = 1ms});
    int runs = 0;
    ASSERT_TRUE(count_every(w, 10ms, runs,
                            {.cadence = Cadence::fixed_delay, .initial_delay = std::nullopt, .misfire = m}));
    EXPECT_EQ(w.advance(95ms), 1u);
    EXPECT_EQ(w.advance(95ms), 0u);
    EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(105ms));
    EXPECT_EQ(runs, 1);
    EXPECT_EQ(w.stats().skipped, 0u);
  }
}

// ---------------------------------------------------------------------------------------------
// Initial delay

TEST(WheelPeriodicInitialDelay, DefaultZeroExplicitAndNegative) {
  struct Case {
    std::optional<Nanos> initial;
    Ticks expected;  // runs while stepping 0..25 ms one millisecond at a time
  };
  for (const Case& c : {Case{std::nullopt, {10, 20}}, Case{0ns, {0, 10, 20}}, Case{7ms, {7, 17}},
                        Case{-5ms, {0, 10, 20}}, Case{Nanos::min(), {0, 10, 20}}, Case{1ns, {1, 11, 21}}}) {
    SCOPED_TRACE(c.initial ? std::to_string(c.initial->count()) + "ns" : std::string("default"));
    Wheel w({.tick = 1ms});
    Ticks at;
    ASSERT_TRUE(record_every(w, 10ms, at, first_after(c.initial.value_or(10ms))));
    if (!c.initial) {
      // The same through an unset optional.
      Wheel w2({.tick = 1ms});
      Ticks at2;
      ASSERT_TRUE(w2.schedule_every(10ms, [&w2, &at2] { at2.push_back(ms_now(w2)); }));
      step_ms(w2, 0, 25, 1);
      EXPECT_EQ(at2, c.expected);
    }
    step_ms(w, 0, 25, 1);
    EXPECT_EQ(at, c.expected);
  }
}

TEST(WheelPeriodicInitialDelay, ZeroDelayRunsOnTheNextAdvanceEvenWithTheSameNow) {
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(40ms), 0u);
  int runs = 0;
  ASSERT_TRUE(count_every(w, 10ms, runs, first_after(0ns)));
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(40ms));
  EXPECT_EQ(w.advance(40ms), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(50ms)) << "the grid starts at the first run's tick";
  EXPECT_EQ(runs, 1);
}

TEST(WheelPeriodicInitialDelay, HugeInitialDelayClampsToTheHorizon) {
  Wheel w({.tick = 1ms});
  int runs = 0;
  ASSERT_TRUE(count_every(w, 1ms, runs, first_after(Nanos::max())));
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.horizon());
  EXPECT_EQ(w.advance(w.horizon() - 1ns), 0u);
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  // At the end of time every next run is due at once: one run per call, never a livelock.
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  EXPECT_EQ(runs, 3);
}

// ---------------------------------------------------------------------------------------------
// Misfire, fixed rate: a period of 10 ms, first run at 10 ms, and the caller's first advance at
// 45 ms, when the runs for 10, 20, 30 and 40 are all due.

// A wheel with a 1 ms tick, and what its periodic timer records: the ms_now() of each run (`at`)
// or the number of runs.
class WheelPeriodicMisfire : public ::testing::Test {
 protected:
  Wheel w{{.tick = 1ms}};
  Ticks at;
  int runs = 0;
};

TEST_F(WheelPeriodicMisfire, CatchUpRunsEveryMissedPeriodInOrderOnePerCall) {
  ASSERT_TRUE(count_every(w, 10ms, runs, rate(Misfire::catch_up)));
  for (int call = 0; call < 4; ++call) {
    EXPECT_EQ(w.advance(45ms), 1u) << "call " << call;
    expect_accounting(w, 1);
    if (call < 3) {
      ASSERT_TRUE(w.next_deadline().has_value());
      EXPECT_LE(*w.next_deadline(), w.now()) << "a missed period is due";
    }
  }
  EXPECT_EQ(runs, 4);  // the runs for 10, 20, 30, 40
  EXPECT_EQ(w.advance(45ms), 0u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(50ms)) << "caught up, back on the grid";
  EXPECT_EQ(w.advance(50ms), 1u);
  EXPECT_EQ(w.stats().fired, 5u);
  EXPECT_EQ(w.stats().rearmed, 5u);
}

TEST_F(WheelPeriodicMisfire, CatchUpKeepsTheGridWhileTimeMovesOn) {
  ASSERT_TRUE(count_every(w, 10ms, runs, rate(Misfire::catch_up)));
  EXPECT_EQ(w.advance(45ms), 1u);  // the run for 10
  // Time moves on while it catches up: the runs for 20 .. 60 (all due by 62) one per call.
  for (int call = 0; call < 5; ++call) EXPECT_EQ(w.advance(62ms), 1u) << call;
  EXPECT_EQ(w.advance(62ms), 0u);
  EXPECT_EQ(runs, 6);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(70ms));
}

TEST_F(WheelPeriodicMisfire, FireOnceNowRunsOnceForTheBacklogThenResumesOnTheGrid) {
  ASSERT_TRUE(record_every(w, 10ms, at, rate(Misfire::fire_once_now)));
  EXPECT_EQ(w.advance(45ms), 1u);
  EXPECT_EQ(w.advance(45ms), 0u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(50ms));
  step_ms(w, 46, 70, 1);
  EXPECT_EQ(at, (Ticks{45, 50, 60, 70}));
  EXPECT_EQ(w.stats().skipped, 0u);
}

TEST_F(WheelPeriodicMisfire, SkipDropsTheBacklogAndResumesOnTheGrid) {
  ASSERT_TRUE(record_every(w, 10ms, at, rate(Misfire::skip)));
  EXPECT_EQ(w.advance(45ms), 0u);
  EXPECT_EQ(w.stats().skipped, 1u);
  EXPECT_EQ(w.stats().rearmed, 1u);
  EXPECT_EQ(w.pending_count(), 1u);
  expect_accounting(w, 1);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(50ms));
  step_ms(w, 46, 70, 1);
  EXPECT_EQ(at, (Ticks{50, 60, 70}));
  EXPECT_EQ(w.stats().skipped, 1u);
}

TEST_F(WheelPeriodicMisfire, SkipStillRunsWhenLessThanAWholePeriodLate) {
  ASSERT_TRUE(record_every(w, 10ms, at, rate(Misfire::skip)));
  EXPECT_EQ(w.advance(19ms), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(20ms));
  EXPECT_EQ(w.advance(20ms), 1u);
  EXPECT_EQ(at, (Ticks{19, 20}));
  EXPECT_EQ(w.stats().skipped, 0u);
}

// The documented sharp edge of skip: exactly one period late means two runs are due, and skip
// drops both, the one on time included; a caller that advances every two periods never runs it.
TEST_F(WheelPeriodicMisfire, SkipDropsAGridPointThatFallsOnNow) {
  ASSERT_TRUE(count_every(w, 10ms, runs, rate(Misfire::skip)));
  EXPECT_EQ(w.advance(20ms), 0u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(30ms));
  for (std::int64_t t = 40; t <= 200; t += 20) EXPECT_EQ(w.advance(Nanos(1ms) * t), 0u);
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(w.stats().skipped, 10u);
  expect_accounting(w, 1);
}

// ---------------------------------------------------------------------------------------------
// No livelock: each call runs each periodic timer at most once

TEST(WheelPeriodicLivelock, OneTickPeriodAfterALongGapRunsOncePerCall) {
  for (Misfire m : {Misfire::catch_up, Misfire::fire_once_now, Misfire::skip}) {
    SCOPED_TRACE(static_cast<int>(m));
    Wheel w({.tick = 1ms});
    int runs = 0;
    ASSERT_TRUE(count_every(w, 1ms, runs, rate(m)));
    int calls = 0;
    while (calls < 5000) {
      const std::size_t ran = w.advance(1000ms);
      ++calls;
      ASSERT_LE(ran, 1u);
      if (ran == 0 && !(w.next_deadline() <= std::optional<Nanos>(w.now()))) break;
    }
    // catch_up: the runs for ticks 1 .. 1000, one per call; fire_once_now: one run for them all;
    // skip: the run for tick 1 is dropped (1000 >= 1 + 1) and tick 1001 is the next.
    const int expected = m == Misfire::catch_up ? 1000 : m == Misfire::fire_once_now ? 1 : 0;
    EXPECT_EQ(runs, expected);
    EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(1001ms));
    expect_accounting(w, 1);
  }
  Wheel w({.tick = 1ms});
  int runs = 0;
  ASSERT_TRUE(count_every(w, 1ms, runs, delay_cadence()));
  EXPECT_EQ(w.advance(1000ms), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(1001ms));
}

TEST(WheelPeriodicLivelock, ManyTimersInOnePassEachRunOnce) {
  Wheel w({.tick = 1ms});
  std::vector<int> runs(64, 0);
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const Misfire m = static_cast<Misfire>(i % 3);
    const Nanos period = Nanos(1ms) * static_cast<std::int64_t>(1 + i % 5);
    ASSERT_TRUE(w.schedule_every(
        period, [&runs, i] { ++runs[i]; }, rate(m)));
  }
  const std::size_t ran = w.advance(100ms);
  EXPECT_LE(ran, runs.size());
  for (int r : runs) EXPECT_LE(r, 1);
}

// ---------------------------------------------------------------------------------------------
// cancel

TEST(WheelPeriodicCancel, BetweenRunsStopsItAndDestroysTheCallable) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  int runs = 0;
  const TimerId id = w.schedule_every(10ms, [&runs, c = Counted(&lc)] { ++runs; });
  step_ms(w, 1, 25, 1);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(lc.live, 1);
  EXPECT_TRUE(w.cancel(id));
  EXPECT_EQ(lc.live, 0) << "destroyed before cancel returns";
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.next_deadline().has_value());
  EXPECT_FALSE(w.cancel(id));
  step_ms(w, 26, 100, 1);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(w.stats().cancelled, 1u);
  expect_accounting(w, 1);
}

TEST(WheelPeriodicCancel, FromInsideItsOwnCallbackTheRunFinishesAndNoneFollows) {
  struct State {
    Wheel* w;
    TimerId id;
    int runs = 0;
    std::vector<bool> results;
    LiveCount lc;
  };
  Wheel w({.tick = 1ms});
  State st{&w, {}, 0, {}, {}};
  st.id = w.schedule_every(1ms, [s = &st, c = Counted(&st.lc)] {
    ++s->runs;
    if (s->runs != 3) return;
    s->results.push_back(s->w->cancel(s->id));
    s->results.push_back(s->w->cancel(s->id));  // a second cancel of the same run: nothing left
    EXPECT_EQ(s->lc.live, 1) << "the running callable must outlive its own cancel";
    EXPECT_EQ(s->w->pending_count(), 0u) << "no further run: no longer pending";
  });
  ASSERT_TRUE(st.id);
  step_ms(w, 1, 10, 1);
  EXPECT_EQ(st.runs, 3);
  EXPECT_EQ(st.results, (std::vector<bool>{true, false}));
  EXPECT_EQ(st.lc.live, 0) << "destroyed once, after the callback returned";
  EXPECT_EQ(w.pending_count(), 0u);
  const WheelStats s = w.stats();
  EXPECT_EQ(s.fired, 3u);
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.rearmed, 3u) << "two re-links, and the period the cancel took";
  EXPECT_FALSE(w.cancel(st.id));
  // Its node is recycled: the next schedule gets it back.
  const std::uint64_t nodes = w.stats().pool_nodes;
  ASSERT_TRUE(w.schedule_after(1ms, [] {}));
  EXPECT_EQ(w.stats().pool_nodes, nodes);
}

// A wheel with a periodic timer that counts its runs, and a one-shot that cancels it.
struct CancelledByAnother {
  CancelledByAnother(Nanos period, const PeriodicOptions& opts)
      : periodic(count_every(w, period, runs, opts)) {}
  // Schedules the one-shot that cancels the periodic timer at `at` and records what cancel() said.
  TimerId cancel_at(Nanos at) {
    return w.schedule_at(at, [this] { result = w.cancel(periodic); });
  }
  // The cancel won and the periodic timer is gone, both schedules accounted for.
  void expect_cancelled() const {
    EXPECT_TRUE(result);
    EXPECT_EQ(w.pending_count(), 0u);
    expect_accounting(w, 2);
  }
  Wheel w{{.tick = 1ms}};
  int runs = 0;
  bool result = false;
  TimerId periodic;
};

TEST(WheelPeriodicCancel, FromAnotherTimersCallbackInTheSamePass) {
  {
    // The periodic timer's first run is later in the pass than the cancelling one-shot.
    CancelledByAnother c(10ms, first_after(7ms));
    ASSERT_TRUE(c.cancel_at(5ms));
    EXPECT_EQ(c.w.advance(20ms), 1u);
    EXPECT_EQ(c.runs, 0);
    c.expect_cancelled();
  }
  {
    // Both on one tick, in either order: the periodic timer runs at most that once.
    CancelledByAnother c(10ms, first_after(5ms));
    ASSERT_TRUE(c.cancel_at(5ms));
    const std::size_t ran = c.w.advance(100ms);
    EXPECT_EQ(ran, 1u + static_cast<std::size_t>(c.runs));
    EXPECT_LE(c.runs, 1);
    c.expect_cancelled();
  }
  {
    // A periodic timer behind (catch_up, waiting in the due slot) cancelled by a later timer of
    // the next call: its missed period runs first, then it is gone.
    CancelledByAnother c(1ms, rate(Misfire::catch_up));
    EXPECT_EQ(c.w.advance(10ms), 1u);
    ASSERT_TRUE(c.cancel_at(12ms));
    EXPECT_EQ(c.w.advance(20ms), 2u);
    EXPECT_EQ(c.runs, 2);
    EXPECT_EQ(c.w.advance(20ms), 0u);
    c.expect_cancelled();
  }
  {
    // Two periodic timers on one tick, each cancelling the other: the first to run stops the
    // other before it runs, and keeps running itself.
    Wheel w({.tick = 1ms});
    struct Pair {
      Wheel* w;
      TimerId x, y;
      int x_runs = 0, y_runs = 0, cancels = 0;
    } pr{&w, {}, {}};
    pr.x = w.schedule_every(4ms, [q = &pr] {
      ++q->x_runs;
      q->cancels += q->w->cancel(q->y) ? 1 : 0;
    });
    pr.y = w.schedule_every(4ms, [q = &pr] {
      ++q->y_runs;
      q->cancels += q->w->cancel(q->x) ? 1 : 0;
    });
    step_ms(w, 1, 20, 2);
    EXPECT_EQ(pr.cancels, 1);
    EXPECT_EQ(std::min(pr.x_runs, pr.y_runs), 0);
    EXPECT_EQ(std::max(pr.x_runs, pr.y_runs), 5);  // 4, 8, 12, 16, 20
    EXPECT_EQ(w.pending_count(), 1u);
    EXPECT_EQ(w.stats().cancelled, 1u);
    expect_accounting(w, 2);
  }
}

// ---------------------------------------------------------------------------------------------
// Bad periods

TEST(WheelPeriodicBadPeriod, RefusedWithNothingChanged) {
  Wheel w({.tick = 1ms, .max_pending = 1});
  LiveCount lc;
  const auto try_every = [&](Nanos period, Cadence cadence) {
    return w.schedule_every(period, [c = Counted(&lc)] {},
                            {.cadence = cadence, .initial_delay = std::nullopt, .misfire = {}});
  };
  const Nanos too_long = Nanos(std::int64_t{1} << 60);
  for (Cadence cadence : {Cadence::fixed_rate, Cadence::fixed_delay}) {
    for (Nanos bad : {Nanos(0), Nanos(-1), -Nanos(1s), Nanos::min(), too_long, Nanos::max()}) {
      const TimerId id = try_every(bad, cadence);
      EXPECT_FALSE(id) << bad.count();
      EXPECT_EQ(id.status(), Status::bad_period) << bad.count();
    }
  }
  // Fixed rate needs a whole number of ticks.
  for (Nanos bad : {Nanos(1), Nanos(999999), Nanos(1000001), Nanos(1500us), Nanos(1ms) * 12345 + 1ns}) {
    EXPECT_EQ(try_every(bad, Cadence::fixed_rate).status(), Status::bad_period) << bad.count();
  }
  EXPECT_EQ(lc.live, 0) << "a refused callable is never stored";
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.stats().scheduled, 0u);
  EXPECT_EQ(w.stats().rejected, 0u) << "a bad period is the caller's error, not a refusal for resources";
  EXPECT_EQ(w.stats().pool_nodes, 0u);

  // The same periods with fixed delay, and the longest periods, are fine.
  const Nanos longest = too_long - 1ns;
  const Nanos longest_rate = Nanos(longest.count() / 1'000'000 * 1'000'000);
  for (auto [period, cadence] :
       {std::pair{Nanos(1500us), Cadence::fixed_delay}, std::pair{Nanos(1), Cadence::fixed_delay},
        std::pair{longest, Cadence::fixed_delay}, std::pair{longest_rate, Cadence::fixed_rate},
        std::pair{Nanos(1ms), Cadence::fixed_rate}}) {
    const TimerId id = try_every(period, cadence);
    ASSERT_TRUE(id) << period.count();
    EXPECT_TRUE(w.cancel(id));
  }
  // A bad period is reported as such even when the wheel is also full.
  ASSERT_TRUE(w.schedule_after(1ms, [] {}));
  EXPECT_EQ(try_every(0ns, Cadence::fixed_rate).status(), Status::bad_period);
  EXPECT_EQ(try_every(1ms, Cadence::fixed_rate).status(), Status::max_pending_reached);
  EXPECT_EQ(lc.live, 0);
}

TEST(WheelPeriodicBadPeriod, NameAndCheckedMessageSayWhatToDo) {
  EXPECT_EQ(to_string(Status::bad_period), "bad_period");
  Wheel w({.tick = 1ms});
  try {
    static_cast<void>(checked(w.schedule_every(1500us, [] {})));
    ADD_FAILURE() << "checked() did not throw for a bad period";
  } catch (const ScheduleError& e) {
    EXPECT_EQ(e.status(), Status::bad_period);
    const std::string what = e.what();
    EXPECT_NE(what.find("bad_period"), std::string::npos) << what;
    EXPECT_NE(what.find("fixed_delay"), std::string::npos) << what;
    EXPECT_NE(what.find("finer tick"), std::string::npos) << what;
  }
}

// ---------------------------------------------------------------------------------------------
// The callable: up to 16 bytes (the 24-byte case is compile_fail/oversized_periodic_callable.cpp)

TEST(WheelPeriodicCallable, SixteenBytesFitAndMutableStateLivesAcrossRuns) {
  struct Two {
    int* runs;
    std::int64_t own = 0;  // the callable's own state, kept from run to run
    void operator()() { *runs += static_cast<int>(++own); }
  };
  static_assert(sizeof(Two) == detail::kPeriodicCallableBytes);
  Wheel w({.tick = 1ms});
  int total = 0;
  ASSERT_TRUE(w.schedule_every(1ms, Two{&total}));
  step_ms(w, 1, 4, 1);
  EXPECT_EQ(total, 1 + 2 + 3 + 4) << "a periodic callable is run in place, not copied per run";
}

// ---------------------------------------------------------------------------------------------
// Throwing callbacks

TEST(WheelPeriodicThrow, AThrowingRunKeepsTheSchedule) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  int runs = 0;
  const TimerId id = w.schedule_every(10ms, [&runs, c = Counted(&lc)] {
    if (++runs == 2) throw std::runtime_error("boom");
  });
  EXPECT_EQ(w.advance(10ms), 1u);
  EXPECT_THROW(w.advance(20ms), std::runtime_error);
  EXPECT_EQ(runs, 2);
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(lc.live, 1) << "a throwing periodic callable is kept";
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(30ms));
  expect_accounting(w, 1);
  EXPECT_EQ(w.advance(30ms), 1u);
  EXPECT_EQ(runs, 3);
  EXPECT_EQ(w.stats().fired, 3u);
  EXPECT_TRUE(w.cancel(id));
  EXPECT_EQ(lc.live, 0);
}

TEST(WheelPeriodicThrow, BehindAndThrowingEveryRunStillMovesOnePeriodPerCall) {
  Wheel w({.tick = 1ms});
  int runs = 0;
  ASSERT_TRUE(w.schedule_every(
      1ms,
      [&runs] {
        ++runs;
        throw 7;
      },
      rate(Misfire::catch_up)));
  for (int call = 1; call <= 5; ++call) {
    EXPECT_THROW(w.advance(5ms), int) << call;
    EXPECT_EQ(runs, call);
  }
  EXPECT_EQ(w.advance(5ms), 0u) << "caught up: the runs for ticks 1 .. 5 are done";
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(6ms));
}

TEST(WheelPeriodicThrow, CancelledFromItsCallbackThenThrowingEndsIt) {
  Wheel w({.tick = 1ms});
  LiveCount lc;
  struct State {
    Wheel* w;
    TimerId id;
  } st{&w, {}};
  st.id = w.schedule_every(1ms, [s = &st, c = Counted(&lc)] {
    EXPECT_TRUE(s->w->cancel(s->id));
    throw std::runtime_error("after cancel");
  });
  EXPECT_THROW(w.advance(1ms), std::runtime_error);
  EXPECT_EQ(lc.live, 0);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.advance(10ms), 0u);
  expect_accounting(w, 1);
}

// ---------------------------------------------------------------------------------------------
// The expiry limit

TEST(WheelPeriodicLimit, RunsCountAgainstTheLimitAndLeftoversRunFirstNextCall) {
  Wheel w({.tick = 1ms});
  int periodic = 0, once = 0;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(w.schedule_every(1ms, [&periodic] { ++periodic; }));
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(w.schedule_at(1ms, [&once] { ++once; }));
  EXPECT_EQ(w.advance(1ms, 3), 3u);
  EXPECT_EQ(w.advance(1ms, 3), 3u);
  EXPECT_EQ(w.advance(1ms, 3), 1u);
  EXPECT_EQ(w.advance(1ms, 3), 0u);
  EXPECT_EQ(periodic, 5);
  EXPECT_EQ(once, 2);
  EXPECT_EQ(w.pending_count(), 5u);
  EXPECT_EQ(w.advance(2ms), 5u);
  EXPECT_EQ(periodic, 10);
  expect_accounting(w, 7);
}

TEST(WheelPeriodicLimit, LimitHitLeavesPeriodicTimersOfLaterTicksForLaterCalls) {
  // A limit hit at tick 3 with a periodic timer due at 4 and 5: the next calls go earliest first.
  Wheel w({.tick = 1ms});
  std::vector<std::string> log;
  ASSERT_TRUE(w.schedule_every(4ms, [&log] { log.push_back("p4"); }));
  ASSERT_TRUE(w.schedule_every(5ms, [&log] { log.push_back("p5"); }));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(w.schedule_at(3ms, [&log] { log.push_back("o3"); }));
  EXPECT_EQ(w.advance(6ms, 2), 2u);
  EXPECT_EQ(w.advance(6ms, 2), 2u);
  EXPECT_EQ(w.advance(6ms, 2), 1u);
  EXPECT_EQ(log, (std::vector<std::string>{"o3", "o3", "o3", "p4", "p5"}));
}

TEST(WheelPeriodicLimit, SkippedRunsDoNotCountAgainstTheLimit) {
  Wheel w({.tick = 1ms});
  int periodic = 0, once = 0;
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(w.schedule_every(
        10ms, [&periodic] { ++periodic; }, rate(Misfire::skip)));
  ASSERT_TRUE(w.schedule_at(15ms, [&once] { ++once; }));
  EXPECT_EQ(w.advance(45ms, 1), 1u);  // three skips at tick 10, then the one-shot at 15
  EXPECT_EQ(once, 1);
  EXPECT_EQ(w.stats().skipped, 3u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(50ms));
  EXPECT_EQ(w.advance(50ms, 2), 2u);
  EXPECT_EQ(w.advance(50ms, 2), 1u);
  EXPECT_EQ(periodic, 3);
  expect_accounting(w, 4);
}

TEST(WheelPeriodicLimit, ZeroLimitRunsNothingAndLosesNothing) {
  Wheel w({.tick = 1ms});
  int runs = 0;
  ASSERT_TRUE(count_every(w, 1ms, runs, rate(Misfire::catch_up)));
  EXPECT_EQ(w.advance(5ms, 0), 0u);
  EXPECT_EQ(w.stats().skipped + w.stats().fired, 0u);
  EXPECT_EQ(w.advance(5ms), 1u);
  EXPECT_EQ(runs, 1);
}

// ---------------------------------------------------------------------------------------------
// pending(), max_pending and next_deadline() while a periodic callback runs

TEST(WheelPeriodicPending, ARunningPeriodicTimerStillCountsAgainstMaxPending) {
  Wheel w({.tick = 1ms, .max_pending = 1});
  struct Inside {
    std::size_t pending = 0;
    Status nested = Status::ok;
    std::optional<Nanos> deadline{0ns};
  } in;
  ASSERT_TRUE(w.schedule_every(1ms, [&w, &in] {
    in.pending = w.pending_count();
    in.nested = w.schedule_after(1ms, [] {}).status();
    in.deadline = w.next_deadline();
  }));
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_EQ(in.pending, 1u);
  EXPECT_EQ(in.nested, Status::max_pending_reached) << "its re-arm would have gone past max_pending";
  EXPECT_FALSE(in.deadline.has_value()) << "its next run is not linked while it runs";
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.next_deadline(), std::optional<Nanos>(2ms));
}

// ---------------------------------------------------------------------------------------------
// The due slot: nothing a call makes due runs again in that call

// A callback of a timer left over in the late slot by a limit hit reschedules itself at zero delay:
// that reschedule runs in the next call, as every "at or before the tick being processed" schedule
// does, even though the leftovers drain in this call.
TEST(WheelDueSlot, ACallbackOfALeftoverSchedulingInThePastRunsInTheNextCall) {
  for (int offset = 0; offset < static_cast<int>(Wheel::kWays); ++offset) {
    SCOPED_TRACE("sub-list offset " + std::to_string(offset));
    Wheel w({.tick = 1ms});
    for (int i = 0; i < offset; ++i) ASSERT_TRUE(w.cancel(w.schedule_after(1h, [] {})));
    EXPECT_EQ(w.advance(10ms), 0u);
    struct Chain {
      Wheel* w;
      int runs = 0;
      int in_call = 0;
      void schedule() {
        ASSERT_TRUE(w->schedule_after(0ns, [this] {
          ++runs;
          ++in_call;
          schedule();
        }));
      }
    };
    Chain a{&w}, b{&w};
    a.schedule();
    b.schedule();
    for (int call = 0; call < 6; ++call) {
      a.in_call = b.in_call = 0;
      EXPECT_EQ(w.advance(10ms, call == 0 ? 1 : 100), call == 0 ? 1u : 2u) << call;
      EXPECT_LE(a.in_call, 1) << call;
      EXPECT_LE(b.in_call, 1) << call;
    }
  }
}

TEST(WheelDueSlot, APeriodicTimerBehindAndLeftOverRunsOncePerCall) {
  for (int offset = 0; offset < static_cast<int>(Wheel::kWays); ++offset) {
    SCOPED_TRACE("sub-list offset " + std::to_string(offset));
    Wheel w({.tick = 1ms});
    for (int i = 0; i < offset; ++i) ASSERT_TRUE(w.cancel(w.schedule_after(1h, [] {})));
    std::vector<int> per_call(2, 0);
    ASSERT_TRUE(w.schedule_every(
        1ms, [&per_call] { ++per_call[0]; }, rate(Misfire::catch_up)));
    ASSERT_TRUE(w.schedule_every(
        1ms, [&per_call] { ++per_call[1]; }, rate(Misfire::catch_up)));
    EXPECT_EQ(w.advance(100ms), 2u);  // both behind now, waiting in the due slot
    int total = 2;
    for (int call = 0; call < 40; ++call) {
      per_call.assign(2, 0);
      total += static_cast<int>(w.advance(100ms, call % 3 == 0 ? 1 : 100));
      EXPECT_LE(per_call[0], 1) << call;
      EXPECT_LE(per_call[1], 1) << call;
    }
    EXPECT_EQ(total, 2 + 14 * 1 + 26 * 2);  // 14 calls of limit 1 run one; the other 26 run both
  }
}

// ---------------------------------------------------------------------------------------------
// Lifetimes and the stats counts

TEST(WheelPeriodicLifetime, WheelDestructionDestroysEveryPeriodicCallableOnce) {
  LiveCount lc;
  int runs = 0;
  {
    Wheel w({.tick = 1ms});
    auto every = [&](Nanos period, PeriodicOptions opts) {
      ASSERT_TRUE(w.schedule_every(
          period, [&runs, c = Counted(&lc)] { ++runs; }, opts));
    };
    for (int i = 0; i < 3; ++i) every(1ms, rate(Misfire::catch_up));  // behind: in the due slot
    for (int i = 0; i < 4; ++i) every(60ms, {});
    every(1h, {});                // an upper level
    every(7ms, delay_cadence());  // level 0
    EXPECT_EQ(w.advance(5ms), 3u);
    // The three behind, the one at 7 and one of the four at 60: three of those are left in the
    // batch, and the three behind go back to the due slot.
    EXPECT_EQ(w.advance(60ms, 5), 5u);
    every(10ms, first_after(0ns));      // the due slot too
    EXPECT_EQ(w.advance(60ms, 1), 1u);  // one of the four due-slot timers: three left in the late slot
    EXPECT_EQ(lc.live, 10);
  }
  EXPECT_EQ(lc.live, 0) << "a periodic callable destroyed twice or never";
  EXPECT_EQ(runs, 9);
}

TEST(WheelPeriodicStats, ScheduledMatchesTheSuccessfulSchedulesAfterEveryOperation) {
  Wheel w({.tick = 1ms});
  std::mt19937_64 rng(4242);
  std::vector<TimerId> ids;
  std::uint64_t scheduled = 0;  // the schedules that returned a valid id
  for (int op = 0; op < 20000; ++op) {
    const unsigned r = static_cast<unsigned>(rng() % 10);
    if (r < 3 && ids.size() < 200) {
      const Nanos period = Nanos(1ms) * static_cast<std::int64_t>(1 + rng() % 20);
      const PeriodicOptions opts{.cadence = static_cast<Cadence>(rng() % 2),
                                 .initial_delay = Nanos(static_cast<std::int64_t>(rng() % 30'000'000)) - 5ms,
                                 .misfire = static_cast<Misfire>(rng() % 3)};
      ids.push_back(w.schedule_every(
          period, [] {}, opts));
      scheduled += ids.back() ? 1 : 0;
    } else if (r < 5) {
      ids.push_back(w.schedule_after(Nanos(static_cast<std::int64_t>(rng() % 40'000'000)) - 5ms, [] {}));
      scheduled += ids.back() ? 1 : 0;
    } else if (r < 7 && !ids.empty()) {
      const std::size_t k = rng() % ids.size();
      w.cancel(ids[k]);
      ids[k] = ids.back();
      ids.pop_back();
    } else {
      const std::size_t limit = rng() % 4 == 0 ? rng() % 5 : std::numeric_limits<std::size_t>::max();
      w.advance(w.now() + Nanos(static_cast<std::int64_t>(rng() % 30'000'000)), limit);
    }
    const WheelStats s = w.stats();
    ASSERT_EQ(s.scheduled, scheduled) << "op " << op;
  }
  EXPECT_GT(w.stats().skipped, 0u);
  EXPECT_GT(w.stats().rearmed, w.stats().skipped);
}

// ---------------------------------------------------------------------------------------------
// The model test
//
// The reference keeps, for each pending timer, the tick of its next run (d) and whether it waits
// in the due/late slots (deferred: scheduled at or before the wheel's processing tick, or a
// periodic timer re-armed at or before the call's now), and for which call. Every advance() here
// runs without a limit and no callback throws, so after each call the processing tick is the
// call's now tick, and one call does, in this order:
//   1. every deferred timer of this call (in any order), then
//   2. every other timer with d <= now tick, in non-decreasing d (ties in any order), including
//      those callbacks schedule into the rest of the pass;
// a periodic timer whose run is dropped by Misfire::skip runs no callback, so the reference
// applies skips when the pass must have passed them. Re-arms follow wheel.hpp's rules. After the
// call nothing due may be left. So each call's set of runs is checked exactly: every run must be
// the reference's next, and none may be left. Callbacks cancel (themselves too), schedule one-shot
// and periodic timers, and try to advance. A nested cancel whose outcome would depend on the order
// within a tick of a skip the reference cannot see (the target is a skip-timer dropped at this
// very tick) is not made.
class PeriodicModel {
 public:
  PeriodicModel(std::uint64_t seed, std::uint64_t ops) : seed_(seed), ops_(ops), rng_(seed) {}

  std::string run() {
    while (op_ < ops_ && failure_.empty()) {
      start_episode();
      const std::uint64_t end = std::min(ops_, op_ + 500 + rng_() % 20000);
      while (op_ < end && failure_.empty()) {
        step();
        ++op_;
        if (failure_.empty()) check("after op");
      }
      end_episode();
    }
    return failure_;
  }

  std::string summary() const {
    std::ostringstream os;
    os << op_ << " ops, " << episode_ << " wheels, " << total_runs_ << " runs (" << total_periodic_runs_
       << " periodic), " << total_skips_ << " skips, " << total_cancels_ << " cancels ("
       << total_running_cancels_ << " from the running callback), " << total_deferred_runs_
       << " runs from the due slot";
    return os.str();
  }
  std::uint64_t total_runs() const { return total_runs_; }
  std::uint64_t total_skips() const { return total_skips_; }
  std::uint64_t total_deferred_runs() const { return total_deferred_runs_; }

  // The callable of every model timer: 16 bytes, so it fits a periodic timer; counts its copies.
  class Fire {
   public:
    Fire(PeriodicModel* m, std::uint64_t serial) noexcept : m_(m), serial_(serial) { ++m_->live_; }
    Fire(const Fire& o) noexcept : m_(o.m_), serial_(o.serial_) { ++m_->live_; }
    Fire& operator=(const Fire&) = delete;
    ~Fire() { --m_->live_; }
    void operator()() const { m_->on_fire(serial_); }

   private:
    PeriodicModel* m_;
    std::uint64_t serial_;
  };

 private:
  struct Timer {
    TimerId id;
    bool periodic = false;
    Cadence cadence = Cadence::fixed_rate;
    Misfire misfire = Misfire::catch_up;
    std::int64_t period_ns = 0;
    std::int64_t p = 0;              // the period in ticks (fixed rate)
    std::int64_t d = 0;              // tick of the next run
    bool deferred = false;           // waits in the due/late slots
    std::uint64_t deferred_for = 0;  // ... to run in this call (calls_ numbering)
  };

  // ---- episodes ------------------------------------------------------------------------------

  void start_episode() {
    ++episode_;
    static constexpr Nanos kTicks[] = {Nanos(1ms), Nanos(1us), Nanos(250us), Nanos(7us)};
    tick_ = kTicks[rng_() % std::size(kTicks)];
    const Nanos start =
        rng_() % 2 == 0 ? Nanos(0) : Nanos(static_cast<std::int64_t>(rng_() % 1'000'000'000'000ull));
    wheel_ = std::make_unique<Wheel>(WheelOptions{.tick = tick_, .start = start, .max_pending = 0});
    now_ = start;
    cur_ = floor_ticks(start, tick_);
    timers_.clear();
    scheduled_ = cancelled_ = fired_ = skipped_ = rearmed_ = 0;
    calls_ = 0;
  }

  void end_episode() {
    if (!failure_.empty()) return;
    if (live_ != static_cast<long>(timers_.size())) fail("live callables before destruction");
    wheel_.reset();
    if (live_ != 0)
      fail("~Wheel left " + std::to_string(live_) + " callables alive (or destroyed some twice)");
    for (const auto& kv : timers_) remember_dead(kv.second.id);
  }

  // ---- operations outside advance() ---------------------------------------------------------

  void step() {
    const unsigned r = static_cast<unsigned>(rng_() % 100);
    if (r < 22) {
      if (timers_.size() < 300) return schedule_once(cur_);
    } else if (r < 40) {
      if (timers_.size() < 300) return schedule_periodic(cur_);
    } else if (r < 42) {
      return bad_period();
    } else if (r < 55) {
      return cancel_random(cur_, false);
    }
    advance_random();
  }

  std::int64_t ticks_of(Nanos deadline) const {
    return std::max<std::int64_t>(0, ceil_ticks(deadline, tick_));
  }

  // A deadline in ticks and nanoseconds around `at` (a tick): in the past, on it, or ahead by up
  // to a few level-0 revolutions, now and then much further.
  Nanos random_deadline(std::int64_t at) {
    const std::int64_t base = at * tick_.count();
    const auto sub = [&] {
      return static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(tick_.count()));
    };
    switch (rng_() % 8) {
      case 0: return Nanos(base - static_cast<std::int64_t>(rng_() % 5) * tick_.count() - sub());
      case 1: return Nanos(base);
      case 2:
      case 3:
      case 4: return Nanos(base + static_cast<std::int64_t>(1 + rng_() % 40) * tick_.count() - sub());
      case 5:
      case 6: return Nanos(base + static_cast<std::int64_t>(1 + rng_() % 1500) * tick_.count() - sub());
      default: return Nanos(base + static_cast<std::int64_t>(1 + rng_() % 300000) * tick_.count());
    }
  }

  // `processing` is the wheel's processing tick at the time: a deadline at or before it defers.
  void schedule_once(std::int64_t processing) {
    const Nanos deadline = random_deadline(processing);
    const std::uint64_t serial = next_serial_++;
    const TimerId id = rng_() % 2 == 0 ? wheel_->schedule_at(deadline, Fire(this, serial))
                                       : wheel_->schedule_after(deadline - now_, Fire(this, serial));
    if (!id) return fail("schedule failed: " + std::string(to_string(id.status())));
    Timer t;
    t.id = id;
    t.d = ticks_of(deadline);
    place(t, processing);
    add(serial, t);
  }

  void schedule_periodic(std::int64_t processing) {
    Timer t;
    t.periodic = true;
    t.cadence = rng_() % 3 == 0 ? Cadence::fixed_delay : Cadence::fixed_rate;
    t.misfire = static_cast<Misfire>(rng_() % 3);
    if (t.cadence == Cadence::fixed_rate) {
      const unsigned k = static_cast<unsigned>(rng_() % 20);
      const std::uint64_t span = k < 14 ? 12 : k < 19 ? 700 : 200000;  // level 0 mostly, then 1 and 2
      t.p = 1 + static_cast<std::int64_t>(rng_() % span);
      t.period_ns = t.p * tick_.count();
    } else {
      t.period_ns = 1 + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(30 * tick_.count()));
    }
    PeriodicOptions opts{.cadence = t.cadence, .initial_delay = std::nullopt, .misfire = t.misfire};
    Nanos first = Nanos(t.period_ns);
    switch (rng_() % 5) {
      case 0: break;  // default: one period
      case 1: opts.initial_delay = first = Nanos(0); break;
      case 2:
        opts.initial_delay = -Nanos(static_cast<std::int64_t>(1 + rng_() % 1'000'000));
        first = Nanos(0);
        break;
      default:
        first = Nanos(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(3 * t.period_ns)));
        opts.initial_delay = first;
        break;
    }
    const std::uint64_t serial = next_serial_++;
    const TimerId id = wheel_->schedule_every(Nanos(t.period_ns), Fire(this, serial), opts);
    if (!id) return fail("schedule_every failed: " + std::string(to_string(id.status())));
    t.id = id;
    t.d = ticks_of(now_ + first);
    place(t, processing);
    add(serial, t);
  }

  void bad_period() {
    const Nanos period = rng_() % 2 == 0
                             ? -Nanos(static_cast<std::int64_t>(rng_() % 1000))
                             : Nanos(tick_.count() * (1 + static_cast<std::int64_t>(rng_() % 9)) + 1);
    const long live = live_;
    const TimerId id = wheel_->schedule_every(period, Fire(this, next_serial_++));
    if (id || id.status() != Status::bad_period) fail("a bad period was not refused with bad_period");
    if (live_ != live) fail("a refused callable was kept");
  }

  void place(Timer& t, std::int64_t processing) {
    t.deferred = t.d <= processing;
    t.deferred_for = calls_ + 1;
  }

  void add(std::uint64_t serial, const Timer& t) {
    for (const auto& kv : timers_) {
      if (kv.second.id == t.id) return fail("a schedule returned the id of a pending timer");
    }
    timers_.emplace(serial, t);
    ++scheduled_;
  }

  void remember_dead(TimerId id) {
    if (dead_.size() < 512) {
      dead_.push_back(id);
    } else {
      dead_[dead_pos_++ % dead_.size()] = id;
    }
  }

  // Cancels a pending timer, a dead one, or a garbage id, and checks the answer. Inside a callback
  // (`nested`) a target whose state the reference cannot know is not tried.
  void cancel_random(std::int64_t processing, bool nested) {
    const unsigned kind = static_cast<unsigned>(rng_() % 10);
    if (kind < 6 && !timers_.empty()) {
      auto it = timers_.begin();
      std::advance(it, static_cast<long>(rng_() % timers_.size()));
      const std::uint64_t serial = it->first;
      if (nested && ambiguous(it->second, processing)) return;
      const bool running = nested && serial == running_;
      if (!wheel_->cancel(it->second.id)) return fail("cancel of a pending timer returned false");
      ++cancelled_;
      ++total_cancels_;
      if (running) {
        running_cancelled_ = true;
        ++total_running_cancels_;
      }
      remember_dead(it->second.id);
      timers_.erase(it);
      return;
    }
    TimerId id;
    if (kind < 8 && !dead_.empty()) {
      id = dead_[rng_() % dead_.size()];
    } else {
      id = TimerId::from_raw(((rng_() % 64) << 32) | (rng_() % 512));
    }
    for (const auto& kv : timers_) {
      if (kv.second.id == id) return;  // a garbage id that happens to be live: not the case tested
    }
    if (wheel_->cancel(id)) fail("cancel of a dead or garbage id returned true");
  }

  // A fixed-rate skip timer dropped in this call at a moment the reference does not see.
  bool ambiguous(const Timer& t, std::int64_t processing) const {
    if (!in_call_ || !skip_eligible(t)) return false;
    return t.deferred ? t.deferred_for == calls_ && in_deferred_phase_ : t.d == processing;
  }

  bool skip_eligible(const Timer& t) const {
    return t.periodic && t.cadence == Cadence::fixed_rate && t.misfire == Misfire::skip && t.d <= target_ &&
           target_ - t.d >= t.p;
  }

  // ---- advance -------------------------------------------------------------------------------

  void advance_random() {
    const auto ticks = [&](std::int64_t n) { return Nanos(n * tick_.count()); };
    const Nanos sub(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(tick_.count())));
    Nanos to = now_;
    switch (rng_() % 10) {
      case 0: to = now_ - ticks(static_cast<std::int64_t>(rng_() % 10)); break;  // back: ignored
      case 1: break;
      case 2:
      case 3: to = now_ + ticks(1); break;
      case 4: to = now_ + sub; break;
      case 5:
      case 6: to = now_ + ticks(static_cast<std::int64_t>(rng_() % 12)) + sub; break;
      case 7:
      case 8: to = now_ + ticks(static_cast<std::int64_t>(rng_() % 600)) + sub; break;
      default: to = now_ + ticks(static_cast<std::int64_t>(rng_() % 300000)); break;
    }
    ++calls_;
    now_ = std::max(now_, to);
    target_ = floor_ticks(now_, tick_);
    in_call_ = true;
    in_deferred_phase_ = true;
    last_d_ = -1;
    ran_ = 0;
    const std::size_t got = wheel_->advance(to);
    in_call_ = false;
    if (!failure_.empty()) return;
    if (got != ran_)
      return fail("advance returned " + std::to_string(got) + ", " + std::to_string(ran_) + " ran");
    // Whatever the pass went over: deferred skip-timers, and skip-timers up to now.
    end_deferred_phase();
    apply_skips_before(target_ + 1);
    for (const auto& [serial, t] : timers_) {
      if (t.deferred && t.deferred_for <= calls_) {
        return fail("timer #" + std::to_string(serial) + " waited in the due slot but did not run");
      }
      if (!t.deferred && t.d <= target_) {
        return fail("timer #" + std::to_string(serial) + " due at tick " + std::to_string(t.d) +
                    " did not run in the call to tick " + std::to_string(target_));
      }
    }
    cur_ = target_;
  }

  void end_deferred_phase() {
    if (!in_deferred_phase_) return;
    in_deferred_phase_ = false;
    for (auto& [serial, t] : timers_) {
      if (t.deferred && t.deferred_for == calls_ && skip_eligible(t)) apply_skip(t);
    }
  }

  void apply_skips_before(std::int64_t tick) {
    for (auto& [serial, t] : timers_) {
      if (!t.deferred && t.d < tick && skip_eligible(t)) apply_skip(t);
    }
  }

  void apply_skip(Timer& t) {
    ++skipped_;
    ++rearmed_;
    ++total_skips_;
    t.d = t.d + ((target_ - t.d) / t.p + 1) * t.p;
    t.deferred = false;
  }

  // Where a periodic timer goes after its run for tick t.d (wheel.hpp's rules).
  void rearm(Timer& t) {
    std::int64_t next = 0;
    if (t.cadence == Cadence::fixed_delay) {
      next = ticks_of(now_ + Nanos(t.period_ns));
    } else {
      next = t.d + t.p;
      if (next <= target_ && t.misfire != Misfire::catch_up) next = t.d + ((target_ - t.d) / t.p + 1) * t.p;
    }
    t.d = next;
    t.deferred = next <= target_;
    t.deferred_for = calls_ + 1;
  }

  // ---- callbacks -------------------------------------------------------------------------------

  void on_fire(std::uint64_t serial) {
    if (!failure_.empty()) return;
    if (!in_call_) return fail("a callback ran outside advance()");
    auto it = timers_.find(serial);
    if (it == timers_.end()) return fail("timer #" + std::to_string(serial) + " ran but is not pending");
    Timer t = it->second;
    std::int64_t processing = cur_;  // the wheel's processing tick while it runs the late slot
    if (t.deferred) {
      if (t.deferred_for != calls_) return fail("a timer deferred by this call ran in it");
      if (!in_deferred_phase_) return fail("a due-slot timer ran after the pass moved on to the ticks");
      ++total_deferred_runs_;
    } else {
      if (t.d > target_)
        return fail("early: a timer due at tick " + std::to_string(t.d) + " ran at now tick " +
                    std::to_string(target_));
      for (const auto& [s, o] : timers_) {
        if (o.deferred && o.deferred_for == calls_ && !skip_eligible(o)) {
          return fail("a tick's timer ran before due-slot timer #" + std::to_string(s));
        }
      }
      end_deferred_phase();
      if (t.d < last_d_) {
        return fail("out of order: tick " + std::to_string(t.d) + " after tick " + std::to_string(last_d_));
      }
      apply_skips_before(t.d);
      for (const auto& [s, o] : timers_) {
        if (!o.deferred && o.d < t.d) {
          return fail("timer #" + std::to_string(s) + " due at tick " + std::to_string(o.d) +
                      " was passed over");
        }
      }
      last_d_ = t.d;
      processing = t.d;
    }
    if (skip_eligible(t)) return fail("a skip timer a whole period late ran");
    ++ran_;
    ++fired_;
    ++total_runs_;
    if (t.periodic) {
      ++total_periodic_runs_;
    } else {
      timers_.erase(it);
      remember_dead(t.id);
    }
    if (wheel_->pending_count() != timers_.size()) return fail("pending() inside a callback disagrees");
    if (live_ != static_cast<long>(timers_.size()) + (t.periodic ? 0 : 1)) {
      return fail("live callables inside a callback: " + std::to_string(live_));
    }
    running_ = serial;
    running_cancelled_ = false;
    nested(processing, t);
    running_ = 0;
    if (t.periodic) {
      ++rearmed_;  // re-linked, or the period a cancel from this callback took
      if (!running_cancelled_) rearm(timers_.at(serial));
    }
  }

  void nested(std::int64_t processing, const Timer& self) {
    switch (rng_() % 16) {
      case 0:
      case 1:
      case 2: return cancel_random(processing, true);
      case 3:
        if (self.periodic || rng_() % 4 == 0) {
          // Its own id: true for a periodic timer (no run follows), false for a one-shot.
          const bool got = wheel_->cancel(self.id);
          if (got != self.periodic) return fail("a callback cancelling itself got the wrong answer");
          if (got) {
            running_cancelled_ = true;
            ++cancelled_;
            ++total_cancels_;
            ++total_running_cancels_;
            remember_dead(self.id);
            timers_.erase(running_);
          }
        }
        return;
      case 4:
      case 5: return timers_.size() < 300 ? schedule_once(processing) : void();
      case 6: return timers_.size() < 300 ? schedule_periodic(processing) : void();
      case 7:
        if (wheel_->advance(Nanos::max()) != 0) fail("advance() from a callback ran something");
        return;
      default: return;
    }
  }

  // ---- checks ----------------------------------------------------------------------------------

  void check(const char* when) {
    if (wheel_->pending_count() != timers_.size()) {
      return fail(std::string(when) + ": pending() " + std::to_string(wheel_->pending_count()) + ", model " +
                  std::to_string(timers_.size()));
    }
    if (live_ != static_cast<long>(timers_.size()))
      return fail(std::string(when) + ": live callables differ");
    const WheelStats s = wheel_->stats();
    if (s.scheduled != scheduled_ || s.cancelled != cancelled_ || s.fired != fired_ ||
        s.skipped != skipped_ || s.rearmed != rearmed_) {
      std::ostringstream os;
      os << when << ": stats disagree: scheduled " << s.scheduled << "/" << scheduled_ << " cancelled "
         << s.cancelled << "/" << cancelled_ << " fired " << s.fired << "/" << fired_ << " skipped "
         << s.skipped << "/" << skipped_ << " rearmed " << s.rearmed << "/" << rearmed_;
      return fail(os.str());
    }
    const std::optional<Nanos> nd = wheel_->next_deadline();
    if (timers_.empty()) {
      if (nd) fail(std::string(when) + ": next_deadline() with nothing pending");
      return;
    }
    if (!nd) return fail(std::string(when) + ": no next_deadline() with timers pending");
    bool deferred = false;
    std::int64_t min_d = std::numeric_limits<std::int64_t>::max();
    for (const auto& kv : timers_) {
      if (kv.second.deferred) {
        deferred = true;
      } else {
        min_d = std::min(min_d, kv.second.d);
      }
    }
    if (deferred ? *nd > now_ : (*nd <= now_ || *nd > Nanos(min_d * tick_.count()))) {
      fail(std::string(when) + ": next_deadline() " + std::to_string(nd->count()) + " with now " +
           std::to_string(now_.count()) + " and the earliest run at tick " + std::to_string(min_d));
    }
  }

  void fail(const std::string& what) {
    if (!failure_.empty()) return;
    std::ostringstream os;
    os << what << "\n  at op " << op_ << " of episode " << episode_ << " (tick " << tick_.count()
       << "ns, now " << now_.count() << "ns, call " << calls_ << ", " << timers_.size() << " pending)\n  "
       << replay_hint(seed_);
    failure_ = os.str();
  }

  std::uint64_t seed_;
  std::uint64_t ops_;
  std::mt19937_64 rng_;
  std::uint64_t op_ = 0;
  std::uint64_t episode_ = 0;
  std::string failure_;

  std::unique_ptr<Wheel> wheel_;
  Nanos tick_{1ms};
  Nanos now_{0};
  std::int64_t cur_ = 0;     // the wheel's processing tick between calls: the last call's now tick
  std::int64_t target_ = 0;  // the now tick of the call in progress
  std::map<std::uint64_t, Timer> timers_;  // serial -> pending timer
  std::vector<TimerId> dead_;
  std::size_t dead_pos_ = 0;
  std::uint64_t next_serial_ = 1;
  long live_ = 0;

  // The advance() call in progress.
  std::uint64_t calls_ = 0;
  bool in_call_ = false;
  bool in_deferred_phase_ = false;
  std::int64_t last_d_ = -1;
  std::size_t ran_ = 0;
  std::uint64_t running_ = 0;
  bool running_cancelled_ = false;

  std::uint64_t scheduled_ = 0, cancelled_ = 0, fired_ = 0, skipped_ = 0, rearmed_ = 0;
  std::uint64_t total_runs_ = 0, total_periodic_runs_ = 0, total_skips_ = 0, total_cancels_ = 0;
  std::uint64_t total_running_cancels_ = 0, total_deferred_runs_ = 0;
};
static_assert(sizeof(PeriodicModel::Fire) == detail::kPeriodicCallableBytes);

void run_periodic_model(std::uint64_t seed, std::uint64_t ops) {
  SCOPED_TRACE(replay_hint(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  PeriodicModel model(seed, ops);
  const std::string failure = model.run();
  EXPECT_TRUE(failure.empty()) << failure;
  std::printf("[ model    ] %s\n", model.summary().c_str());
  if (ops >= 100000 && failure.empty()) {
    EXPECT_GT(model.total_runs(), ops / 20) << replay_hint(seed);
    EXPECT_GT(model.total_skips(), 0u) << replay_hint(seed);
    EXPECT_GT(model.total_deferred_runs(), 0u) << replay_hint(seed);
  }
}

// The default runs in about a second in a Release build; TICKWHEEL_MODEL_OPS scales it (it is the
// existing model test's knob, whose default is 6M: this one is slower per operation).
std::uint64_t periodic_model_ops() { return env_u64("TICKWHEEL_MODEL_OPS", 6'000'000) / 20; }

TEST(WheelPeriodicModel, RandomSeed) {
  const std::uint64_t seed = seed_from_env_or_random();
  std::printf("[ model    ] %s\n", replay_hint(seed).c_str());
  run_periodic_model(seed, periodic_model_ops());
}

TEST(WheelPeriodicModel, FixedSeed1) { run_periodic_model(1, periodic_model_ops() / 4); }
TEST(WheelPeriodicModel, FixedSeed20240611) { run_periodic_model(20240611, periodic_model_ops() / 4); }

}  // namespace
}  // namespace tickwheel::test
