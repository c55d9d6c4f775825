// The Wheel's pending timers as a whole and one by one: the queries is_pending(), deadline() and
// remaining() in every state a TimerId can name (pending, due but not run yet, firing inside its
// own one-shot callback, a periodic timer between runs, fired, cancelled, stale, default, failed,
// forged, at the horizon); for_each_pending(), which visits each pending timer once with its
// deadline; and clear(), which ends them all without running one. Time is driven by hand.
#include <gtest/gtest.h>

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

// ---------------------------------------------------------------------------------------------
// is_pending(), deadline(), remaining() in every state

TEST(WheelQueries, EveryStateOfAOneShotTimer) {
  Wheel w({.tick = 1ms, .max_pending = 4});
  RunLog log{&w};
  const TimerId pending = w.schedule_after(10ms + 300us, LogRun{&log, 1});
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

  const TimerId cancelled = w.schedule_after(1s, LogRun{&log, 2});
  ASSERT_TRUE(w.cancel(cancelled));
  const TimerId fired = firing;
  const TimerId reused = w.schedule_after(2s, LogRun{&log, 3});  // takes a recycled node
  ASSERT_TRUE(reused);
  ASSERT_TRUE(w.schedule_after(3s, LogRun{&log, 4}));
  ASSERT_TRUE(w.schedule_after(3s, LogRun{&log, 4}));
  const TimerId failed = w.schedule_after(3s, LogRun{&log, 5});
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
  RunLog log{&w};
  const TimerId a = w.schedule_after(2ms, LogRun{&log, 1});
  const TimerId b = w.schedule_after(2ms, LogRun{&log, 2});
  ASSERT_EQ(w.advance(9ms, 1), 1u);
  const TimerId left = w.is_pending(a) ? a : b;
  EXPECT_TRUE(w.is_pending(left));
  EXPECT_EQ(w.deadline(left), 2ms);
  EXPECT_EQ(w.remaining(left), 0ns);
}

TEST(WheelQueries, APeriodicTimerBetweenRunsReadsItsNextRun) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  PeriodicOptions opts;
  opts.initial_delay = 3ms;
  const TimerId id = w.schedule_every(10ms, LogRun{&log, 1}, opts);
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
  RunLog log{&w};
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(w.schedule_after(Nanos(i * 1ms + 1ms), LogRun{&log, 0}));
  tick_to(w, 1s + 10ms);
  const std::uint64_t nodes = w.stats().pool_nodes;
  EXPECT_EQ(w.clear(), 2990u);
  EXPECT_EQ(w.now(), 1s + 10ms) << "time is kept";
  for (int i = 0; i < 3000; ++i) ASSERT_TRUE(w.schedule_after(Nanos(i * 1ms + 1ms), LogRun{&log, 1}));
  EXPECT_EQ(w.stats().pool_nodes, nodes) << "the cleared nodes were reused";
  tick_to(w, 1s + 10ms + 3000ms);
  EXPECT_EQ(log.of(1).size(), 3000u);
  EXPECT_EQ(log.of(1).front(), 1s + 11ms);
}

TEST(WheelClear, AfterAPassCutShortTheWheelIsCaughtUp) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(w.schedule_after(2ms, LogRun{&log, 0}));
  ASSERT_EQ(w.advance(9ms, 3), 3u);
  EXPECT_EQ(w.clear(), 7u);
  const TimerId id = w.schedule_after(1ms, LogRun{&log, 1});
  EXPECT_EQ(w.deadline(id), 10ms);
  EXPECT_EQ(w.next_deadline(), 10ms) << "placed against the present, not the tick the pass stopped at";
  tick_to(w, 10ms);
  EXPECT_EQ(log.of(1), std::vector<Nanos>{10ms});
}

// ---------------------------------------------------------------------------------------------
// for_each_pending()

TEST(WheelForEachPending, VisitsExactlyThePendingTimersWithTheirDeadlines) {
  Wheel w({.tick = 1ms});
  RunLog log{&w};
  std::map<std::uint64_t, Nanos> expected;
  std::mt19937_64 rng(11);
  std::vector<TimerId> ids;
  for (int i = 0; i < 4000; ++i) {
    const Nanos delay(static_cast<Nanos::rep>(rng() % 400'000'000'000) - 1'000'000);
    ids.push_back(w.schedule_after(delay, LogRun{&log, 0}));
  }
  ids.push_back(w.schedule_every(3ms, LogRun{&log, 1}));
  ids.push_back(w.schedule_at(Nanos::max(), LogRun{&log, 2}));
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
