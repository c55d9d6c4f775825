// The Engine's contract: behaviour tests of the multicore tickwheel::Engine, one (or a few) per
// rule of the contract in include/tickwheel/engine.hpp: options and their validation, lazy start,
// which shard and which thread runs a timer, never early, cancel (in transit, in the wheel, fired,
// stale, copies), stop() (idempotent, exactly the timers that neither fired nor were cancelled,
// hand-offs still queued, refused inside a callback), destruction, callbacks that schedule, cancel
// or throw, max_pending_per_shard, the transfer cap, the wait strategies, an idle engine's
// wake-ups, pinning and a simulated binding failure, and the stats counters.
//
// The engine runs on the real steady clock, so these tests never assert a timing figure: they wait
// for an event with a bounded loop (a counter reaching N, or 10 s passing) and then assert on
// counts, identities and orderings. Two devices keep them deterministic: a HoldGate callback that
// holds a shard's worker inside a pass (so nothing on that shard can fire or be transferred while
// the test acts), and a sentinel timer due after a cancelled one on the same shard (ticks run in
// order, so once the sentinel ran the cancelled timer had its chance to run, wrongly).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <latch>
#include <memory>
#include <ostream>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Options, built by assignment: EngineOptions has members without default initializers (cpus,
// log), so a designated initializer that leaves them out trips -Wmissing-field-initializers.
struct Opts {
  EngineOptions o;
  explicit Opts(std::size_t shards, bool pin = false) : o(workers(shards)) { o.pin_workers = pin; }
  Opts& tick(Nanos t) {
    o.tick = t;
    return *this;
  }
  Opts& transfer_cap(std::size_t n) {
    o.transfer_cap = n;
    return *this;
  }
  Opts& max_pending(std::size_t n) {
    o.max_pending_per_shard = n;
    return *this;
  }
  Opts& wait(WaitStrategy w) {
    o.wait = w;
    return *this;
  }
  Opts& cpus(std::vector<unsigned> c) {
    o.cpus = std::move(c);
    return *this;
  }
  Opts& log(std::function<void(std::string_view)> f) {
    o.log = std::move(f);
    return *this;
  }
  operator EngineOptions() const { return o; }  // NOLINT: implicit by design
};

// ---------------------------------------------------------------------------------------------
// Construction and options

TEST(EngineOptions, DefaultsBuildAnIdleEngine) {
  Engine e;
  EXPECT_GE(e.shard_count(), 1u);
  EXPECT_EQ(e.tick(), 1ms);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.shards.size(), e.shard_count());
  EXPECT_EQ(s.scheduled, 0u);
  EXPECT_EQ(s.pending, 0u);
}

TEST(EngineOptions, ExplicitShardCountAndTick) {
  Engine e(Opts(3).tick(250us));
  EXPECT_EQ(e.shard_count(), 3u);
  EXPECT_EQ(e.tick(), 250us);
  EXPECT_EQ(e.stats().shards.size(), 3u);
}

// The constructor must throw std::invalid_argument whose message names the option and its value.
void expect_rejected(EngineOptions opts, const std::string& option, const std::string& value) {
  try {
    Engine e(std::move(opts));
    ADD_FAILURE() << "constructor accepted a bad " << option << " (" << value << ")";
  } catch (const std::invalid_argument& err) {
    const std::string what = err.what();
    EXPECT_NE(what.find(option), std::string::npos) << "message does not name " << option << ": " << what;
    EXPECT_NE(what.find(value), std::string::npos)
        << "message does not name the value " << value << ": " << what;
  }
}

TEST(EngineOptions, RejectsBadValuesNamingThem) {
  expect_rejected(Opts(1).tick(0ns), "tick", "0");
  expect_rejected(Opts(1).tick(-1ms), "tick", "-1000000");
  expect_rejected(Opts(1).tick(999ns), "tick", "999");
  expect_rejected(Opts(1).tick(1h + 1ns), "tick", "3600000000001");
  expect_rejected(Opts(1).transfer_cap(0), "transfer_cap", "0");
}

TEST(EngineOptions, AcceptsTheTickBoundaries) {
  Engine lo(Opts(1).tick(1us));
  EXPECT_EQ(lo.tick(), 1us);
  Engine hi(Opts(1).tick(1h));
  EXPECT_EQ(hi.tick(), 1h);
  Engine cap1(Opts(1).transfer_cap(1));
  EXPECT_EQ(cap1.shard_count(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Lifecycle: lazy start, start(), stop(), destruction

TEST(EngineLifecycle, StartsLazilyOnFirstSchedule) {
  Tally t(1);
  Engine e(workers(2));
  std::this_thread::sleep_for(20ms);  // a worker started by the constructor would have passed by now
  EXPECT_EQ(e.stats().passes, 0u) << "the constructor started the workers";
  EXPECT_EQ(e.stats().wakeups, 0u);

  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, 0)));  // no start() anywhere in this test
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_EQ(t.ran[0].load(), 1);
  EXPECT_GT(e.stats().passes, 0u);
}

TEST(EngineLifecycle, StartIsIdempotent) {
  Tally t(2);
  Engine e(workers(2));
  e.start();
  e.start();
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, Probe(&t, 0)));
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, Probe(&t, 1)));
  ASSERT_TRUE(t.wait_runs(2));
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineLifecycle, StopBeforeStartReturnsNothingAndRefusesSchedules) {
  Tally t(1);
  Engine e(workers(2));
  EXPECT_TRUE(e.stop().empty());
  Timer x = e.schedule_after(0ns, Probe(&t, 0));
  EXPECT_FALSE(x);
  EXPECT_EQ(x.status(), Status::stopped);
  EXPECT_EQ(t.destroyed[0].load(), 1) << "the refused callable was not destroyed exactly once";
}

TEST(EngineLifecycle, StopIsIdempotentAndLaterSchedulesFailWithStopped) {
  Tally t(8);
  Engine e(workers(2));
  std::vector<Timer> handles;
  for (std::size_t i = 0; i < 4; ++i) {
    handles.push_back(e.schedule_after_on(i % 2, 1h, Probe(&t, i)));
    ASSERT_TRUE(handles.back());
  }
  std::vector<Timer> first = e.stop();
  EXPECT_EQ(first.size(), 4u);
  EXPECT_TRUE(e.stop().empty()) << "a second stop() returned timers again";
  EXPECT_TRUE(e.stop().empty());

  Timer a = e.schedule_after(0ns, Probe(&t, 4));
  Timer b = e.schedule_after_on(1, 0ns, Probe(&t, 5));
  Timer c = e.schedule_at(e.now(), Probe(&t, 6));
  for (const Timer* x : {&a, &b, &c}) {
    EXPECT_FALSE(*x);
    EXPECT_EQ(x->status(), Status::stopped);
  }
  for (std::size_t i = 4; i < 7; ++i) EXPECT_EQ(t.destroyed[i].load(), 1) << "refused callable " << i;
  EXPECT_EQ(ids_of_returned(first, handles), (std::set<std::size_t>{0, 1, 2, 3}));
}

// ShardStats::rejected: "schedules refused (max_pending_per_shard, stopped, ...)".
TEST(EngineLifecycle, SchedulesRefusedAfterStopAreCountedAsRejected) {
  Tally t(3);
  Engine e(workers(2));
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, Probe(&t, 0)));
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_TRUE(e.stop().empty());
  const std::uint64_t before = e.stats().rejected;
  EXPECT_EQ(e.schedule_after(0ns, Probe(&t, 1)).status(), Status::stopped);
  EXPECT_EQ(e.schedule_after_on(1, 0ns, Probe(&t, 2)).status(), Status::stopped);
  EXPECT_EQ(e.stats().rejected, before + 2) << "schedules refused after stop() are not counted";
  EXPECT_EQ(e.stats().shards[1].rejected, 1u) << "a refused schedule_after_on(1) is not counted on shard 1";
}

TEST(EngineLifecycle, StopReturnsExactlyTheTimersThatNeitherFiredNorWereCancelled) {
  constexpr std::size_t kFire = 10, kCancel = 10, kKeep = 10, kN = kFire + kCancel + kKeep;
  Tally t(kN);
  auto e = std::make_unique<Engine>(workers(2));
  std::vector<Timer> handles;
  for (std::size_t i = 0; i < kN; ++i) {
    const Nanos delay = i < kFire ? Nanos(0) : Nanos(1h);
    handles.push_back(e->schedule_after_on(i % 2, delay, Probe(&t, i)));
    ASSERT_TRUE(handles.back()) << i;
    EXPECT_EQ(handles.back().shard(), i % 2);
  }
  ASSERT_TRUE(t.wait_runs(kFire));
  for (std::size_t i = kFire; i < kFire + kCancel; ++i) EXPECT_TRUE(handles[i].cancel()) << i;

  std::vector<Timer> returned = e->stop();
  ASSERT_EQ(returned.size(), kKeep);
  for (const Timer& r : returned) {
    EXPECT_TRUE(r);
    EXPECT_FALSE(r.cancelled()) << "a returned timer must still be pending";
    EXPECT_FALSE(r.expired()) << "a returned timer must still be pending";
  }
  std::set<std::size_t> expected;
  for (std::size_t i = kFire + kCancel; i < kN; ++i) expected.insert(i);
  EXPECT_EQ(ids_of_returned(returned, handles), expected);
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(t.ran[i].load(), i < kFire ? 1 : 0) << i;

  e.reset();  // destruction destroys the callables of the cancelled timers, if stop() did not
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(t.destroyed[i].load(), 1) << "callable " << i;
}

// Schedules timers 0 .. n-1 of `t` an hour out on e, then stops it: the timers stop() returns,
// which must be all n, still pending.
std::vector<Timer> stop_with_pending(Engine& e, Tally& t, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) EXPECT_TRUE(e.schedule_after(1h, Probe(&t, i))) << i;
  std::vector<Timer> returned = e.stop();
  EXPECT_EQ(returned.size(), n);
  return returned;
}

TEST(EngineLifecycle, ReturnedTimersAreCancellableOnceAndReportIt) {
  Tally t(3);
  Engine e(workers(1));
  std::vector<Timer> returned = stop_with_pending(e, t, 3);
  ASSERT_EQ(returned.size(), 3u);
  Timer copy = returned[0];
  EXPECT_TRUE(copy.cancel());
  EXPECT_TRUE(returned[0].cancelled());
  EXPECT_FALSE(returned[0].expired());
  EXPECT_FALSE(returned[0].cancel()) << "the same timer cancelled twice, through a copy";
  EXPECT_FALSE(copy.cancel());
}

// engine.hpp, stop(): the returned timers are "still pending: cancel() on one returns true and
// destroys its callable" (so whatever the callable owns is released then, not at destruction).
TEST(EngineLifecycle, CancelOfAReturnedTimerDestroysItsCallable) {
  Tally t(3);
  Engine e(workers(1));
  std::vector<Timer> returned = stop_with_pending(e, t, 3);
  ASSERT_EQ(returned.size(), 3u);
  EXPECT_TRUE(returned[0].cancel());
  int destroyed = 0;
  for (std::size_t i = 0; i < 3; ++i) destroyed += t.destroyed[i].load();
  EXPECT_EQ(destroyed, 1) << "cancel() of one returned timer must destroy exactly its callable";
}

// Hand-offs still in the queue when stop() runs are returned too. The worker is held inside a
// callback while the timers are handed over and stop() is called, so none of them can have been
// transferred into the wheel before stop() began. They are an hour out: should the gate open
// before stop() has told the worker (stop() marks the engine stopped first, the shards after), a
// pass may transfer them, and they are still pending, and returned.
TEST(EngineLifecycle, StopReturnsHandOffsNotYetTransferred) {
  constexpr std::size_t kQueued = 100, kProbes = 100'000;
  Tally t(kQueued + kProbes);
  HoldGate gate;
  Engine e(workers(1));
  ReleaseOnExit guard{gate};
  ASSERT_TRUE(e.schedule_after(0ns, [g = &gate] { g->pass(); }));
  ASSERT_TRUE(gate.wait_entered());
  std::vector<Timer> handles(kQueued + kProbes);
  for (std::size_t i = 0; i < kQueued; ++i) {
    handles[i] = e.schedule_after(1h, Probe(&t, i));
    ASSERT_TRUE(handles[i]) << i;
  }
  std::vector<Timer> returned;
  std::thread stopper([&] { returned = e.stop(); });
  // The gate is opened by another thread: a probe whose hand-off races stop()'s store of stopped_
  // waits (settle_late) until stop() has drained the queues, which it does after joining this very
  // worker, so this thread cannot be the one to open it. Normally the probes end first; the bound
  // only frees that race (no timing is asserted).
  std::atomic<bool> probing{true};
  std::thread opener([&] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (probing.load() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    gate.release();
  });
  // stop() has begun once a schedule fails with Status::stopped; each one that still succeeded
  // before that is one more timer to account for.
  std::size_t probe = kQueued;
  Status last = Status::ok;
  for (; probe < kQueued + kProbes; ++probe) {
    handles[probe] = e.schedule_after(0ns, Probe(&t, probe));
    last = handles[probe].status();
    if (!handles[probe]) break;
    std::this_thread::sleep_for(50us);
  }
  probing.store(false);
  opener.join();
  stopper.join();
  ASSERT_LT(probe, kQueued + kProbes) << "schedules kept succeeding after stop() was called";
  EXPECT_EQ(last, Status::stopped);

  std::set<std::size_t> ids = ids_of_returned(returned, handles);
  std::size_t scheduled = 0;
  for (std::size_t i = 0; i <= probe; ++i) {
    if (!handles[i]) continue;
    ++scheduled;
    const int ran = t.ran[i].load();
    const bool back = ids.count(i) != 0;
    EXPECT_EQ(ran + (back ? 1 : 0), 1) << "timer " << i << " ran " << ran << " time(s), returned: " << back;
  }
  EXPECT_EQ(t.runs.load() + ids.size(), scheduled);
  for (std::size_t i = 0; i < kQueued; ++i) {
    EXPECT_EQ(ids.count(i), 1u) << "hand-off " << i
                                << " was queued behind a held worker and must be returned by stop()";
  }
}

TEST(EngineLifecycle, DestructionStopsAndDestroysEveryCallable) {
  constexpr std::size_t kN = 100;
  Tally t(kN);
  {
    Engine e(workers(2));
    for (std::size_t i = 0; i < kN; ++i) {
      ASSERT_TRUE(e.schedule_after_on(i % 2, i < kN / 2 ? Nanos(0) : Nanos(1h), Probe(&t, i)));
    }
    ASSERT_TRUE(t.wait_runs(kN / 2));
  }
  for (std::size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(t.ran[i].load(), i < kN / 2 ? 1 : 0) << i;
    EXPECT_EQ(t.destroyed[i].load(), 1) << "callable " << i;
  }
}

TEST(EngineLifecycle, DestructionAfterStopDestroysReturnedCallables) {
  Tally t(5);
  {
    Engine e(workers(1));
    std::vector<Timer> returned = stop_with_pending(e, t, 5);
    for (std::size_t i = 0; i < 5; ++i)
      EXPECT_EQ(t.destroyed[i].load(), 0) << "returned timers must be pending";
  }  // the returned handles are never cancelled: the engine's destructor owns the callables
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(t.destroyed[i].load(), 1) << "callable " << i;
}

// The destructor finds every pending callable whichever pool its node came from: a shard's own,
// or the overflow pool of each thread that scheduled past the shard's hand-out reserve (1 Ki nodes
// at start; caller-driven, no poll refills it). A third are cancelled first, so that recycled and
// linked nodes lie side by side in every pool, and the deadlines are spread at random over an hour
// so that the lists' order is not the pools' address order.
TEST(EngineLifecycle, DestructionDestroysTheCallablesOfEveryPool) {
  constexpr std::size_t kPerThread = 12'000;
  Tally t(2 * kPerThread);
  {
    EngineOptions o;
    o.shards = 2;
    o.threads = Threads::manual;
    Engine e(o);
    std::vector<Timer> timers(2 * kPerThread);
    auto schedule = [&](std::size_t first) {
      for (std::size_t i = first; i < first + kPerThread; ++i) {
        const Nanos delay = 1h + Nanos(static_cast<std::int64_t>(i * 2'654'435'761U % 3'600'000) * 1'000'000);
        timers[i] = e.schedule_after_on(i % 2, delay, Probe(&t, i));
      }
    };
    std::thread other(schedule, kPerThread);
    schedule(0);
    other.join();
    for (const Timer& timer : timers) ASSERT_TRUE(timer);
    for (std::size_t shard = 0; shard < 2; ++shard) EXPECT_EQ(e.poll(shard), 0u);  // into the wheels
    for (std::size_t i = 0; i < timers.size(); i += 3) EXPECT_TRUE(timers[i].cancel());
  }
  for (std::size_t i = 0; i < t.ran.size(); ++i) {
    EXPECT_EQ(t.ran[i].load(), 0) << i;
    ASSERT_EQ(t.destroyed[i].load(), 1) << "callable " << i;
  }
}

// The destructor looks for pending callables only if one with a destructor was ever stored: the
// owner's inline schedule and a periodic schedule from another thread must each say so.
TEST(EngineLifecycle, DestructionFindsTheOwnersCallableAmongTriviallyDestructibleOnes) {
  Tally t(1);
  {
    EngineOptions o;
    o.shards = 1;
    o.threads = Threads::manual;
    Engine e(o);
    e.own_shard(0);
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(e.schedule_after(1h, [] {}));
    ASSERT_TRUE(e.schedule_after(1h, Probe(&t, 0)));
    e.release_shard(0);
  }
  EXPECT_EQ(t.ran[0].load(), 0);
  EXPECT_EQ(t.destroyed[0].load(), 1);
}

TEST(EngineLifecycle, DestructionFindsAPeriodicCallableAmongTriviallyDestructibleOnes) {
  Tally t(1);
  {
    Engine e(workers(1));
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(e.schedule_after(1h, [] {}));
    ASSERT_TRUE(e.schedule_every(1h, Probe(&t, 0)));
  }
  EXPECT_EQ(t.ran[0].load(), 0);
  EXPECT_EQ(t.destroyed[0].load(), 1);
}

// ---------------------------------------------------------------------------------------------
// Scheduling: once, never early, schedule_at, shards and threads

TEST(EngineSchedule, ScheduleAfterRunsExactlyOnce) {
  Tally t(2);
  Engine e(workers(2));
  Timer a = e.schedule_after(0ns, Probe(&t, 0));
  Timer b = e.schedule_after(2ms, Probe(&t, 1));
  ASSERT_TRUE(a);
  ASSERT_TRUE(b);
  EXPECT_EQ(a.status(), Status::ok);
  ASSERT_TRUE(t.wait_runs(2));
  EXPECT_TRUE(a.expired());
  EXPECT_FALSE(a.cancelled());
  EXPECT_TRUE(e.stop().empty());
  EXPECT_EQ(t.ran[0].load(), 1);
  EXPECT_EQ(t.ran[1].load(), 1);
  EXPECT_EQ(t.destroyed[0].load(), 1);
  EXPECT_EQ(t.destroyed[1].load(), 1);
}

// Deadlines on and around tick boundaries and sub-tick delays: each timer's callback starts no
// earlier than (the clock read before its schedule) + delay, a lower bound of its real deadline.
void expect_never_early(EngineOptions opts) {
  std::vector<Nanos> delays = {0ns, 1ns, 999us, 1ms, 1ms + 1ns, 1500us, 2ms - 1ns, 2ms, 3333us, -5ms};
  for (int ms = 0; ms <= 40; ms += 2) delays.push_back(Nanos(std::chrono::milliseconds(ms)) + 123us);
  const std::size_t n = delays.size() * 2;
  Tally t(n);
  Engine e(std::move(opts));
  for (std::size_t i = 0; i < n; ++i) {
    const Nanos d = delays[i % delays.size()];
    t.due_ns[i] = now_ns() + std::max<std::int64_t>(d.count(), 0);
    Timer x = i % 3 == 0 ? e.schedule_after(d, Probe(&t, i))
                         : e.schedule_after_on(i % e.shard_count(), d, Probe(&t, i));
    ASSERT_TRUE(x) << i;
  }
  ASSERT_TRUE(t.wait_runs(n));
  for (std::size_t i = 0; i < n; ++i) {
    EXPECT_GE(t.fired_ns[i], t.due_ns[i])
        << "timer " << i << " (delay " << delays[i % delays.size()].count() << "ns) fired "
        << (t.due_ns[i] - t.fired_ns[i]) << "ns before its deadline";
  }
  EXPECT_TRUE(e.stop().empty());
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(t.ran[i].load(), 1) << i;
}

TEST(EngineSchedule, NeverFiresBeforeItsDeadline) { expect_never_early(workers(2)); }
TEST(EngineSchedule, NeverFiresBeforeItsDeadlineAtAFineTick) { expect_never_early(Opts(2).tick(100us)); }

TEST(EngineSchedule, ScheduleAtATimePoint) {
  Tally t(3);
  Engine e(workers(2));
  const Nanos deadline = e.now() + 15ms;
  t.due_ns[0] = deadline.count();
  std::vector<Timer> handles;
  handles.push_back(e.schedule_at(deadline, Probe(&t, 0)));
  handles.push_back(e.schedule_at(e.now() - 1s, Probe(&t, 1)));  // in the past: runs at once
  handles.push_back(e.schedule_at(Nanos::max(), Probe(&t, 2)));  // clamped, never due
  for (const Timer& h : handles) ASSERT_TRUE(h);
  ASSERT_TRUE(t.wait_runs(2));
  EXPECT_GE(t.fired_ns[0], t.due_ns[0]) << "fired " << (t.due_ns[0] - t.fired_ns[0]) << "ns early";
  std::vector<Timer> returned = e.stop();
  EXPECT_EQ(ids_of_returned(returned, handles), std::set<std::size_t>{2});
  EXPECT_EQ(t.ran[0].load(), 1);
  EXPECT_EQ(t.ran[1].load(), 1);
}

TEST(EngineSchedule, ExtremeDelaysSaturateInsteadOfOverflowing) {
  Tally t(3);
  Engine e(workers(1));
  std::vector<Timer> handles;
  handles.push_back(e.schedule_after(Nanos::max(), Probe(&t, 0)));
  handles.push_back(e.schedule_after(Nanos::max() - 1ns, Probe(&t, 1)));
  handles.push_back(e.schedule_after(Nanos::min(), Probe(&t, 2)));  // far in the past: runs at once
  for (const Timer& h : handles) ASSERT_TRUE(h);
  ASSERT_TRUE(t.wait_runs(1));
  std::vector<Timer> returned = e.stop();
  EXPECT_EQ(ids_of_returned(returned, handles), (std::set<std::size_t>{0, 1}));
  EXPECT_EQ(t.ran[2].load(), 1);
}

TEST(EngineSchedule, ScheduleOnRunsOnThatShardsWorker) {
  constexpr std::size_t kShards = 3, kPer = 6;
  Tally t(kShards * kPer);
  Engine e(workers(kShards));
  for (std::size_t i = 0; i < kShards * kPer; ++i) {
    Timer x = e.schedule_after_on(i % kShards, Nanos(std::chrono::milliseconds(i % 4)), Probe(&t, i));
    ASSERT_TRUE(x);
    EXPECT_EQ(x.shard(), i % kShards);
  }
  ASSERT_TRUE(t.wait_runs(kShards * kPer));
  std::set<std::thread::id> workers;
  for (std::size_t s = 0; s < kShards; ++s) {
    for (std::size_t i = s; i < kShards * kPer; i += kShards) {
      EXPECT_EQ(t.thread[i], t.thread[s]) << "timers of shard " << s << " ran on different threads";
    }
    EXPECT_NE(t.thread[s], std::this_thread::get_id()) << "a timer ran on the scheduling thread";
    workers.insert(t.thread[s]);
  }
  EXPECT_EQ(workers.size(), kShards) << "two shards share a worker thread";
}

TEST(EngineSchedule, ScheduleOnAMissingShardFails) {
  Tally t(3);
  Engine e(workers(2));
  Timer a = e.schedule_after_on(e.shard_count(), 0ns, Probe(&t, 0));
  Timer b = e.schedule_after_on(e.shard_count() + 1000, 0ns, Probe(&t, 1));
  for (const Timer* x : {&a, &b}) {
    EXPECT_FALSE(*x);
    EXPECT_EQ(x->status(), Status::no_such_shard);
    EXPECT_EQ(x->shard(), 0u);
  }
  EXPECT_EQ(t.destroyed[0].load(), 1);
  EXPECT_EQ(t.destroyed[1].load(), 1);
  Timer any = e.schedule_after_on(Engine::kAnyShard, 0ns, Probe(&t, 2));  // kAnyShard is "the caller's"
  ASSERT_TRUE(any);
  EXPECT_LT(any.shard(), e.shard_count());
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_EQ(t.ran[0].load() + t.ran[1].load(), 0);
}

// "a shard assigned round robin to the thread on its first schedule and kept". Each thread
// schedules kPer timers; `together` keeps every thread alive until all have scheduled, so no two
// of them share a thread id.
void spread_threads_over_shards(bool together) {
  constexpr std::size_t kShards = 2, kThreads = 4, kPer = 20;
  Tally t(kThreads * kPer);
  Engine e(workers(kShards));
  std::vector<std::size_t> first_shard(kThreads, 0);
  std::vector<int> moved(kThreads, 0);
  std::latch all_scheduled(kThreads);
  auto body = [&](std::size_t th) {
    for (std::size_t k = 0; k < kPer; ++k) {
      Timer x = e.schedule_after(1h, Probe(&t, th * kPer + k));
      if (k == 0) first_shard[th] = x.shard();
      if (!x || x.shard() != first_shard[th]) ++moved[th];
    }
    if (together) all_scheduled.arrive_and_wait();
  };
  std::vector<std::thread> threads;
  for (std::size_t th = 0; th < kThreads; ++th) {
    threads.emplace_back(body, th);
    if (!together) threads.back().join();  // the next thread may get this one's id
  }
  if (together) {
    for (std::thread& th : threads) th.join();
  }
  std::vector<std::size_t> per_shard(kShards, 0);
  for (std::size_t th = 0; th < kThreads; ++th) {
    EXPECT_EQ(moved[th], 0) << "thread " << th << "'s schedules did not all go to one shard";
    ASSERT_LT(first_shard[th], kShards);
    ++per_shard[first_shard[th]];
  }
  for (std::size_t s = 0; s < kShards; ++s) {
    EXPECT_EQ(per_shard[s], kThreads / kShards)
        << "the " << kThreads << " threads' first schedules did not go round robin over the shards";
  }
  EXPECT_EQ(e.stop().size(), kThreads * kPer);
}

TEST(EngineSchedule, AThreadKeepsItsShardAndLiveThreadsGoRoundRobin) { spread_threads_over_shards(true); }
// Threads started one after another, each joined before the next starts (as a pool that
// replaces its threads would): every one is a new thread making its first schedule.
TEST(EngineSchedule, ThreadsStartedOneAfterAnotherGoRoundRobin) { spread_threads_over_shards(false); }

// ---------------------------------------------------------------------------------------------
// Timer handles and cancel

TEST(EngineTimer, DefaultTimerNamesNothing) {
  Timer t;
  EXPECT_FALSE(t);
  EXPECT_EQ(t.status(), Status::no_timer);
  EXPECT_FALSE(t.cancel());
  EXPECT_FALSE(t.cancelled());
  EXPECT_FALSE(t.expired());
  EXPECT_EQ(t.shard(), 0u);
}

// Cancel while the timer is still in the hand-off queue: the worker is held, so it cannot have
// been transferred, let alone fired.
TEST(EngineCancel, InTransitBeforeItFires) {
  Tally t(2);
  HoldGate gate;
  Engine e(workers(1));
  ReleaseOnExit guard{gate};
  ASSERT_TRUE(e.schedule_after(0ns, [g = &gate] { g->pass(); }));
  ASSERT_TRUE(gate.wait_entered());
  Timer x = e.schedule_after(0ns, Probe(&t, 0));
  ASSERT_TRUE(x);
  EXPECT_FALSE(x.cancelled());
  EXPECT_TRUE(x.cancel());
  EXPECT_TRUE(x.cancelled());
  EXPECT_FALSE(x.expired());
  EXPECT_FALSE(x.cancel()) << "second cancel";
  gate.release();
  ASSERT_TRUE(e.schedule_after(2ms, Probe(&t, 1)));  // the sentinel: due after x, same shard
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_EQ(t.ran[0].load(), 0) << "a cancelled timer ran";
  EXPECT_EQ(t.ran[1].load(), 1);
  ASSERT_TRUE(eventually([&] { return t.destroyed[0].load() == 1; }))
      << "the cancelled timer's callable was never destroyed";
  EXPECT_TRUE(e.stop().empty());
  EXPECT_EQ(t.destroyed[0].load(), 1);
}

// Cancel once the timer sits in the wheel, overdue, while the worker is held inside a callback of
// the same pass that transferred it.
TEST(EngineCancel, InTheWheelWhileOverdue) {
  Tally t(2);
  HoldGate gate;
  Engine e(workers(1));
  ReleaseOnExit guard{gate};
  // Both deadlines from one reading, so that x stays 5 ms behind the gate however long this
  // thread stalls between the two calls.
  const Nanos t0 = e.now();
  Timer x = e.schedule_at(t0 + 5ms, Probe(&t, 0));
  ASSERT_TRUE(x);
  ASSERT_TRUE(e.schedule_at(t0, [g = &gate] { g->pass(); }));  // queued behind x: same pass
  ASSERT_TRUE(gate.wait_entered());
  std::this_thread::sleep_for(10ms);  // x is now overdue (only ordering is asserted, not time)
  EXPECT_TRUE(x.cancel());
  EXPECT_FALSE(x.cancel());
  EXPECT_TRUE(x.cancelled());
  EXPECT_FALSE(x.expired());
  gate.release();
  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, 1)));  // its tick is after x's
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_EQ(t.ran[0].load(), 0) << "a cancelled timer ran";
  EXPECT_TRUE(e.stop().empty());
  EXPECT_EQ(t.destroyed[0].load(), 1);
}

TEST(EngineCancel, FarTimerInTheWheelIsUnlinkedOnTheNextPass) {
  Tally t(2);
  Engine e(workers(1));
  Timer x = e.schedule_after(1h, Probe(&t, 0));
  ASSERT_TRUE(x);
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 1; })) << "never transferred";
  EXPECT_TRUE(x.cancel());
  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, 1)));  // wakes the worker, whose pass drains cancels
  ASSERT_TRUE(t.wait_runs(1));
  ASSERT_TRUE(eventually([&] {
    const EngineStats s = e.stats();
    return s.pending == 0 && s.cancelled == 1;
  })) << "pending "
      << e.stats().pending << ", cancelled " << e.stats().cancelled;
  EXPECT_EQ(t.destroyed[0].load(), 1);
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineCancel, AfterItFiredIsFalse) {
  Tally t(1);
  Engine e(workers(1));
  Timer x = e.schedule_after(0ns, Probe(&t, 0));
  ASSERT_TRUE(x);
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_TRUE(x.expired());  // nothing has been scheduled since, so its node is not reused
  EXPECT_FALSE(x.cancelled());
  EXPECT_FALSE(x.cancel());
  EXPECT_TRUE(x.expired());
  EXPECT_FALSE(x.cancelled());
}

TEST(EngineCancel, ThroughACopyOfTheHandle) {
  Tally t(1);
  Engine e(workers(1));
  Timer x = e.schedule_after(1h, Probe(&t, 0));
  Timer y = x;
  EXPECT_TRUE(y.cancel());
  EXPECT_TRUE(x.cancelled());
  EXPECT_FALSE(x.cancel());
  EXPECT_TRUE(e.stop().empty());
}

// A stale handle (its timer fired, its node possibly reused by a later timer) cancels nothing.
TEST(EngineCancel, StaleHandleTouchesNoOtherTimer) {
  constexpr std::size_t kLater = 20'000;
  Tally t(1 + kLater);
  Engine e(workers(1));
  Timer old = e.schedule_after(0ns, Probe(&t, 0));
  ASSERT_TRUE(t.wait_runs(1));
  ASSERT_TRUE(eventually([&] { return t.destroyed[0].load() == 1; }));
  for (std::size_t i = 1; i <= kLater; ++i) ASSERT_TRUE(e.schedule_after(1h, Probe(&t, i)));
  EXPECT_FALSE(old.cancel());
  EXPECT_FALSE(old.cancel());
  std::vector<Timer> returned = e.stop();
  EXPECT_EQ(returned.size(), kLater) << "a stale cancel removed another timer";
  for (Timer& r : returned) EXPECT_TRUE(r.cancel());
}

TEST(EngineCancel, NeverWakesASleepingWorker) {
  constexpr std::size_t kN = 200;
  Tally t(kN + 1);
  Engine e(Opts(1).wait(WaitStrategy::sleep));
  std::vector<Timer> timers;
  for (std::size_t i = 0; i < kN; ++i) timers.push_back(e.schedule_after(1h, Probe(&t, i)));
  // Some of these may still sit in the hand-off queue (a later deadline does not wake a sleeping
  // worker); cancels of those are in transit, of the others in the wheel. Either way no wake.
  std::this_thread::sleep_for(20ms);  // let the worker settle into its wait
  const EngineStats before = e.stats();
  for (Timer& x : timers) {
    EXPECT_TRUE(x.cancel());
    std::this_thread::sleep_for(200us);  // spaced, so that waking cancels could not coalesce
  }
  std::this_thread::sleep_for(20ms);
  const EngineStats after = e.stats();
  EXPECT_LT(after.passes - before.passes, 10u) << kN << " cancels woke the worker";
  EXPECT_LT(after.wakeups - before.wakeups, 10u) << kN << " cancels woke the worker";
  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, kN)));
  ASSERT_TRUE(t.wait_runs(1));
  ASSERT_TRUE(eventually([&] { return e.stats().cancelled == kN; })) << e.stats().cancelled;
  for (std::size_t i = 0; i < kN; ++i) EXPECT_EQ(t.ran[i].load(), 0);
  EXPECT_TRUE(e.stop().empty());
}

// A callback that cancels and schedules while stop() is joining its worker: stop() holds its
// mutex across the join, so neither call may take it from the worker. Both must return (the
// cancel wins; the schedule, begun after stop(), is refused), and so must stop().
TEST(EngineLifecycle, CallbacksThatCancelAndScheduleWhileStopJoinsThemDoNotDeadlock) {
  Engine e(Opts(2));
  struct State {
    Engine* e = nullptr;
    Timer victim;
    std::atomic<bool> entered{false}, cancelled{false};
    std::size_t probes = 0;
    Status scheduled = Status::no_timer;
  } st;
  st.e = &e;
  st.victim = e.schedule_after_on(0, 1h, [] {});
  ASSERT_TRUE(st.victim);
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, [s = &st] {
    s->entered.store(true);
    // stop() has begun once a schedule is refused. Probing from the worker never blocks: its own
    // shard's schedules link straight into its wheel (those returned by stop() too).
    const auto until = Clock::now() + 10s;
    while (s->e->schedule_after_on(0, 1h, [] {}).status() != Status::stopped && Clock::now() < until) {
      ++s->probes;
      std::this_thread::yield();
    }
    s->cancelled.store(s->victim.cancel());
    s->scheduled = s->e->schedule_after_on(1, 1h, [] {}).status();
  }));
  ASSERT_TRUE(eventually([&] { return st.entered.load(); }));
  std::atomic<bool> stopped{false};
  std::vector<Timer> left;
  std::thread stopper([&] {
    left = e.stop();
    stopped.store(true);
  });
  if (!eventually([&] { return stopped.load(); }, 20s)) {
    std::fprintf(stderr, "stop() deadlocked with a callback that cancels and schedules\n");
    std::abort();  // the stopper thread cannot be joined
  }
  stopper.join();
  EXPECT_TRUE(st.cancelled.load());
  EXPECT_EQ(st.scheduled, Status::stopped);
  EXPECT_EQ(left.size(), st.probes) << "the victim was cancelled: only the probes are left";
}

// The bound on what a sleeping worker leaves in its queues: a thread that keeps scheduling far
// timers and cancelling them (idle timeouts re-armed on every message) nudges the worker once per
// 4096 posts, so the cancelled nodes are recycled long before the 1 h deadline would wake it.
TEST(EngineCancel, ABacklogOfCancelsIsDrainedWithoutWaitingForTheDeadline) {
  constexpr std::size_t kN = 40'000;
  Engine e(Opts(1).wait(WaitStrategy::sleep));
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 1; }));
  for (std::size_t i = 0; i < kN; ++i) {
    Timer t = e.schedule_after(1h, [] {});
    ASSERT_TRUE(t);
    ASSERT_TRUE(t.cancel());
  }
  // Nothing more is posted: only the nudges already sent can get the worker to drain.
  EXPECT_TRUE(eventually([&] { return e.stats().cancelled >= kN - 2 * 4096; }))
      << "cancelled " << e.stats().cancelled << " of " << kN << ", queue " << e.stats().queue_depth;
}

// "woken early only when a producer hands over a deadline earlier than the worker's planned
// wake-up": later hand-offs wait in the queue, and stop() returns them all the same.
TEST(EngineWait, LaterHandOffsDoNotWakeASleepingWorker) {
  constexpr std::size_t kN = 100;
  Tally t(kN + 1);
  Engine e(Opts(1).wait(WaitStrategy::sleep));
  ASSERT_TRUE(e.schedule_after(1h, Probe(&t, 0)));
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 1; }));
  std::this_thread::sleep_for(20ms);
  const EngineStats before = e.stats();
  for (std::size_t i = 1; i <= kN; ++i) {
    ASSERT_TRUE(e.schedule_after(2h, Probe(&t, i)));
    std::this_thread::sleep_for(200us);
  }
  std::this_thread::sleep_for(20ms);
  const EngineStats after = e.stats();
  EXPECT_LT(after.wakeups - before.wakeups, 10u) << "later hand-offs woke the worker";
  std::vector<Timer> returned = e.stop();
  EXPECT_EQ(returned.size(), kN + 1);
}

TEST(EngineWait, AnEarlierHandOffWakesASleepingWorker) {
  Tally t(2);
  Engine e(Opts(1).wait(WaitStrategy::sleep));
  ASSERT_TRUE(e.schedule_after(1h, Probe(&t, 0)));
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 1; }));
  std::this_thread::sleep_for(20ms);
  ASSERT_TRUE(e.schedule_after(1ms, Probe(&t, 1)));
  ASSERT_TRUE(t.wait_runs(1)) << "the worker slept through an earlier deadline";
  EXPECT_EQ(t.ran[1].load(), 1);
  EXPECT_EQ(e.stop().size(), 1u);
}

// ---------------------------------------------------------------------------------------------
// Callbacks: schedule, cancel, stop and throw from inside

struct Nest {
  Engine* engine = nullptr;
  Tally* tally = nullptr;
  Timer child_own, child_other;
  std::size_t parent_shard = 99;
  std::thread::id parent_thread;
  std::atomic<bool> done{false};
};

TEST(EngineCallback, SchedulesOnItsOwnShardAndOnAnother) {
  Tally t(2);
  Nest n;
  Engine e(workers(2));
  n.engine = &e;
  n.tally = &t;
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, [n = &n] {
    n->parent_thread = std::this_thread::get_id();
    n->child_own = n->engine->schedule_after(1ms, Probe(n->tally, 0));          // the worker's own shard
    n->child_other = n->engine->schedule_after_on(0, 1ms, Probe(n->tally, 1));  // a hand-off from a worker
    n->done.store(true, std::memory_order_release);
  }));
  ASSERT_TRUE(eventually([&] { return n.done.load(std::memory_order_acquire); }));
  ASSERT_TRUE(n.child_own);
  ASSERT_TRUE(n.child_other);
  EXPECT_EQ(n.child_own.shard(), 1u) << "a callback's schedule_after must go to its own shard";
  EXPECT_EQ(n.child_other.shard(), 0u);
  ASSERT_TRUE(t.wait_runs(2));
  EXPECT_EQ(t.thread[0], n.parent_thread) << "the own-shard child ran on another thread";
  EXPECT_NE(t.thread[1], n.parent_thread) << "the other-shard child ran on the parent's worker";
  EXPECT_TRUE(e.stop().empty());
}

// A callback re-arming itself at zero delay, many times: no livelock, each step runs once.
struct Chain {
  Engine* engine = nullptr;
  std::atomic<int> steps{0};
  int target = 0;
  std::atomic<int> failures{0};
  void step() {
    if (steps.fetch_add(1) + 1 >= target) return;
    if (!engine->schedule_after(0ns, [c = this] { c->step(); })) failures.fetch_add(1);
  }
};

TEST(EngineCallback, RearmingChainRunsEveryStep) {
  Chain c;
  Engine e(workers(1));
  c.engine = &e;
  c.target = 200;
  ASSERT_TRUE(e.schedule_after(0ns, [c = &c] { c->step(); }));
  ASSERT_TRUE(eventually([&] { return c.steps.load() >= c.target; }));
  EXPECT_TRUE(e.stop().empty());
  EXPECT_EQ(c.steps.load(), c.target);
  EXPECT_EQ(c.failures.load(), 0);
}

TEST(EngineCallback, CancelsAnotherTimer) {
  Tally t(2);
  Engine e(workers(2));
  struct Ctx {
    Timer victims[2];
    std::atomic<int> won{0};
    std::atomic<bool> done{false};
  } ctx;
  ctx.victims[0] = e.schedule_after_on(0, 1h, Probe(&t, 0));  // same shard as the canceller
  ctx.victims[1] = e.schedule_after_on(1, 1h, Probe(&t, 1));  // another shard
  ASSERT_TRUE(ctx.victims[0] && ctx.victims[1]);
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, [c = &ctx] {
    c->won.fetch_add(c->victims[0].cancel() ? 1 : 0);
    c->won.fetch_add(c->victims[1].cancel() ? 1 : 0);
    c->done.store(true);
  }));
  ASSERT_TRUE(eventually([&] { return ctx.done.load(); }));
  EXPECT_EQ(ctx.won.load(), 2) << "a cancel from a callback lost against a pending timer";
  EXPECT_TRUE(ctx.victims[0].cancelled());
  EXPECT_TRUE(ctx.victims[1].cancelled());
  EXPECT_TRUE(e.stop().empty()) << "stop() returned a timer a callback had cancelled";
  EXPECT_EQ(t.ran[0].load() + t.ran[1].load(), 0);
}

TEST(EngineCallback, StopInsideACallbackThrowsLogicErrorAndTheEngineGoesOn) {
  Tally t(1);
  Engine e(workers(1));
  struct Ctx {
    Engine* engine;
    std::atomic<int> logic_error{0}, other{0}, returned{0};
    std::atomic<bool> done{false};
  } ctx{&e};
  ASSERT_TRUE(e.schedule_after(0ns, [c = &ctx] {
    try {
      (void)c->engine->stop();
      c->returned.fetch_add(1);
    } catch (const std::logic_error&) {
      c->logic_error.fetch_add(1);
    } catch (...) {
      c->other.fetch_add(1);
    }
    c->done.store(true);
  }));
  ASSERT_TRUE(eventually([&] { return ctx.done.load(); }));
  EXPECT_EQ(ctx.logic_error.load(), 1);
  EXPECT_EQ(ctx.other.load(), 0);
  EXPECT_EQ(ctx.returned.load(), 0);
  Timer x = e.schedule_after(1ms, Probe(&t, 0));
  ASSERT_TRUE(x) << "the engine stopped after a refused stop(): " << to_string(x.status());
  ASSERT_TRUE(t.wait_runs(1));
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineCallback, AThrowingCallbackDoesNotKillTheWorker) {
  Tally t(21);
  Engine e(workers(1));
  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, 0)));
  ASSERT_TRUE(t.wait_runs(1));
  const std::thread::id worker = t.thread[0];
  Timer boom = e.schedule_after(0ns, [] { throw std::runtime_error("boom"); });
  Timer odd = e.schedule_after(0ns, [] { throw 42; });
  ASSERT_TRUE(boom && odd);
  for (std::size_t i = 1; i <= 10; ++i) ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, i)));   // same tick
  for (std::size_t i = 11; i <= 20; ++i) ASSERT_TRUE(e.schedule_after(3ms, Probe(&t, i)));  // later
  ASSERT_TRUE(t.wait_runs(21));
  for (std::size_t i = 1; i <= 20; ++i) {
    EXPECT_EQ(t.ran[i].load(), 1) << i;
    EXPECT_EQ(t.thread[i], worker) << "timer " << i << " ran on another thread than the shard's worker";
  }
  EXPECT_TRUE(boom.expired());
  EXPECT_TRUE(odd.expired());
  ASSERT_TRUE(eventually([&] { return e.stats().callback_errors == 2; }))
      << "callback_errors = " << e.stats().callback_errors;
  EXPECT_EQ(e.stats().shards[0].callback_errors, 2u);
  EXPECT_TRUE(e.stop().empty());
}

// ---------------------------------------------------------------------------------------------
// Backpressure and the transfer cap

TEST(EngineBackpressure, MaxPendingPerShardRejectsTheNextSchedule) {
  constexpr std::size_t kLimit = 100;
  Tally t(kLimit + 2);
  Engine e(Opts(1).max_pending(kLimit));
  for (std::size_t i = 0; i < kLimit; ++i) ASSERT_TRUE(e.schedule_after(1h, Probe(&t, i))) << i;
  Timer over = e.schedule_after(1h, Probe(&t, kLimit));
  EXPECT_FALSE(over);
  EXPECT_EQ(over.status(), Status::max_pending_reached);
  EXPECT_EQ(e.stats().rejected, 1u);
  EXPECT_EQ(e.stats().shards[0].rejected, 1u);
  Timer again = e.schedule_after_on(0, 0ns, Probe(&t, kLimit + 1));
  EXPECT_EQ(again.status(), Status::max_pending_reached);
  EXPECT_EQ(e.stats().rejected, 2u);
  EXPECT_EQ(t.destroyed[kLimit].load(), 1);
  EXPECT_EQ(e.stop().size(), kLimit) << "a rejected schedule was scheduled after all";
}

// 250k hand-offs queued behind a held worker, with a cap of 100k per pass: they take at least
// three passes to move, at least two of them hit the cap, and every one fires exactly once.
struct Flood {
  explicit Flood(std::size_t n) : hits(n) {}
  std::vector<std::atomic<std::uint8_t>> hits;
  std::atomic<std::size_t> runs{0};
};

TEST(EngineTransferCap, AFloodMovesOverSeveralPassesAndAllFires) {
  constexpr std::size_t kN = 250'000, kCap = 100'000;
  Flood f(kN);
  HoldGate gate;
  Engine e(Opts(1).transfer_cap(kCap));
  ReleaseOnExit guard{gate};
  ASSERT_TRUE(e.schedule_after(0ns, [g = &gate] { g->pass(); }));
  ASSERT_TRUE(gate.wait_entered());
  const EngineStats before = e.stats();
  for (std::size_t i = 0; i < kN; ++i) {
    Timer x = e.schedule_after(0ns, [f = &f, i] {
      f->hits[i].fetch_add(1, std::memory_order_relaxed);
      f->runs.fetch_add(1, std::memory_order_relaxed);
    });
    ASSERT_TRUE(x) << "hand-off " << i << " refused: " << to_string(x.status());
  }
  gate.release();
  ASSERT_TRUE(eventually([&] { return f.runs.load() == kN; }, 60s))
      << f.runs.load() << " of " << kN << " fired";
  ASSERT_TRUE(eventually([&] {
    const EngineStats s = e.stats();
    return s.pending == 0 && s.fired >= before.fired + kN;
  }));
  const EngineStats after = e.stats();
  EXPECT_GE(after.shards[0].transfer_cap_hits - before.shards[0].transfer_cap_hits, 2u);
  EXPECT_GE(after.passes - before.passes, 3u);
  EXPECT_EQ(after.transfer_cap_hits, after.shards[0].transfer_cap_hits);
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < kN; ++i) wrong += f.hits[i].load() != 1 ? 1 : 0;
  EXPECT_EQ(wrong, 0u) << "timers that did not fire exactly once";
  EXPECT_TRUE(e.stop().empty());
}

// ---------------------------------------------------------------------------------------------
// Wait strategies and the idle engine

std::string strategy_name(WaitStrategy w) {
  switch (w) {
    case WaitStrategy::sleep: return "sleep";
    case WaitStrategy::spin: return "spin";
    case WaitStrategy::hybrid: return "hybrid";
  }
  return "unknown";
}

class EngineWaitStrategy : public ::testing::TestWithParam<WaitStrategy> {};

TEST_P(EngineWaitStrategy, RunsTimersOnceAndNeverEarly) { expect_never_early(Opts(1).wait(GetParam())); }

INSTANTIATE_TEST_SUITE_P(All, EngineWaitStrategy,
                         ::testing::Values(WaitStrategy::sleep, WaitStrategy::spin, WaitStrategy::hybrid),
                         [](const auto& info) { return strategy_name(info.param); });

// The brief: an idle engine (sleep mode, 1 ms tick) makes fewer than 10 wake-ups per second. A
// worker that looped without blocking would show as passes rather than wake-ups: both are checked.
void expect_idle_for_a_second(Engine& e) {
  std::this_thread::sleep_for(50ms);  // let the workers settle into their wait
  const EngineStats before = e.stats();
  std::this_thread::sleep_for(1s);
  const EngineStats after = e.stats();
  EXPECT_LT(after.wakeups - before.wakeups, 10u) << "wake-ups of an idle engine in 1 s";
  EXPECT_LT(after.passes - before.passes, 10u) << "passes of an idle engine in 1 s";
}

TEST(EngineIdle, NothingPendingWakesFewerThanTenTimesASecond) {
  Engine e(Opts(0, /*pin=*/true).tick(1ms).wait(WaitStrategy::sleep));
  e.start();
  expect_idle_for_a_second(e);
}

TEST(EngineIdle, AfterABurstAndWithAFarTimerPending) {
  Tally t(202);
  Engine e(Opts(2).tick(1ms).wait(WaitStrategy::sleep));
  for (std::size_t i = 0; i < 200; ++i)
    ASSERT_TRUE(e.schedule_after_on(i % 2, Nanos(std::chrono::milliseconds(i % 20)), Probe(&t, i)));
  ASSERT_TRUE(e.schedule_after_on(0, 1h, Probe(&t, 200)));
  ASSERT_TRUE(e.schedule_after_on(1, 1h, Probe(&t, 201)));
  ASSERT_TRUE(t.wait_runs(200));
  expect_idle_for_a_second(e);
  EXPECT_EQ(e.stop().size(), 2u);
}

// ---------------------------------------------------------------------------------------------
// Pinning and binding

TEST(EngineBinding, ASimulatedBindingFailureIsReportedOnceAndNotFatal) {
  auto sink = std::make_shared<LogSink>();
  Tally t(20);
  Engine e(Opts(1, /*pin=*/true).cpus({99999}).log(log_into(sink)));
  e.start();
  const ShardStats s = e.stats().shards.at(0);
  EXPECT_EQ(s.bound_cpu, -1);
  EXPECT_FALSE(s.binding.empty()) << "binding does not say why it failed";
  EXPECT_EQ(s.binding.find("bound to PU"), std::string::npos) << s.binding;
  EXPECT_EQ(s.binding.find("not pinned"), std::string::npos) << s.binding;

  for (std::size_t i = 0; i < 20; ++i)
    ASSERT_TRUE(e.schedule_after(Nanos(std::chrono::milliseconds(i % 3)), Probe(&t, i)));
  ASSERT_TRUE(t.wait_runs(20)) << "an engine whose binding failed does not run timers";
  EXPECT_TRUE(e.stop().empty());
  const std::vector<std::string> lines = sink->snapshot();
  ASSERT_EQ(lines.size(), 1u) << "the log hook must be called exactly once about the failed binding";
  EXPECT_FALSE(lines[0].empty());
}

TEST(EngineBinding, UnpinnedWorkersSayNotPinned) {
  Engine e(Opts(2));
  e.start();
  for (const ShardStats& s : e.stats().shards) {
    EXPECT_EQ(s.bound_cpu, -1);
    EXPECT_NE(s.binding.find("not pinned"), std::string::npos) << s.binding;
  }
}

// Whether binding is allowed depends on the machine (a container may refuse it); whatever
// happened, bound_cpu and binding must agree.
TEST(EngineBinding, PinnedWorkersReportWhereTheyAreBound) {
  Tally t(2);
  Engine e(Opts(2, /*pin=*/true).log([](std::string_view) {}));
  e.start();
  for (const ShardStats& s : e.stats().shards) {
    if (s.bound_cpu >= 0) {
      EXPECT_EQ(s.binding, "bound to PU " + std::to_string(s.bound_cpu));
    } else {
      EXPECT_FALSE(s.binding.empty());
      EXPECT_EQ(s.binding.find("bound to PU"), std::string::npos) << s.binding;
    }
  }
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, Probe(&t, 0)));
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, Probe(&t, 1)));
  ASSERT_TRUE(t.wait_runs(2));
}

// ---------------------------------------------------------------------------------------------
// Stats

TEST(EngineStats, CountersAddUpPerShardAndInTotal) {
  Tally t(64);
  Engine e(workers(2));
  std::vector<Timer> far;
  for (std::size_t i = 0; i < 20; ++i) ASSERT_TRUE(e.schedule_after_on(i % 2, 0ns, Probe(&t, i)));
  for (std::size_t i = 20; i < 40; ++i) far.push_back(e.schedule_after_on(i % 2, 1h, Probe(&t, i)));
  // Sentinels due now wake both workers; each pass transfers everything queued before them (a
  // later deadline alone would not wake a sleeping worker), so the far timers are in the wheels.
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, Probe(&t, 40)));
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, Probe(&t, 41)));
  ASSERT_TRUE(t.wait_runs(22));
  ASSERT_TRUE(eventually([&] { return e.stats().pending == 20; })) << e.stats().pending;
  for (std::size_t k = 0; k < 10; ++k) EXPECT_TRUE(far[k].cancel());  // 5 on each shard
  // More sentinels: their passes drain the cancels.
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, Probe(&t, 42)));
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, Probe(&t, 43)));
  ASSERT_TRUE(t.wait_runs(24));
  ASSERT_TRUE(eventually([&] {
    const EngineStats s = e.stats();
    return s.cancelled == 10 && s.fired == 24 && s.queue_depth == 0;
  })) << "cancelled "
      << e.stats().cancelled << ", fired " << e.stats().fired;
  const EngineStats s = e.stats();
  ASSERT_EQ(s.shards.size(), 2u);
  auto sum = [&](auto field) {
    std::uint64_t total = 0;
    for (const ShardStats& sh : s.shards) total += static_cast<std::uint64_t>(sh.*field);
    return total;
  };
  EXPECT_EQ(s.scheduled, sum(&ShardStats::scheduled));
  EXPECT_EQ(s.fired, sum(&ShardStats::fired));
  EXPECT_EQ(s.fired_at_schedule, sum(&ShardStats::fired_at_schedule));
  EXPECT_EQ(s.cancelled, sum(&ShardStats::cancelled));
  EXPECT_EQ(s.rejected, sum(&ShardStats::rejected));
  EXPECT_EQ(s.pending, sum(&ShardStats::pending));
  EXPECT_EQ(s.queue_depth, sum(&ShardStats::queue_depth));
  EXPECT_EQ(s.passes, sum(&ShardStats::passes));
  EXPECT_EQ(s.wakeups, sum(&ShardStats::wakeups));
  EXPECT_EQ(s.transfer_cap_hits, sum(&ShardStats::transfer_cap_hits));
  EXPECT_EQ(s.callback_errors, sum(&ShardStats::callback_errors));
  std::int64_t worst_lag = 0;
  for (const ShardStats& sh : s.shards) worst_lag = std::max(worst_lag, sh.max_tick_lag_ns);
  EXPECT_EQ(s.max_tick_lag_ns, worst_lag);
  // 20 + 4 sentinels fired, 10 cancelled, 10 pending: 44 reached the wheels.
  EXPECT_EQ(s.scheduled, 44u);
  EXPECT_EQ(s.pending, 10u);
  EXPECT_EQ(s.scheduled, s.fired + s.cancelled + s.pending);
  for (const ShardStats& sh : s.shards) {
    EXPECT_EQ(sh.scheduled, sh.fired + sh.cancelled + sh.pending);
    EXPECT_EQ(sh.pending, 5u);
    EXPECT_EQ(sh.cancelled, 5u);
  }
  EXPECT_EQ(e.stop().size(), 10u);
}

// Timers cancelled while still in the hand-off queue are recycled by the worker when it meets
// them; `pending` must not drop below the timers really pending because of them.
TEST(EngineStats, InTransitCancelsKeepPendingRight) {
  constexpr std::size_t kN = 10, kCancel = 4;
  Tally t(kN + 1);
  HoldGate gate;
  Engine e(workers(1));
  ReleaseOnExit guard{gate};
  ASSERT_TRUE(e.schedule_after(0ns, [g = &gate] { g->pass(); }));
  ASSERT_TRUE(gate.wait_entered());
  std::vector<Timer> queued;
  for (std::size_t i = 0; i < kN; ++i) queued.push_back(e.schedule_after(1h, Probe(&t, i)));
  for (std::size_t i = 0; i < kCancel; ++i) EXPECT_TRUE(queued[i].cancel());
  gate.release();
  ASSERT_TRUE(e.schedule_after(0ns, Probe(&t, kN)));  // a pass after the release
  ASSERT_TRUE(t.wait_runs(1));
  ASSERT_TRUE(eventually([&] {
    const EngineStats s = e.stats();
    return s.cancelled == kCancel && s.fired == 2 && s.queue_depth == 0;
  })) << "cancelled "
      << e.stats().cancelled << ", fired " << e.stats().fired;
  const EngineStats s = e.stats();
  EXPECT_EQ(s.pending, kN - kCancel) << "scheduled " << s.scheduled << ", fired " << s.fired << ", cancelled "
                                     << s.cancelled;
  EXPECT_EQ(s.scheduled, s.fired + s.cancelled + s.pending);
  EXPECT_EQ(e.stop().size(), kN - kCancel);
}

}  // namespace
}  // namespace tickwheel::test

namespace tickwheel {
// Found by argument-dependent lookup: test names and failure messages print the strategy's name.
void PrintTo(WaitStrategy w, std::ostream* os) { *os << test::strategy_name(w); }
}  // namespace tickwheel
