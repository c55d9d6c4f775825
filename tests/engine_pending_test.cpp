// The Engine's pending timers as a whole and one by one: Engine::now() (the clock deadlines are
// given in); Timer::deadline() and remaining() in every state, on the shard's thread and any
// other; the 8-byte handle (Timer::raw(), Engine::timer_from_raw()) with nodes from every pool,
// and raw values that are forged, stale or another engine's; Engine::for_each_pending(), which
// visits each pending timer of a shard with its deadline; Engine::clear() on the shard's own
// thread; and Engine::post_clear() / post_clear_all(), a clear from any thread that the shard's
// next pass serves.
//
// EngineQueries.*, EngineRawHandle.*, EngineForEachPending.*, EngineClear.* and EnginePostClear.*
// run caller-driven on the injected clock wherever they can, so what a pass runs is decided by the
// test. EngineQueriesThreads.* and EnginePostClearThreads.* run on worker threads: deadline reads racing
// moves, fires, cancels and node reuse, and posted clears racing schedules and cancels with every
// timer accounted for exactly once (run under TSan too).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// A timer scheduled on shard 0 now runs at the poll a tick later, and only then: whatever clear
// came before has been served and left the shard working. `why` names the case.
void expect_a_new_timer_runs(Engine& engine, const char* why) {
  Timer timer = engine.schedule_after(1ms, [] {});
  advance_clock(1ms);
  EXPECT_EQ(engine.poll(0), 1u) << why;
  EXPECT_TRUE(timer.expired()) << why;
}

// ---- the engine's clock, deadline() and remaining() in every state ----

TEST(EngineQueries, NowIsTheEnginesClockTheTimeScheduleAtSpeaks) {
  Engine fake(manual());
  EXPECT_EQ(fake.now(), fake_now());
  advance_clock(3ms);
  EXPECT_EQ(fake.now(), fake_now()) << "EngineOptions::clock, read again";
  EngineOptions o = manual();
  o.clock = nullptr;
  Engine real(o);
  const auto before = std::chrono::steady_clock::now().time_since_epoch();
  const Nanos now = real.now();
  const auto after = std::chrono::steady_clock::now().time_since_epoch();
  EXPECT_LE(before, now);
  EXPECT_LE(now, after) << "without a clock of the user's, CLOCK_MONOTONIC";
}

TEST(EngineQueries, DeadlineAndRemainingInEveryState) {
  Tally t(4);
  OwnedEngine o;
  EXPECT_EQ(Timer{}.deadline(), std::nullopt);
  EXPECT_EQ(Timer{}.remaining(), std::nullopt);
  // Pending, rounded up to the tick.
  Timer pending = o.engine.schedule_at(o.start + 2500us, Probe(&t, 0));
  EXPECT_EQ(pending.deadline(), o.start + 3ms);
  EXPECT_EQ(pending.remaining(), 3ms);
  // In transit: scheduled by another thread, not yet taken in by a poll.
  Timer transit;
  std::thread([&] { transit = o.engine.schedule_after(7ms, Probe(&t, 1)); }).join();
  EXPECT_EQ(transit.deadline(), o.start + 7ms);
  // Running: a one-shot asking about itself (nullopt: it is firing), a periodic one too.
  struct Self {
    Timer timer;
    std::optional<std::optional<Nanos>> inside;
  } s_once, s_every;
  s_once.timer = o.engine.schedule_after(1ms, [s = &s_once] { s->inside = s->timer.deadline(); });
  s_every.timer = o.engine.schedule_every(1ms, [s = &s_every] { s->inside = s->timer.deadline(); });
  const Timer once = s_once.timer;
  const Timer every = s_every.timer;
  advance_clock(1ms);
  EXPECT_EQ(o.engine.poll(0), 2u);
  ASSERT_TRUE(s_once.inside.has_value() && s_every.inside.has_value()) << "a callback did not run";
  EXPECT_EQ(*s_once.inside, std::nullopt);
  EXPECT_EQ(*s_every.inside, std::nullopt);
  EXPECT_EQ(every.deadline(), o.start + 2ms) << "between runs: its next run";
  EXPECT_EQ(pending.remaining(), 2ms);
  // Fired, cancelled, stale.
  EXPECT_EQ(once.deadline(), std::nullopt);
  Timer every_copy = every;
  EXPECT_TRUE(every_copy.cancel());
  EXPECT_EQ(every.deadline(), std::nullopt);
  Timer reuse = o.engine.schedule_after(9ms, Probe(&t, 2));
  EXPECT_EQ(every.deadline(), std::nullopt);
  EXPECT_EQ(once.remaining(), std::nullopt);
  // A due timer waiting past its deadline reads zero remaining.
  advance_clock(5ms);
  EXPECT_EQ(pending.remaining(), 0ns);
  // Another thread than the shard's reads the same answers.
  std::thread([&] {
    EXPECT_EQ(pending.remaining(), 0ns);
    EXPECT_EQ(pending.deadline(), o.start + 3ms);
    EXPECT_EQ(once.remaining(), std::nullopt);
    EXPECT_EQ(every.deadline(), std::nullopt);
    EXPECT_EQ(reuse.deadline(), o.start + 10ms);
    EXPECT_EQ(Timer{}.deadline(), std::nullopt);
  }).join();
}

// A thread that is not the shard's reads every state too: nobody owns the shard here, so the test
// thread is "another thread" outside its polls, and a callback asks from a thread of its own.
TEST(EngineQueries, DeadlineAndRemainingFromAThreadNotTheShardsInEveryState) {
  Tally t(4);
  Engine engine(manual(1));
  const Nanos start = fake_now();
  Timer linked = engine.schedule_at(start + 2500us, Probe(&t, 0));
  EXPECT_EQ(engine.poll(0), 0u);  // taken in
  Timer transit = engine.schedule_after(7ms, Probe(&t, 1));
  EXPECT_EQ(linked.deadline(), start + 3ms) << "pending, linked";
  EXPECT_EQ(linked.remaining(), 3ms);
  EXPECT_EQ(transit.deadline(), start + 7ms) << "pending, a hand-off not taken in";
  // A posted move reads the old deadline until the shard applies it.
  ASSERT_TRUE(transit.reschedule(start + 9ms));
  EXPECT_EQ(transit.deadline(), start + 7ms);
  // Running: each callback asks about itself from a thread of its own, while it runs.
  struct Self {
    Timer timer;
    std::optional<std::optional<Nanos>> inside;
  } s_once, s_every;
  const auto ask = [](Self* s) { std::thread([s] { s->inside = s->timer.deadline(); }).join(); };
  s_once.timer = engine.schedule_after(1ms, [&ask, s = &s_once] { ask(s); });
  s_every.timer = engine.schedule_every(1ms, [&ask, s = &s_every] { ask(s); });
  const Timer once = s_once.timer;
  const Timer every = s_every.timer;
  advance_clock(1ms);
  EXPECT_EQ(engine.poll(0), 2u);
  ASSERT_TRUE(s_once.inside.has_value() && s_every.inside.has_value()) << "a callback did not run";
  EXPECT_EQ(*s_once.inside, std::nullopt) << "a one-shot claimed to run";
  EXPECT_EQ(*s_every.inside, std::nullopt) << "a periodic timer whose run is under way";
  EXPECT_EQ(transit.deadline(), start + 9ms) << "the move applied by the pass";
  EXPECT_EQ(every.deadline(), start + 2ms) << "between runs: its next run";
  EXPECT_EQ(transit.remaining(), 8ms);
  // Fired, cancelled, stale, empty.
  EXPECT_EQ(once.deadline(), std::nullopt);
  EXPECT_EQ(once.remaining(), std::nullopt);
  Timer every_copy = every;
  ASSERT_TRUE(every_copy.cancel());
  EXPECT_EQ(every.deadline(), std::nullopt) << "cancelled, its record not yet retired";
  (void)engine.poll(0);
  Timer reuse = engine.schedule_after(4ms, Probe(&t, 2));
  EXPECT_EQ(every.deadline(), std::nullopt) << "stale: the node may hold another timer now";
  EXPECT_EQ(once.deadline(), std::nullopt);
  EXPECT_EQ(reuse.deadline(), start + 5ms);
  EXPECT_EQ(Timer{}.remaining(), std::nullopt);
  EXPECT_EQ(engine.schedule_after_on(3, 1ms, Probe(&t, 3)).deadline(), std::nullopt) << "a failed schedule";
  // Handed back by stop(): pending, with its deadline, until cancelled.
  std::vector<Timer> back = engine.stop();
  EXPECT_EQ(back.size(), 3u);
  EXPECT_EQ(linked.deadline(), start + 3ms);
  EXPECT_EQ(linked.remaining(), 2ms);
  EXPECT_TRUE(linked.cancel());
  EXPECT_EQ(linked.deadline(), std::nullopt);
  for (Timer& timer : back) (void)timer.cancel();
}

// ---- the 8-byte handle ----

TEST(EngineRawHandle, RawRoundTripsOnEveryShardAndNodesFromOverflowPools) {
  Engine engine(manual(2));
  // More than a shard's hand-out reserve (1 Ki nodes at start) from one thread without a poll: the
  // rest come from this thread's overflow pool for the shard.
  constexpr std::size_t kN = 20'000;
  std::vector<Timer> timers;
  timers.reserve(2 * kN);
  for (std::size_t i = 0; i < kN; ++i) {
    timers.push_back(engine.schedule_after_on(0, 1h, [] {}));
    timers.push_back(engine.schedule_after_on(1, 1h, [] {}));
  }
  std::vector<std::uint64_t> raws;
  raws.reserve(timers.size());
  for (const Timer& t : timers) {
    ASSERT_TRUE(t);
    raws.push_back(t.raw());
    ASSERT_NE(raws.back(), 0u);
  }
  std::sort(raws.begin(), raws.end());
  EXPECT_EQ(std::adjacent_find(raws.begin(), raws.end()), raws.end()) << "two timers with one raw value";
  for (std::size_t i = 0; i < timers.size(); ++i) {
    Timer back = engine.timer_from_raw(timers[i].raw());
    ASSERT_TRUE(back);
    EXPECT_EQ(back.shard(), timers[i].shard());
    EXPECT_EQ(back.raw(), timers[i].raw());
    ASSERT_TRUE(back.is_pending());
    if (i % 2 == 0) {
      EXPECT_TRUE(back.cancel());  // through the raw form
    }
  }
  for (std::size_t i = 0; i < timers.size(); ++i) {
    EXPECT_EQ(timers[i].cancelled(), i % 2 == 0);
    if (i % 2 == 1) {
      EXPECT_TRUE(timers[i].cancel());
    }
  }
  EXPECT_EQ(engine.stats().pending, 0u);
}

TEST(EngineRawHandle, BadOrStaleRawValuesGiveEmptyOrStaleTimers) {
  Tally t(2);
  OwnedEngine o;
  EXPECT_EQ(Timer{}.raw(), 0u);
  EXPECT_EQ(o.engine.schedule_after_on(9, 1ms, Probe(&t, 0)).raw(), 0u) << "a failed schedule";
  const Timer empty = o.engine.timer_from_raw(0);
  EXPECT_FALSE(empty);
  EXPECT_EQ(empty.status(), Status::no_timer);
  Timer live = o.engine.schedule_after(1ms, Probe(&t, 1));
  const std::uint64_t raw = live.raw();
  const std::uint64_t gen = raw >> 32;
  const std::uint64_t locator = raw & 0xFFFF'FFFFU;
  // Forged: not a pending generation; a locator past what was handed out (same chunk, and chunks
  // never numbered); all ones.
  // (The shard's pool handed out its first 1 Ki + 1 nodes, its hand-out reserve and this timer's:
  // chunk 0 holds them, its offset 4000 is numbered but not handed out, and chunk 28 is not
  // numbered.)
  for (const std::uint64_t bad :
       {locator | ((gen + 1) << 32), locator | ((gen + 2) << 32), (gen << 32) | 4000,
        (gen << 32) | (locator + 100'000), (gen << 32) | 0xFFFF'F000U, ~std::uint64_t{0}}) {
    Timer forged = o.engine.timer_from_raw(bad);
    EXPECT_FALSE(forged) << std::hex << bad;
    EXPECT_FALSE(forged.cancel());
  }
  std::mt19937_64 rng(17);
  for (int i = 0; i < 100'000; ++i) {
    const Timer random_one = o.engine.timer_from_raw(rng());
    if (random_one) {
      EXPECT_FALSE(random_one.is_pending()) << "a random raw value matched a live timer";
    }
  }
  // Stale: the timer fired; its node reused.
  advance_clock(1ms);
  EXPECT_EQ(o.engine.poll(0), 1u);
  Timer reused = o.engine.schedule_after(1ms, [] {});
  Timer stale = o.engine.timer_from_raw(raw);
  EXPECT_TRUE(stale) << "names the timer that was";
  EXPECT_FALSE(stale.is_pending());
  EXPECT_FALSE(stale.cancel());
  EXPECT_TRUE(reused.is_pending());
  // Another engine's raw value names nothing live here.
  Engine other(manual(1));
  Timer there = other.schedule_after(1h, [] {});
  EXPECT_FALSE(o.engine.timer_from_raw(there.raw()).is_pending());
  EXPECT_TRUE(there.cancel());
}

// Raw values of another engine, live or destroyed, name nothing here: each engine starts its
// nodes' generations at a value of its own, so the same locator does not bring the same pending
// generation with it.
TEST(EngineRawHandle, AnotherEnginesRawValuesMatchNoneOfThisEnginesTimers) {
  constexpr int kTimers = 1000;
  Engine a(manual(1));
  std::vector<Timer> mine;
  for (int i = 0; i < kTimers; ++i) mine.push_back(a.schedule_after(1h, [] {}));
  std::vector<std::uint64_t> theirs;
  {
    Engine b(manual(1));
    std::vector<Timer> live;
    for (int i = 0; i < kTimers; ++i) live.push_back(b.schedule_after(1h, [] {}));
    for (const Timer& t : live) theirs.push_back(t.raw());
    int matched = 0;
    for (const std::uint64_t raw : theirs) {
      Timer here = a.timer_from_raw(raw);
      ASSERT_TRUE(here) << "the locator names one of this engine's nodes";
      matched += here.is_pending() ? 1 : 0;
      EXPECT_FALSE(here.cancel()) << "a foreign raw value cancelled one of this engine's timers";
      EXPECT_FALSE(here.reschedule_after(1ms));
    }
    EXPECT_EQ(matched, 0) << "live raw values of another engine";
  }
  Engine c(manual(1));  // a later engine, after b's destruction
  std::vector<Timer> later;
  for (int i = 0; i < kTimers; ++i) later.push_back(c.schedule_after(1h, [] {}));
  for (const std::uint64_t raw : theirs) {
    EXPECT_FALSE(a.timer_from_raw(raw).is_pending()) << "a destroyed engine's raw value, here";
    EXPECT_FALSE(c.timer_from_raw(raw).is_pending()) << "a destroyed engine's raw value, on a later engine";
  }
  for (const Timer& t : mine) EXPECT_TRUE(t.is_pending()) << "none of a's timers was touched";
  for (const Timer& t : later) EXPECT_TRUE(t.is_pending());
}

// ---- clear() and for_each_pending() on the shard's own thread ----

TEST(EngineClear, ClearCancelsEveryPendingTimerHandOffsIncludedAndRunsNone) {
  Tally t(6);
  OwnedEngine o;
  std::vector<Timer> timers;
  timers.push_back(o.engine.schedule_after(1ms, Probe(&t, 0)));
  timers.push_back(o.engine.schedule_after(1h, Probe(&t, 1)));
  timers.push_back(o.engine.schedule_every(5ms, Probe(&t, 2)));
  std::thread([&] {
    timers.push_back(o.engine.schedule_after_on(0, 2ms, Probe(&t, 3)));  // in transit
    timers.push_back(o.engine.schedule_after_on(0, 2ms, Probe(&t, 4)));
    EXPECT_TRUE(timers.back().cancel());  // a cancel posted, not yet retired
  }).join();
  Timer moved = o.engine.schedule_after(1ms, Probe(&t, 5));
  std::thread([&] { EXPECT_TRUE(moved.reschedule_after(10ms)); }).join();  // a move posted
  EXPECT_EQ(o.engine.clear(0), 5u);
  for (std::size_t i = 0; i < timers.size(); ++i) EXPECT_TRUE(timers[i].cancelled()) << i;
  EXPECT_TRUE(moved.cancelled());
  EXPECT_EQ(t.total_destroyed(), 6);
  advance_clock(1h);
  EXPECT_EQ(o.engine.poll(0), 0u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(t.ran[i].load(), 0);
  const EngineStats s = o.engine.stats();
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.cancelled, 6u);
  EXPECT_EQ(o.engine.clear(0), 0u) << "nothing left";
  expect_a_new_timer_runs(o.engine, "the shard takes new timers at once");
}

TEST(EngineClear, ClearFromACallbackOnTheShardWithWorkerThreads) {
  Tally t(3);
  Engine engine(workers(1));
  Timer a = engine.schedule_after_on(0, 1h, Probe(&t, 0));
  Timer b = engine.schedule_after_on(0, 1h, Probe(&t, 1));
  std::atomic<std::size_t> cleared{99};
  Timer c = engine.schedule_after_on(0, 0ns, [&] { cleared.store(engine.clear(0)); });
  ASSERT_TRUE(eventually([&] { return cleared.load() != 99; }));
  EXPECT_EQ(cleared.load(), 2u);
  EXPECT_TRUE(a.cancelled() && b.cancelled());
  EXPECT_THROW((void)engine.clear(0), std::logic_error) << "from a thread not the shard's";
  EXPECT_TRUE(engine.stop().empty());
  (void)c;
}

TEST(EngineForEachPending, ForEachPendingVisitsEveryPendingTimerWithItsDeadline) {
  Tally t(4);
  OwnedEngine o;
  Timer a = o.engine.schedule_after(2ms, Probe(&t, 0));
  Timer b = o.engine.schedule_after(1h, Probe(&t, 1));
  ASSERT_TRUE(o.engine.schedule_after(1ms, Probe(&t, 2)).cancel());  // not visited
  Timer transit;
  std::thread([&] { transit = o.engine.schedule_after_on(0, 3ms, Probe(&t, 3)); }).join();
  std::vector<std::pair<std::uint64_t, Nanos>> seen;
  const std::size_t n = o.engine.for_each_pending(
      0, [&](Timer timer, Nanos deadline) { seen.emplace_back(timer.raw(), deadline); });
  EXPECT_EQ(n, 3u);
  std::sort(seen.begin(), seen.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], std::make_pair(a.raw(), o.start + 2ms));
  EXPECT_EQ(seen[1], std::make_pair(transit.raw(), o.start + 3ms));
  EXPECT_EQ(seen[2], std::make_pair(b.raw(), o.start + 1h));
  // The visitor may cancel and reschedule (posted), and must not clear or walk again.
  o.engine.for_each_pending(0, [&](Timer timer, Nanos) {
    EXPECT_THROW((void)o.engine.clear(0), std::logic_error);
    EXPECT_THROW((void)o.engine.for_each_pending(0, [](Timer, Nanos) {}), std::logic_error);
    EXPECT_THROW((void)o.engine.poll(0), std::logic_error);
    if (timer.raw() == a.raw()) {
      EXPECT_TRUE(timer.cancel());
    }
    if (timer.raw() == b.raw()) {
      EXPECT_TRUE(timer.reschedule(o.start + 4ms));
    }
  });
  EXPECT_TRUE(a.cancelled());
  advance_clock(4ms);
  EXPECT_EQ(o.engine.poll(0), 2u) << "the transit one at 3 ms and the moved one at 4 ms";
  EXPECT_EQ(t.ran[0].load() + t.ran[1].load() + t.ran[3].load(), 2);
  // What the visitor throws leaves the walk, and the shard is usable after it.
  Timer c = o.engine.schedule_after(1ms, [] {});
  EXPECT_THROW(o.engine.for_each_pending(0, [](Timer, Nanos) { throw std::runtime_error("out"); }),
               std::runtime_error);
  EXPECT_EQ(o.engine.clear(0), 1u);
  EXPECT_TRUE(c.cancelled());
}

TEST(EngineClear, ClearAndForEachPendingRefuseOtherThreadsAndMissingShards) {
  OwnedEngine o(2);
  EXPECT_THROW((void)o.engine.clear(2), std::out_of_range);
  EXPECT_THROW((void)o.engine.for_each_pending(5, [](Timer, Nanos) {}), std::out_of_range);
  EXPECT_THROW((void)o.engine.clear(1), std::logic_error) << "shard 1 is not this thread's";
  EXPECT_THROW((void)o.engine.for_each_pending(1, [](Timer, Nanos) {}), std::logic_error);
  std::thread([&] {
    EXPECT_THROW((void)o.engine.clear(0), std::logic_error);
    EXPECT_THROW((void)o.engine.for_each_pending(0, [](Timer, Nanos) {}), std::logic_error);
  }).join();
  EXPECT_EQ(o.engine.clear(0), 0u);
}

// ---- post_clear() and post_clear_all(): a clear from any thread, served by the shard's pass ----

TEST(EnginePostClear, APostedClearIsServedByTheNextPollBeforeAnythingRuns) {
  Tally t(6);
  Engine engine(manual(1));  // nobody owns the shard: the test thread is "another thread"
  std::vector<Timer> timers;
  timers.push_back(engine.schedule_after(1ms, Probe(&t, 0)));
  timers.push_back(engine.schedule_after(1h, Probe(&t, 1)));
  timers.push_back(engine.schedule_every(1ms, Probe(&t, 2)));
  EXPECT_EQ(engine.poll(0), 0u);                                   // taken in
  timers.push_back(engine.schedule_after(1ms, Probe(&t, 3)));      // in transit
  Timer posted_cancel = engine.schedule_after(1ms, Probe(&t, 4));  // a cancel posted, not retired
  ASSERT_TRUE(posted_cancel.cancel());
  Timer moved = engine.schedule_after(1h, Probe(&t, 5));
  ASSERT_TRUE(moved.reschedule_after(1ms));  // a move posted, not applied: it does not save it
  timers.push_back(moved);
  EXPECT_TRUE(engine.post_clear(0));
  EXPECT_TRUE(engine.post_clear(0)) << "a second request before the pass";
  EXPECT_EQ(engine.next_deadline(0), fake_now()) << "a clear waits: the loop must poll now";
  for (const Timer& timer : timers) EXPECT_TRUE(timer.is_pending()) << "served before the pass";
  EXPECT_EQ(engine.stats().clears, 0u);
  advance_clock(1ms);  // every timer but one is due now: none may run
  EXPECT_EQ(engine.poll(0), 0u);
  for (std::size_t i = 0; i < timers.size(); ++i) {
    EXPECT_TRUE(timers[i].cancelled()) << i;
    EXPECT_FALSE(timers[i].cancel()) << i;
  }
  for (std::size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(t.ran[i].load(), 0) << i;
    EXPECT_EQ(t.destroyed[i].load(), 1) << i;
  }
  EngineStats s = engine.stats();
  EXPECT_EQ(s.clears, 1u) << "the two requests the pass found are served by one clear";
  EXPECT_EQ(s.cleared, 5u);
  EXPECT_EQ(s.cancelled, 6u) << "the five cleared and the one cancel() won";
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(engine.next_deadline(0), std::nullopt);
  expect_a_new_timer_runs(engine, "served: a timer scheduled after the serving pass is untouched");
  // Once stopped: refused, nothing posted.
  EXPECT_TRUE(engine.stop().empty());
  EXPECT_FALSE(engine.post_clear(0));
  EXPECT_FALSE(engine.post_clear_all());
}

TEST(EnginePostClear, AClearPostedBeforeStopAndNotServedIsServedByStop) {
  Tally t(3);
  Engine engine(manual(2));
  Timer a = engine.schedule_after_on(0, 1h, Probe(&t, 0));
  Timer b = engine.schedule_after_on(1, 1h, Probe(&t, 1));
  Timer c = engine.schedule_after_on(1, 2h, Probe(&t, 2));
  EXPECT_TRUE(engine.post_clear(1));
  std::vector<Timer> back = engine.stop();
  ASSERT_EQ(back.size(), 1u) << "shard 1's timers cancelled by stop()'s drain, shard 0's handed back";
  EXPECT_EQ(back[0].raw(), a.raw());
  EXPECT_TRUE(b.cancelled() && c.cancelled());
  EXPECT_EQ(t.destroyed[1].load() + t.destroyed[2].load(), 2);
  EXPECT_EQ(engine.stats().shards[1].clears, 1u);
  EXPECT_EQ(engine.stats().shards[1].cleared, 2u);
  // From stop()'s own hand-back visitor: stopped, refused.
  Engine other(manual(1));
  Timer d = other.schedule_after(1h, Probe(&t, 0));
  bool posted = true;
  EXPECT_EQ(other.stop([&](Timer) noexcept { posted = other.post_clear_all(); }), 1u);
  EXPECT_FALSE(posted);
  EXPECT_TRUE(d.cancel());
  EXPECT_TRUE(back[0].cancel());
}

TEST(EnginePostClear, APostedClearBeforeTheFirstStartClearsNothingLater) {
  Engine engine(manual(1));
  EXPECT_TRUE(engine.post_clear(0)) << "nothing to clear: no timer exists yet";
  EXPECT_TRUE(engine.post_clear_all());
  expect_a_new_timer_runs(engine, "a timer scheduled after the call was cleared");
  EXPECT_EQ(engine.stats().clears, 0u);
}

TEST(EnginePostClear, PostClearAllServesEachShardAtItsOwnNextPoll) {
  Tally t(4);
  Engine engine(manual(2));
  Timer a = engine.schedule_after_on(0, 1h, Probe(&t, 0));
  Timer b = engine.schedule_after_on(1, 1h, Probe(&t, 1));
  EXPECT_TRUE(engine.post_clear_all());
  EXPECT_EQ(engine.poll(0), 0u);
  EXPECT_TRUE(a.cancelled());
  EXPECT_TRUE(b.is_pending()) << "shard 1 has not polled yet";
  EXPECT_EQ(engine.next_deadline(1), fake_now());
  EXPECT_EQ(engine.poll(1), 0u);
  EXPECT_TRUE(b.cancelled());
  EXPECT_EQ(engine.stats().clears, 2u);
  EXPECT_EQ(engine.stats().cleared, 2u);
  EXPECT_TRUE(engine.stop().empty());
}

// From a callback on the shard the request waits for the next pass: the pass under way goes on,
// and what is still due in it runs; the timers pending at the next pass, those the callback
// scheduled on its own shard included, are cancelled then.
TEST(EnginePostClear, APostFromACallbackIsServedAtTheNextPassAndThePassUnderWayGoesOn) {
  Tally t(4);
  OwnedEngine o;
  struct Ctx {
    Engine* engine;
    Tally* t;
    bool posted = false;
    Timer direct;
  } c{&o.engine, &t, false, {}};
  Timer first = o.engine.schedule_after(1ms, [&c] {
    c.posted = c.engine->post_clear(0);
    c.direct = c.engine->schedule_after(1h, Probe(c.t, 3));  // linked directly, no queue
  });
  Timer far = o.engine.schedule_after(1h, Probe(&t, 1));
  advance_clock(1ms);
  Timer second = o.engine.schedule_after(0ns, Probe(&t, 2));  // the owner's: due in this pass too
  EXPECT_EQ(o.engine.poll(0), 2u) << "the pass that the post came from ran on";
  EXPECT_TRUE(c.posted);
  // Order within a tick is unspecified: if `second` ran first, the callback's schedule may have
  // taken its recycled node, and its handle then reads neither expired nor cancelled.
  EXPECT_TRUE(first.expired());
  EXPECT_EQ(t.ran[2].load(), 1) << "the owner's timer due in the same pass ran in it";
  EXPECT_FALSE(second.is_pending());
  EXPECT_TRUE(far.is_pending() && c.direct.is_pending());
  EXPECT_EQ(o.engine.poll(0), 0u);
  EXPECT_TRUE(far.cancelled() && c.direct.cancelled());
  EXPECT_EQ(t.destroyed[1].load() + t.destroyed[3].load(), 2);
  EXPECT_EQ(o.engine.stats().clears, 1u);
}

// From a for_each_pending() visitor: posted; the walk goes on and sees the timers as they are.
TEST(EnginePostClear, APostFromAVisitorIsServedAfterTheWalk) {
  Tally t(3);
  OwnedEngine o;
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(o.engine.schedule_after(1h, Probe(&t, i)));
  std::size_t posted = 0;
  EXPECT_EQ(o.engine.for_each_pending(0,
                                      [&](Timer timer, Nanos) {
                                        posted += o.engine.post_clear(0) ? 1 : 0;
                                        EXPECT_TRUE(timer.is_pending());
                                      }),
            3u);
  EXPECT_EQ(posted, 3u);
  EXPECT_EQ(o.engine.stats().pending, 3u);
  EXPECT_EQ(o.engine.poll(0), 0u);
  EXPECT_EQ(o.engine.stats().pending, 0u);
  EXPECT_EQ(o.engine.stats().cleared, 3u);
  EXPECT_EQ(t.total_destroyed(), 3);
}

// A loop waiting between prepare_wait() and finish_wait() is woken for a posted clear, whatever
// its plan, and prepare_wait() refuses to wait while one is not served.
TEST(EnginePostClear, APostedClearWakesAWaitingLoop) {
  std::atomic<int> wakes{0};
  EngineOptions opts = manual(1);
  opts.wake_loop = [&wakes](std::size_t) { wakes.fetch_add(1); };
  Engine engine(opts);
  Timer a = engine.schedule_after(1h, [] {});
  EXPECT_EQ(engine.poll(0), 0u);
  ASSERT_TRUE(engine.prepare_wait(0, engine.next_deadline(0)));
  std::thread([&] { EXPECT_TRUE(engine.post_clear(0)); }).join();
  EXPECT_EQ(wakes.load(), 1) << "the waiting loop was not woken";
  engine.finish_wait(0);
  EXPECT_FALSE(engine.prepare_wait(0, std::nullopt)) << "a clear waits: poll, do not wait";
  EXPECT_EQ(engine.poll(0), 0u);
  EXPECT_TRUE(a.cancelled());
  ASSERT_TRUE(engine.prepare_wait(0, std::nullopt));
  engine.finish_wait(0);
  EXPECT_TRUE(engine.post_clear(0)) << "nothing pending: served as an empty clear";
  EXPECT_EQ(wakes.load(), 1) << "a loop that is not waiting was woken";
  EXPECT_EQ(engine.poll(0), 0u);
  EXPECT_EQ(engine.stats().clears, 2u);
  EXPECT_TRUE(engine.stop().empty());
}

// ---- worker threads ----

// A periodic timer every 1 ms that counts its runs and holds its first one on `gate`: with an
// executor, that run stays out on its task until the gate is released.
Timer schedule_every_holding_its_first_run(Engine& engine, HoldGate& gate, std::atomic<int>& runs) {
  return engine.schedule_every(1ms, [&gate, &runs] {
    if (runs.fetch_add(1) == 0) gate.pass();
  });
}

// Timer::deadline() from the test thread, which is never a worker's, in each state a worker shard
// puts a timer in: pending, fired, cancelled, a periodic timer between runs and in a run (out on
// an executor's task), moved, and after stop().
TEST(EngineQueriesThreads, DeadlineFromAThreadNotTheShardsWithWorkersInEveryState) {
  Tally t(3);
  auto executor = pool(1);
  Engine engine(workers(1, executor));
  const Nanos base = Nanos((now_ns() / 1'000'000 + 1) * 1'000'000) + 1h;  // on the tick
  Timer far = engine.schedule_at(base, Probe(&t, 0));
  EXPECT_EQ(far.deadline(), base) << "whether or not the worker has taken it in yet";
  Timer soon = engine.schedule_after(0ns, Probe(&t, 1));
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_TRUE(eventually([&] { return soon.expired(); }));
  EXPECT_EQ(soon.deadline(), std::nullopt) << "fired";
  Timer gone = engine.schedule_after(1h, Probe(&t, 2));
  ASSERT_TRUE(gone.cancel());
  EXPECT_EQ(gone.deadline(), std::nullopt) << "cancelled";
  // A periodic timer held in its run on the executor: no deadline until the worker takes it back.
  HoldGate gate;
  const ReleaseOnExit release{gate};
  std::atomic<int> runs{0};
  Timer every = schedule_every_holding_its_first_run(engine, gate, runs);
  ASSERT_TRUE(gate.wait_entered());
  EXPECT_TRUE(every.is_pending());
  EXPECT_EQ(every.deadline(), std::nullopt) << "a periodic timer out on its task";
  gate.release();
  ASSERT_TRUE(eventually([&] { return runs.load() >= 3; }));
  // Between runs again: its next run, on the tick.
  std::optional<Nanos> next;
  ASSERT_TRUE(eventually([&] { return (next = every.deadline()).has_value(); }));
  EXPECT_EQ(next->count() % engine.tick().count(), 0);
  EXPECT_TRUE(far.reschedule(base + 1h));
  EXPECT_TRUE(eventually([&] { return far.deadline() == base + 1h; })) << "the posted move applied";
  std::vector<Timer> back = engine.stop();
  EXPECT_EQ(back.size(), 2u);
  EXPECT_EQ(far.deadline(), base + 1h) << "handed back, pending";
  EXPECT_TRUE(every.deadline().has_value());
  for (Timer& timer : back) EXPECT_TRUE(timer.cancel());
  EXPECT_EQ(far.deadline(), std::nullopt);
  EXPECT_EQ(every.deadline(), std::nullopt);
}

// Readers on threads of their own call deadline() on every handle, again and again, while the
// workers fire, re-arm and move the timers, the producing thread moves and cancels them, and new
// schedules reuse their nodes (stale handles then name nodes that hold later timers). Each deadline a
// one-shot timer i is given is a whole tick congruent to i mod 64; a periodic one (its period 64
// ticks) keeps the residue of its first deadline, or takes i's when moved. So an answer taken from
// another timer, or another lifetime of the node, is caught 63 times in 64; and a one-shot's
// nullopt is final (its lifetime has ended). Under TSan it also checks that the reads race nothing.
TEST(EngineQueriesThreads, DeadlineReadersRacingReschedulesCancelsFiresAndReuse) {
  const std::size_t n = kSanitized ? 3'000 : 30'000;
  constexpr std::int64_t kTickNs = 1'000'000;
  constexpr std::int64_t kResidues = 64;
  Engine engine(workers(2));
  // A whole multiple of 64 ticks: each deadline below is base + (64 k + i % 64) ticks.
  const std::int64_t base = (now_ns() / (kResidues * kTickNs) + 1) * kResidues * kTickNs;
  const auto deadline_of = [&](std::size_t i, std::int64_t k) {
    return Nanos(base + (kResidues * k + static_cast<std::int64_t>(i % kResidues)) * kTickNs);
  };
  const auto residue = [&](Nanos d) { return ((d.count() - base) / kTickNs) % kResidues; };
  std::vector<Timer> handles(n);
  std::vector<std::int64_t> first_residue(n, -1);  // a periodic timer's; -1 for a one-shot
  std::atomic<std::size_t> published{0};           // handles[i] below it are written (release)
  std::atomic<bool> done{false};
  std::atomic<std::size_t> bad{0};
  std::atomic<std::size_t> reads{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::mt19937 rng(static_cast<unsigned>(100 + r));
      std::vector<std::uint8_t> ended(n, 0);
      std::size_t mine = 0;
      while (!done.load(std::memory_order_relaxed) || mine < 1000) {
        const std::size_t have = published.load(std::memory_order_acquire);
        if (have == 0) continue;
        const std::size_t i = rng() % have;
        const std::optional<Nanos> d = handles[i].deadline();
        ++mine;
        if (!d) {
          if (first_residue[i] < 0) ended[i] = 1;
          continue;
        }
        const std::int64_t got = residue(*d);
        const bool residue_ok = got == static_cast<std::int64_t>(i % kResidues) ||
                                (first_residue[i] >= 0 && got == first_residue[i]);
        if (d->count() % kTickNs != 0 || d->count() < base - kResidues * kTickNs || !residue_ok ||
            ended[i] != 0) {
          bad.fetch_add(1);
        }
      }
      reads.fetch_add(mine);
    });
  }
  // The producer, on this thread: half of the timers are due within 64 ticks of base, so their
  // nodes come back to the pool and the schedules that follow reuse them. After each schedule it
  // moves or cancels two published timers (the shard applies the moves, writing their deadlines);
  // it pauses now and then so that time passes and timers fire meanwhile.
  std::mt19937 rng(3);
  const auto move_or_cancel = [&](std::size_t have) {
    const std::size_t i = rng() % have;
    if (rng() % 8 == 0) {
      (void)handles[i].cancel();
    } else {  // near (due soon after base, or at once) or far
      const std::int64_t k = rng() % 4 == 0 ? 0 : static_cast<std::int64_t>(rng() % 4096);
      (void)handles[i].reschedule(deadline_of(i, k));
    }
  };
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t k = rng() % 2 == 0 ? 0 : static_cast<std::int64_t>(rng() % 4096);
    if (rng() % 16 == 0) {
      PeriodicOptions opts;
      opts.initial_delay = deadline_of(i, k + 1) - Nanos(now_ns());
      handles[i] = engine.schedule_every(
          Nanos(kResidues * kTickNs), [] {}, opts);
      ASSERT_TRUE(handles[i]) << i;
      std::optional<Nanos> first;
      ASSERT_TRUE(eventually([&] { return (first = handles[i].deadline()).has_value(); }));
      first_residue[i] = residue(*first);
    } else {
      handles[i] = engine.schedule_at(deadline_of(i, k), [] {});
      ASSERT_TRUE(handles[i]) << i;
    }
    published.store(i + 1, std::memory_order_release);
    move_or_cancel(i + 1);
    move_or_cancel(i + 1);
    if (i % 64 == 63) std::this_thread::sleep_for(200us);
  }
  done.store(true);
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0u) << "of " << reads.load() << " reads";
  EXPECT_TRUE(eventually([&] { return engine.stats().fired > 0 && engine.stats().rescheduled > 0; }));
}

// A posted clear wakes a worker asleep until a far deadline; a periodic timer out on its task
// (an executor's run under way) when the pass serves it is not cancelled and runs on.
TEST(EnginePostClearThreads, APostedClearWakesTheSleepingWorkerAndSparesARunUnderWay) {
  Tally t(3);
  Engine engine(workers(1, pool(1)));
  Timer a = engine.schedule_after_on(0, 1h, Probe(&t, 0));
  Timer b = engine.schedule_after_on(0, 2h, Probe(&t, 1));
  HoldGate gate;
  const ReleaseOnExit release{gate};
  std::atomic<int> runs{0};
  Timer every = schedule_every_holding_its_first_run(engine, gate, runs);
  ASSERT_TRUE(gate.wait_entered());
  EXPECT_TRUE(engine.post_clear(0));
  EXPECT_TRUE(eventually([&] { return a.cancelled() && b.cancelled(); }))
      << "the sleeping worker was not woken";
  // cancelled() is true from the compare-and-swap; the callable is destroyed just after it.
  EXPECT_TRUE(eventually([&] { return t.total_destroyed() == 2; }));
  EXPECT_TRUE(eventually([&] { return engine.stats().clears == 1; }));
  EXPECT_TRUE(every.is_pending()) << "a run under way is not cancelled";
  gate.release();
  EXPECT_TRUE(eventually([&] { return runs.load() >= 3; })) << "it runs on";
  EXPECT_TRUE(every.cancel());
  EXPECT_TRUE(engine.stop().empty());
}

// Producers schedule (near and far), cancel their own earlier timers, and now and then post a
// clear of the shard they schedule on and check that each far timer they scheduled before it
// stops being pending; a clearing thread posts clears of one shard or all meanwhile. At the end,
// every timer ended exactly one way: it ran once, a cancel() returned true, or a clear cancelled
// it, and the engine's counts say the same (fired, cleared, cancelled).
TEST(EnginePostClearThreads, PostedClearsRacingSchedulesAndCancelsKeepExactlyOnce) {
  RaceTimers timers(3, kSanitized ? 1'500 : 15'000);
  Engine engine(workers(2));
  std::atomic<std::size_t> producing{timers.threads};
  std::atomic<std::size_t> unserved{0};  // far timers a served clear left pending
  std::vector<Timer>& handles = timers.handles;
  timers.start(11, [&](std::size_t k, std::size_t first, std::size_t end, std::mt19937& rng) {
    const std::size_t shard = k % 2;
    std::vector<std::size_t> far;  // this thread's far timers since its last clear
    for (std::size_t i = first; i < end; ++i) {
      const bool is_far = rng() % 2 == 0;
      handles[i] =
          engine.schedule_after_on(shard, is_far ? 1h : Nanos(rng() % 2'000'000), Probe(&timers.tally, i));
      if (!handles[i]) continue;
      if (is_far) far.push_back(i);
      const std::size_t victim = first + rng() % (i - first + 1);
      if (rng() % 4 == 0 && handles[victim]) timers.won[victim] |= handles[victim].cancel() ? 1 : 0;
      if (rng() % 500 == 0) {
        ASSERT_TRUE(engine.post_clear(shard));
        // Each far timer scheduled before the call is cancelled by the pass that serves it
        // (by this clear or the clearing thread's), unless this thread's cancel won first.
        for (const std::size_t f : far) {
          if (!eventually([&] { return !handles[f].is_pending(); })) unserved.fetch_add(1);
        }
        far.clear();
      }
    }
    producing.fetch_sub(1);
  });
  timers.start_other([&] {
    std::mt19937 rng(5);
    while (producing.load() != 0) {
      EXPECT_TRUE(rng() % 3 == 0 ? engine.post_clear_all() : engine.post_clear(rng() % 2));
      std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
    }
  });
  timers.go();
  timers.join();
  // The far timers left are cleared now; the near ones fire.
  EXPECT_TRUE(engine.post_clear_all());
  // Still: nothing pending, every end published by its pass, every callback returned.
  EngineStats s;
  ASSERT_TRUE(eventually([&] {
    s = engine.stats();
    return s.pending == 0 && s.fired + s.cancelled == s.scheduled &&
           timers.tally.runs.load(std::memory_order_acquire) == s.fired;
  }));
  EXPECT_EQ(unserved.load(), 0u);
  const RaceTimers::Ends e = timers.ends();
  const std::size_t cleared = e.neither;
  EXPECT_EQ(e.ran + e.cancels + cleared, e.scheduled);
  EXPECT_EQ(s.fired, e.ran);
  EXPECT_EQ(s.cleared, cleared) << "a timer neither run nor cancel()ed ended other than by a clear";
  EXPECT_EQ(s.cancelled, e.cancels + cleared);
  EXPECT_EQ(s.scheduled, e.scheduled);
  EXPECT_GT(s.clears, 0u);
  EXPECT_TRUE(engine.stop().empty());
}

}  // namespace
}  // namespace tickwheel::test
