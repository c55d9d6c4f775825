// tests/engine_support.hpp — fixtures shared by the test files that drive an Engine (engine_test,
// engine_edges_test, engine_executor_test, engine_stress_test, fault_injection_test,
// repeated_timer_test, bad_input_test): which build the tests run in (to size them, and to skip
// what a sanitizer's runtime cannot take), a recording callable (Probe, writing into a Tally) that
// can also throw, the ids a stop() result names, a log hook that collects the engine's notices, and
// the options of unpinned worker threads, with or without a thread-pool executor.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
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

// Worker-thread options: `shards` workers, unpinned (the 2-core test machine runs the test thread
// too), callbacks run on `executor` (none: on the workers).
inline EngineOptions workers(std::size_t shards, std::shared_ptr<Executor> executor = {}) {
  EngineOptions o;
  o.shards = shards;
  o.pin_workers = false;
  o.executor = std::move(executor);
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
