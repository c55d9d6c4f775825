// The Engine's periodic timers: Engine::schedule_every. Most cases use the caller-driven mode on an
// injected clock, so which poll runs what is exact; the Wheel's own periodic rules (grid, misfire
// policies, cancel from inside) are tested in wheel_periodic_test.cpp, and these check that the
// Engine keeps them across its hand-off: the handle stays valid across runs, a cancel from another
// thread or from the callback stops all future runs, the accounting identity holds per shard, a
// periodic timer counts once against max_pending_per_shard, and stop() returns it pending. One test
// races cancels against runs on a real worker: after cancel() returns true, at most the run already
// under way happens.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "support.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

void expect_identity(const EngineStats& s) {
  EXPECT_EQ(s.scheduled + s.rearmed, s.fired + s.skipped + s.cancelled + s.pending)
      << "scheduled " << s.scheduled << " rearmed " << s.rearmed << " fired " << s.fired << " skipped "
      << s.skipped << " cancelled " << s.cancelled << " pending " << s.pending;
}

struct Bump {
  int* runs;
  void operator()() const noexcept { ++*runs; }
};

TEST(EnginePeriodic, FixedRateRunsEveryPeriodWithOneHandleUntilCancelled) {
  Engine e(manual());
  int runs = 0;
  Timer t = e.schedule_every(2ms, Bump{&runs});
  ASSERT_TRUE(t) << to_string(t.status());
  for (int ms = 1; ms <= 10; ++ms) e.poll(0, advance_clock(1ms));
  EXPECT_EQ(runs, 5);
  EXPECT_FALSE(t.expired()) << "a periodic timer never expires";
  EXPECT_FALSE(t.cancelled());
  EXPECT_EQ(e.stats().pending, 1u);
  EXPECT_TRUE(t.cancel());
  EXPECT_TRUE(t.cancelled());
  EXPECT_FALSE(t.cancel()) << "a second cancel must lose";
  for (int ms = 1; ms <= 10; ++ms) e.poll(0, advance_clock(1ms));
  EXPECT_EQ(runs, 5) << "ran after its cancel";
  const EngineStats s = e.stats();
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.fired, 5u);
  EXPECT_EQ(s.cancelled, 1u);
  expect_identity(s);
}

TEST(EnginePeriodic, InitialDelayAndFixedDelayFollowTheClockOfEachRun) {
  Engine e(manual());
  std::vector<Nanos> at;
  struct Stamp {
    std::vector<Nanos>* at;
    void operator()() const noexcept { at->push_back(fake_now()); }
  };
  const Nanos t0 = fake_now();
  PeriodicOptions o;
  o.cadence = Cadence::fixed_delay;
  o.initial_delay = 1ms;
  // 1.5 ms is no whole number of ticks: fine for fixed delay, refused for fixed rate.
  Timer t = e.schedule_every(1500us, Stamp{&at}, o);
  ASSERT_TRUE(t);
  for (int i = 0; i < 40; ++i) e.poll(0, advance_clock(250us));
  ASSERT_GE(at.size(), 4u);
  EXPECT_GE(at[0] - t0, 1ms);
  for (std::size_t i = 1; i < at.size(); ++i) EXPECT_GE(at[i] - at[i - 1], 1500us) << "run " << i << " early";
  EXPECT_TRUE(t.cancel());
}

// Fixed delay counts from the clock as the callback returned, not from the poll's now: a callback
// that takes longer than its period (it moves the clock), or a poll given a now ahead of the clock,
// still leaves a whole period between the end of one run and the start of the next.
TEST(EnginePeriodic, FixedDelayCountsFromTheEndOfAnInlineRun) {
  Engine e(manual());
  struct Slow {
    std::vector<std::pair<Nanos, Nanos>>* runs;  // (start, end) on the engine's clock
    void operator()() const noexcept {
      const Nanos start = fake_now();
      runs->emplace_back(start, advance_clock(5ms));  // a run of 5 ms against a period of 2 ms
    }
  };
  std::vector<std::pair<Nanos, Nanos>> runs;
  PeriodicOptions o;
  o.cadence = Cadence::fixed_delay;
  Timer t = e.schedule_every(2ms, Slow{&runs}, o);
  ASSERT_TRUE(t);
  for (int i = 0; i < 40; ++i) e.poll(0, advance_clock(500us));
  ASSERT_GE(runs.size(), 3u);
  for (std::size_t i = 1; i < runs.size(); ++i) {
    EXPECT_GE(runs[i].first - runs[i - 1].second, 2ms) << "run " << i << " started early";
  }
  EXPECT_TRUE(t.cancel());

  // A poll told a now 10 ms past the clock runs the timer; the next run is a period after the
  // clock, so it is already due by that now (a period after the poll's now would be too late).
  int stamps = 0;
  Timer u = e.schedule_every(2ms, Bump{&stamps}, o);
  ASSERT_TRUE(u);
  const Nanos told = fake_now() + 10ms;
  e.poll(0, told);
  ASSERT_EQ(stamps, 1);
  const std::optional<Nanos> next = e.next_deadline(0);
  ASSERT_TRUE(next.has_value());
  EXPECT_LE(*next, told) << "the next run was placed a period after the poll's now, not the clock";
  EXPECT_TRUE(u.cancel());
}

TEST(EnginePeriodic, BadPeriodsAreRefusedWithNothingScheduled) {
  Engine e(manual());
  int runs = 0;
  EXPECT_EQ(e.schedule_every(0ns, Bump{&runs}).status(), Status::bad_period);
  EXPECT_EQ(e.schedule_every(-1ms, Bump{&runs}).status(), Status::bad_period);
  EXPECT_EQ(e.schedule_every(1500us, Bump{&runs}).status(), Status::bad_period)
      << "fixed rate needs whole ticks";
  EXPECT_EQ(e.schedule_every_on(3, 1ms, Bump{&runs}).status(), Status::no_such_shard);
  e.poll(0, advance_clock(10ms));
  const EngineStats s = e.stats();
  EXPECT_EQ(s.scheduled, 0u);
  EXPECT_EQ(runs, 0);
}

TEST(EnginePeriodic, CancelFromInsideItsOwnCallbackEndsItAndDestroysTheCallable) {
  Engine e(manual());
  LiveCount live;
  Timer t;
  struct State {
    Timer* self;
    int runs = 0;
    bool result = false;
  } state{&t};
  struct Callback {
    State* s;
    Counted c;
    void operator()() const noexcept {
      if (++s->runs == 3) s->result = s->self->cancel();
    }
  };
  t = e.schedule_every(1ms, Callback{&state, Counted(&live)});
  ASSERT_TRUE(t);
  for (int ms = 0; ms < 10; ++ms) e.poll(0, advance_clock(1ms));
  EXPECT_EQ(state.runs, 3);
  EXPECT_TRUE(state.result);
  EXPECT_TRUE(t.cancelled());
  EXPECT_EQ(live.live, 0) << "the callable of a periodic timer cancelled from inside was not destroyed";
  const EngineStats s = e.stats();
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.cancelled, 1u);
  expect_identity(s);
}

TEST(EnginePeriodic, MisfirePoliciesAfterAClockJump) {
  for (Misfire m : {Misfire::catch_up, Misfire::fire_once_now, Misfire::skip}) {
    Engine e(manual());
    int runs = 0;
    PeriodicOptions o;
    o.misfire = m;
    Timer t = e.schedule_every(2ms, Bump{&runs}, o);
    ASSERT_TRUE(t);
    e.poll(0, advance_clock(2ms));
    ASSERT_EQ(runs, 1);
    e.poll(0, advance_clock(20ms));  // ten periods due at once
    const int after_jump = runs;
    e.poll(0, advance_clock(0ms));
    const int next_call = runs;
    switch (m) {
      case Misfire::catch_up:  // one missed period per call
        EXPECT_EQ(after_jump, 2);
        EXPECT_EQ(next_call, 3);
        break;
      case Misfire::fire_once_now:  // one run for all, then back on the grid after now
        EXPECT_EQ(after_jump, 2);
        EXPECT_EQ(next_call, 2);
        break;
      case Misfire::skip:  // dropped and counted
        EXPECT_EQ(after_jump, 1);
        EXPECT_EQ(next_call, 1);
        EXPECT_EQ(e.stats().skipped, 1u);
        break;
    }
    expect_identity(e.stats());
    EXPECT_TRUE(t.cancel());
  }
}

TEST(EnginePeriodic, CountsOnceAgainstMaxPendingAndStopReturnsItPending) {
  EngineOptions o = manual();
  o.max_pending_per_shard = 2;
  Engine e(o);
  LiveCount live;
  struct Callback {
    int* runs;
    Counted c;
    void operator()() const noexcept { ++*runs; }
  };
  int runs = 0;
  Timer a = e.schedule_every(1ms, Callback{&runs, Counted(&live)});
  Timer b = e.schedule_every(1ms, Callback{&runs, Counted(&live)});
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  for (int ms = 0; ms < 5; ++ms) e.poll(0, advance_clock(1ms));
  EXPECT_EQ(runs, 10);
  EXPECT_EQ(e.schedule_after(1ms, [] {}).status(), Status::max_pending_reached)
      << "ten runs must not free places: each periodic timer holds one until cancelled";
  EXPECT_TRUE(a.cancel());
  e.poll(0, advance_clock(1ms));
  EXPECT_TRUE(e.schedule_after(1ms, [] {})) << "the cancel must give its place back";
  std::vector<Timer> left = e.stop();
  ASSERT_EQ(left.size(), 2u);
  for (Timer& t : left) EXPECT_TRUE(t.cancel()) << "stop() must return its timers pending";
  EXPECT_TRUE(b.cancelled()) << "the periodic timer must be among them";
  EXPECT_EQ(live.live, 0);
}

// Workers mode, real clock: a thread cancels a fast periodic timer while it runs on its worker.
// After cancel() returns true no new run may start: the count can exceed the one read right after
// the cancel by at most the run that was claimed but had not counted itself yet.
TEST(EnginePeriodic, ACancelRacingARunLetsAtMostThatRunHappen) {
  EngineOptions o = fine_tick_workers(1);
  o.wait = WaitStrategy::spin;
  Engine e(o);
  // One counter per round, all alive to the end: the run a cancel let finish may still be under
  // way when the next round begins.
  std::vector<std::atomic<int>> counters(200);
  for (int round = 0; round < 200; ++round) {
    std::atomic<int>& runs = counters[static_cast<std::size_t>(round)];
    struct Callback {
      std::atomic<int>* runs;
      void operator()() const noexcept { runs->fetch_add(1, std::memory_order_relaxed); }
    };
    Timer t = e.schedule_every(100us, Callback{&runs});
    ASSERT_TRUE(t);
    const auto until = std::chrono::steady_clock::now() + 10s;
    const int want = 1 + round % 3;
    while (runs.load(std::memory_order_relaxed) < want && std::chrono::steady_clock::now() < until) {
      std::this_thread::yield();
    }
    ASSERT_TRUE(t.cancel()) << "round " << round;
    const int at_cancel = runs.load(std::memory_order_relaxed);
    std::this_thread::sleep_for(1ms);  // ten periods: runs would go on if the cancel had not held
    EXPECT_LE(runs.load(std::memory_order_relaxed), at_cancel + 1) << "round " << round;
    EXPECT_FALSE(t.cancel());
  }
  e.stop();
  const EngineStats s = e.stats();
  EXPECT_EQ(s.cancelled, 200u);
  EXPECT_EQ(s.pending, 0u);
  expect_identity(s);
}

}  // namespace
}  // namespace tickwheel::test
