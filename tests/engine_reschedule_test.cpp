// Moving a pending timer of the Engine: Timer::reschedule() and reschedule_after(). On the thread
// that owns the timer's shard a move is applied at once; from any other thread it is posted and
// applied by the shard's next pass (a hand-off still in transit is moved too), the last move to
// return wins whichever threads made them, and Moved says which of the two happened. A timer that
// is not pending, or one whose callback is running, is refused; a move to a past or overflowing
// deadline is taken as a schedule would take it; after stop() a posted move is refused.
//
// EngineReschedule.* run caller-driven on the injected clock, so what a pass runs is decided by the
// test. EngineRescheduleThreads.* run on worker threads: a move wakes a sleeping worker, and moves
// race fires, cancels and stop() with every timer accounted for exactly once (run under TSan too).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// ---- on the shard's own thread ----

TEST(EngineReschedule, OwnThreadRescheduleMovesLaterAndEarlierKeepingHandleAndCallable) {
  Tally t(2);
  OwnedEngine o;
  Timer a = o.engine.schedule_after(10ms, Probe(&t, 0));
  Timer b = o.engine.schedule_after(10ms, Probe(&t, 1));
  ASSERT_TRUE(a && b);
  EXPECT_TRUE(a.reschedule_after(50ms));     // later
  EXPECT_TRUE(b.reschedule(o.start + 3ms));  // earlier
  EXPECT_EQ(a.deadline(), o.start + 50ms);
  EXPECT_EQ(b.deadline(), o.start + 3ms);
  EXPECT_EQ(o.engine.next_deadline(0), o.start + 3ms) << "exact right after an owner's move";
  advance_clock(3ms);
  EXPECT_EQ(o.engine.poll(0), 1u);
  EXPECT_EQ(t.ran[1].load(), 1);
  advance_clock(20ms);
  EXPECT_EQ(o.engine.poll(0), 0u) << "the old deadline of the moved timer ran it";
  EXPECT_TRUE(a.is_pending());
  advance_clock(27ms);
  EXPECT_EQ(o.engine.poll(0), 1u);
  EXPECT_EQ(t.ran[0].load(), 1);
  EXPECT_TRUE(a.expired());
  EXPECT_EQ(t.total_destroyed(), 2) << "each callable destroyed once, none by a move";
  EXPECT_EQ(o.engine.stats().pending, 0u);
  EXPECT_EQ(o.engine.stats().rescheduled, 2u);
  EXPECT_EQ(o.engine.stats().scheduled, 2u) << "a move is not a schedule";
}

TEST(EngineReschedule, RescheduleOfATimerThatIsNotPendingIsFalseAndTouchesNothing) {
  Tally t(4);
  OwnedEngine o;
  EXPECT_FALSE(Timer{}.reschedule_after(1ms));
  EXPECT_FALSE(Timer{}.reschedule(o.start));
  Timer fired = o.engine.schedule_after(1ms, Probe(&t, 0));
  Timer cancelled = o.engine.schedule_after(1ms, Probe(&t, 1));
  ASSERT_TRUE(cancelled.cancel());
  advance_clock(1ms);
  EXPECT_EQ(o.engine.poll(0), 1u);
  EXPECT_FALSE(fired.reschedule_after(1ms));
  EXPECT_FALSE(cancelled.reschedule_after(1ms));
  // A stale handle: its node now holds another timer (LIFO reuse hands the same node back).
  Timer reused = o.engine.schedule_after(5ms, Probe(&t, 2));
  EXPECT_FALSE(fired.reschedule_after(1ms));
  EXPECT_FALSE(cancelled.reschedule_after(1ms));
  EXPECT_EQ(reused.deadline(), fake_now() + 5ms) << "a stale reschedule moved the node's current timer";
  // A failed schedule's handle.
  Timer failed = o.engine.schedule_after_on(7, 1ms, Probe(&t, 3));
  EXPECT_FALSE(failed.reschedule_after(1ms));
}

TEST(EngineReschedule, ACallbackReschedulingItselfIsRefusedAndOneReschedulingAnotherMovesIt) {
  Tally t(2);
  OwnedEngine o;
  struct Ctx {
    Timer self;
    Timer other;
    int refused = 0;
    int moved = 0;
  } c;
  c.other = o.engine.schedule_after(1ms, Probe(&t, 1));  // due at the same tick, not run yet
  c.self = o.engine.schedule_after(1ms, [&c] {
    c.refused += c.self.reschedule_after(10ms) ? 0 : 1;
    c.moved += c.other.reschedule_after(10ms) ? 1 : 0;
  });
  advance_clock(1ms);
  const std::size_t ran = o.engine.poll(0);
  // Order within a tick is unspecified: the other timer either ran first (then the move is false)
  // or was moved out of this tick.
  EXPECT_EQ(c.refused, 1);
  EXPECT_EQ(ran, 2u - static_cast<std::size_t>(c.moved));
  if (c.moved == 1) {
    EXPECT_EQ(t.ran[1].load(), 0);
    advance_clock(10ms);
    EXPECT_EQ(o.engine.poll(0), 1u);
  }
  EXPECT_EQ(t.ran[1].load(), 1);
}

TEST(EngineReschedule, APeriodicTimerMovedBetweenRunsRestartsItsGridThereAndIsRefusedWhileRunning) {
  OwnedEngine o;
  struct Ctx {
    Nanos start;
    std::vector<Nanos> runs;
    Timer every;
    int refused = 0;
  } c{o.start, {}, {}, 0};
  c.every = o.engine.schedule_every(10ms, [&c] {
    c.runs.push_back(fake_now() - c.start);
    c.refused += c.every.reschedule_after(1ms) ? 0 : 1;
  });
  advance_clock(10ms);
  EXPECT_EQ(o.engine.poll(0), 1u);
  EXPECT_EQ(c.refused, 1) << "a periodic timer asking from its own callback";
  EXPECT_TRUE(c.every.reschedule(o.start + 35ms));
  EXPECT_EQ(c.every.deadline(), o.start + 35ms);
  for (int i = 0; i < 7; ++i) {
    advance_clock(5ms);
    (void)o.engine.poll(0);
  }
  ASSERT_EQ(c.runs.size(), 3u);
  EXPECT_EQ(c.runs[1], 35ms);
  EXPECT_EQ(c.runs[2], 45ms) << "fixed rate: the grid restarts at the new deadline";
  EXPECT_TRUE(c.every.cancel());
}

TEST(EngineReschedule, RescheduleToAPastOrOverflowingDeadlineIsAsASchedule) {
  Tally t(3);
  OwnedEngine o;
  Timer past = o.engine.schedule_after(1h, Probe(&t, 0));
  Timer negative = o.engine.schedule_after(1h, Probe(&t, 1));
  Timer far = o.engine.schedule_after(1ms, Probe(&t, 2));
  EXPECT_TRUE(past.reschedule(o.start - 5ms));
  EXPECT_TRUE(negative.reschedule(Nanos::min()));
  EXPECT_TRUE(far.reschedule_after(Nanos::max()));
  EXPECT_EQ(negative.deadline(), 0ns);
  EXPECT_GT(*far.deadline(), Nanos::max() / 2) << "clamped to the horizon, near the end of Nanos";
  EXPECT_EQ(o.engine.poll(0), 2u) << "the past and negative ones, at the same now";
  EXPECT_TRUE(far.is_pending());
  EXPECT_TRUE(far.cancel());
}

// ---- from another thread: posted, applied by the shard's next pass ----

TEST(EngineReschedule, AReschedulePostedFromAnotherThreadTakesEffectAtTheNextPass) {
  Tally t(2);
  Engine engine(manual(1));  // nobody owns the shard: the test thread is "another thread"
  const Nanos start = fake_now();
  Timer a = engine.schedule_after(5ms, Probe(&t, 0));
  EXPECT_EQ(engine.poll(0), 0u);                       // taken in
  Timer b = engine.schedule_after(5ms, Probe(&t, 1));  // still in the hand-off queue
  EXPECT_TRUE(a.reschedule(start + 20ms));
  EXPECT_TRUE(b.reschedule(start + 30ms)) << "a hand-off in transit is moved too";
  EXPECT_EQ(a.deadline(), start + 5ms) << "not applied before the shard's pass: the old deadline";
  EXPECT_EQ(b.deadline(), start + 5ms);
  advance_clock(5ms);
  EXPECT_EQ(engine.poll(0), 0u) << "the records are drained before anything runs";
  EXPECT_EQ(engine.next_deadline(0), start + 20ms);
  EXPECT_EQ(a.deadline(), start + 20ms);
  EXPECT_EQ(b.deadline(), start + 30ms);
  advance_clock(15ms);
  EXPECT_EQ(engine.poll(0), 1u);
  EXPECT_EQ(t.ran[0].load(), 1);
  advance_clock(10ms);
  EXPECT_EQ(engine.poll(0), 1u);
  EXPECT_EQ(t.ran[1].load(), 1);
  EXPECT_EQ(engine.stats().rescheduled, 2u);
}

TEST(EngineReschedule, ARecordThatFindsItsTimerFiredOrCancelledIsDropped) {
  Tally t(3);
  Engine engine(manual(1));
  Timer fired = engine.schedule_after(1ms, Probe(&t, 0));
  Timer cancelled = engine.schedule_after(1ms, Probe(&t, 1));
  EXPECT_TRUE(fired.reschedule_after(1h));
  EXPECT_TRUE(cancelled.reschedule_after(1h));
  EXPECT_TRUE(cancelled.cancel());  // after the move was requested: the cancel wins
  advance_clock(2ms);
  (void)engine.poll(0);  // the move of `fired` applies: it does not run
  EXPECT_EQ(t.ran[0].load(), 0);
  EXPECT_EQ(t.destroyed[1].load(), 1);
  // The node of the cancelled timer, reused: a stale record for it must not move the new timer.
  ASSERT_TRUE(engine.schedule_after(3ms, Probe(&t, 2)));
  EXPECT_FALSE(cancelled.reschedule_after(1h));
  advance_clock(3ms);
  (void)engine.poll(0);
  EXPECT_EQ(t.ran[2].load(), 1);
  EXPECT_TRUE(fired.cancel());
  EXPECT_EQ(engine.stats().pending, 0u);
}

// The last reschedule to return wins, whichever threads made them: thread A moves the timer
// early, then thread B, strictly after A returned, moves it back late; the shard must not apply
// A's record after B's. Several rounds, each of several threads one after another.
TEST(EngineReschedule, TheLastPostedRescheduleWinsAcrossThreads) {
  constexpr int kRounds = 50;
  constexpr int kThreads = 6;
  Tally t(1);
  Engine engine(manual(1));  // nobody owns the shard: every move is posted
  std::mt19937 rng(29);
  Timer timer = engine.schedule_after(10s, Probe(&t, 0));
  (void)engine.poll(0);
  for (int round = 0; round < kRounds; ++round) {
    const Nanos now = fake_now();
    std::vector<Nanos> when(kThreads);
    for (int i = 0; i < kThreads; ++i) {
      when[i] = i + 1 == kThreads ? now + 10s : now + std::chrono::milliseconds(1 + rng() % 500);
    }
    const Nanos last = when.back();
    // All alive at once (a thread that took over an exited one's state would post on its queue
    // token, in order); each moves the timer in its turn, after the one before it returned.
    std::atomic<int> turn{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        while (turn.load(std::memory_order_acquire) != i) std::this_thread::yield();
        EXPECT_TRUE(timer.reschedule(when[i]));
        turn.store(i + 1, std::memory_order_release);
      });
    }
    for (std::thread& thread : threads) thread.join();
    (void)engine.poll(0);
    ASSERT_EQ(timer.deadline(), last) << "round " << round << ": an earlier thread's move won";
    advance_clock(1s);  // past every earlier move: the timer must not fire
    (void)engine.poll(0);
    ASSERT_EQ(t.ran[0].load(), 0) << "round " << round << ": fired at an earlier thread's deadline";
  }
  EXPECT_TRUE(timer.cancel());
}

// The same between another thread's posted move and the owner's own, which is applied at once: a
// record posted before the owner's call must not undo it at the next poll.
TEST(EngineReschedule, TheOwnersRescheduleAfterAPostedOneWins) {
  Tally t(1);
  OwnedEngine o;
  Timer timer = o.engine.schedule_after(10s, Probe(&t, 0));
  std::thread([&] { EXPECT_TRUE(timer.reschedule(o.start + 20ms)); }).join();
  EXPECT_TRUE(timer.reschedule(o.start + 10s));
  EXPECT_EQ(timer.deadline(), o.start + 10s);
  advance_clock(1s);
  EXPECT_EQ(o.engine.poll(0), 0u) << "the posted move, older, came back";
  EXPECT_EQ(timer.deadline(), o.start + 10s);
  EXPECT_TRUE(timer.cancel());
}

// What a reschedule did: moved at once on the shard's own thread, posted from any other, refused
// for a timer that is not pending.
TEST(EngineReschedule, RescheduleSaysWhetherItMovedOrPosted) {
  Tally t(1);
  OwnedEngine o;
  Timer timer = o.engine.schedule_after(10s, Probe(&t, 0));
  const Moved here = timer.reschedule_after(5s);
  EXPECT_TRUE(here);
  EXPECT_EQ(here.outcome(), Moved::Outcome::moved);
  EXPECT_FALSE(here.posted());
  std::thread([&] {
    const Moved there = timer.reschedule_after(7s);
    EXPECT_TRUE(there);
    EXPECT_EQ(there.outcome(), Moved::Outcome::posted);
    EXPECT_TRUE(there.posted());
  }).join();
  EXPECT_TRUE(timer.cancel());
  const Moved refused = timer.reschedule_after(1s);
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.outcome(), Moved::Outcome::refused);
  EXPECT_EQ(Timer{}.reschedule_after(1s).outcome(), Moved::Outcome::refused);
}

TEST(EngineReschedule, AfterStopARescheduleFromAnotherThreadIsFalse) {
  Tally t(1);
  Engine engine(manual(1));
  Timer a = engine.schedule_after(1h, Probe(&t, 0));
  std::vector<Timer> back = engine.stop();
  ASSERT_EQ(back.size(), 1u);
  EXPECT_FALSE(a.reschedule_after(1ms));
  EXPECT_TRUE(a.is_pending());
  EXPECT_TRUE(back[0].cancel());
}

// ---- worker threads ----

// Producers schedule, reschedule (back and forth, often across the deadline), cancel and query
// from several threads while the workers fire; then stop() mid-flight. Every timer ends exactly
// one way: it ran once, a cancel() returned true, or stop() handed it back.
TEST(EngineRescheduleThreads, ReschedulesRacingFiresCancelsAndStopKeepExactlyOnce) {
  RaceTimers timers(3, kSanitized ? 1'500 : 20'000);
  Engine engine(workers(2));
  std::atomic<std::size_t> moves_true{0};
  std::atomic<std::size_t> done{0};  // schedules made, to stop mid-flight by progress, not by time
  std::vector<Timer>& handles = timers.handles;
  timers.start(1, [&](std::size_t, std::size_t first, std::size_t end, std::mt19937& rng) {
    for (std::size_t i = first; i < end; ++i) {
      handles[i] = engine.schedule_after_on(i % 2, Nanos(rng() % 2'000'000), Probe(&timers.tally, i));
      done.fetch_add(1, std::memory_order_relaxed);
      if (!handles[i]) continue;  // stop() came first: its callable was destroyed
      // A few earlier timers of this thread: move, cancel, or move through the raw form.
      for (int j = 0; j < 3; ++j) {
        const std::size_t victim = first + rng() % (i - first + 1);
        if (!handles[victim]) continue;
        switch (rng() % 4) {
          case 0: moves_true += handles[victim].reschedule_after(Nanos(rng() % 3'000'000)) ? 1 : 0; break;
          case 1:
            moves_true += engine.timer_from_raw(handles[victim].raw()).reschedule_after(0ns) ? 1 : 0;
            break;
          case 2: timers.won[victim] |= handles[victim].cancel() ? 1 : 0; break;
          default: (void)handles[victim].is_pending(); break;
        }
      }
    }
  });
  timers.go();
  // Stop mid-flight: once half of the schedules are made, the rest race stop() itself.
  ASSERT_TRUE(eventually([&] { return done.load(std::memory_order_relaxed) >= handles.size() / 2; }));
  std::vector<Timer> back = engine.stop();
  timers.join();
  std::size_t returned = 0;
  for (Timer& timer : back) returned += timer.cancel() ? 1 : 0;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (!handles[i]) {
      EXPECT_EQ(timers.tally.ran[i].load(), 0);
      continue;
    }
    const int won = timers.won[i];
    EXPECT_EQ(timers.tally.ran[i].load() + won + (handles[i].cancelled() && won == 0 ? 1 : 0), 1)
        << "timer " << i << " ended other than exactly once";
  }
  const RaceTimers::Ends e = timers.ends();
  EXPECT_EQ(e.ran + e.cancels + returned, e.scheduled);
  EXPECT_GT(moves_true.load(), 0u);
}

// A move earlier than the sleeping worker's planned wake-up wakes it.
TEST(EngineRescheduleThreads, AnEarlierMoveWakesTheSleepingWorker) {
  Tally t(1);
  Engine engine(workers(1));
  Timer a = engine.schedule_after_on(0, 1h, Probe(&t, 0));
  ASSERT_TRUE(eventually([&] { return engine.stats().scheduled == 1; }));
  EXPECT_TRUE(a.reschedule_after(1ms));
  EXPECT_TRUE(t.wait_runs(1)) << "the worker slept through a move to 1 ms";
  EXPECT_TRUE(a.expired());
  EXPECT_TRUE(engine.stop().empty());
}

}  // namespace
}  // namespace tickwheel::test
