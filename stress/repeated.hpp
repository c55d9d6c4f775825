// stress/repeated.hpp — tickwheel::RepeatedTimer driven during the run: a few named timers,
// started, stopped, restarted and reset at random by one thread of their own, on an Engine of their
// own, each run checked against the timer's contract (tickwheel/repeated_timer.hpp). The check and
// why the run that had begun before a control call is allowed: docs/stress.md, "RepeatedTimer's
// check".
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "options.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/repeated_timer.hpp"
#include "workload.hpp"

namespace tickwheel::stress {

// What the repeated timers did, and what broke their rules.
struct RepeatedReport {
  std::uint64_t timers = 0;
  std::uint64_t starts = 0, stops = 0, restarts = 0, resets = 0;  // control calls made
  std::uint64_t refused = 0;        // calls that returned false (the timer was never destroyed)
  std::uint64_t runs = 0;           // on_trigger calls
  std::uint64_t begun_before = 0;   // runs allowed as begun before a control call (docs/stress.md)
  std::uint64_t too_early = 0;      // runs sooner than the timeout after their arm (a broken rule)
  std::uint64_t while_stopped = 0;  // runs while stopped, past the one begun before stop() returned
  EngineStats engine;               // of their own engine, after every timer was destroyed
  std::uint64_t returned = 0;       // timers that engine's stop() handed back (must be none)
};

class RepeatedLoad {
 public:
  // Builds the engine (its worker bound to `cpus`, when there are any) and `o.repeated` stopped
  // timers. Throws as Engine's constructor does.
  RepeatedLoad(const Options& o, const std::vector<unsigned>& cpus,
               std::function<void(std::string_view)> log);
  ~RepeatedLoad();
  RepeatedLoad(const RepeatedLoad&) = delete;
  RepeatedLoad& operator=(const RepeatedLoad&) = delete;

  // Starts the control thread (bound to `cpus`; "" or why it could not be bound).
  std::string start(const std::vector<unsigned>& cpus);
  // Stops and joins the control thread, destroys every timer (which waits for a run in progress),
  // stops the engine and returns the figures. Call once.
  RepeatedReport finish();
  // The control thread's kernel id, once started (0 before).
  pid_t control_tid() const noexcept { return control_tid_.load(std::memory_order_acquire); }
  // The thread that ran the first run, once one ran (0 before).
  pid_t worker_tid() const noexcept { return worker_tid_.load(std::memory_order_acquire); }

 private:
  // One timer's bound and counts, under its mutex (docs/stress.md, "RepeatedTimer's check").
  struct alignas(kCacheLine) Watch {
    std::mutex mutex;
    std::int64_t timeout_ns = 0;
    std::int64_t not_before = 0;  // the earliest a run may start; kNever while stopped
    bool allowance = false;       // one run begun before the latest control call may still start
    bool running = false;         // as the control thread last left it
    std::uint64_t runs = 0, begun_before = 0, too_early = 0, while_stopped = 0;

    // A call that arms, its clock read before it at `before`: the next run comes a timeout after,
    // and the one run begun before the call may still come.
    void arm(std::int64_t before) noexcept {
      not_before = before + timeout_ns;
      allowance = true;
      running = true;
    }
  };

  void on_run(std::size_t i) noexcept;
  void control() noexcept;  // the control thread's body
  void call(std::mt19937_64& rng);

  const Options& o_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Watch[]> watches_;
  std::vector<std::unique_ptr<RepeatedTimer>> timers_;
  // The control calls; written by the control thread, read after it is joined.
  RepeatedReport counts_;
  std::atomic<bool> stop_{false};  // relaxed: a request, looked at once per call
  std::atomic<pid_t> control_tid_{0};
  std::atomic<pid_t> worker_tid_{0};
  std::thread thread_;
};

}  // namespace tickwheel::stress
