// tests/engine_support.hpp — fixtures shared by the test files that drive an Engine: which build
// the tests run in (to size them, and to skip what a sanitizer's runtime cannot take), a recording
// callable (Probe, writing into a Tally) that can also throw, the ids a stop() result names, the
// records of an exactly-once race test, a log hook that collects the engine's notices, and the
// options of unpinned worker threads, with or without a thread-pool executor.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/executor.hpp"

// The sanitizer this build runs under, if any: GCC says so with __SANITIZE_*__, clang with
// __has_feature.
#if defined(__has_feature)
#define TICKWHEEL_TEST_HAS_FEATURE(name) __has_feature(name)
#else
#define TICKWHEEL_TEST_HAS_FEATURE(name) 0
#endif

namespace tickwheel::test {

#if defined(__SANITIZE_THREAD__) || TICKWHEEL_TEST_HAS_FEATURE(thread_sanitizer)
inline constexpr bool kUnderTsan = true;
#else
inline constexpr bool kUnderTsan = false;
#endif
#if defined(__SANITIZE_ADDRESS__) || TICKWHEEL_TEST_HAS_FEATURE(address_sanitizer)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
inline constexpr bool kSanitized = kUnderTsan || kUnderAsan;
// NDEBUG: the Release and RelWithDebInfo builds, which are the optimised ones.
#if defined(NDEBUG)
inline constexpr bool kOptimised = true;
#else
inline constexpr bool kOptimised = false;
#endif

// The steady clock's now in nanoseconds: the time base of a worker-mode engine.
inline std::int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// Per-timer records, indexed by an id captured in the callable. `runs` is bumped with release after
// the per-id writes, so a thread that saw it reach N (acquire) may read them. `seq` numbers the
// runs, for order checks in caller-driven tests (one thread). Declared before the Engine (or Wheel)
// in every test: its destructor destroys the callables never run, and they write here.
struct Tally {
  explicit Tally(std::size_t n) : ran(n), destroyed(n), thread(n), fired_ns(n), due_ns(n, 0), seq(n, -1) {}
  std::vector<std::atomic<int>> ran;
  std::vector<std::atomic<int>> destroyed;
  std::vector<std::thread::id> thread;  // the thread that ran it
  std::vector<std::int64_t> fired_ns;   // steady clock when the callback started
  std::vector<std::int64_t> due_ns;     // earliest legal fire time; the test writes it before the schedule
  std::vector<long> seq;                // the run's place among all runs
  std::atomic<long> next_seq{0};
  std::atomic<std::size_t> runs{0};

  bool wait_runs(std::size_t n) {
    return eventually([&] { return runs.load(std::memory_order_acquire) >= n; });
  }
  int total_destroyed() const {
    int n = 0;
    for (const auto& d : destroyed) n += d.load();
    return n;
  }
};

// What a Probe does after recording its run.
enum class Throw : std::uint8_t { none, std_exception, integer, other_type };
struct NotAnException {};

// A move-only callable that records its run, then throws if told to, and records its destruction
// once across its moves (an engine that destroyed a callable twice, or never, shows in
// `destroyed`). 16 bytes: it fits the 24-byte inline storage, and a periodic timer's 16.
class Probe {
 public:
  Probe(Tally* t, std::size_t id, Throw how = Throw::none) noexcept
      : t_(t), id_(static_cast<std::uint32_t>(id)), how_(how) {}
  Probe(Probe&& o) noexcept : t_(o.t_), id_(o.id_), how_(o.how_), armed_(std::exchange(o.armed_, false)) {}
  Probe(const Probe&) = delete;
  Probe& operator=(const Probe&) = delete;
  Probe& operator=(Probe&&) = delete;
  ~Probe() {
    if (armed_) t_->destroyed[id_].fetch_add(1, std::memory_order_relaxed);
  }
  void operator()() {
    t_->fired_ns[id_] = now_ns();
    t_->thread[id_] = std::this_thread::get_id();
    t_->seq[id_] = t_->next_seq.fetch_add(1, std::memory_order_relaxed);
    t_->ran[id_].fetch_add(1, std::memory_order_relaxed);
    t_->runs.fetch_add(1, std::memory_order_release);
    switch (how_) {
      case Throw::none: return;
      case Throw::std_exception: throw std::runtime_error("injected fault");
      case Throw::integer: throw 42;
      case Throw::other_type: throw NotAnException{};
    }
  }

 private:
  Tally* t_;
  std::uint32_t id_;
  Throw how_;
  bool armed_ = true;
};
static_assert(sizeof(Probe) <= 16);

// Which timers a stop() result names, through the public API only: cancels every returned handle
// (each must win: a returned timer is still pending), then reports the ids whose own handle turned
// cancelled() by it. Exact: once stopped no node is reused, and a handle matches only its own
// lifetime of a node. `handles[id]` is the Timer the schedule of timer `id` returned.
inline std::set<std::size_t> ids_of_returned(std::vector<Timer>& returned,
                                             const std::vector<Timer>& handles) {
  std::vector<bool> before(handles.size());
  for (std::size_t i = 0; i < handles.size(); ++i) before[i] = handles[i].cancelled();
  for (Timer& t : returned) EXPECT_TRUE(t.cancel()) << "a timer returned by stop() did not cancel";
  std::set<std::size_t> ids;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (!before[i] && handles[i].cancelled()) ids.insert(i);
  }
  EXPECT_EQ(ids.size(), returned.size()) << "returned handles that name no timer of this test, or one twice";
  return ids;
}

// The records of an exactly-once race test: `threads` producer threads, each owning the timer ids
// [k * per, (k + 1) * per), and per timer the handle its schedule returned, whether a cancel() of
// it returned true, and (in `tally`) what its Probe recorded.
struct RaceTimers {
  RaceTimers(std::size_t threads, std::size_t per)
      : threads(threads), per(per), tally(threads * per), handles(threads * per), won(threads * per, 0) {}
  const std::size_t threads;
  const std::size_t per;
  Tally tally;
  std::vector<Timer> handles;
  std::vector<std::uint8_t> won;

  // Starts the producers: thread k waits for go(), then runs body(k, first, end, rng) for its ids
  // [first, end), its rng seeded with `seed` + k so that a run's random choices (not its
  // interleaving) repeat.
  template <class Body>
  void start(unsigned seed, Body body) {
    for (std::size_t k = 0; k < threads; ++k) {
      producers_.emplace_back([this, seed, body, k] {
        std::mt19937 rng(seed + static_cast<unsigned>(k));
        while (!go_.load()) std::this_thread::yield();
        body(k, k * per, (k + 1) * per, rng);
      });
    }
  }
  // Starts one more thread, not a producer, that waits for go() and then runs `fn`.
  template <class Fn>
  void start_other(Fn fn) {
    producers_.emplace_back([this, fn] {
      while (!go_.load()) std::this_thread::yield();
      fn();
    });
  }
  void go() { go_.store(true); }
  void join() {
    for (std::thread& thread : producers_) thread.join();
  }

  // How the timers with a true handle ended.
  struct Ends {
    std::size_t scheduled = 0;
    std::size_t ran = 0;      // callbacks run
    std::size_t cancels = 0;  // cancel() calls that returned true
    std::size_t neither = 0;  // neither run nor cancel()ed
  };
  // Counts them, checking that each ran at most once, had its callable destroyed exactly once, and
  // did not both run and have a cancel() return true.
  Ends ends() const {
    Ends e;
    for (std::size_t i = 0; i < handles.size(); ++i) {
      if (!handles[i]) continue;
      ++e.scheduled;
      const int r = tally.ran[i].load();
      EXPECT_LE(r, 1) << "timer " << i << " ran twice";
      EXPECT_EQ(tally.destroyed[i].load(), 1) << "timer " << i;
      EXPECT_FALSE(r == 1 && won[i] != 0) << "timer " << i << " ran and was cancelled";
      e.ran += static_cast<std::size_t>(r);
      e.cancels += won[i];
      e.neither += r == 0 && won[i] == 0 ? 1 : 0;
    }
    return e;
  }

 private:
  std::atomic<bool> go_{false};
  std::vector<std::thread> producers_;
};

// Collects the log hook's notices (called from any thread).
struct LogSink {
  std::mutex mu;
  std::vector<std::string> lines;
  std::vector<std::string> snapshot() {
    std::lock_guard lock(mu);
    return lines;
  }
  // The notices that contain `what`.
  std::vector<std::string> containing(std::string_view what) {
    std::lock_guard lock(mu);
    std::vector<std::string> out;
    for (const std::string& l : lines) {
      if (l.find(what) != std::string::npos) out.push_back(l);
    }
    return out;
  }
};
inline std::function<void(std::string_view)> log_into(const std::shared_ptr<LogSink>& sink) {
  return [sink](std::string_view line) {
    std::lock_guard lock(sink->mu);
    sink->lines.emplace_back(line);
  };
}

// Worker-thread options: `shards` workers, unpinned (they share the cores with the test's own
// threads), callbacks run on `executor` (none: on the workers).
inline EngineOptions workers(std::size_t shards, std::shared_ptr<Executor> executor = {}) {
  EngineOptions o;
  o.shards = shards;
  o.pin_workers = false;
  o.executor = std::move(executor);
  return o;
}

// Caller-driven options on the real clock (CLOCK_MONOTONIC): `shards` shards, no worker thread.
inline EngineOptions real_clock_manual(std::size_t shards = 1) {
  EngineOptions o;
  o.shards = shards;
  o.threads = Threads::manual;
  return o;
}

// The same on a 100 us tick, for the tests that want many periodic runs in little time.
inline EngineOptions fine_tick_workers(std::size_t shards, std::shared_ptr<Executor> executor = {}) {
  EngineOptions o = workers(shards, std::move(executor));
  o.tick = std::chrono::microseconds(100);
  return o;
}

// A pool of `threads` unpinned threads, for EngineOptions::executor.
inline std::shared_ptr<ThreadPoolExecutor> pool(std::size_t threads) {
  ThreadPoolOptions p;
  p.threads = threads;
  return std::make_shared<ThreadPoolExecutor>(p);
}

}  // namespace tickwheel::test

#undef TICKWHEEL_TEST_HAS_FEATURE
