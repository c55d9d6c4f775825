// Moving a pending timer of the Wheel: reschedule() and reschedule_after(). A one-shot timer moved
// later, earlier, across levels, into the past and past the horizon keeps its id and its callable;
// a move within the unit of a slot of an upper level changes only the deadline (counted in
// rescheduled_in_place); every id that names no pending timer (fired, cancelled, failed, stale,
// default, forged, firing inside its own callback) gets false and nothing is touched; callbacks
// move other timers into and out of the pass under way; a periodic timer moved between runs
// restarts its cadence there, and is refused from inside its own callback. Time is driven by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "support.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

// ---------------------------------------------------------------------------------------------
// reschedule(): a pending one-shot timer

TEST(WheelReschedule, MovesAPendingTimerLaterKeepingItsIdAndItsCallable) {
  LiveCount lc;
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  struct Fn {
    LogRun note;
    Counted c;
    void operator()() const { note(); }
  };
  const TimerId id = w.schedule_after(10ms, Fn{{&log, 1}, Counted(&lc)});
  ASSERT_TRUE(id);
  const long constructed = lc.constructed;
  EXPECT_TRUE(w.reschedule(id, 25ms));
  EXPECT_EQ(lc.constructed, constructed) << "the callable was rebuilt";
  EXPECT_EQ(lc.live, 1);
  EXPECT_EQ(w.deadline(id), 25ms);
  EXPECT_EQ(w.pending_count(), 1u);
  tick_to(w, 24ms);
  EXPECT_TRUE(log.runs.empty()) << "ran at the old deadline or early";
  EXPECT_TRUE(w.is_pending(id));
  w.advance(25ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{25ms});
  EXPECT_EQ(lc.live, 0);
  expect_counts(w, {.scheduled = 1, .fired = 1, .rescheduled = 1});
}

TEST(WheelReschedule, MovesAPendingTimerEarlierAcrossLevels) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_after(10min, LogRun{&log, 1});  // level 2
  ASSERT_TRUE(w.reschedule(id, 3ms));                           // level 0
  EXPECT_EQ(w.next_deadline(), 3ms);
  tick_to(w, 3ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{3ms});
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.is_pending(id));
}

TEST(WheelReschedule, RoundsUpToTheTickAndClampsToTheHorizonAsASchedule) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_after(5ms, LogRun{&log, 1});
  ASSERT_TRUE(w.reschedule(id, 7ms + 1ns));
  EXPECT_EQ(w.deadline(id), 8ms);
  ASSERT_TRUE(w.reschedule(id, Nanos::max()));
  EXPECT_EQ(w.deadline(id), w.horizon());
  ASSERT_TRUE(w.reschedule_after(id, Nanos::max()));  // saturates, no overflow
  EXPECT_EQ(w.deadline(id), w.horizon());
  w.advance(1h);
  EXPECT_TRUE(log.runs.empty());
  EXPECT_TRUE(w.is_pending(id));
}

TEST(WheelReschedule, IntoThePastIsDueInTheNextAdvance) {
  Wheel w({.tick = 1ms, .start = 100ms});
  RunLog log{&w};
  const TimerId id = w.schedule_after(1s, LogRun{&log, 1});
  ASSERT_TRUE(w.reschedule(id, 40ms));
  EXPECT_EQ(w.deadline(id), 40ms) << "reads its own tick";
  EXPECT_EQ(w.remaining(id), 0ns);
  EXPECT_EQ(w.next_deadline(), 100ms);
  EXPECT_EQ(w.advance(100ms), 1u);
  ASSERT_TRUE(w.schedule_after(1s, LogRun{&log, 2}));
  const TimerId neg = w.schedule_after(1s, LogRun{&log, 3});
  ASSERT_TRUE(w.reschedule(neg, Nanos::min()));
  EXPECT_EQ(w.deadline(neg), 0ns) << "a negative deadline reads 0";
  EXPECT_EQ(w.advance(100ms), 1u);
  EXPECT_EQ(log.of(3), std::vector<Nanos>{100ms});
}

TEST(WheelReschedule, AfterCountsFromNowOfTheLastAdvance) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_after(10ms, LogRun{&log, 1});
  w.advance(4ms + 500us);
  ASSERT_TRUE(w.reschedule_after(id, 10ms));
  EXPECT_EQ(w.deadline(id), 15ms) << "14.5 ms rounded up to the tick";
  EXPECT_EQ(w.remaining(id), 10ms + 500us);
}

// The same-slot shortcut: a timer in an upper level pushed back within its slot's unit is not
// moved; only its deadline changes, and it still fires on its new tick, never on the old one.
TEST(WheelReschedule, WithinTheSameUnitOfAnUpperLevelMovesNothing) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  // 30 s: level 1, whose slots are 256 ticks wide; 30,000 = 117 * 256 + 48.
  const TimerId id = w.schedule_after(30s, LogRun{&log, 1});
  for (int k = 1; k <= 100; ++k) ASSERT_TRUE(w.reschedule(id, 30s + Nanos(k * 1ms)));
  WheelStats s = w.stats();
  EXPECT_EQ(s.rescheduled, 100u);
  EXPECT_EQ(s.rescheduled_in_place, 100u);
  EXPECT_EQ(w.deadline(id), 30100ms);
  // Across the unit boundary (30,208 = 118 * 256): moved, the move queued until a flush (here
  // next_deadline()); a move queued already just takes the latest deadline.
  ASSERT_TRUE(w.reschedule(id, 30210ms));
  ASSERT_TRUE(w.reschedule(id, 30220ms));
  EXPECT_EQ(w.deadline(id), 30220ms);
  s = w.stats();
  EXPECT_EQ(s.rescheduled, 102u);
  EXPECT_EQ(s.rescheduled_in_place, 100u);
  EXPECT_EQ(w.next_deadline(), 30220ms) << "its new deadline, from its new slot";
  ASSERT_TRUE(w.reschedule(id, 30200ms));  // back into the first unit: moved again
  EXPECT_EQ(w.stats().rescheduled_in_place, 100u);
  EXPECT_EQ(w.next_deadline(), 30200ms);
  ASSERT_TRUE(w.reschedule(id, 30150ms));  // and within it: in place
  EXPECT_EQ(w.stats().rescheduled_in_place, 101u);
  tick_to(w, 30149ms);
  EXPECT_TRUE(log.runs.empty());
  w.advance(30150ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{30150ms});
  EXPECT_EQ(w.stats().moved, 1u) << "moved down once, from level 1, as any timer that far out";
}

// A timer still sitting in a higher level than a link made now would pick (not yet moved down):
// the shortcut keeps it there when the new deadline shares the unit of the lowest level it could
// be in, and relinks it otherwise; in both cases it fires exactly on its new tick.
TEST(WheelReschedule, ATimerNotYetMovedDownFiresOnItsNewTickEitherWay) {
  for (const Nanos shift : {Nanos(10ms), Nanos(300ms), Nanos(-100ms)}) {
    SCOPED_TRACE(shift.count());
    Wheel w({.tick = 1ms});
    RunLog log{&w};
    // 200,000 ticks: level 2 (units of 65,536 ticks), unit 3, which starts at tick 196,608.
    const TimerId id = w.schedule_after(200s, LogRun{&log, 1});
    w.advance(100s);  // level 2's next unit is 2: unit 3 is not paced yet, the timer stays there
    EXPECT_EQ(w.stats().moved, 0u);
    const WheelStats before = w.stats();
    ASSERT_TRUE(w.reschedule(id, 200s + shift));
    const bool in_place = w.stats().rescheduled_in_place == before.rescheduled_in_place + 1;
    // 200,000 and 200,010 share their level-1 unit (781); 200,300 and 199,900 do not.
    EXPECT_EQ(in_place, shift == 10ms);
    tick_to(w, 200s + shift - 1ms);
    EXPECT_TRUE(log.runs.empty());
    w.advance(200s + shift);
    EXPECT_EQ(log.of(1), std::vector<Nanos>{200s + shift});
  }
}

TEST(WheelReschedule, InLevelZeroOnlyTheSameTickIsInPlace) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_after(100ms, LogRun{&log, 1});
  ASSERT_TRUE(w.reschedule(id, 100ms));
  EXPECT_EQ(w.stats().rescheduled_in_place, 1u);
  ASSERT_TRUE(w.reschedule(id, 101ms));
  EXPECT_EQ(w.stats().rescheduled_in_place, 1u);
  tick_to(w, 101ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{101ms});
}

// The kernel's case: an idle timeout re-armed on every packet. Each connection's timer is pushed
// back on each of its packets; each fires once, exactly idle after its last packet.
TEST(WheelReschedule, IdleTimeoutsPushedBackOnEveryPacketFireOnceIdleAfterTheLast) {
  constexpr int kConns = 200;
  constexpr Nanos kIdle = 5s;
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  std::vector<TimerId> ids;
  std::vector<Nanos> last(kConns, 0ns);
  for (int c = 0; c < kConns; ++c) ids.push_back(w.schedule_after(kIdle, LogRun{&log, c}));
  std::mt19937_64 rng(17);
  for (Nanos t = 1ms; t <= 20s; t += 1ms) {
    w.advance(t);
    for (int packet = 0; packet < 10; ++packet) {  // each connection sees a packet every 20 ms
      const int c = static_cast<int>(rng() % kConns);
      if (c % 4 != 0 && w.is_pending(ids[c])) {  // a quarter of the connections go quiet at once
        ASSERT_TRUE(w.reschedule_after(ids[c], kIdle));
        last[c] = t;
      }
    }
  }
  tick_to(w, 40s);
  EXPECT_EQ(log.runs.size(), static_cast<std::size_t>(kConns));
  for (int c = 0; c < kConns; ++c) {
    EXPECT_EQ(log.of(c), std::vector<Nanos>{last[c] + kIdle}) << "connection " << c;
  }
  const WheelStats s = w.stats();
  // Pushed back by 20 ms on average in 256 ms units: most pushes stay within their slot's unit.
  EXPECT_GT(s.rescheduled_in_place, s.rescheduled / 2);
  EXPECT_EQ(s.cancelled, 0u);
  // stats() derives `scheduled` from its other counts and pending(): the schedules must match.
  EXPECT_EQ(s.scheduled, static_cast<std::uint64_t>(kConns)) << "a reschedule is no schedule";
}

// ---------------------------------------------------------------------------------------------
// reschedule(): every state that is not pending gets false, with nothing touched

TEST(WheelReschedule, FalseForEveryIdThatNamesNoPendingTimer) {
  Wheel w({.tick = 1ms, .max_pending = 3});
  RunLog log{&w};
  const TimerId keep = w.schedule_after(1h, LogRun{&log, 0});
  const TimerId fired = w.schedule_after(1ms, LogRun{&log, 1});
  const TimerId cancelled = w.schedule_after(1h, LogRun{&log, 2});
  const TimerId failed = w.schedule_after(1h, LogRun{&log, 3});
  ASSERT_TRUE(keep && fired && cancelled);
  ASSERT_FALSE(failed);
  ASSERT_TRUE(w.cancel(cancelled));
  ASSERT_EQ(w.advance(1ms), 1u);
  const TimerId reused = w.schedule_after(2h, LogRun{&log, 4});  // the fired timer's node
  ASSERT_EQ(static_cast<std::uint32_t>(reused.raw()), static_cast<std::uint32_t>(fired.raw()));
  const WheelStats before = w.stats();
  for (const TimerId id : {TimerId{}, failed, fired, cancelled, TimerId::from_raw(~std::uint64_t{0}),
                           TimerId::from_raw(reused.raw() + (std::uint64_t{4} << 32)),
                           TimerId::from_raw((std::uint64_t{1} << 32) | 0xfffffff0u)}) {
    EXPECT_FALSE(w.reschedule(id, 5ms)) << id.raw();
    EXPECT_FALSE(w.reschedule_after(id, 5ms)) << id.raw();
  }
  EXPECT_EQ(w.deadline(reused), 2h + 1ms) << "the node's current timer was touched";
  EXPECT_EQ(w.deadline(keep), 1h);
  EXPECT_EQ(w.stats().rescheduled, before.rescheduled);
  EXPECT_EQ(w.pending_count(), 2u);
}

TEST(WheelReschedule, AOneShotCallbackReschedulingItselfGetsFalseAndRunsOnce) {
  Wheel w({.tick = 1ms});
  struct {
    Wheel* w;
    TimerId self;
    int runs = 0;
    bool got = true;
  } st{&w, {}};
  st.self = w.schedule_after(2ms, [s = &st] {
    ++s->runs;
    s->got = s->w->reschedule_after(s->self, 5ms);
  });
  tick_to(w, 20ms);
  EXPECT_FALSE(st.got);
  EXPECT_EQ(st.runs, 1);
  EXPECT_EQ(w.pending_count(), 0u);
}

TEST(WheelReschedule, ACallbackMovesAnotherTimerIntoThisPassOrOutOfIt) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  struct {
    Wheel* w;
    TimerId late, early;
    bool moved_in = false, moved_out = false;
  } st{&w, w.schedule_after(50ms, LogRun{&log, 1}), w.schedule_after(3ms, LogRun{&log, 2})};
  ASSERT_TRUE(w.schedule_after(2ms, [s = &st] {
    s->moved_in = s->w->reschedule(s->late, 4ms);     // not reached yet by the pass: runs in it
    s->moved_out = s->w->reschedule(s->early, 30ms);  // due in this pass, moved away before it ran
  }));
  EXPECT_EQ(w.advance(10ms), 2u);
  EXPECT_TRUE(st.moved_in && st.moved_out);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{10ms});
  EXPECT_TRUE(log.of(2).empty());
  tick_to(w, 30ms);
  EXPECT_EQ(log.of(2), std::vector<Nanos>{30ms});
}

TEST(WheelReschedule, ACallbackMovingATimerOfItsOwnTickToThePastRunsItInTheNextCall) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  struct {
    Wheel* w;
    TimerId other;
    bool moved = false;
  } st{&w, w.schedule_after(5ms, LogRun{&log, 1})};
  ASSERT_TRUE(w.schedule_after(5ms, [s = &st] { s->moved = s->w->reschedule(s->other, 1ms); }));
  const bool& moved = st.moved;
  const std::size_t first = w.advance(5ms);
  // The two share a tick, so either may run first. If the mover did, the other one was still
  // pending and, moved to the past from inside the pass, waits for the next call; if not, it had
  // fired and the move got false.
  const std::size_t second = w.advance(5ms);
  EXPECT_EQ(first, moved ? 1u : 2u);
  EXPECT_EQ(second, moved ? 1u : 0u);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{5ms});
}

// After a pass cut short by its limit the wheel waits at the tick with callbacks left; moving the
// last of them away lets it catch up at once, as a cancel does, so next_deadline() is exact.
TEST(WheelReschedule, MovingTheLastLeftoverOfAPassCutShortLetsTheWheelCatchUp) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId a = w.schedule_after(3ms, LogRun{&log, 1});
  const TimerId b = w.schedule_after(3ms, LogRun{&log, 2});
  ASSERT_EQ(w.advance(8ms, 1), 1u);  // which of the two ran is unspecified
  const TimerId waiting = w.is_pending(a) ? a : b;
  EXPECT_EQ(w.next_deadline(), 8ms) << "a leftover is due";
  ASSERT_TRUE(w.reschedule(waiting, 20ms));
  EXPECT_EQ(w.next_deadline(), 20ms) << "the wheel still waits at the tick the pass stopped at";
  EXPECT_EQ(w.advance(8ms), 0u);
  tick_to(w, 20ms);
  ASSERT_EQ(log.runs.size(), 2u);
  EXPECT_EQ(log.runs.back().second, 20ms);
}

// ---------------------------------------------------------------------------------------------
// reschedule(): periodic timers

TEST(WheelRescheduleInPeriodic, BetweenRunsMovesTheNextRunAndTheGridFollowsFromThere) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_every(10ms, LogRun{&log, 1});  // 10, 20, 30, ...
  tick_to(w, 20ms);
  ASSERT_TRUE(w.reschedule(id, 35ms));
  EXPECT_EQ(w.deadline(id), 35ms);
  tick_to(w, 60ms);
  EXPECT_EQ(log.of(1), (std::vector<Nanos>{10ms, 20ms, 35ms, 45ms, 55ms}));
  EXPECT_TRUE(w.cancel(id));
  EXPECT_EQ(w.stats().scheduled, 1u) << "the moved runs and the cancel account for the one schedule";
}

TEST(WheelRescheduleInPeriodic, FixedDelayRunsOnePeriodAfterTheMovedRun) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  PeriodicOptions opts;
  opts.cadence = Cadence::fixed_delay;
  const TimerId id = w.schedule_every(10ms, LogRun{&log, 1}, opts);
  tick_to(w, 10ms);
  ASSERT_TRUE(w.reschedule(id, 13ms));
  tick_to(w, 40ms);
  EXPECT_EQ(log.of(1), (std::vector<Nanos>{10ms, 13ms, 23ms, 33ms}));
}

TEST(WheelRescheduleInPeriodic, FromInsideItsOwnCallbackGetsFalseAndKeepsItsGrid) {
  Wheel w({.tick = 1ms});
  struct {
    Wheel* w;
    TimerId id;
    std::vector<Nanos> runs{};
    std::vector<bool> got{}, pending_inside{}, deadline_inside{};
  } st{&w, {}};
  st.id = w.schedule_every(10ms, [s = &st] {
    s->runs.push_back(s->w->now());
    s->got.push_back(s->w->reschedule(s->id, s->w->now() + 3ms));
    s->pending_inside.push_back(s->w->is_pending(s->id));
    s->deadline_inside.push_back(s->w->deadline(s->id).has_value());
  });
  tick_to(w, 30ms);
  EXPECT_EQ(st.runs, (std::vector<Nanos>{10ms, 20ms, 30ms}));
  EXPECT_EQ(st.got, (std::vector<bool>{false, false, false}));
  EXPECT_EQ(st.pending_inside, (std::vector<bool>{true, true, true}))
      << "a running periodic timer runs again";
  EXPECT_EQ(st.deadline_inside, (std::vector<bool>{false, false, false})) << "its next run is not known yet";
}

// A periodic timer moved by another callback to a tick this call has reached waits for the next
// call, so that it never runs twice in one call.
TEST(WheelRescheduleInPeriodic, MovedByAnotherCallbackToAReachedTickRunsInTheNextCall) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  const TimerId id = w.schedule_every(4ms, LogRun{&log, 1});  // 4, 8, ...
  ASSERT_TRUE(w.schedule_after(6ms, [&] { EXPECT_TRUE(w.reschedule(id, 7ms)); }));
  EXPECT_EQ(w.advance(10ms), 2u) << "the periodic run at 4 ms and the mover at 6 ms";
  EXPECT_EQ(log.of(1), std::vector<Nanos>{10ms});
  EXPECT_EQ(w.advance(10ms), 1u) << "the moved run, one call later";
  EXPECT_EQ(log.of(1), (std::vector<Nanos>{10ms, 10ms}));
  EXPECT_EQ(w.deadline(id), 11ms) << "the grid restarted at 7 ms";
}

TEST(WheelRescheduleInPeriodic, CancelledFromItsCallbackIsNoLongerPending) {
  Wheel w({.tick = 1ms});
  struct {
    Wheel* w;
    TimerId id;
    bool cancelled = false, pending_after = true, moved = true;
  } st{&w, {}};
  st.id = w.schedule_every(10ms, [s = &st] {
    s->cancelled = s->w->cancel(s->id);
    s->pending_after = s->w->is_pending(s->id);
    s->moved = s->w->reschedule(s->id, 100ms);
  });
  tick_to(w, 50ms);
  EXPECT_TRUE(st.cancelled);
  EXPECT_FALSE(st.pending_after);
  EXPECT_FALSE(st.moved);
  EXPECT_FALSE(w.is_pending(st.id));
  EXPECT_EQ(w.stats().fired, 1u);
}

}  // namespace
}  // namespace tickwheel::test
