// RepeatedTimer, the named repeating timer of repeated_timer.hpp.
//
// RepeatedTimerManual: the caller-driven engine on an injected clock, so every run time below is
// exact (one tick = 1 ms, a poll per tick). Covers each transition (start, start while running,
// stop, restart, reset to a shorter and to a longer timeout, while running and while stopped,
// run_once_now while running and while stopped, destroy and the refusals after it), each of them
// called from inside the timer's own callback, the destructor called from inside it, the adjust
// hook (its argument, its result used, a result <= 0, a hook that throws), a refused schedule
// recorded and stopping the timer, a throwing on_trigger, and the argument checks.
//
// RepeatedTimerThreads: worker threads and a thread pool, with bounded waits and no timing figure
// asserted: a run that comes due during another waits for it (runs never overlap), the destructor
// waits for a run in progress on another thread, and a seeded random storm of start / stop /
// restart / reset / run_once_now from several threads and from inside the callback, after which
// stop() holds (at most the run already begun finishes, then nothing runs).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "support.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/executor.hpp"
#include "tickwheel/repeated_timer.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using Ms = std::vector<long>;

// One engine on the fake clock; times are in whole ms since the fixture was made.
class RepeatedTimerManual : public ::testing::Test {
 protected:
  explicit RepeatedTimerManual(EngineOptions o = manual()) : e(o) {}

  // Advances the clock by 1 ms and polls, `ms` times.
  void step(int ms) {
    for (int i = 0; i < ms; ++i) e.poll(0, advance_clock(1ms));
  }
  // Polls again without moving the clock (a zero-delay run armed from a callback runs here).
  void poll_now() { e.poll(0, fake_now()); }
  long now_ms() const { return static_cast<long>((fake_now() - t0) / 1ms); }
  // An on_trigger that records when it ran.
  std::function<void()> record(Ms& at) {
    return [this, &at] { at.push_back(now_ms()); };
  }

  // A 10 ms timer whose on_trigger records when it ran, then calls inside(timer, run) with the
  // number of runs so far: what the test does from inside the timer's own callback.
  struct Recorded {
    Ms at;
    std::unique_ptr<RepeatedTimer> timer;
  };
  template <class Inside>
  std::unique_ptr<Recorded> recorded(Inside inside) {
    auto r = std::make_unique<Recorded>();
    r->timer = std::make_unique<RepeatedTimer>(e, "t", 10ms, [this, r = r.get(), inside] {
      r->at.push_back(now_ms());
      inside(*r->timer, r->at.size());
    });
    return r;
  }

  Engine e;
  const Nanos t0 = fake_now();
};

TEST_F(RepeatedTimerManual, StartRunsEveryTimeoutUntilStoppedAndStartsAgainFromNow) {
  Ms at;
  RepeatedTimer t(e, "heartbeat", 10ms, record(at));
  EXPECT_EQ(t.name(), "heartbeat");
  EXPECT_EQ(t.timeout(), 10ms);
  EXPECT_FALSE(t.running());
  step(25);
  EXPECT_TRUE(at.empty()) << "ran before start()";

  ASSERT_TRUE(t.start());  // at 25
  EXPECT_TRUE(t.running());
  step(35);
  EXPECT_EQ(at, (Ms{35, 45, 55}));

  t.stop();  // at 60
  EXPECT_FALSE(t.running());
  step(30);
  EXPECT_EQ(at.size(), 3u) << "ran after stop()";
  EXPECT_EQ(e.stats().pending, 0u) << "stop() must cancel the armed engine timer";

  ASSERT_TRUE(t.start());  // at 90
  step(15);
  EXPECT_EQ(at, (Ms{35, 45, 55, 100}));
  EXPECT_EQ(t.last_error(), Status::ok);
}

// The next run is timeout() after the run returned, not after the pass that ran it began: a run
// that takes 4 ms (the clock moved inside it) pushes the next one 4 ms later.
TEST_F(RepeatedTimerManual, TheNextRunCountsFromTheEndOfALongRun) {
  Ms at;
  RepeatedTimer t(e, "slow", 10ms, [this, &at] {
    at.push_back(now_ms());
    (void)advance_clock(4ms);  // the run takes 4 ms
  });
  ASSERT_TRUE(t.start());  // at 0
  step(10);                // runs at 10, returns at 14: the next run is due at 24
  ASSERT_EQ(at, (Ms{10}));
  step(9);  // to 23
  EXPECT_EQ(at, (Ms{10})) << "the next run counted from the pass's start, not from the run's end";
  step(1);  // to 24
  EXPECT_EQ(at, (Ms{10, 24}));
}

TEST_F(RepeatedTimerManual, StartWhileRunningIsANoOp) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.start());
  step(5);
  EXPECT_TRUE(t.start()) << "already running: true, and nothing re-armed";
  step(20);
  EXPECT_EQ(at, (Ms{10, 20}));
  EXPECT_EQ(e.stats().pending, 1u) << "one armed run, not two";
}

TEST_F(RepeatedTimerManual, RestartArmsTheNextRunFromNow) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.start());
  step(7);
  ASSERT_TRUE(t.restart());  // at 7: the run due at 10 is superseded
  step(20);
  EXPECT_EQ(at, (Ms{17, 27}));
  t.stop();
  ASSERT_TRUE(t.restart()) << "restart() of a stopped timer starts it";
  EXPECT_TRUE(t.running());
  step(10);
  EXPECT_EQ(at, (Ms{17, 27, 37}));
  EXPECT_EQ(e.stats().pending, 1u);
}

TEST_F(RepeatedTimerManual, ResetToAShorterOrALongerTimeoutTakesEffectFromNow) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.start());
  step(5);
  ASSERT_TRUE(t.reset(3ms));  // at 5: shorter than the 5 ms left
  EXPECT_EQ(t.timeout(), 3ms);
  step(10);
  EXPECT_EQ(at, (Ms{8, 11, 14}));
  ASSERT_TRUE(t.reset(20ms));  // at 15: longer than the 2 ms left
  step(30);
  EXPECT_EQ(at, (Ms{8, 11, 14, 35}));
  EXPECT_EQ(e.stats().pending, 1u);

  t.stop();  // at 45
  ASSERT_TRUE(t.reset(4ms)) << "stopped: the timeout is stored";
  EXPECT_FALSE(t.running()) << "reset() must not start a stopped timer";
  step(10);
  EXPECT_EQ(at.size(), 4u);
  ASSERT_TRUE(t.start());  // at 55
  step(8);
  EXPECT_EQ(at, (Ms{8, 11, 14, 35, 59, 63}));
}

TEST_F(RepeatedTimerManual, RunOnceNowWhileRunningRunsAtOnceThenTheCycleGoesOnFromThatRun) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.start());
  step(4);
  ASSERT_TRUE(t.run_once_now());  // at 4: supersedes the run due at 10
  EXPECT_TRUE(at.empty()) << "run_once_now() runs on the engine, never on the calling thread";
  poll_now();
  EXPECT_EQ(at, (Ms{4}));
  step(25);
  EXPECT_EQ(at, (Ms{4, 14, 24})) << "the next regular run is a timeout after the forced one";
  EXPECT_TRUE(t.running());
}

TEST_F(RepeatedTimerManual, RunOnceNowWhileStoppedRunsOnceAndStaysStopped) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.run_once_now());
  ASSERT_TRUE(t.run_once_now()) << "a second call before the run coalesces into it";
  poll_now();
  EXPECT_EQ(at, (Ms{0}));
  EXPECT_FALSE(t.running());
  step(30);
  EXPECT_EQ(at, (Ms{0}));

  ASSERT_TRUE(t.run_once_now());  // at 30
  t.stop();
  poll_now();
  step(5);
  EXPECT_EQ(at, (Ms{0})) << "stop() cancels a pending run_once_now() run";

  ASSERT_TRUE(t.run_once_now());  // at 35, then start(): the forced run is kept and the cycle follows it
  ASSERT_TRUE(t.start());
  poll_now();
  step(20);
  EXPECT_EQ(at, (Ms{0, 35, 45, 55}));
}

TEST_F(RepeatedTimerManual, DestroyStopsForGoodAndRefusesEveryLaterTransition) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at));
  ASSERT_TRUE(t.start());
  step(12);
  ASSERT_EQ(at, (Ms{10}));
  t.destroy();
  EXPECT_FALSE(t.running());
  step(30);
  EXPECT_EQ(at, (Ms{10})) << "ran after destroy()";
  EXPECT_FALSE(t.start());
  EXPECT_FALSE(t.restart());
  EXPECT_FALSE(t.reset(1ms));
  EXPECT_EQ(t.timeout(), 10ms) << "a refused reset() stores nothing";
  EXPECT_FALSE(t.run_once_now());
  t.stop();
  t.destroy();
  EXPECT_FALSE(t.running());
  poll_now();
  step(30);
  EXPECT_EQ(at, (Ms{10}));
  EXPECT_EQ(e.stats().pending, 0u);
}

TEST_F(RepeatedTimerManual, TheDestructorCancelsTheArmedRunAndDestroysTheCallables) {
  LiveCount live;
  int runs = 0;
  {
    Counted c(&live);
    RepeatedTimer t(
        e, "t", 10ms, [&runs, c] { ++runs; }, [c](Nanos d) { return d; });
    ASSERT_TRUE(t.start());
    step(15);
    EXPECT_EQ(e.stats().pending, 1u);
  }
  EXPECT_EQ(live.live, 0) << "on_trigger and adjust outlived the timer";
  step(30);
  EXPECT_EQ(runs, 1);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(s.cancelled, 1u);
}

TEST_F(RepeatedTimerManual, BadArgumentsAreRefusedNamingTheTimerAndTheValue) {
  auto message = [](auto&& make) -> std::string {
    try {
      make();
    } catch (const std::invalid_argument& ex) {
      return ex.what();
    }
    return "(no exception)";
  };
  const std::string zero = message([&] { RepeatedTimer t(e, "election", 0ns, [] {}); });
  EXPECT_NE(zero.find("\"election\""), std::string::npos) << zero;
  EXPECT_NE(zero.find("got 0 ns"), std::string::npos) << zero;
  const std::string negative = message([&] { RepeatedTimer t(e, "election", -3ms, [] {}); });
  EXPECT_NE(negative.find("got -3000000 ns"), std::string::npos) << negative;
  const std::string empty = message([&] { RepeatedTimer t(e, "snapshot", 1ms, std::function<void()>{}); });
  EXPECT_NE(empty.find("\"snapshot\""), std::string::npos) << empty;
  EXPECT_NE(empty.find("on_trigger"), std::string::npos) << empty;

  RepeatedTimer t(e, "vote", 10ms, [] {});
  ASSERT_TRUE(t.start());
  const std::string reset = message([&] { (void)t.reset(-1ns); });
  EXPECT_NE(reset.find("\"vote\""), std::string::npos) << reset;
  EXPECT_NE(reset.find("got -1 ns"), std::string::npos) << reset;
  EXPECT_EQ(t.timeout(), 10ms);
  EXPECT_TRUE(t.running()) << "a refused reset() changes nothing";
}

// ---- The adjust hook ----

TEST_F(RepeatedTimerManual, AdjustIsCalledBeforeEachRegularArmWithTheTimeoutAndItsResultIsUsed) {
  Ms at;
  std::vector<Nanos> args;
  Nanos extra = 0ms;
  auto adjust = [&](Nanos timeout) {
    args.push_back(timeout);
    const Nanos d = timeout + extra;
    extra += 1ms;
    return d;
  };
  RepeatedTimer t(e, "election", 10ms, record(at), adjust);
  EXPECT_TRUE(args.empty()) << "the constructor arms nothing";
  ASSERT_TRUE(t.start());  // adjust(10) = 10
  ASSERT_EQ(args.size(), 1u) << "start() calls adjust before it arms";
  step(35);  // runs at 10, 21 (10 + 11), 33 (21 + 12); each re-arm calls adjust
  EXPECT_EQ(at, (Ms{10, 21, 33}));
  ASSERT_TRUE(t.reset(5ms));  // at 35: adjust(5) = 5 + 4
  step(10);
  EXPECT_EQ(at, (Ms{10, 21, 33, 44}));
  ASSERT_TRUE(t.run_once_now());  // at 45: no adjust for a forced run, one for the re-arm after it
  poll_now();
  step(10);
  EXPECT_EQ(at, (Ms{10, 21, 33, 44, 45}));
  EXPECT_EQ(args, (std::vector<Nanos>{10ms, 10ms, 10ms, 10ms, 5ms, 5ms, 5ms}));
  step(1);
  EXPECT_EQ(at, (Ms{10, 21, 33, 44, 45, 56})) << "5 + 6 after the forced run";
}

TEST_F(RepeatedTimerManual, AnAdjustedDelayAtOrBelowZeroMeansTheNextPoll) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, record(at), [](Nanos) { return -5ms; });
  ASSERT_TRUE(t.start());
  poll_now();
  EXPECT_EQ(at, (Ms{0}));
  poll_now();
  poll_now();
  EXPECT_EQ(at, (Ms{0, 0, 0})) << "one run per poll: a zero-delay re-arm waits for the next call";
}

TEST_F(RepeatedTimerManual, AnAdjustThatThrowsStopsTheTimerAndReachesTheCaller) {
  int calls = 0;
  int runs = 0;
  RepeatedTimer t(
      e, "t", 10ms, [&] { ++runs; },
      [&](Nanos d) {
        if (++calls == 2) throw std::runtime_error("no delay for you");
        return d;
      });
  ASSERT_TRUE(t.start());
  step(10);  // the run, then the re-arm's adjust throws: the engine counts it, the timer stops
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(t.running());
  EXPECT_EQ(e.stats().callback_errors, 1u);
  step(30);
  EXPECT_EQ(runs, 1);

  calls = 1;
  EXPECT_THROW((void)t.start(), std::runtime_error) << "from start(), adjust's exception reaches the caller";
  EXPECT_FALSE(t.running());
  EXPECT_EQ(e.stats().pending, 0u);
  ASSERT_TRUE(t.start());
  step(10);
  EXPECT_EQ(runs, 2);
}

// ---- Errors ----

TEST(RepeatedTimerErrors, ARefusedScheduleIsRecordedAndStopsTheTimer) {
  EngineOptions o = manual();
  o.max_pending_per_shard = 1;
  Engine e(o);
  int runs = 0;
  RepeatedTimer t(e, "t", 10ms, [&] { ++runs; });
  Timer blocker = e.schedule_after(1h, [] {});
  ASSERT_TRUE(blocker);
  EXPECT_FALSE(t.start());
  EXPECT_EQ(t.last_error(), Status::max_pending_reached);
  EXPECT_FALSE(t.running());
  EXPECT_FALSE(t.run_once_now());
  ASSERT_TRUE(blocker.cancel());
  e.poll(0, advance_clock(1ms));
  ASSERT_TRUE(t.start());
  EXPECT_EQ(t.last_error(), Status::max_pending_reached) << "the most recent failure is kept";

  // Inside a run, the re-arm is refused (the run fills every place first): recorded, and it stops.
  t.stop();
  e.poll(0, advance_clock(1ms));
  std::vector<Timer> blockers;
  RepeatedTimer greedy(e, "greedy", 10ms, [&] {
    for (Timer b; (b = e.schedule_after(1h, [] {}));) blockers.push_back(b);
  });
  ASSERT_TRUE(greedy.start());
  for (int i = 0; i < 10; ++i) e.poll(0, advance_clock(1ms));
  EXPECT_FALSE(greedy.running());
  EXPECT_EQ(greedy.last_error(), Status::max_pending_reached);
  for (Timer& b : blockers) EXPECT_TRUE(b.cancel());
  RepeatedTimer late(e, "late", 10ms, [] {});
  e.stop();
  EXPECT_FALSE(late.run_once_now());
  EXPECT_EQ(late.last_error(), Status::stopped);
  EXPECT_EQ(runs, 0);
}

TEST_F(RepeatedTimerManual, AThrowingRunIsReportedByTheEngineAndTheTimerGoesOn) {
  Ms at;
  RepeatedTimer t(e, "t", 10ms, [&] {
    at.push_back(now_ms());
    if (at.size() == 1) throw std::runtime_error("first run fails");
  });
  ASSERT_TRUE(t.start());
  step(30);
  EXPECT_EQ(at, (Ms{10, 20, 30}));
  EXPECT_EQ(e.stats().callback_errors, 1u);
  EXPECT_TRUE(t.running());
}

// ---- Every transition from inside the timer's own callback ----

TEST_F(RepeatedTimerManual, StopFromInsideItsCallback) {
  auto r = recorded([](RepeatedTimer& t, std::size_t run) {
    if (run == 2) t.stop();
  });
  ASSERT_TRUE(r->timer->start());
  step(50);
  EXPECT_EQ(r->at, (Ms{10, 20}));
  EXPECT_FALSE(r->timer->running());
  EXPECT_EQ(e.stats().pending, 0u);
  ASSERT_TRUE(r->timer->start()) << "a timer stopped from inside starts again";
  step(10);
  EXPECT_EQ(r->at, (Ms{10, 20, 60}));
}

TEST_F(RepeatedTimerManual, StartAndRestartFromInsideItsCallback) {
  bool start_result = false;
  auto r = recorded([&start_result](RepeatedTimer& t, std::size_t run) {
    if (run == 1) start_result = t.start();  // running: a no-op
    if (run == 2) {
      t.stop();
      EXPECT_TRUE(t.start()) << "stop then start from inside: armed from now, once";
    }
    if (run == 3) {
      EXPECT_TRUE(t.restart());
    }
  });
  ASSERT_TRUE(r->timer->start());
  step(45);
  EXPECT_TRUE(start_result);
  EXPECT_EQ(r->at, (Ms{10, 20, 30, 40})) << "each re-arm exactly once";
  EXPECT_EQ(e.stats().pending, 1u);
}

TEST_F(RepeatedTimerManual, ResetFromInsideItsCallbackToAShorterThenALongerTimeout) {
  auto r = recorded([](RepeatedTimer& t, std::size_t run) {
    if (run == 1) {
      EXPECT_TRUE(t.reset(3ms));
    }
    if (run == 3) {
      EXPECT_TRUE(t.reset(25ms));
    }
  });
  ASSERT_TRUE(r->timer->start());
  step(50);
  EXPECT_EQ(r->at, (Ms{10, 13, 16, 41}));
  EXPECT_EQ(r->timer->timeout(), 25ms);
  EXPECT_EQ(e.stats().pending, 1u);
}

TEST_F(RepeatedTimerManual, RunOnceNowFromInsideItsCallbackRunsRightAfterIt) {
  auto r = recorded([](RepeatedTimer& t, std::size_t run) {
    if (run == 1) {
      EXPECT_TRUE(t.run_once_now());
    }
  });
  ASSERT_TRUE(r->timer->start());
  step(10);
  EXPECT_EQ(r->at, (Ms{10}));
  poll_now();
  EXPECT_EQ(r->at, (Ms{10, 10})) << "the forced run comes at the next poll, after this run returned";
  step(20);
  EXPECT_EQ(r->at, (Ms{10, 10, 20, 30}));
  EXPECT_EQ(e.stats().pending, 1u);
}

TEST_F(RepeatedTimerManual, DestroyFromInsideItsCallback) {
  auto r = recorded([](RepeatedTimer& t, std::size_t) {
    t.destroy();
    EXPECT_FALSE(t.start());
    EXPECT_FALSE(t.run_once_now());
  });
  ASSERT_TRUE(r->timer->start());
  step(50);
  EXPECT_EQ(r->at, (Ms{10}));
  EXPECT_FALSE(r->timer->start());
  EXPECT_EQ(e.stats().pending, 0u);
}

TEST_F(RepeatedTimerManual, TheDestructorFromInsideItsCallbackLetsTheRunFinishThenFreesTheCallables) {
  LiveCount live;
  int runs = 0;
  long live_after_destructor = -1;
  std::unique_ptr<RepeatedTimer> t;
  {
    Counted c(&live);
    t = std::make_unique<RepeatedTimer>(e, "t", 10ms, [&, c] {
      ++runs;
      t.reset();  // destroys the timer from inside its own run
      live_after_destructor = live.live;
    });
  }
  ASSERT_TRUE(t->start());
  step(10);
  EXPECT_EQ(runs, 1);
  EXPECT_FALSE(t) << "the destructor did not run";
  EXPECT_EQ(live_after_destructor, 1) << "on_trigger must stay alive until its run returns";
  EXPECT_EQ(live.live, 0) << "on_trigger not destroyed when its run returned";
  step(30);
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(e.stats().pending, 0u);
}

// ---- Threads ----

// Counts runs in on_trigger and any two that overlap. Sequentially consistent throughout: the
// storm's hand-shake below (a flag store, then a read of `inside`) relies on it.
struct Overlap {
  std::atomic<int> inside{0};
  std::atomic<int> started{0};
  std::atomic<int> overlaps{0};
  void enter() {
    if (inside.fetch_add(1) != 0) overlaps.fetch_add(1);
    started.fetch_add(1);
  }
  void leave() { inside.fetch_sub(1); }
};

TEST(RepeatedTimerThreads, ARunThatComesDueDuringAnotherWaitsForItToReturn) {
  // Two pool threads: the forced run is handed to the second while the first still blocks.
  Engine e(fine_tick_workers(1, pool(2)));
  Overlap o;
  Gate gate;
  RepeatedTimer t(e, "t", 1h, [&] {
    o.enter();
    if (o.started.load() == 1) gate.wait();
    o.leave();
  });
  ASSERT_TRUE(t.run_once_now());
  ASSERT_TRUE(eventually([&] { return o.started.load() == 1; }));
  ASSERT_TRUE(t.run_once_now());  // due at once, on another pool thread, while the first blocks
  // Both engine timers fired; the second's task has returned (only the blocked first still executes).
  ASSERT_TRUE(eventually([&] { return e.stats().fired == 2 && e.stats().executing == 1; }));
  EXPECT_EQ(o.started.load(), 1) << "the second run started while the first was in on_trigger";
  gate.open();
  ASSERT_TRUE(eventually([&] { return o.started.load() == 2 && o.inside.load() == 0; }))
      << "the run that waited must come once the first returned";
  EXPECT_EQ(o.overlaps.load(), 0);
  EXPECT_FALSE(t.running());
  t.destroy();
  e.stop();
}

TEST(RepeatedTimerThreads, TheDestructorWaitsForARunInProgressOnAnotherThread) {
  Engine e(fine_tick_workers(1));
  Gate gate;
  std::atomic<bool> started{false};
  std::atomic<bool> finished{false};
  auto t = std::make_unique<RepeatedTimer>(e, "t", 1ms, [&] {
    started.store(true);
    gate.wait();
    finished.store(true);
  });
  ASSERT_TRUE(t->start());
  ASSERT_TRUE(eventually([&] { return started.load(); }));
  std::atomic<bool> returned{false};
  bool finished_at_return = false;
  std::thread destroyer([&] {
    t.reset();
    finished_at_return = finished.load();
    returned.store(true);
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(returned.load()) << "the destructor returned while a run was in on_trigger";
  gate.open();
  destroyer.join();
  EXPECT_TRUE(finished_at_return) << "the destructor returned before the run did";
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 0; }));
  e.stop();
}

// Several threads, and the callback itself, call every transition at random for a while; then
// stop() must hold: the run begun before it (if any) finishes and nothing starts after. Runs never
// overlap throughout. With a thread pool and two shards, so runs can come due on several threads.
void storm(Engine& e, std::uint64_t seed) {
  SCOPED_TRACE(replay_hint(seed));
  Overlap o;
  std::atomic<std::uint64_t> adjusts{0};
  RepeatedTimer* self = nullptr;
  std::atomic<bool> inside_calls{true};
  RepeatedTimer t(
      e, "storm", 300us,
      [&] {
        o.enter();
        const auto busy_until = Clock::now() + 200us;  // a window for another run to come due
        while (Clock::now() < busy_until) {
        }
        const int n = o.started.load(std::memory_order_relaxed);
        if (inside_calls.load()) {
          switch (n % 11) {
            case 3: (void)self->run_once_now(); break;
            case 5: (void)self->reset(Nanos(100'000 * (1 + n % 4))); break;
            case 7: (void)self->restart(); break;
            case 9: self->stop(); break;
            default: break;
          }
        }
        o.leave();
      },
      [&](Nanos d) {
        return d + Nanos(100'000 * static_cast<std::int64_t>(adjusts.fetch_add(1) % 3)) - 200us;
      });
  self = &t;

  constexpr int kThreads = 4;
  const int ops = static_cast<int>(env_u64("TICKWHEEL_REPEATED_OPS", 1000));
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      std::mt19937_64 rng(seed + static_cast<std::uint64_t>(i));
      for (int k = 0; k < ops; ++k) {
        switch (rng() % 12) {
          case 0:
          case 1:
          case 2: (void)t.start(); break;
          case 3: t.stop(); break;
          case 4: (void)t.restart(); break;
          case 5: (void)t.reset(Nanos(100'000 * static_cast<std::int64_t>(1 + rng() % 5))); break;
          case 6:
          case 7: (void)t.run_once_now(); break;
          default: std::this_thread::sleep_for(Nanos(static_cast<std::int64_t>(rng() % 400'000))); break;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  // Once no run is inside after this store, no run can restart the timer from inside any more.
  inside_calls.store(false);
  ASSERT_TRUE(eventually([&] { return o.inside.load() == 0; }));
  EXPECT_GT(o.started.load(), 0) << "the storm never ran the timer";

  t.stop();
  const int at_stop = o.started.load();
  ASSERT_TRUE(eventually([&] { return o.inside.load() == 0; }));
  // Many timeouts: runs would go on if stop() had not held. The one run begun before stop() (past
  // its check, not yet counted) may start at any point of these waits, however late: it is the
  // one the bound allows.
  std::this_thread::sleep_for(10ms);
  EXPECT_LE(o.started.load(), at_stop + 1) << "at most the run already begun may start after stop()";
  EXPECT_TRUE(eventually([&] { return o.inside.load() == 0; }));
  EXPECT_EQ(o.overlaps.load(), 0) << "two runs overlapped";
  EXPECT_FALSE(t.running());
  EXPECT_EQ(t.last_error(), Status::ok);
  EXPECT_EQ(e.stats().callback_errors, 0u);
}

TEST(RepeatedTimerThreads, ConcurrentTransitionsOnWorkersKeepTheInvariants) {
  Engine e(fine_tick_workers(2));
  storm(e, seed_from_env_or_random());
  e.stop();
}

TEST(RepeatedTimerThreads, ConcurrentTransitionsOnAThreadPoolKeepTheInvariants) {
  Engine e(fine_tick_workers(2, pool(2)));
  storm(e, seed_from_env_or_random());
  e.stop();
}

}  // namespace
}  // namespace tickwheel::test
