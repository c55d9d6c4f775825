// The Engine's executors: fired callbacks handed to an Executor. Covers the thread pool (runs off
// the worker, exactly once, counted as fired), a slow callback not holding up the tick (some
// callbacks block on a gate while thousands of others fire), exceptions caught on the pool and
// passed to the error handler, a user's own executor (an event loop's queue, drained by its own
// thread), stop() waiting for tasks already handed over and refusing to run inside one, periodic
// timers on the pool (runs never overlap, fixed delay counts from the end of the run, a cancel from
// inside stops them, stop() returns them pending), the caller-driven mode with an executor, an
// explicit InlineExecutor treated as none, ThreadPoolExecutor's option checks, and a timer already
// due from another thread handed to an any-thread executor by that thread (which timers go that
// way, their counts, stop() waiting for them, and a race with stop()). No timing figure is
// asserted: waits are bounded, outcomes are orders and counts.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "support.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/executor.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::thread::id worker_thread_of(Engine& e, std::size_t shard) {
  std::atomic<bool> done{false};
  std::thread::id id;
  struct Probe {
    std::thread::id* id;
    std::atomic<bool>* done;
    void operator()() const noexcept {
      *id = std::this_thread::get_id();
      done->store(true, std::memory_order_release);
    }
  };
  EXPECT_TRUE(e.schedule_after_on(shard, 0ns, Probe{&id, &done}));
  EXPECT_TRUE(eventually([&] { return done.load(std::memory_order_acquire); }));
  return id;
}

TEST(EngineExecutor, ThreadPoolRunsEveryCallbackOnceOffTheWorker) {
  auto exec = pool(2);
  Engine e(workers(1, exec));
  constexpr int kTimers = 5000;
  std::vector<std::atomic<int>> ran(kTimers);
  std::mutex m;
  std::vector<std::thread::id> threads;
  struct Run {
    std::atomic<int>* slot;
    std::mutex* m;
    std::vector<std::thread::id>* threads;
    void operator()() const noexcept {
      slot->fetch_add(1, std::memory_order_relaxed);
      std::lock_guard lock(*m);
      threads->push_back(std::this_thread::get_id());
    }
  };
  for (int i = 0; i < kTimers; ++i)
    ASSERT_TRUE(e.schedule_after(Nanos(i % 7) * 100'000, Run{&ran[i], &m, &threads}));
  ASSERT_TRUE(eventually([&] { return e.stats().fired == kTimers && e.stats().executing == 0; }));
  e.stop();
  for (int i = 0; i < kTimers; ++i) EXPECT_EQ(ran[i].load(), 1) << "timer " << i;
  const std::thread::id me = std::this_thread::get_id();
  for (std::thread::id id : threads) EXPECT_NE(id, me);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.fired, static_cast<std::uint64_t>(kTimers));
  EXPECT_EQ(s.executing, 0u);
  EXPECT_EQ(s.pending, 0u);
}

TEST(EngineExecutor, SlowCallbacksDoNotHoldUpTheTick) {
  auto exec = pool(3);
  Engine e(workers(1, exec));
  Gate gate;
  std::atomic<int> slow_started{0};
  struct Slow {
    Gate* gate;
    std::atomic<int>* started;
    void operator()() const noexcept {
      started->fetch_add(1);
      gate->wait();
    }
  };
  // Two of the three pool threads stay blocked until every fast timer has fired: were the
  // callbacks run by the worker, or the tick waited on the pool, the fast ones could not fire.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(e.schedule_after(0ns, Slow{&gate, &slow_started}));
  ASSERT_TRUE(eventually([&] { return slow_started.load() == 2; }));
  constexpr int kFast = 3000;
  std::atomic<int> fast{0};
  struct Fast {
    std::atomic<int>* fast;
    void operator()() const noexcept { fast->fetch_add(1); }
  };
  for (int i = 0; i < kFast; ++i) {
    ASSERT_TRUE(e.schedule_after(Nanos(1ms) * (1 + i % 20), Fast{&fast}));
  }
  const bool all_fired = eventually([&] { return fast.load() == kFast; });
  const bool gate_was_shut = !gate.is_open();
  gate.open();
  EXPECT_TRUE(all_fired) << fast.load() << " of " << kFast << " fired";
  EXPECT_TRUE(gate_was_shut);
  e.stop();
  EXPECT_EQ(e.stats().fired, static_cast<std::uint64_t>(kFast + 2));
}

TEST(EngineExecutor, AThrowingCallbackIsCaughtCountedAndPassedToTheHandler) {
  auto exec = pool(1);
  EngineOptions o = workers(1, exec);
  std::mutex m;
  std::vector<std::string> messages;
  o.on_callback_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& ex) {
      std::lock_guard lock(m);
      messages.push_back(ex.what());
    }
  };
  Engine e(o);
  std::atomic<int> good{0};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(e.schedule_after(Nanos(100us) * i, [] { throw std::runtime_error("boom"); }));
    ASSERT_TRUE(e.schedule_after(Nanos(100us) * i, [&good] { good.fetch_add(1); }));
  }
  ASSERT_TRUE(eventually([&] { return good.load() == 10 && e.stats().callback_errors == 10; }));
  e.stop();
  std::lock_guard lock(m);
  ASSERT_EQ(messages.size(), 10u);
  for (const std::string& s : messages) EXPECT_EQ(s, "boom");
  EXPECT_EQ(e.stats().fired, 20u);
}

// An event loop of the user's own: execute() posts to its queue, its thread runs what is posted.
class LoopExecutor final : public Executor {
 public:
  LoopExecutor() : thread_([this] { loop(); }) {}
  ~LoopExecutor() override {
    {
      std::lock_guard lock(m_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void execute(Task task) noexcept override {
    {
      std::lock_guard lock(m_);
      posted_.push_back(task);
    }
    cv_.notify_one();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  void loop() {
    std::unique_lock lock(m_);
    for (;;) {
      cv_.wait(lock, [&] { return done_ || !posted_.empty(); });
      if (posted_.empty()) return;
      Task t = posted_.front();
      posted_.pop_front();
      lock.unlock();
      t.run();
      lock.lock();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::deque<Task> posted_;
  bool done_ = false;
  std::thread thread_;
};

TEST(EngineExecutor, AUsersOwnExecutorRunsTheCallbacksOnItsThread) {
  auto loop = std::make_shared<LoopExecutor>();
  Engine e(workers(2, loop));
  std::atomic<int> on_loop{0}, elsewhere{0};
  const std::thread::id loop_id = loop->id();
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(e.schedule_after_on(i % 2, Nanos(50us) * (i % 10), [&, loop_id] {
      (std::this_thread::get_id() == loop_id ? on_loop : elsewhere).fetch_add(1);
    }));
  }
  ASSERT_TRUE(eventually([&] { return on_loop.load() + elsewhere.load() == 1000; }));
  e.stop();
  EXPECT_EQ(on_loop.load(), 1000);
  EXPECT_EQ(elsewhere.load(), 0);
}

TEST(EngineExecutor, StopWaitsForTasksAlreadyHandedOverAndIsRefusedInsideOne) {
  auto exec = pool(2);
  Engine e(workers(1, exec));
  struct State {
    Engine* e = nullptr;
    Gate gate;
    std::atomic<bool> started{false}, finished{false};
    std::atomic<int> refused{0};
  } st;
  st.e = &e;
  ASSERT_TRUE(e.schedule_after(0ns, [s = &st] {
    try {
      s->e->stop();
    } catch (const std::logic_error& ex) {
      if (std::string(ex.what()).find("inside one of its timer callbacks") != std::string::npos)
        s->refused.fetch_add(1);
    }
    s->started.store(true);
    s->gate.wait();
    s->finished.store(true);
  }));
  ASSERT_TRUE(eventually([&] { return st.started.load(); }));
  std::thread opener([&] {
    std::this_thread::sleep_for(20ms);  // lets stop() begin; correctness does not depend on it
    st.gate.open();
  });
  e.stop();
  EXPECT_TRUE(st.finished.load()) << "stop() returned while a task it had handed over was still running";
  opener.join();
  EXPECT_EQ(st.refused.load(), 1);
  EXPECT_EQ(e.stats().executing, 0u);
}

TEST(EngineExecutor, PeriodicTimersOnThePoolNeverOverlapAndStopReturnsThemPending) {
  Engine e(fine_tick_workers(1, pool(3)));
  struct Shared {
    std::atomic<int> in_run{0};
    std::atomic<int> overlaps{0};
    std::atomic<int> runs{0};
  };
  auto shared = std::make_unique<Shared>();
  struct Callback {
    Shared* s;
    void operator()() const noexcept {
      if (s->in_run.fetch_add(1) != 0) s->overlaps.fetch_add(1);
      std::this_thread::sleep_for(300us);  // longer than the period: the next run is due meanwhile
      s->in_run.fetch_sub(1);
      s->runs.fetch_add(1);
    }
  };
  PeriodicOptions p;
  p.misfire = Misfire::catch_up;
  Timer t = e.schedule_every(100us, Callback{shared.get()}, p);
  ASSERT_TRUE(t);
  ASSERT_TRUE(eventually([&] { return shared->runs.load() >= 20; }));
  std::vector<Timer> left = e.stop();
  EXPECT_EQ(shared->overlaps.load(), 0);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_FALSE(t.cancelled());
  EXPECT_TRUE(left[0].cancel());
  EXPECT_TRUE(t.cancelled());
  const EngineStats s = e.stats();
  EXPECT_EQ(s.fired, static_cast<std::uint64_t>(shared->runs.load()));
  EXPECT_EQ(s.scheduled + s.rearmed, s.fired + s.skipped + s.cancelled + s.pending);
}

TEST(EngineExecutor, FixedDelayOnThePoolCountsFromTheEndOfEachRun) {
  Engine e(fine_tick_workers(1, pool(1)));
  struct Spans {
    std::mutex m;
    std::vector<std::pair<Clock::time_point, Clock::time_point>> runs;
  } spans;
  PeriodicOptions p;
  p.cadence = Cadence::fixed_delay;
  Timer t = e.schedule_every(
      500us,
      [&spans] {
        const auto start = Clock::now();
        std::this_thread::sleep_for(1ms);
        std::lock_guard lock(spans.m);
        spans.runs.emplace_back(start, Clock::now());
      },
      p);
  ASSERT_TRUE(t);
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(spans.m);
    return spans.runs.size() >= 8;
  }));
  ASSERT_TRUE(t.cancel());
  e.stop();
  std::lock_guard lock(spans.m);
  for (std::size_t i = 1; i < spans.runs.size(); ++i) {
    EXPECT_GE(spans.runs[i].first - spans.runs[i - 1].second, 500us) << "run " << i << " started early";
  }
}

TEST(EngineExecutor, APeriodicTimerCancelledInsideItsPoolRunEnds) {
  auto exec = pool(2);
  Engine e(workers(1, exec));
  LiveCount live;
  struct State {
    Timer self;
    std::atomic<bool> self_set{false};  // orders the write of `self` before a run reads it
    std::atomic<int> runs{0};
    std::atomic<bool> result{false};
  };
  auto state = std::make_unique<State>();
  struct Callback {
    State* s;
    Counted c;
    void operator()() const noexcept {
      if (s->runs.fetch_add(1) + 1 != 3) return;
      while (!s->self_set.load(std::memory_order_acquire)) std::this_thread::yield();
      s->result.store(s->self.cancel());
    }
  };
  state->self = e.schedule_every(1ms, Callback{state.get(), Counted(&live)});
  state->self_set.store(true, std::memory_order_release);
  ASSERT_TRUE(state->self);
  ASSERT_TRUE(eventually([&] { return state->runs.load() >= 3 && e.stats().pending == 0; }));
  std::this_thread::sleep_for(5ms);
  e.stop();
  EXPECT_EQ(state->runs.load(), 3);
  EXPECT_TRUE(state->result.load());
  EXPECT_EQ(live.live, 0);
}

TEST(EngineExecutor, CallerDrivenPollHandsOverAndReArmsWhatComesBack) {
  static std::atomic<std::int64_t> now_ns{1'000'000'000};
  EngineOptions o;
  o.shards = 1;
  o.threads = Threads::manual;
  o.clock = []() noexcept { return Nanos(now_ns.load()); };
  o.executor = pool(1);
  Engine e(o);
  std::atomic<int> runs{0};
  Timer t = e.schedule_every(1ms, [&runs] { runs.fetch_add(1); });
  ASSERT_TRUE(t);
  for (int i = 1; i <= 5; ++i) {
    now_ns.fetch_add(1'000'000);
    EXPECT_EQ(e.poll(0), 1u) << "poll " << i << " must hand the due run over";
    ASSERT_TRUE(eventually([&] { return runs.load() == i; }));
    // The node is back on the returned queue (or about to be): the next poll re-arms it.
    ASSERT_TRUE(eventually([&] { return e.stats().executing == 0; }));
    EXPECT_EQ(e.next_deadline(0), Nanos(now_ns.load())) << "a returned node is work for the next poll";
    EXPECT_EQ(e.poll(0), 0u);
    EXPECT_EQ(e.next_deadline(0), Nanos(now_ns.load() + 1'000'000));
  }
  EXPECT_TRUE(t.cancel());
}

TEST(EngineExecutor, AnExplicitInlineExecutorRunsOnTheWorker) {
  Engine e(workers(1, std::make_shared<InlineExecutor>()));
  const std::thread::id worker = worker_thread_of(e, 0);
  std::atomic<int> on_worker{0};
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(e.schedule_after(0ns, [&, worker] {
      if (std::this_thread::get_id() == worker) on_worker.fetch_add(1);
    }));
  }
  ASSERT_TRUE(eventually([&] { return on_worker.load() == 100; }));
  EXPECT_EQ(e.stats().executing, 0u);
}

TEST(EngineExecutor, ThreadPoolOptionsAreCheckedAndRefusedBindingIsNotFatal) {
  ThreadPoolOptions bad;
  bad.threads = 0;
  try {
    ThreadPoolExecutor p(bad);
    ADD_FAILURE() << "threads = 0 accepted";
  } catch (const std::invalid_argument& ex) {
    EXPECT_NE(std::string(ex.what()).find("got 0"), std::string::npos) << ex.what();
  }
  ThreadPoolOptions nowhere;
  nowhere.threads = 2;
  nowhere.pin = true;
  nowhere.cpus = {100000};
  auto sink = std::make_shared<LogSink>();
  nowhere.log = log_into(sink);
  auto p = std::make_shared<ThreadPoolExecutor>(nowhere);
  EXPECT_EQ(p->thread_count(), 2u);
  EXPECT_EQ(p->bound_cpus(), (std::vector<int>{-1, -1}));
  EXPECT_EQ(sink->snapshot().size(), 1u) << "binding refused must be said once";
  Engine e(workers(1, p));
  std::atomic<int> ran{0};
  ASSERT_TRUE(e.schedule_after(0ns, [&ran] { ran.fetch_add(1); }));
  EXPECT_TRUE(eventually([&] { return ran.load() == 1; })) << "an unbound pool must still run tasks";
}

// An executor that queues each task with the thread that called execute(), and runs them when the
// test says (or when stop() waits for them). any_thread() as constructed.
class RecordingExecutor final : public Executor {
 public:
  explicit RecordingExecutor(bool any_thread) : any_thread_(any_thread) {}
  void execute(Task task) noexcept override {
    std::lock_guard lock(m_);
    queued_.emplace_back(task, std::this_thread::get_id());
  }
  bool any_thread() const noexcept override { return any_thread_; }
  void run_while_stopping() noexcept override { run_all(); }
  // The threads that called execute() for the tasks queued now, oldest first.
  std::vector<std::thread::id> callers() {
    std::lock_guard lock(m_);
    std::vector<std::thread::id> ids;
    for (const auto& q : queued_) ids.push_back(q.second);
    return ids;
  }
  std::size_t run_all() {
    std::deque<std::pair<Task, std::thread::id>> now;
    {
      std::lock_guard lock(m_);
      now.swap(queued_);
    }
    for (auto& q : now) q.first.run();
    return now.size();
  }

 private:
  const bool any_thread_;
  std::mutex m_;
  std::deque<std::pair<Task, std::thread::id>> queued_;
};

// Caller-driven on the injected clock, half a tick past a tick's start, with `exec` and the
// shard's loop asleep (prepare_wait until woken) on the calling thread.
struct AsleepLoop {
  explicit AsleepLoop(std::shared_ptr<Executor> exec, std::size_t max_pending = 0)
      : e([&] {
          EngineOptions o = manual(1, 1ms);
          o.executor = std::move(exec);
          o.max_pending_per_shard = max_pending;
          return o;
        }()) {
    advance_clock(Nanos(1ms) - Nanos(fake_now().count() % 1'000'000) + 500us);
    e.own_shard(0);
    EXPECT_TRUE(e.prepare_wait(0, std::nullopt));
  }
  Engine e;
};

// Runs fn on a thread of its own (a producer: not the shard's) and returns that thread's id.
template <class Fn>
std::thread::id on_another_thread(Fn fn) {
  std::thread::id id;
  std::thread t([&] {
    id = std::this_thread::get_id();
    fn();
  });
  t.join();
  return id;
}

TEST(EngineExecutor, ATimerAlreadyDueFromAnotherThreadGoesStraightToAnAnyThreadExecutor) {
  auto exec = std::make_shared<RecordingExecutor>(/*any_thread=*/true);
  Tally tally(4);
  AsleepLoop loop(exec);
  Engine& e = loop.e;
  const Nanos now = e.now();
  Timer due, in_tick, later, relative;
  const std::thread::id producer = on_another_thread([&] {
    due = e.schedule_at_on(0, now - 600us, Probe(&tally, 0));      // its tick ended 100 us ago
    in_tick = e.schedule_at_on(0, now - 100us, Probe(&tally, 1));  // its tick ends in 500 us
    later = e.schedule_at_on(0, now + 1h, Probe(&tally, 2));       // not due
    relative = e.schedule_after_on(0, 0ns, Probe(&tally, 3));      // now + 0: its tick not over
  });
  ASSERT_TRUE(due && in_tick && later && relative);
  EXPECT_EQ(exec->callers(), std::vector<std::thread::id>{producer}) << "only the due timer, by its producer";
  EXPECT_TRUE(due.expired()) << "claimed before schedule_at returned";
  EXPECT_FALSE(due.cancel());
  EXPECT_TRUE(in_tick.is_pending() && later.is_pending() && relative.is_pending());
  EngineStats s = e.stats();
  EXPECT_EQ(s.fired, 1u);
  EXPECT_EQ(s.fired_at_schedule, 1u);
  EXPECT_EQ(s.shards[0].fired_at_schedule, 1u);
  EXPECT_EQ(s.executing, 1u);
  EXPECT_EQ(s.pending, 3u);
  EXPECT_EQ(s.passes, 0u) << "no pass ran it";

  EXPECT_EQ(exec->run_all(), 1u);
  EXPECT_EQ(tally.ran[0].load(), 1);
  EXPECT_EQ(tally.thread[0], std::this_thread::get_id());
  EXPECT_EQ(e.stats().executing, 0u);

  // The rest go the usual way: the loop's poll claims them when their ticks end.
  e.finish_wait(0);
  advance_clock(1ms);
  EXPECT_EQ(e.poll(0), 2u);
  EXPECT_EQ(exec->callers(),
            (std::vector<std::thread::id>{std::this_thread::get_id(), std::this_thread::get_id()}));
  EXPECT_EQ(exec->run_all(), 2u);
  EXPECT_EQ(tally.ran[1].load() + tally.ran[3].load(), 2);
  EXPECT_TRUE(later.cancel());
  (void)e.poll(0);  // takes the returned nodes back
  s = e.stats();
  EXPECT_EQ(s.scheduled, 4u);
  EXPECT_EQ(s.fired, 3u);
  EXPECT_EQ(s.fired_at_schedule, 1u) << "the two the poll claimed are not among them";
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(tally.total_destroyed(), 4) << "each callable destroyed once: three runs and a cancel";
}

TEST(EngineExecutor, ADueTimerWaitsForTheShardWithAOneThreadExecutorALimitOrAnAwakeLoop) {
  struct Case {
    const char* what;
    bool any_thread;
    std::size_t max_pending;
    bool asleep;
  };
  for (const Case& c :
       {Case{"an executor without any_thread()", false, 0, true},
        Case{"max_pending_per_shard", true, 100, true}, Case{"an awake loop", true, 0, false}}) {
    SCOPED_TRACE(c.what);
    auto exec = std::make_shared<RecordingExecutor>(c.any_thread);
    Tally tally(1);
    AsleepLoop loop(exec, c.max_pending);
    Engine& e = loop.e;
    if (!c.asleep) e.finish_wait(0);
    Timer t;
    (void)on_another_thread([&] { t = e.schedule_at_on(0, Nanos(0), Probe(&tally, 0)); });
    ASSERT_TRUE(t);
    EXPECT_TRUE(t.is_pending()) << "handed over, for the shard's own thread to claim";
    EXPECT_TRUE(exec->callers().empty());
    if (c.asleep) e.finish_wait(0);
    EXPECT_EQ(e.poll(0), 1u);
    EXPECT_EQ(exec->callers(), std::vector<std::thread::id>{std::this_thread::get_id()});
    EXPECT_EQ(exec->run_all(), 1u);
    EXPECT_EQ(tally.ran[0].load(), 1);
  }
}

TEST(EngineExecutor, StopWaitsForADueTaskAnotherThreadHandedOver) {
  auto exec = std::make_shared<RecordingExecutor>(/*any_thread=*/true);
  Tally tally(2);
  AsleepLoop loop(exec);
  Engine& e = loop.e;
  Timer t;
  (void)on_another_thread([&] { t = e.schedule_at_on(0, Nanos(0), Probe(&tally, 0)); });
  ASSERT_TRUE(t.expired());
  e.finish_wait(0);
  EXPECT_TRUE(e.stop().empty());  // its wait ran the queued task (run_while_stopping)
  EXPECT_EQ(tally.ran[0].load(), 1);
  EXPECT_EQ(e.stats().executing, 0u);
  Timer late;
  (void)on_another_thread([&] { late = e.schedule_at_on(0, Nanos(0), Probe(&tally, 1)); });
  EXPECT_EQ(late.status(), Status::stopped);
  EXPECT_TRUE(exec->callers().empty());
}

// Producers schedule due timers onto a sleeping worker's pool until stop() refuses them: each
// accepted timer runs exactly once (claimed by its producer, or by the worker), or is among those
// stop() returns pending, never both; and every callable is destroyed once.
TEST(EngineExecutor, DueTimersHandedToThePoolByTheirProducersRunOnceAcrossAStop) {
  constexpr std::size_t kProducers = 3;
  constexpr std::size_t kEach = kSanitized ? 3000 : 20000;
  Tally tally(kProducers * kEach);
  std::vector<Timer> handles(kProducers * kEach);
  std::vector<Timer> returned;
  {
    Engine e(workers(1, pool(2)));
    std::atomic<std::size_t> accepted{0};
    std::vector<std::thread> producers;
    for (std::size_t p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        for (std::size_t i = p * kEach; i < (p + 1) * kEach; ++i) {
          handles[i] = e.schedule_at(Nanos(0), Probe(&tally, i));
          if (!handles[i]) {
            EXPECT_EQ(handles[i].status(), Status::stopped);
            return;
          }
          accepted.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    ASSERT_TRUE(eventually([&] { return accepted.load() >= kProducers * kEach / 4; }));
    returned = e.stop();
    for (auto& t : producers) t.join();
    const std::set<std::size_t> back = ids_of_returned(returned, handles);
    for (std::size_t i = 0; i < handles.size(); ++i) {
      const int ran = tally.ran[i].load();
      if (handles[i]) {
        EXPECT_EQ(ran + static_cast<int>(back.count(i)), 1) << "timer " << i;
      } else {
        EXPECT_EQ(ran, 0) << "refused timer " << i << " ran";
      }
    }
    const EngineStats s = e.stats();
    EXPECT_EQ(s.executing, 0u);
    EXPECT_EQ(s.fired + s.cancelled + s.pending, s.scheduled);
  }
  for (std::size_t i = 0; i < handles.size(); ++i) {
    const bool tried = handles[i] || handles[i].status() == Status::stopped;
    EXPECT_EQ(tally.destroyed[i].load(), tried ? 1 : 0) << "timer " << i;
  }
}

}  // namespace
}  // namespace tickwheel::test
