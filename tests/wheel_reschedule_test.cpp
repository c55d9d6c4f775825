// Tier 1: deterministic unit tests of the calls a user of other timer libraries reaches for (issue
// 17): reschedule() and reschedule_after(), the queries is_pending(), deadline() and remaining(),
// clear() and the public for_each_pending(). Each call is checked in every state a TimerId can name:
// pending, due but not run yet, firing (inside its own one-shot callback), running (inside its
// own periodic callback), fired, cancelled (also from inside its own periodic callback), cleared,
// stale (its node reused by another timer), default, failed and forged. Time is driven by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <vector>

#include "support.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

// What the callbacks of a test record: which timer ran, and the wheel's now() when it did.
struct Log {
  Wheel* wheel;
  std::vector<std::pair<int, Nanos>> runs{};
  std::vector<Nanos> of(int who) const {
    std::vector<Nanos> out;
    for (const auto& [w, at] : runs) {
      if (w == who) out.push_back(at);
    }
    return out;
  }
};

// 16 bytes, so it fits a periodic timer too.
struct Note {
  Log* log;
  int who;
  void operator()() const { log->runs.emplace_back(who, log->wheel->now()); }
};

// Advances one tick at a time up to `until`.
void tick_to(Wheel& w, Nanos until) {
  while (w.now() < until) w.advance(w.now() + w.tick());
}

// ---------------------------------------------------------------------------------------------
// reschedule(): a pending one-shot timer

TEST(WheelReschedule, MovesAPendingTimerLaterKeepingItsIdAndItsCallable) {
  LiveCount lc;
  Wheel w({.tick = 1ms});
  Log log{&w};
  struct Fn {
    Note note;
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
  const WheelStats s = w.stats();
  EXPECT_EQ(s.scheduled, 1u);
  EXPECT_EQ(s.fired, 1u);
  EXPECT_EQ(s.cancelled, 0u);
  EXPECT_EQ(s.rescheduled, 1u);
}

TEST(WheelReschedule, MovesAPendingTimerEarlierAcrossLevels) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  const TimerId id = w.schedule_after(10min, Note{&log, 1});  // level 2
  ASSERT_TRUE(w.reschedule(id, 3ms));                         // level 0
  EXPECT_EQ(w.next_deadline(), 3ms);
  tick_to(w, 3ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{3ms});
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.is_pending(id));
}

TEST(WheelReschedule, RoundsUpToTheTickAndClampsToTheHorizonAsASchedule) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  const TimerId id = w.schedule_after(5ms, Note{&log, 1});
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
  Log log{&w};
  const TimerId id = w.schedule_after(1s, Note{&log, 1});
  ASSERT_TRUE(w.reschedule(id, 40ms));
  EXPECT_EQ(w.deadline(id), 40ms) << "reads its own tick";
  EXPECT_EQ(w.remaining(id), 0ns);
  EXPECT_EQ(w.next_deadline(), 100ms);
  EXPECT_EQ(w.advance(100ms), 1u);
  ASSERT_TRUE(w.schedule_after(1s, Note{&log, 2}));
  const TimerId neg = w.schedule_after(1s, Note{&log, 3});
  ASSERT_TRUE(w.reschedule(neg, Nanos::min()));
  EXPECT_EQ(w.deadline(neg), 0ns) << "a negative deadline reads 0";
  EXPECT_EQ(w.advance(100ms), 1u);
  EXPECT_EQ(log.of(3), std::vector<Nanos>{100ms});
}

TEST(WheelReschedule, AfterCountsFromNowOfTheLastAdvance) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  const TimerId id = w.schedule_after(10ms, Note{&log, 1});
  w.advance(4ms + 500us);
  ASSERT_TRUE(w.reschedule_after(id, 10ms));
  EXPECT_EQ(w.deadline(id), 15ms) << "14.5 ms rounded up to the tick";
  EXPECT_EQ(w.remaining(id), 10ms + 500us);
}

// The same-slot shortcut: a timer in an upper level pushed back within its slot's unit is not
// moved; only its deadline changes, and it still fires on its new tick, never on the old one.
TEST(WheelReschedule, WithinTheSameUnitOfAnUpperLevelMovesNothing) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  // 30 s: level 1, whose slots are 256 ticks wide; 30,000 = 117 * 256 + 48.
  const TimerId id = w.schedule_after(30s, Note{&log, 1});
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
    Log log{&w};
    // 200,000 ticks: level 2 (units of 65,536 ticks), unit 3, which starts at tick 196,608.
    const TimerId id = w.schedule_after(200s, Note{&log, 1});
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
  Log log{&w};
  const TimerId id = w.schedule_after(100ms, Note{&log, 1});
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
  Log log{&w};
  std::vector<TimerId> ids;
  std::vector<Nanos> last(kConns, 0ns);
  for (int c = 0; c < kConns; ++c) ids.push_back(w.schedule_after(kIdle, Note{&log, c}));
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
  Log log{&w};
  const TimerId keep = w.schedule_after(1h, Note{&log, 0});
  const TimerId fired = w.schedule_after(1ms, Note{&log, 1});
  const TimerId cancelled = w.schedule_after(1h, Note{&log, 2});
  const TimerId failed = w.schedule_after(1h, Note{&log, 3});
  ASSERT_TRUE(keep && fired && cancelled);
  ASSERT_FALSE(failed);
  ASSERT_TRUE(w.cancel(cancelled));
  ASSERT_EQ(w.advance(1ms), 1u);
  const TimerId reused = w.schedule_after(2h, Note{&log, 4});  // the fired timer's node
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
  Log log{&w};
  struct {
    Wheel* w;
    TimerId late, early;
    bool moved_in = false, moved_out = false;
  } st{&w, w.schedule_after(50ms, Note{&log, 1}), w.schedule_after(3ms, Note{&log, 2})};
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
  Log log{&w};
  struct {
    Wheel* w;
    TimerId other;
    bool moved = false;
  } st{&w, w.schedule_after(5ms, Note{&log, 1})};
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
  Log log{&w};
  const TimerId a = w.schedule_after(3ms, Note{&log, 1});
  const TimerId b = w.schedule_after(3ms, Note{&log, 2});
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
  Log log{&w};
  const TimerId id = w.schedule_every(10ms, Note{&log, 1});  // 10, 20, 30, ...
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
  Log log{&w};
  PeriodicOptions opts;
  opts.cadence = Cadence::fixed_delay;
  const TimerId id = w.schedule_every(10ms, Note{&log, 1}, opts);
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
  Log log{&w};
  const TimerId id = w.schedule_every(4ms, Note{&log, 1});  // 4, 8, ...
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

// ---------------------------------------------------------------------------------------------
// is_pending(), deadline(), remaining() in every state

TEST(WheelQueries, EveryStateOfAOneShotTimer) {
  Wheel w({.tick = 1ms, .max_pending = 4});
  Log log{&w};
  const TimerId pending = w.schedule_after(10ms + 300us, Note{&log, 1});
  EXPECT_TRUE(w.is_pending(pending));
  EXPECT_EQ(w.deadline(pending), 11ms) << "rounded up to the tick";
  EXPECT_EQ(w.remaining(pending), 11ms);
  w.advance(4ms + 250us);
  EXPECT_EQ(w.remaining(pending), 6ms + 750us) << "from now(), not from the tick";

  // Firing: asked from inside its own callback.
  struct {
    Wheel* w;
    TimerId firing;
    std::optional<bool> pending_inside{};
    std::optional<Nanos> deadline_inside{1ns}, remaining_inside{1ns};
  } st{&w, {}};
  st.firing = w.schedule_after(1ms, [s = &st] {
    s->pending_inside = s->w->is_pending(s->firing);
    s->deadline_inside = s->w->deadline(s->firing);
    s->remaining_inside = s->w->remaining(s->firing);
  });
  w.advance(6ms);  // 5.25 ms rounded up
  EXPECT_EQ(st.pending_inside, false);
  EXPECT_EQ(st.deadline_inside, std::nullopt);
  EXPECT_EQ(st.remaining_inside, std::nullopt);
  const TimerId firing = st.firing;

  const TimerId cancelled = w.schedule_after(1s, Note{&log, 2});
  ASSERT_TRUE(w.cancel(cancelled));
  const TimerId fired = firing;
  const TimerId reused = w.schedule_after(2s, Note{&log, 3});  // takes a recycled node
  ASSERT_TRUE(reused);
  ASSERT_TRUE(w.schedule_after(3s, Note{&log, 4}));
  ASSERT_TRUE(w.schedule_after(3s, Note{&log, 4}));
  const TimerId failed = w.schedule_after(3s, Note{&log, 5});
  ASSERT_EQ(failed.status(), Status::max_pending_reached);
  for (const TimerId id : {fired, cancelled, failed, TimerId{}, TimerId::from_raw(~std::uint64_t{0}),
                           TimerId::from_raw(reused.raw() + (std::uint64_t{4} << 32))}) {
    EXPECT_FALSE(w.is_pending(id)) << id.raw();
    EXPECT_EQ(w.deadline(id), std::nullopt) << id.raw();
    EXPECT_EQ(w.remaining(id), std::nullopt) << id.raw();
  }
  EXPECT_TRUE(w.is_pending(reused));
  EXPECT_EQ(w.deadline(reused), 2s + 6ms);
}

TEST(WheelQueries, ADueTimerLeftByAPassCutShortReadsItsTickAndZeroRemaining) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  const TimerId a = w.schedule_after(2ms, Note{&log, 1});
  const TimerId b = w.schedule_after(2ms, Note{&log, 2});
  ASSERT_EQ(w.advance(9ms, 1), 1u);
  const TimerId left = w.is_pending(a) ? a : b;
  EXPECT_TRUE(w.is_pending(left));
  EXPECT_EQ(w.deadline(left), 2ms);
  EXPECT_EQ(w.remaining(left), 0ns);
}

TEST(WheelQueries, APeriodicTimerBetweenRunsReadsItsNextRun) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  PeriodicOptions opts;
  opts.initial_delay = 3ms;
  const TimerId id = w.schedule_every(10ms, Note{&log, 1}, opts);
  EXPECT_EQ(w.deadline(id), 3ms);
  tick_to(w, 3ms);
  EXPECT_TRUE(w.is_pending(id));
  EXPECT_EQ(w.deadline(id), 13ms);
  EXPECT_EQ(w.remaining(id), 10ms);
  ASSERT_TRUE(w.cancel(id));
  EXPECT_FALSE(w.is_pending(id));
  EXPECT_EQ(w.deadline(id), std::nullopt);
}

TEST(WheelQueries, AtTheHorizon) {
  Wheel w({.tick = 1ms});
  const TimerId id = w.schedule_at(Nanos::max(), [] {});
  EXPECT_EQ(w.deadline(id), w.horizon());
  EXPECT_EQ(w.remaining(id), w.horizon());
  w.advance(w.horizon() - 500us);
  EXPECT_EQ(w.remaining(id), 500us);
  EXPECT_EQ(w.advance(Nanos::max()), 1u);
  EXPECT_EQ(w.remaining(id), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// clear()

TEST(WheelClear, DestroysEveryCallableWithoutRunningItAndEndsEveryId) {
  LiveCount lc;
  Wheel w({.tick = 1ms});
  int runs = 0;
  struct Fn {
    int* runs;
    Counted c;
    void operator()() const { ++*runs; }
  };
  struct Periodic {
    int* runs;
    Counted c;
    void operator()() const { ++*runs; }
  };
  std::vector<TimerId> ids;
  std::mt19937_64 rng(5);
  for (int i = 0; i < 5000; ++i) {
    ids.push_back(w.schedule_after(Nanos(static_cast<Nanos::rep>(rng() % 10'000'000'000'000)),
                                   Fn{&runs, Counted(&lc)}));
  }
  ids.push_back(w.schedule_every(7ms, Periodic{&runs, Counted(&lc)}));
  ids.push_back(w.schedule_after(-5ms, Fn{&runs, Counted(&lc)}));   // in the due slot
  for (int i = 0; i < 1000; i += 7) ASSERT_TRUE(w.cancel(ids[i]));  // some queued for a batched unlink
  const std::size_t pending = w.pending_count();
  const WheelStats before = w.stats();
  EXPECT_EQ(w.clear(), pending);
  EXPECT_EQ(lc.live, 0) << "callables left alive, or destroyed twice";
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.next_deadline(), std::nullopt);
  const WheelStats s = w.stats();
  EXPECT_EQ(s.cancelled, before.cancelled + pending);
  EXPECT_EQ(s.scheduled, 5002u) << "the cancels of clear() account for every timer it ended";
  for (const TimerId id : ids) {
    EXPECT_FALSE(w.is_pending(id));
    EXPECT_FALSE(w.cancel(id));
    EXPECT_FALSE(w.reschedule(id, 1ms));
  }
  w.advance(Nanos::max());
  EXPECT_EQ(runs, 0);
  EXPECT_EQ(w.clear(), 0u) << "an empty wheel";
}

TEST(WheelClear, TheWheelIsReadyForNewTimersAndReusesItsNodes) {
  Wheel w({.tick = 1ms, .start = 1s});
  Log log{&w};
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(w.schedule_after(Nanos(i * 1ms + 1ms), Note{&log, 0}));
  tick_to(w, 1s + 10ms);
  const std::uint64_t nodes = w.stats().pool_nodes;
  EXPECT_EQ(w.clear(), 2990u);
  EXPECT_EQ(w.now(), 1s + 10ms) << "time is kept";
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(w.schedule_after(Nanos(i * 1ms + 1ms), Note{&log, 1}));
  EXPECT_EQ(w.stats().pool_nodes, nodes) << "the cleared nodes were reused";
  tick_to(w, 1s + 10ms + 3000ms);
  EXPECT_EQ(log.of(1).size(), 3000u);
  EXPECT_EQ(log.of(1).front(), 1s + 11ms);
}

TEST(WheelClear, AfterAPassCutShortTheWheelIsCaughtUp) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.schedule_after(2ms, Note{&log, 0}));
  ASSERT_EQ(w.advance(9ms, 3), 3u);
  EXPECT_EQ(w.clear(), 7u);
  const TimerId id = w.schedule_after(1ms, Note{&log, 1});
  EXPECT_EQ(w.deadline(id), 10ms);
  EXPECT_EQ(w.next_deadline(), 10ms) << "placed against the present, not the tick the pass stopped at";
  tick_to(w, 10ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{10ms});
}

// ---------------------------------------------------------------------------------------------
// for_each_pending()

TEST(WheelForEachPending, VisitsExactlyThePendingTimersWithTheirDeadlines) {
  Wheel w({.tick = 1ms});
  Log log{&w};
  std::map<std::uint64_t, Nanos> expected;
  std::mt19937_64 rng(11);
  std::vector<TimerId> ids;
  for (int i = 0; i < 4000; ++i) {
    const Nanos delay(static_cast<Nanos::rep>(rng() % 400'000'000'000) - 1'000'000);
    ids.push_back(w.schedule_after(delay, Note{&log, 0}));
  }
  ids.push_back(w.schedule_every(3ms, Note{&log, 1}));
  ids.push_back(w.schedule_at(Nanos::max(), Note{&log, 2}));
  for (std::size_t i = 0; i < ids.size(); i += 3) ASSERT_TRUE(w.cancel(ids[i]));  // queued unlinks too
  w.advance(50ms);
  for (const TimerId id : ids) {
    if (const std::optional<Nanos> d = w.deadline(id)) expected.emplace(id.raw(), *d);
  }
  ASSERT_EQ(expected.size(), w.pending_count());
  std::map<std::uint64_t, Nanos> seen;
  w.for_each_pending([&](TimerId id, Nanos deadline) {
    EXPECT_TRUE(seen.emplace(id.raw(), deadline).second) << "visited twice";
    EXPECT_TRUE(w.is_pending(id)) << "const queries are allowed from the visitor";
  });
  EXPECT_EQ(seen, expected);
}

TEST(WheelForEachPending, APeriodicTimerWhoseCallbackRunsIsNotVisited) {
  Wheel w({.tick = 1ms});
  TimerId periodic;
  std::vector<std::uint64_t> inside;
  const TimerId other = w.schedule_after(1h, [] {});
  periodic = w.schedule_every(
      5ms, [&] { w.for_each_pending([&](TimerId id, Nanos) { inside.push_back(id.raw()); }); });
  w.advance(5ms);
  EXPECT_EQ(inside, std::vector<std::uint64_t>{other.raw()});
  std::size_t after = 0;
  w.for_each_pending([&](TimerId, Nanos) { ++after; });
  EXPECT_EQ(after, 2u);
  EXPECT_TRUE(w.is_pending(periodic));
}

TEST(WheelForEachPending, AnExceptionFromTheVisitorLeavesTheWheelAsItWas) {
  Wheel w({.tick = 1ms});
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.schedule_after(Nanos(i * 1ms + 1ms), [] {}));
  int visits = 0;
  EXPECT_THROW(w.for_each_pending([&](TimerId, Nanos) {
    if (++visits == 4) throw std::runtime_error("stop");
  }),
               std::runtime_error);
  EXPECT_EQ(visits, 4);
  EXPECT_EQ(w.pending_count(), 10u);
  EXPECT_EQ(w.advance(10ms), 10u);
  const TimerId id = w.schedule_after(1ms, [] {});  // the guard was reset: changes are allowed again
  EXPECT_TRUE(w.cancel(id));
}

TEST(WheelForEachPending, AnEmptyWheelVisitsNothing) {
  Wheel w;
  int visits = 0;
  w.for_each_pending([&](TimerId, Nanos) { ++visits; });
  EXPECT_EQ(visits, 0);
}

}  // namespace
}  // namespace tickwheel::test
