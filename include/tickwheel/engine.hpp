// tickwheel/engine.hpp — the multicore timer engine: one hierarchical wheel per shard, each driven
// by its own worker thread pinned to a core, with lock-free cross-thread schedule and cancel.
//
// Reasons you might want this
//   - Schedule and cancel from any thread in O(1), without a lock and, in steady state, without a
//     heap allocation: a producer takes a pooled node from a thread-local cache, stores the
//     callable in it and hands it to the owning shard through a moodycamel ConcurrentQueue with a
//     per-thread producer token. A cancel is one compare-and-swap on the node's generation word,
//     plus a record on a second queue; it does not wake the worker (a thread nudges a sleeping
//     worker once per 4096 hand-offs and cancels it posts to it, so that a worker asleep until a
//     far deadline cannot let cancelled timers pile up in its queues without bound).
//   - Throughput that grows with cores: shards share nothing on the hot path; each worker is
//     bound (hwloc) to one physical core and first-touches its own node memory.
//   - Bounded work per pass: at most `transfer_cap` hand-offs move into a wheel per pass (100,000
//     by default, as in Netty), so a flood cannot stall the firing of what is due.
//   - No idle ticking: in `sleep` mode a worker blocks until its wheel's next deadline and is woken
//     early only by a producer whose deadline is earlier than that.
//
// Reasons not to use it
//   - By default callbacks run on the shard's worker thread and must be short: a long callback
//     delays every timer of its shard. Give long ones an executor (EngineOptions::executor, see
//     tickwheel/executor.hpp), at the cost of a hand-off per fired timer.
//   - Each engine costs one thread per shard. Create one per process, not one per connection.
//   - A Timer handle tells fired from cancelled only until its node is reused for a later timer;
//     after that both cancelled() and expired() return false (see Timer).
//
// Memory-ordering guarantees, at the API level
//   - Whatever a thread did before schedule*() is visible to the callback when it runs (the node
//     is published through the hand-off queue: release on enqueue, acquire on dequeue).
//   - cancel() and the worker's decision to run a timer are one compare-and-swap each on the same
//     word: exactly one wins, and cancel() returns true iff the callback will never start.
//   - Engine::post_clear(): every schedule that happened before the call (made on this thread, or
//     on another whose result this thread saw with acquire ordering) is seen by the pass that
//     serves it, which cancels the timer unless it was claimed to run first.
//   - Timer::deadline() never pairs a timer's generation with a deadline of another lifetime of
//     its node: it answers for the lifetime the handle names, or nullopt.
//   - stop() returns after every worker has joined and every task handed to the executor has run:
//     every callback that started has finished, and its effects are visible to the thread that
//     called stop().
//
// Threads: every member of Engine and Timer may be called from any thread, with these exceptions:
// stop() is refused from inside a timer callback (it would join the thread it runs on, or wait for
// itself); in caller-driven mode a shard's poll() and next_deadline() are for the thread that
// polls it, one thread at a time; and what walks or empties a shard's wheel at once
// (Engine::clear(), for_each_pending()) is for the shard's own thread: a callback running on it,
// or the thread that owns it (own_shard). Timer::reschedule() works from any thread, exactly on
// the shard's own and as a posted request elsewhere (see there); so does clearing, as
// Engine::post_clear() from any thread. Timer::deadline() and remaining() answer anywhere.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/executor.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel {
namespace detail {
class Shard;
class EngineCore;
struct ProducerState;

// What the schedule path carries from choosing the shard and taking a node to handing the timer
// over (Engine::acquire, then the callable stored, then Engine::commit): the node, its shard, and
// the calling thread's producer state (null for a callback scheduling on its own shard, whose
// timer is linked directly). Not public API.
struct Reservation {
  Node* node = nullptr;
  Shard* shard = nullptr;
  ProducerState* producer = nullptr;
  Status status = Status::ok;  // not ok: nothing was taken, and the schedule fails with it
};
}  // namespace detail

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
// made or posted, as a bool would.
class Moved {
 public:
  enum class Outcome : std::uint8_t {
    refused,  // nothing moved nor posted
    moved,    // moved before the call returned: it runs at the new deadline, not before
    posted,   // posted to the shard, whose next pass applies it before it runs anything
  };
  constexpr explicit Moved(Outcome outcome) noexcept : outcome_(outcome) {}
  // NOLINTNEXTLINE(google-explicit-constructor,hicpp-explicit-conversions): reads as the bool it was
  constexpr operator bool() const noexcept { return outcome_ != Outcome::refused; }
  constexpr Outcome outcome() const noexcept { return outcome_; }
  constexpr bool posted() const noexcept { return outcome_ == Outcome::posted; }

 private:
  Outcome outcome_;
};

// A copyable handle to one scheduled timer (24 bytes). A default-constructed Timer, or one from a
// failed schedule, tests false; status() says why the schedule failed. It owns nothing: dropping it
// neither cancels nor leaks the timer. It may be used while its Engine exists, through stop() and
// any number of reuses of its node (a stale handle's calls return false); using it after the Engine
// is destroyed is undefined behaviour, since the node memory goes back to the system then.
class Timer {
 public:
  Timer() = default;

  // True iff the timer was pending and now will never run: one compare-and-swap, then a record
  // on the shard's cancel queue (the worker unlinks and recycles the node on its next pass; the
  // worker is not woken, but for the nudge above). False for a failed or default handle, or a timer that
  // fired, started firing, or was cancelled before. For a periodic timer: true iff it was not cancelled
  // before, and then no run starts after this returns; if a run is in progress (on another thread, or this is
  // its own callback) that run finishes and is the last (a cancel racing a run lets at most that one run
  // happen). O(1), lock-free, any thread, including callbacks.
  bool cancel() noexcept;
  // Whether cancel() won / the worker claimed the callback to run (with an executor: handed it
  // over). A periodic timer never expires: expired() is false for it. Exact until the node is
  // reused for a later timer (only after this one fired or was cancelled and its node was
  // recycled); after that both return false. Any thread; one atomic load.
  bool cancelled() const noexcept;
  bool expired() const noexcept;
  // Whether the timer may still run: scheduled and neither claimed to run (a one-shot) nor
  // cancelled, a hand-off not yet taken by its shard included; a periodic timer until it is
  // cancelled, its own runs included (as Wheel::is_pending). False for a failed or default handle,
  // one whose timer fired (a one-shot callback asking about itself gets false), was cancelled, or
  // whose node now holds another timer. A snapshot: on another thread the shard may claim the timer
  // right after. Any thread; one atomic load.
  bool pending() const noexcept;

  // Moves a pending timer to a new deadline in place, keeping this handle (and every copy and raw
  // form of it) and its callable: nothing is destroyed, constructed, or taken from the pool. The
  // deadline is taken as schedule_at() takes it (the engine's clock; rounded up to the tick, a
  // past one due at once); reschedule_after() counts as schedule_after() does (the engine's clock
  // now, or on the shard's own thread its loop time). A periodic timer between its runs: its next
  // run moves there, and the runs after it follow from that one (Wheel::reschedule: fixed rate
  // restarts its grid there).
  // Of several reschedules of one timer, from any threads, the last to return wins: one that
  // returned before another began is never applied after it.
  //
  // Returns a Moved, which tests true iff the timer was pending when asked and the move was made
  // (Outcome::moved) or posted (Outcome::posted):
  //   - on the shard's own thread (a callback running on that shard's worker or polling thread, or
  //     the thread that owns it, Engine::own_shard) the move is made before this returns, exact,
  //     as Wheel::reschedule: moved;
  //   - on any other thread it is posted to the shard, whose next pass applies it before it runs
  //     anything, iff the timer is still pending then (a hand-off not yet taken in is moved too):
  //     posted. A pass reads its clock before it applies moves, so the timer can run first only at
  //     a deadline it held before this call, and only if that deadline's tick had come by the time
  //     this returned; then it runs once there and the move is dropped. So a loop that moves its
  //     timers from another thread knows a fire can be for a deadline it replaced only after a
  //     posted move whose previous deadline had come. A new deadline before the sleeping worker's
  //     planned wake-up wakes it (a system call), as a hand-off would.
  // Exactly once holds whatever races it: the move never changes the generation, only the shard's
  // thread links nodes, and the fire claim and cancel() stay one compare-and-swap each.
  // False, with nothing touched or posted: a false or default handle, a timer that fired, is
  // firing (a one-shot asking about itself), was cancelled, or whose node holds another timer; a
  // periodic timer whose run is under way (its callback running, asked from inside it or not;
  // with an executor, from the hand-over of its task until the shard's first pass after the task
  // returned: its next run is linked then; move it after); once stop() has begun, from a thread
  // other than the shard's (nothing runs any more; a reschedule racing stop() may return true and
  // have no effect); and when the record cannot be posted (no memory for this thread's first use,
  // or for a record beyond the most it ever had in flight). Cost: one load; then on the shard's
  // thread O(1) (only the deadline written when the new one is in the same unit of the timer's
  // level, else an unlink and a link); elsewhere one exchange on the shard's move queue and a
  // fence, no lock, no allocation in steady state. noexcept.
  Moved reschedule(std::chrono::steady_clock::time_point deadline) noexcept;
  Moved reschedule_after(Nanos delay) noexcept;

  // The time the timer is due, as the shard will run it: its deadline rounded up to the tick and
  // clamped to the wheel's horizon (a timer already due may read a time before now). remaining():
  // deadline() minus the engine's clock now, zero once that is negative. Any thread, in every
  // state, racing nothing:
  //   - pending, in the wheel or a hand-off not yet taken in by its shard: its deadline (a
  //     periodic timer between runs: its next run's);
  //   - running: nullopt for a one-shot claimed to run (its callback asking about itself
  //     included) and for a periodic timer whose run is under way, as reschedule() says (its next
  //     run is not known until the shard takes it back);
  //   - fired, cancelled (clear() and post_clear() included), a stale handle (its node holds
  //     another timer), a false or default handle: nullopt. After stop(), a timer it handed back
  //     is pending: its deadline.
  // So a value comes exactly for the timers pending() calls true, but for a periodic timer whose
  // run is under way (pending() true, deadline() nullopt).
  // A snapshot: on another thread than the shard's the timer may be claimed, cancelled or moved
  // right after. A move racing the call (reschedule() applied by the shard meanwhile: at once on
  // its thread, or by its pass for a posted one) gives the old deadline or the new one, never
  // anything else; a posted move not applied yet gives the old one. Likewise a periodic timer
  // whose run ends during the call may read the deadline of that run or of the next one.
  // Cost: three loads and an acquire fence (no instruction on x86-64), a seqlock's read with the
  // generation word as its sequence; remaining() adds a clock read. No lock, never blocks,
  // never fails; noexcept.
  std::optional<Nanos> deadline() const noexcept;
  std::optional<Nanos> remaining() const noexcept;

  // The handle in 8 bytes, for storage beside a connection or in a lock-free slot; the engine's
  // timer_from_raw() gives the Timer back. Bit budget: the pending generation in the high 32 bits
  // (so a stale raw value is as safe as a stale Timer: it matches only its own lifetime of the
  // node, until 2^30 lifetimes of that node later), the node's engine-wide locator in the low 32
  // (a chunk of 4096 nodes, 20 bits, and the node in it, 12 bits; the chunk also names the shard).
  // 0 for a false or default handle, and for a timer on a node that got no locator: past 2^32 -
  // 4096 nodes handed out in one engine (256 GiB of node memory), or when the directory found no
  // memory for its entries as node memory grew (see engine/directory.hpp). Any thread; a load of
  // the node's locator, written once before the node was first handed out.
  std::uint64_t raw() const noexcept;

  explicit operator bool() const noexcept { return node_ != nullptr; }
  Status status() const noexcept { return status_; }
  std::size_t shard() const noexcept;  // the shard that owns the timer; 0 for a false handle

 private:
  friend class Engine;
  friend class detail::EngineCore;
  friend class detail::Shard;
  Timer(detail::Shard* shard, detail::Node* node, std::uint32_t gen) noexcept
      : shard_(shard), node_(node), gen_(gen), status_(Status::ok) {}
  explicit Timer(Status why) noexcept : status_(why) {}

  detail::Shard* shard_ = nullptr;
  detail::Node* node_ = nullptr;
  std::uint32_t gen_ = 0;  // the pending generation of the node's lifetime for this timer
  Status status_ = Status::no_timer;
};

// The counters of one shard (ShardStats) and, summed, of the whole engine (EngineStats): one list
// of fields, one sum.
struct StatCounters {
  std::uint64_t scheduled = 0;  // timers that reached the wheel (handed over or direct)
  std::uint64_t fired = 0;      // callbacks started (or handed to the executor); each
                                // run of a periodic timer counts
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

class Engine {
 public:
  // Validates the options, discovers the topology and builds the shards; starts no thread (see
  // start()). Throws std::invalid_argument for a bad option, naming it and its value.
  explicit Engine(EngineOptions opts = {});
  // Stops (as stop(), discarding its result) and destroys the callables of timers never run.
  // Must not run inside one of this engine's callbacks.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Schedules fn() to run on a worker at or after deadline (rounded up to the tick), exactly once
  // unless cancelled. The shard is the calling thread's: a worker's own shard inside a callback
  // (inserted straight into its wheel, no queue), otherwise a shard assigned round robin to the
  // thread on its first schedule and kept (so one thread's timers stay on one shard, in order, with
  // one producer token; threads that need another shard use schedule_on). Starts the workers on
  // first use. The callable rules are the Wheel's (at most 24 bytes, nothrow to construct and
  // destroy: a compile error otherwise). Fails, with nothing scheduled, when the engine is stopped
  // (Status::stopped), the shard holds max_pending_per_shard timers (Status::max_pending_reached),
  // or no node could be had (Status::out_of_memory); a null function pointer fails with
  // Status::null_callback, not counted as rejected.
  // Where `delay` counts from: on another thread, the engine's clock now (or an upper bound of it:
  // a timer never fires early); on the shard's own thread (a callback on it, or its owner), the
  // shard's loop time, as the Wheel counts from its last advance() and an event loop caches its
  // time once per iteration: the `now` of its last pass, or, if later, the clock read when its
  // polling loop last returned from finish_wait() or took ownership. No clock read there; for a
  // deadline from the exact clock, pass one to schedule_at(). Cost on the shard's own thread: the
  // Wheel's schedule plus a thread-local load and a few loads of the shard's state, no queue, no
  // fence. Lock-free; no allocation in steady state (a thread's first schedule on a shard allocates
  // its producer token and node cache). The one exception to lock-free: a schedule whose hand-off
  // races stop() on another thread waits, on the engine's lifecycle mutex, until stop() has joined
  // the workers and drained the queues, to learn whether its timer was taken (it then stands, among
  // those stop() returns) or not (it fails with Status::stopped). So a callback must not wait for a
  // thread that may be scheduling on this engine while stop() runs: stop() waits for the callback,
  // which waits for that thread, which waits for stop(). A schedule from a callback itself does not
  // deadlock: on a worker or polling thread it never waits, and on an executor's thread it waits at
  // most until stop() lets the mutex go to wait for the executor's tasks.
  template <class F>
  [[nodiscard]] Timer schedule_after(Nanos delay, F&& fn) noexcept {
    return schedule_on(any_shard, delay, std::forward<F>(fn));
  }
  template <class F>
  [[nodiscard]] Timer schedule_at(std::chrono::steady_clock::time_point deadline, F&& fn) noexcept {
    return submit(any_shard, deadline.time_since_epoch(), /*relative=*/false, std::forward<F>(fn));
  }
  // As schedule_at, on the given shard (Status::no_such_shard if there is none).
  template <class F>
  [[nodiscard]] Timer schedule_at_on(std::size_t shard, std::chrono::steady_clock::time_point deadline,
                                     F&& fn) noexcept {
    return submit(shard, deadline.time_since_epoch(), /*relative=*/false, std::forward<F>(fn));
  }
  // As schedule_after, on the given shard; shard >= shard_count() fails with Status::no_such_shard.
  template <class F>
  [[nodiscard]] Timer schedule_on(std::size_t shard, Nanos delay, F&& fn) noexcept {
    return submit(shard, delay, /*relative=*/true, std::forward<F>(fn));
  }

  // Schedules fn() to run every `period` until cancelled, with the Wheel's periodic semantics
  // (Cadence, Misfire and PeriodicOptions in wheel.hpp: the first run after opts.initial_delay, one
  // period if unset; fixed rate on a grid of whole ticks; fixed delay one period after the end of
  // the previous run, as the engine's clock read when the callback returned, also when it ran on
  // an executor). The timer keeps its node, and the Timer stays valid, for its whole life: each
  // re-arm is done by the shard's worker, without allocation, after the run has returned, so runs
  // never overlap. It counts once against max_pending_per_shard and once in pending. The shard is
  // chosen as for schedule_after; the callable rules are the Wheel's schedule_every's (at most 16
  // bytes). Fails with Status::bad_period, nothing scheduled, as Wheel::schedule_every does (the
  // engine's tick decides "whole ticks"), else as schedule_after. Lock-free; any thread.
  template <class F>
  [[nodiscard]] Timer schedule_every(Nanos period, F&& fn, PeriodicOptions opts = {}) noexcept {
    return schedule_every_on(any_shard, period, std::forward<F>(fn), opts);
  }
  // As schedule_every, on the given shard (Status::no_such_shard if there is none).
  template <class F>
  [[nodiscard]] Timer schedule_every_on(std::size_t shard, Nanos period, F&& fn,
                                        PeriodicOptions opts = {}) noexcept {
    detail::check_periodic_callable<F>();
    if (detail::is_null_callable(fn)) return Timer(Status::null_callback);
    const std::uint64_t meta = periodic_meta(period, opts);
    if (meta == 0) return Timer(Status::bad_period);
    const detail::Reservation r = acquire(shard);
    if (r.status != Status::ok) return Timer(r.status);
    detail::store_periodic_callable(r.node, meta, std::forward<F>(fn));
    const Nanos delay = opts.initial_delay.value_or(period);
    const Nanos from_now = delay > Nanos(0) ? delay : Nanos(0);
    if (r.producer == nullptr) return commit_own(r.node, r.shard, from_now, /*relative=*/true);
    return commit(r.node, r.shard, r.producer, from_now, /*relative=*/true);
  }

  // Starts the workers, if not started: each binds to its core, maps its first node memory and
  // fills its free-node reserve before this returns. Idempotent; any thread but a callback.
  // Throws std::system_error (or std::bad_alloc) if a worker thread cannot be created (memory or
  // a thread limit): the workers that did start keep running, no schedule is accepted meanwhile
  // (each fails with Status::out_of_memory after trying start() again), and the next start(),
  // once the system has room, creates only the missing ones. Caller-driven: only std::bad_alloc.
  void start();
  // Stops the engine: later schedules fail with Status::stopped, the workers finish the pass they
  // are in and are joined, every task already handed to the executor is waited for (a periodic
  // one is then linked again), and every timer that neither fired nor was cancelled (hand-offs not
  // yet transferred included, periodic timers between runs included) is returned, still pending:
  // cancel() on one returns true and destroys its callable (the engine's destructor destroys
  // those never cancelled).
  //
  // A cancel() racing stop() on another thread: it either wins before stop() reaches the timer
  // (the timer is not returned) or after (the timer is returned, and cancel() on the returned
  // Timer then returns false, cancelled() true). So a timer ends exactly one way, and an exact
  // account, once the cancelling threads are done, is: fired + cancel() calls that returned true
  // (the stopping thread's on returned Timers included) == timers scheduled; returned Timers whose
  // cancel() returns false are those a racing cancel took. Stop the cancelling threads first and
  // no returned Timer is refused.
  //
  // Memory: the list is reserved, for every timer the stopped wheels hold, before any is returned.
  // If that allocation fails, stop() throws std::bad_alloc with the engine stopped and nothing
  // lost: the timers stay pending, cancellable through their handles, and the next stop() returns
  // them (the overload below allocates nothing). Otherwise idempotent: once the timers were
  // returned a call returns nothing, at once; a call that finds another stop() waiting for
  // executor tasks waits with it, meanwhile calling the executor's run_while_stopping() on its own
  // thread, then returns as a call made after that stop() would (nothing, once it returned the
  // timers). So several loops may each call stop(), and every call returns.
  // Throws std::logic_error if called from inside a timer callback of this engine (a worker, a
  // polling thread or an executor thread), from the visitor of stop(visit), or from a
  // for_each_pending() visitor. The thread that owns a shard (own_shard) may call it outside those:
  // its ownership ends as the call begins, before it waits for another stop() (which may be
  // waiting for this owner to let go), as at its first poll() after a stop() from elsewhere. A
  // schedule racing stop() on another thread waits for it (see schedule_after()): no callback may
  // wait for such a thread.
  std::vector<Timer> stop();
  // As stop(), but calls visit(Timer) once per timer it would return instead of collecting them,
  // and returns how many: no allocation, so it cannot fail for memory. visit must be noexcept (a
  // compile error otherwise). It runs on the calling thread under the engine's lifecycle lock: it
  // may keep the Timer, or cancel() it (true; the callable is then destroyed with the engine), but
  // must not call stop() (std::logic_error) or wait for another thread that uses this engine.
  template <class Visit>
  std::size_t stop(Visit&& visit) {
    static_assert(std::is_nothrow_invocable_v<Visit&, Timer>,
                  "tickwheel: the visitor of Engine::stop(visit) must be callable as visit(Timer) and "
                  "noexcept: it runs while the engine is handing timers back, which must not be cut short");
    auto call = [&visit](Timer timer) noexcept { visit(timer); };
    return stop_visiting(
        &call, [](void* context, Timer timer) noexcept { (*static_cast<decltype(call)*>(context))(timer); });
  }

  // Caller-driven mode (Threads::manual): runs one pass of `shard` on the calling thread, as a
  // worker would: posted cancels, at most transfer_cap hand-offs, then the callbacks due at `now`
  // (the engine's clock when not given), at most `limit` of them; the rest run in the next poll,
  // earliest first. Returns how many callbacks ran. Callbacks run on this thread, and one that
  // schedules on this shard goes straight into its wheel. Cost: that of a worker pass, no lock
  // and no system call; a callback that throws is counted in stats().callback_errors and the pass
  // goes on. Any thread, but one at a time per shard. Returns 0 and runs nothing once stop() has
  // begun. Throws std::out_of_range for shard >= shard_count(), std::logic_error with
  // Threads::workers or while another thread is polling the same shard, and std::bad_alloc if
  // the engine's first start (which this may do, see start()) cannot get memory.
  std::size_t poll(std::size_t shard, std::size_t limit = kNoLimit);
  std::size_t poll(std::size_t shard, Nanos now, std::size_t limit = kNoLimit);
  // Caller-driven mode: when poll(shard) next has work: the shard's earliest deadline (a lower
  // bound where Wheel::next_deadline says, for a crowded upper-level slot), `now` if hand-offs are
  // waiting, nullopt if nothing is pending or once stop() has begun (nothing will run any more). A
  // loop may sleep until then; to be woken by a hand-off due earlier, wait between prepare_wait()
  // and finish_wait(). The thread that polls the shard only. Throws as poll().
  std::optional<Nanos> next_deadline(std::size_t shard) const;

  // Caller-driven mode: the polling loop's side of the wake-up protocol the workers use. Before the
  // loop waits, prepare_wait(shard, until) announces how long it means to: `until` in the engine's
  // clock (normally next_deadline(shard); nullopt: until woken). It returns false when hand-offs
  // already wait (poll at once instead of waiting); otherwise, until finish_wait(shard), a producer
  // whose hand-off's tick ends before `until` wakes the loop: it writes the shard's wakeup_fd(), or calls
  // EngineOptions::wake_loop. Cancels never wake it, but a thread that has posted 4096 hand-offs and
  // cancels to the shard since its last nudge wakes it whatever its plan, so a loop asleep until a
  // far deadline cannot let them pile up. stop() wakes it too. A producer pays a system call only
  // when it wakes the loop, never while the loop is awake. The polling thread only; one wait at a
  // time. Cost: a store and a fence; finish_wait() a read of the eventfd if it was signalled.
  // Throws as poll().
  //   for (;;) {
  //     engine.poll(shard);
  //     const std::optional<Nanos> until = engine.next_deadline(shard);
  //     if (engine.prepare_wait(shard, until)) {
  //       epoll_wait(...);  // the shard's wakeup_fd() is in the set; wait at most until `until`
  //       engine.finish_wait(shard);
  //     }
  //     ... the loop's own events ...
  //   }
  bool prepare_wait(std::size_t shard, std::optional<Nanos> until);
  void finish_wait(std::size_t shard);
  // The shard's eventfd (non-blocking, close-on-exec, owned by the engine until it is destroyed):
  // readable once a producer wakes the loop (see prepare_wait()). Add it to the loop's epoll set;
  // finish_wait() drains it. Throws as poll(), and std::logic_error when EngineOptions::wake_loop
  // is set (there is no eventfd then). Any thread.
  int wakeup_fd(std::size_t shard) const;

  // Caller-driven mode: makes the calling thread the owner of `shard`, the shard it polls. From now
  // on its schedule_after()/schedule_at() without a shard go to that shard, and its schedules and
  // cancels on it go straight into the shard's wheel, as a callback's do: no queue, no fence, no
  // wake-up, so next_deadline() is exact right after them, and a relative deadline counts from the
  // shard's loop time, not a clock read (see schedule_after()). Only the owner polls the shard. The
  // ownership ends with release_shard(), with the thread's exit, as the owner's own stop() begins,
  // or at the owner's first poll() after stop() began: stop() from another thread wakes the
  // owner's loop (as a producer would) and waits for that poll, or for the owner's stop(). A
  // thread owns at most one shard. Starts the engine if need be. Throws std::logic_error with
  // worker threads, for a shard that another thread owns or is polling, when this thread owns
  // another shard, or once stop() has begun; std::out_of_range for shard >= shard_count(). No cost
  // on any other thread.
  void own_shard(std::size_t shard);
  // Ends the calling thread's ownership of `shard` (std::logic_error if it does not own it).
  void release_shard(std::size_t shard);
  // The shard the calling thread owns (own_shard), or nullopt: it owns none of this engine's, its
  // ownership ended (release_shard, or its first poll() after a stop() from another thread), or
  // it never had one. A loop asks before release_shard(), which throws once ownership ended. Any
  // thread; a thread-local load; no lock.
  std::optional<std::size_t> owned_shard() const noexcept;
  // Whether stop() has begun, on any thread: nothing will run any more, a caller-driven loop may
  // leave (next_deadline() gives nullopt both for "nothing pending" and for "stopped"; this tells
  // them apart). Any thread; one load; no lock.
  bool stopped() const noexcept;

  // With EngineOptions::clock: tells the engine that its clock moved, so that every worker asleep
  // (it cannot time its sleep on that clock) wakes and runs what is now due; a caller-driven loop
  // waiting in prepare_wait() is woken too. Any thread; a system call per sleeping shard. Without
  // a clock of one's own it only wakes sleepers early, which is harmless.
  void clock_moved() noexcept;

  // The Timer whose raw() this is: it names that timer and answers as the original handle does
  // (pending() false once the timer fired or was cancelled; cancel() and reschedule() then false).
  // 0, and any value that names no node this engine handed out (a forged, garbled, or another
  // engine's raw value), give an empty Timer (false, Status::no_timer): every part is checked
  // against the engine's node directory before any node is read, so a bad value is never undefined
  // behaviour. A raw value of another engine, live or destroyed, whose locator names a node here
  // gives a handle that matches nothing here (pending() false; cancel() and reschedule() false)
  // but by a 1 in 2^30 chance: each engine starts its nodes' generations at a value of its own.
  // Any thread; no lock; three loads.
  Timer timer_from_raw(std::uint64_t raw) const noexcept;

  // Cancels every pending timer of `shard`, as cancel() on each would: their callables are
  // destroyed, never run, their handles answer cancelled() true, and each counts in
  // stats().cancelled (and stats().cleared). Cancels and moves posted to the shard are applied,
  // and hand-offs waiting for it taken in, first, so every timer whose schedule returned before
  // this call began is cancelled, unless it already ran. A cancel() racing it on another thread
  // wins or loses as it would against any cancel: exactly one of them returns true (or counts
  // here). A periodic timer whose run is under way, as reschedule() says (this call inside it, or
  // an executor's task), is not cancelled.
  // Returns how many it cancelled. Cost: O(pending + hand-offs waiting), one compare-and-swap per
  // timer, no allocation, no system call. The shard's own thread only, where the shard can be
  // emptied at once and the count is exact: a callback running on that shard, or the thread that
  // owns it in caller-driven mode (own_shard). Any other thread posts the clear instead
  // (post_clear()). Throws std::out_of_range for shard >= shard_count(), std::logic_error from any
  // other thread (the shard's wheel is its thread's alone) and from inside a for_each_pending()
  // visitor.
  std::size_t clear(std::size_t shard);

  // Clears `shard` from any thread: posts a request that the shard serves at the start of its next
  // pass, as clear() on its own thread would: after that pass has applied the cancels and moves
  // posted to it and taken in every hand-off waiting (all of them, not capped by transfer_cap),
  // and before it runs anything, it cancels every timer then pending on the shard. A sleeping
  // worker, or a caller-driven loop waiting between prepare_wait() and finish_wait(), is woken for
  // it (a system call); a caller-driven shard serves it at its next poll(), and next_deadline()
  // says "now" until then. Requests that one pass finds waiting are served by one clear.
  //
  // Which timers it cancels:
  //   - every timer of the shard whose schedule returned before this call began (on this thread,
  //     or on another that passed its result here with release/acquire ordering) is cancelled,
  //     unless it was claimed to run (inline: its callback started; with an executor: handed to
  //     it) or cancelled before the serving pass: a timer due while this call is made may still
  //     fire, in the pass under way. A periodic timer whose run is under way then, as
  //     reschedule() says (with an executor, out on its task), is not cancelled and runs on;
  //   - a timer scheduled concurrently, or after this call returned but before the serving pass
  //     took in its hand-off, may or may not be: it is cancelled iff that pass finds it pending.
  //     Either way it ends exactly once: cancelled (never run, cancel() false, cancelled() true,
  //     counted in stats().cleared) or left as any timer is. A timer scheduled after the serving
  //     pass is untouched. Posted moves before it do not save a timer; a cancel() racing the clear
  //     wins or loses as against clear().
  // From a callback on the shard, or a for_each_pending() visitor, the request waits for the next
  // pass: the pass under way (or the walk) goes on unchanged, callbacks still due in it run; use
  // clear() there for an immediate clear. The counts are in stats(): `clears`, `cleared`.
  //
  // Returns true if the request was posted, or there was nothing to clear (the engine never
  // started, so it holds no timer); false once stop() has begun, with nothing posted: stop()
  // hands back the timers still pending. A request posted before stop() began and not served by
  // a pass is served by stop() (those timers are cancelled, not handed back); one racing stop()
  // on another thread may return true and be served by stop() or not at all (its timers are then
  // handed back, pending). Cost: an atomic increment, a fence and a load, plus a system call when
  // it wakes a sleeper; no lock, no allocation; it never blocks a producer or waits for the shard.
  // The serving pass pays O(pending + hand-offs waiting). Any thread, callbacks, executor tasks
  // and visitors included. Throws std::out_of_range for shard >= shard_count().
  bool post_clear(std::size_t shard);
  // post_clear() for every shard (each served by its own next pass, independently: there is no
  // instant at which the whole engine is empty). Returns as post_clear() does. noexcept.
  bool post_clear_all() noexcept;

  // Calls visit(Timer, Nanos deadline) once for every pending timer of `shard` (after applying
  // posted cancels and moves and taking waiting hand-offs in, as clear() does), the deadline as
  // Timer::deadline() reads it, in no particular order; returns how many. A periodic timer whose
  // run is under way, as reschedule() says, is not visited. The visitor may keep each Timer, cancel or
  // reschedule it (posted, as from another thread, so the walk's lists stay as they are: the moves and the
  // cancels' unlinks happen at the next pass), and schedule (a new timer may or may not be
  // visited); it must not call clear() or for_each_pending() on this shard (std::logic_error), nor
  // poll() it. What it throws leaves the walk and propagates. Cost: O(pending + hand-offs waiting)
  // plus one test per 64 slots, no allocation. Threads and errors as clear().
  template <class Visit>
  requires std::invocable<Visit&, Timer, Nanos> std::size_t for_each_pending(std::size_t shard,
                                                                             Visit&& visit) {
    return walk_shard(shard, &visit, [](void* context, Timer timer, Nanos deadline) {
      (*static_cast<std::remove_reference_t<Visit>*>(context))(timer, deadline);
    });
  }

  EngineStats stats() const;  // totals and per shard; any thread; reads relaxed counters
  std::size_t shard_count() const noexcept;
  Nanos tick() const noexcept;
  // The engine's clock now: CLOCK_MONOTONIC, or EngineOptions::clock. The time schedule_at() and
  // next_deadline() speak, so `schedule_at(steady_clock::time_point(now() + d), fn)` counts d from
  // this exact read wherever it is called (schedule_after() on the shard's own thread counts from
  // the loop's time instead). A clock read; any thread.
  Nanos now() const noexcept;

  static constexpr std::size_t any_shard = static_cast<std::size_t>(-1);
  static constexpr std::size_t kNoLimit = static_cast<std::size_t>(-1);

 private:
  template <class F>
  Timer submit(std::size_t shard, Nanos when, bool relative, F&& fn) noexcept {
    detail::check_callable<F>();
    if (detail::is_null_callable(fn)) return Timer(Status::null_callback);
    const detail::Reservation r = acquire(shard);
    if (r.status != Status::ok) return Timer(r.status);
    detail::store_callable(r.node, std::forward<F>(fn));
    if (r.producer == nullptr) return commit_own(r.node, r.shard, when, relative);
    return commit(r.node, r.shard, r.producer, when, relative);
  }
  // Out of line (EngineCore::acquire): picks the shard, checks admission, takes a node.
  detail::Reservation acquire(std::size_t shard) noexcept;
  // Out of line (EngineCore::commit): sets the deadline and generation, hands the node over (or
  // links it directly).
  // The reservation's parts as arguments, in registers: read back from memory right after the
  // callable's store, a reference to the struct cost the owner's schedule a stall.
  Timer commit(detail::Node* node, detail::Shard* shard, detail::ProducerState* producer, Nanos when,
               bool relative) noexcept;
  // commit() for the shard's own thread (a null producer): straight into its wheel, in a function
  // of its own, so the owner's schedule pays none of the hand-off's registers.
  static Timer commit_own(detail::Node* node, detail::Shard* shard, Nanos when, bool relative) noexcept;
  // for_each_pending(), type-erased: each(context, timer, deadline) per pending timer.
  std::size_t walk_shard(std::size_t shard, void* context,
                         void (*each)(void* context, Timer timer, Nanos deadline));
  // The visitor form of stop(): each(context, timer) per timer handed back.
  std::size_t stop_visiting(void* context, void (*each)(void* context, Timer timer) noexcept);
  // detail::periodic_meta() against the engine's tick.
  std::uint64_t periodic_meta(Nanos period, const PeriodicOptions& opts) const noexcept;

  std::unique_ptr<detail::EngineCore> core_;
};

}  // namespace tickwheel
