// tickwheel/engine_options.hpp — what an Engine is built with (EngineOptions, its wait and
// thread modes) and what it reports (PassReport, EngineStats). Included by tickwheel/engine.hpp.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tickwheel/executor.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel {

// How a worker waits between passes.
enum class WaitStrategy {
  sleep,   // block until the wheel's next deadline (futex, timer slack 1 ns); wakes early only for an
           // earlier hand-off. Idle costs nothing; wake-up latency is the kernel's (tens of us).
  spin,    // busy-poll: lowest latency, one core kept busy per shard. For isolated cores.
  hybrid,  // spin for EngineOptions::hybrid_spin after each pass, then sleep.
};

// Who drives the shards' wheels.
enum class Threads {
  workers,  // one worker thread per shard, started lazily, bound to its core (the default)
  manual,   // no threads: the caller's own loop calls Engine::poll(shard) (see there)
};

// What one pass of a shard did, as EngineOptions::on_pass reports it. Times are the engine's clock.
struct PassReport {
  std::size_t shard = 0;
  std::optional<Nanos> planned;  // the wake-up the wait before it aimed at, if it had one
  Nanos start{0};                // the clock read the pass ran at
  Nanos end{0};                  // the clock read when it was done (read only for this report)
  std::size_t cancels = 0;       // cancel records taken from the shard's queue
  std::size_t transferred = 0;   // hand-offs moved into the wheel (at most transfer_cap)
  std::size_t fired = 0;         // callbacks run (or handed to the executor)
  std::uint64_t moved = 0;       // timers moved down a level of the wheel
};

// Runtime options, validated by the constructor (std::invalid_argument naming the bad value).
struct EngineOptions {
  std::size_t shards = 0;                    // 0 = one per physical core (hwloc)
  Nanos tick{std::chrono::milliseconds(1)};  // each shard's wheel tick, 1 us .. 1 h
  std::size_t transfer_cap = 100'000;        // hand-offs moved into a wheel per pass, >= 1
  // 0 = unlimited. Past it a schedule fails (Status::max_pending_reached). A timer holds its place
  // from its schedule until it is claimed to run or its cancel wins (ShardStats::pending), both
  // counted at once, on the thread that does them; so the limit is never exceeded, and is reached
  // early only by schedules other threads have in progress (admitted, not yet handed over).
  std::size_t max_pending_per_shard = 0;
  // Timers per shard to make room for at start: each worker, once bound to its core (caller-driven:
  // the thread that starts the engine), maps and first-touches node memory for this many timers
  // plus its hand-out reserve (1 Ki nodes, grown with bursts) before the engine is ready, so that
  // no node a timer takes costs a page fault on a hot path until a shard holds more than that.
  // 0 = none (memory is mapped and touched as the shard grows). At most 2^32 - 1, and at most
  // max_pending_per_shard when set.
  std::size_t reserve_per_shard = 0;
  // Also lock each shard's reserve in memory (mlock). Needs reserve_per_shard. Where mlock is
  // refused (no CAP_IPC_LOCK and RLIMIT_MEMLOCK too low) the shard runs with its reserve touched but
  // not locked, and the log hook says so, once per engine.
  bool lock_memory = false;
  WaitStrategy wait = WaitStrategy::sleep;
  bool pin_workers = true;  // bind each worker to its core (hwloc)
  // Processing units (OS indexes) for the workers, shard i on cpus[i % size]; empty = the first
  // PU of each physical core in turn. Naming a PU that does not exist is not an error: binding
  // fails, the engine runs unpinned, and stats and the log say so.
  std::vector<unsigned> cpus{};
  // Spin time before sleeping in hybrid mode, >= 0; a spin past the end of the clock (up to
  // Nanos::max()) saturates: it spins until there is work, as WaitStrategy::spin does.
  Nanos hybrid_spin{std::chrono::microseconds(50)};
  // One-line notices (binding refused, ...), at most once per kind per engine, never on the hot
  // path. Default: standard error.
  std::function<void(std::string_view)> log{};
  Threads threads = Threads::workers;
  // The engine's clock, for tests and simulations that drive time themselves: what
  // schedule_after() counts from, poll(shard) reads, and, with Threads::workers, what each pass
  // reads. Any thread may call it; it must never go back and must not be negative (the
  // constructor reads it once and refuses a negative time). Null: CLOCK_MONOTONIC
  // (std::chrono::steady_clock). A worker cannot time a sleep on a clock of the user's: with one,
  // a `sleep` or `hybrid` worker sleeps until woken, so whoever moves the clock calls
  // Engine::clock_moved() (or use WaitStrategy::spin).
  Nanos (*clock)() noexcept = nullptr;
  // Caller-driven mode only: how a producer wakes a shard's polling loop that waits (see
  // prepare_wait()) past the deadline of a timer it hands over. Null: the engine writes the shard's
  // eventfd (wakeup_fd()), for a loop that waits in epoll or poll. Set: called instead, with the
  // shard's index, on the producer's thread, only when the loop must wake (never while it is
  // awake); for loops that wait on something else (io_uring, a condition variable). It must be
  // short and must not call the engine; what it throws is dropped.
  std::function<void(std::size_t shard)> wake_loop{};
  // Each engine costs a thread per shard: when more than this many engines are alive at once, the
  // log says so, once per process (a sign of an engine per connection or per request). 0: never.
  std::size_t warn_engines_above = 64;
  // Where fired callbacks run (see tickwheel/executor.hpp): null (or an InlineExecutor) = on the
  // shard's worker, with no hand-off. Shared by every shard; kept alive by the engine.
  std::shared_ptr<Executor> executor{};
  // Called with the exception of each callback that throws, on the thread that ran it (a worker,
  // the polling thread, or an executor's), after it is counted in stats().callback_errors. It must
  // not throw (what it throws is dropped). Null: the first such exception is logged once, through
  // `log`, and the rest are only counted.
  std::function<void(std::exception_ptr)> on_callback_error{};
  // Called at the end of every pass of every shard, on the thread that ran it (a worker, or the
  // thread in poll()), with what the pass did: for profilers (the stress harness's per-pass
  // histograms). It must be short and must not call the engine; noexcept by its type. Null (the
  // default): nothing is reported, and a pass reads no clock and no counter for it.
  void (*on_pass)(void* context, const PassReport& pass) noexcept = nullptr;
  void* on_pass_context = nullptr;
};

// What Timer::reschedule() did (see there). Tests true iff the timer was pending and the move was

// The counters of one shard (ShardStats) and, summed, of the whole engine (EngineStats): one list
// of fields, one sum.
struct StatCounters {
  std::uint64_t scheduled = 0;  // timers that reached the wheel (handed over or direct), or
                                // went to the executor from their scheduling thread
  std::uint64_t fired = 0;      // callbacks started (or handed to the executor, by the shard
                                // or, for a timer due when scheduled, by the scheduling thread:
                                // Executor::any_thread); each run of a periodic timer counts
  // Of `fired`, the timers due when scheduled that their scheduling thread handed to the executor
  // itself (Executor::any_thread): no pass ran them, so they are in no on_pass record.
  std::uint64_t fired_at_schedule = 0;
  std::uint64_t cancelled = 0;  // timers whose cancel won and that the worker recycled
  std::uint64_t rearmed = 0;    // periodic runs and skips after which a next period was
                                // due (see WheelStats: scheduled + rearmed == fired +
                                // skipped + cancelled + pending, once the shard is still)
  std::uint64_t skipped = 0;    // periodic runs dropped by Misfire::skip
  std::uint64_t rejected = 0;   // schedules refused (max_pending_per_shard, stopped, ...)
  // Timers scheduled on the shard and not yet claimed to run (a one-shot) nor cancelled: a
  // hand-off still in the queue counts, a callback running does not, a periodic timer counts once
  // from its schedule to its cancel. Counted as each happens, on the thread it happens on, so the
  // snapshot needs no pass of the worker; exact once the threads are still. What
  // max_pending_per_shard limits. After stop(), the timers it handed back until they are cancelled.
  std::uint64_t pending = 0;
  std::uint64_t queue_depth = 0;        // hand-offs waiting in the queue (approximate)
  std::uint64_t transfer_cap_hits = 0;  // passes that moved transfer_cap hand-offs and left more
  std::uint64_t passes = 0;             // worker passes
  std::uint64_t wakeups = 0;            // returns from a blocking wait
  std::uint64_t callback_errors = 0;    // callbacks that threw (caught; the worker goes on)
  std::uint64_t executing = 0;          // handed to the executor and not yet returned
  std::int64_t max_tick_lag_ns = 0;     // worst lateness of a pass's start against its planned wake
  // Moves the shard applied (Timer::reschedule() calls that took effect, on its thread or from a
  // posted record). A move changes none of the counts above.
  std::uint64_t rescheduled = 0;
  // Clears the shard did: each Engine::clear() call, and each pass (or stop()) that served posted
  // requests (Engine::post_clear(); the requests one pass finds waiting are served by one clear).
  std::uint64_t clears = 0;
  // Timers those clears cancelled; each is also counted in `cancelled`.
  std::uint64_t cleared = 0;

  // Adds each count of `o` to this one's; max_tick_lag_ns keeps the worse of the two.
  StatCounters& operator+=(const StatCounters& o) noexcept {
    scheduled += o.scheduled;
    fired += o.fired;
    fired_at_schedule += o.fired_at_schedule;
    cancelled += o.cancelled;
    rearmed += o.rearmed;
    skipped += o.skipped;
    rejected += o.rejected;
    pending += o.pending;
    queue_depth += o.queue_depth;
    transfer_cap_hits += o.transfer_cap_hits;
    passes += o.passes;
    wakeups += o.wakeups;
    callback_errors += o.callback_errors;
    executing += o.executing;
    max_tick_lag_ns = max_tick_lag_ns > o.max_tick_lag_ns ? max_tick_lag_ns : o.max_tick_lag_ns;
    rescheduled += o.rescheduled;
    clears += o.clears;
    cleared += o.cleared;
    return *this;
  }
};

struct ShardStats : StatCounters {
  int bound_cpu = -1;   // OS index of the PU the worker is bound to, -1 if not bound
  std::string binding;  // "bound to PU n", "not pinned (pin_workers = false)", or why binding failed
};

// The shards' counters summed (StatCounters::operator+=), and each shard's.
struct EngineStats : StatCounters {
  std::vector<ShardStats> shards;
};

}  // namespace tickwheel
