// tickwheel/engine.hpp — the multicore timer engine: one hierarchical wheel per shard, driven by a
// worker thread pinned to a core or by the caller's own event loop, with lock-free schedule and
// cancel from any thread.
//
// Use it for: timers scheduled and cancelled from many threads without a lock or, in steady state,
// an allocation (a producer hands a pooled node to its shard through a queue; a cancel is one
// compare-and-swap); a loop thread that owns its shard and calls straight into its wheel; bounded
// work per pass (EngineOptions::transfer_cap); no idle ticking.
//
// Not for: long callbacks on the default inline executor (they delay their shard: give them an
// Executor, tickwheel/executor.hpp); an engine per connection (each costs a thread per shard in
// worker mode); telling fired from cancelled after the timer's node was reused (see Timer).
//
// Time: every time in and out of the Engine and Timer is a Nanos on the engine's clock, now():
// CLOCK_MONOTONIC (steady_clock's epoch), or EngineOptions::clock.
//
// Guarantees (the races behind them: docs/DESIGN.md, "The Engine's races"):
//   - what a thread did before a schedule is visible to the callback (release/acquire through the
//     hand-off);
//   - cancel() and the shard's claim to run are one compare-and-swap each on one word: exactly
//     one wins, and cancel() is true iff the callback never starts;
//   - stop() returns after every started callback has finished, its effects visible to the caller.
//
// Threads: any thread may call any member, except that stop() is refused inside a callback; a
// shard's poll(), next_deadline(), prepare_wait() and finish_wait() are for the thread polling it;
// clear() and for_each_pending() are for the shard's own thread (a callback on it, or its owner).
#pragma once

#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/own_lane.hpp"
#include "tickwheel/engine_options.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel {
namespace detail {
class Shard;
class EngineCore;
struct ProducerState;

// What a schedule carries from taking a node (Engine::acquire) to handing it over (commit): the
// node, its shard, and the caller's producer state (null on the shard's own thread).
struct Reservation {
  Node* node = nullptr;
  Shard* shard = nullptr;
  ProducerState* producer = nullptr;
  Status status = Status::ok;  // not ok: nothing was taken, and the schedule fails with it
};
}  // namespace detail

// What Timer::reschedule() did. Tests true iff the timer was pending and the move was made or
// posted, as a bool would.
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

// A copyable 24-byte handle to one scheduled timer; it owns nothing (dropping it neither cancels
// nor leaks). A default handle, or one from a failed schedule, tests false and status() says why.
// Valid while its Engine exists, stop() and node reuse included (a stale handle's calls return
// false); undefined behaviour after the Engine is destroyed. Every call: any thread, no lock.
class Timer {
 public:
  Timer() = default;

  // True iff the timer was pending and now never runs (one compare-and-swap; the shard unlinks it
  // at its next pass and is not woken for it). A periodic timer: no run starts after this returns
  // (a run under way finishes). False for a false handle, or a timer that fired, is firing or was
  // cancelled. O(1); callbacks included.
  bool cancel() noexcept;
  // Whether cancel() won / the shard claimed the callback to run. A periodic timer never expires.
  // Exact until the node is reused for a later timer; both false after that. One load.
  bool cancelled() const noexcept;
  bool expired() const noexcept;
  // Whether the timer may still run: scheduled (a hand-off not yet taken in included) and neither
  // claimed to run (a one-shot) nor cancelled; a periodic timer until cancelled. A snapshot. One load.
  bool is_pending() const noexcept;

  // Moves a pending timer to `deadline` (as schedule_at() takes it), keeping the handle and the
  // callable; a periodic timer's next run moves and its grid follows. On the shard's own thread
  // the move is made before this returns (Outcome::moved); elsewhere it is posted and applied by the
  // shard's next pass before it runs anything, if the timer is still pending then (Outcome::posted;
  // it may still fire at its old deadline if that tick had come). Of several reschedules, the last
  // to return wins. Refused (false, nothing posted) for a timer cancel() would refuse, a periodic
  // timer whose run is under way, after stop() began (off the shard's thread), or when the record
  // finds no memory. O(1); no lock; no allocation in steady state.
  Moved reschedule(Nanos deadline) noexcept;
  // reschedule(now + delay), now counted as schedule_after() counts it.
  Moved reschedule_after(Nanos delay) noexcept;

  // The time the shard will run it (deadline rounded up to the tick and clamped; a periodic timer's
  // next run): a value exactly where is_pending() is true, but nullopt while a periodic run is
  // under way. A snapshot that never mixes two lifetimes of the node: a racing move gives the old or
  // the new deadline. Three loads, no lock. remaining(): deadline() - now(), at least zero.
  std::optional<Nanos> deadline() const noexcept;
  std::optional<Nanos> remaining() const noexcept;

  // The handle in 8 bytes (the generation high, the node's engine-wide locator low), for storage
  // beside a connection; Engine::timer_from_raw() gives the Timer back. 0 for a false handle and
  // for a node that got no locator (past 2^32 - 4096 nodes in one engine). One load.
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
  Moved move_to(Nanos when, bool relative) noexcept;  // reschedule() and reschedule_after()

  detail::Shard* shard_ = nullptr;
  detail::Node* node_ = nullptr;
  std::uint32_t gen_ = 0;  // the pending generation of the node's lifetime for this timer
  Status status_ = Status::no_timer;
};

class Engine {
 public:
  static constexpr std::size_t kAnyShard = static_cast<std::size_t>(-1);  // the caller's shard
  static constexpr std::size_t kNoLimit = static_cast<std::size_t>(-1);   // poll(): no limit

  // Validates the options (std::invalid_argument naming the bad one) and builds the shards; starts
  // no thread (see start()).
  explicit Engine(EngineOptions opts = {});
  // stop(), its result discarded, then destroys the callables of timers never run: a read of every
  // node pool in address order if any callable scheduled had a destructor, nothing otherwise. Not
  // from inside one of this engine's callbacks.
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs fn() once, at or after now + delay rounded up to the tick, unless cancelled. The shard:
  // the caller's own (a callback's, or the one it owns: straight into the wheel, no queue, no
  // fence), else one given to the thread round robin at its first schedule. `now`: on the shard's
  // own thread its loop time (its last pass, or its last return from finish_wait()), no clock read;
  // elsewhere the clock. fn: as Wheel::schedule_at's (a compile error otherwise). Starts the
  // engine if need be. Fails, nothing scheduled: stopped, max_pending_reached, out_of_memory,
  // null_callback. Lock-free, no allocation in steady state (a thread's first schedule on a shard
  // allocates its producer state); a schedule racing stop() waits for it (docs/DESIGN.md).
  template <class F>
  [[nodiscard]] Timer schedule_after(Nanos delay, F&& fn) noexcept {
    return submit(kAnyShard, delay, /*relative=*/true, std::forward<F>(fn));
  }
  // As schedule_after, at `deadline` on the engine's clock (now() + delay counts from that read).
  // From another thread, a deadline whose tick is over, for a shard whose thread sleeps past it and
  // whose executor takes tasks from any thread, goes to the executor from the calling thread, the
  // shard's thread not woken (Executor::any_thread): an answer due now costs one hand-off.
  template <class F>
  [[nodiscard]] Timer schedule_at(Nanos deadline, F&& fn) noexcept {
    return submit(kAnyShard, deadline, /*relative=*/false, std::forward<F>(fn));
  }
  // As schedule_after / schedule_at, on the given shard (Status::no_such_shard if there is none).
  template <class F>
  [[nodiscard]] Timer schedule_after_on(std::size_t shard, Nanos delay, F&& fn) noexcept {
    return submit(shard, delay, /*relative=*/true, std::forward<F>(fn));
  }
  template <class F>
  [[nodiscard]] Timer schedule_at_on(std::size_t shard, Nanos deadline, F&& fn) noexcept {
    return submit(shard, deadline, /*relative=*/false, std::forward<F>(fn));
  }

  // Runs fn() every `period` until cancelled, with the Wheel's Cadence and Misfire (a fixed delay
  // counts from the clock read when the run returned, on any executor). One node and one handle
  // for life; re-armed by the shard after each run, so runs never overlap; counts once in pending.
  // fn: as Wheel::schedule_every's. Fails with bad_period as Wheel::schedule_every (the engine's
  // tick decides whole ticks), else as schedule_after.
  template <class F>
  [[nodiscard]] Timer schedule_every(Nanos period, F&& fn, PeriodicOptions opts = {}) noexcept {
    return schedule_every_on(kAnyShard, period, std::forward<F>(fn), opts);
  }
  template <class F>
  [[nodiscard]] Timer schedule_every_on(std::size_t shard, Nanos period, F&& fn,
                                        PeriodicOptions opts = {}) noexcept {
    detail::check_periodic_callable<F>();
    if (detail::is_null_callable(fn)) return Timer(Status::null_callback);
    note_destructor<F>();
    const std::uint64_t meta = periodic_meta(period, opts);
    if (meta == 0) return Timer(Status::bad_period);
    const detail::Reservation r = acquire(shard);
    if (r.status != Status::ok) return Timer(r.status);
    detail::store_periodic_callable(r.node, meta, std::forward<F>(fn));
    const Nanos delay = opts.initial_delay.value_or(period);
    const Nanos from_now = delay > Nanos(0) ? delay : Nanos(0);
    if (r.producer == nullptr) {
      return {r.shard, r.node, link_own(r.node, r.shard, from_now, /*relative=*/true)};
    }
    return commit(r.node, r.shard, r.producer, from_now, /*relative=*/true);
  }

  // Starts the workers (each bound to its core, its first memory mapped) before it returns;
  // idempotent; not from a callback. Throws std::system_error or std::bad_alloc if a worker cannot
  // be created: the started ones run, schedules fail with out_of_memory, and the next start()
  // creates only the missing ones. Caller-driven: only std::bad_alloc.
  void start();
  // Stops: later schedules fail with stopped, workers finish their pass and are joined, executor
  // tasks are waited for, and every timer that neither fired nor was cancelled is returned, still
  // pending (cancel() on it destroys its callable). Idempotent: a later call returns nothing, and
  // calls from several threads all return. std::bad_alloc (nothing lost, the next call returns
  // them) if the list cannot be allocated; std::logic_error inside a callback or visitor. A cancel
  // racing it and the exact account: docs/DESIGN.md.
  std::vector<Timer> stop();
  // As stop(), calling visit(Timer) per timer instead of collecting them: no allocation. visit
  // must be noexcept (a compile error otherwise) and must not call stop() or wait for a thread
  // that uses this engine. Returns how many.
  template <class Visit>
  std::size_t stop(Visit&& visit) {
    static_assert(std::is_nothrow_invocable_v<Visit&, Timer>,
                  "tickwheel: the visitor of Engine::stop(visit) must be callable as visit(Timer) and "
                  "noexcept: it runs while the engine is handing timers back, which must not be cut short");
    auto call = [&visit](Timer timer) noexcept { visit(timer); };
    return stop_visiting(
        &call, [](void* context, Timer timer) noexcept { (*static_cast<decltype(call)*>(context))(timer); });
  }

  // Caller-driven mode (Threads::manual). poll() runs one pass of `shard` on this thread, as a worker
  // would: posted cancels and moves, at most transfer_cap hand-offs, then what is due at `now` (the
  // clock if not given), at most `limit` callbacks. Returns how many ran; 0 once stopped. No lock,
  // no system call. One thread at a time per shard. Throws std::out_of_range for a bad shard,
  // std::logic_error in worker mode or while another thread polls it, std::bad_alloc if the first
  // start() finds no memory.
  std::size_t poll(std::size_t shard, std::size_t limit = kNoLimit);
  std::size_t poll(std::size_t shard, Nanos now, std::size_t limit = kNoLimit);
  // When poll() next has work: the earliest deadline (a lower bound, as Wheel::next_deadline), now
  // if hand-offs wait, nullopt if nothing is pending or once stopped. The polling thread; as poll().
  std::optional<Nanos> next_deadline(std::size_t shard) const;

  // The polling loop's wait (tickwheel/epoll_loop.hpp writes it for epoll; the README's
  // "Embedding in your event loop" for other loops). prepare_wait(shard, until), before sleeping
  // until `until` (nullopt: until woken), returns false if hand-offs already wait (poll instead);
  // otherwise, until finish_wait(), a producer whose timer is due before `until` wakes the loop
  // through wakeup_fd() or EngineOptions::wake_loop, and so do stop() and every 4096th hand-off or
  // cancel of one thread. So does the polling thread itself, if it schedules or moves a timer of
  // the shard to before `until` while its wait is announced (a loop that runs other handlers
  // between the two calls, as an io_context does). A producer makes a system call only to wake it. The
  // polling thread, one wait at a time; a store and a fence; finish_wait() reads the fd only if it was
  // signalled. Throw as poll().
  bool prepare_wait(std::size_t shard, std::optional<Nanos> until);
  void finish_wait(std::size_t shard);
  // The shard's eventfd (non-blocking, the engine's): readable once a producer wakes the loop, for
  // its epoll set; finish_wait() drains it. Throws as poll(), and std::logic_error with wake_loop.
  int wakeup_fd(std::size_t shard) const;

  // Makes this thread the owner of `shard`: its schedules without a shard go there, straight into
  // the wheel (next_deadline() exact right after them), counted from the loop time. Ends with
  // release_shard(), the thread's exit, its own stop(), or its first poll() after stop() began
  // elsewhere. One shard per thread. Starts the engine. Throws std::logic_error in worker mode, for
  // a shard another thread owns or polls, a second shard, or once stopped; std::out_of_range for a
  // bad shard.
  void own_shard(std::size_t shard);
  void release_shard(std::size_t shard);  // std::logic_error if this thread does not own it
  // The shard this thread owns, or nullopt (none, released, or ended by a stop()). A thread-local load.
  std::optional<std::size_t> owned_shard() const noexcept;
  // Whether stop() has begun (next_deadline()'s nullopt: nothing pending, or stopped); once this
  // thread sees true, its schedules fail with stopped. One load.
  bool stopped() const noexcept;

  // With EngineOptions::clock: the clock moved; wakes every sleeping worker and waiting loop so that
  // what is due runs (a system call per sleeper). Harmless otherwise.
  void clock_moved() noexcept;

  // The Timer whose raw() this is. Any value that names no node this engine handed out (forged,
  // garbled, another engine's) gives an empty Timer (Status::no_timer), checked before any node is
  // read; another engine's value that happens to name a node here matches nothing but by a 1 in
  // 2^30 chance. Three loads.
  Timer timer_from_raw(std::uint64_t raw) const noexcept;

  // Cancels every pending timer of `shard` at once (posted cancels, moves and waiting hand-offs
  // taken in first), as cancel() on each; a periodic run under way is spared. Returns how many.
  // O(pending), no allocation. The shard's own thread only (elsewhere: post_clear()). Throws
  // std::out_of_range for a bad shard, std::logic_error from another thread or inside a visitor.
  std::size_t clear(std::size_t shard);
  // Clears `shard` from any thread: the shard's next pass, after taking in what was posted and
  // handed off, cancels every timer then pending (a sleeper is woken for it). Every timer whose
  // schedule happened before this call is cancelled unless it ran first; one scheduled concurrently
  // may or may not be, and ends exactly once either way (docs/DESIGN.md). False, nothing posted,
  // once stop() began. An increment, a fence, a load; no lock. std::out_of_range for a bad shard.
  bool post_clear(std::size_t shard);
  bool post_clear_all() noexcept;  // post_clear() for each shard, each served by its own pass

  // Calls visit(Timer, deadline) for every pending timer of `shard` (after taking in what clear()
  // takes in), in no set order; returns how many. visit may keep, cancel or reschedule timers
  // (posted, applied at the next pass) and schedule; not clear(), for_each_pending() or poll() this
  // shard (std::logic_error). Its exception ends the walk. O(pending). Threads and errors as clear().
  template <class Visit>
  requires std::invocable<Visit&, Timer, Nanos> std::size_t for_each_pending(std::size_t shard,
                                                                             Visit&& visit) {
    return walk_shard(shard, &visit, [](void* context, Timer timer, Nanos deadline) {
      (*static_cast<std::remove_reference_t<Visit>*>(context))(timer, deadline);
    });
  }

  EngineStats stats() const;  // totals and per shard; relaxed loads
  std::size_t shard_count() const noexcept;
  Nanos tick() const noexcept;
  Nanos now() const noexcept;  // the engine's clock: a clock read

 private:
  template <class F>
  Timer submit(std::size_t shard, Nanos when, bool relative, F&& fn) noexcept {
    detail::check_callable<F>();
    if (detail::is_null_callable(fn)) return Timer(Status::null_callback);
    note_destructor<F>();
    // The shard's own thread: a recycled node straight from its pool, then into its wheel.
    if (detail::OwnLane* const lane = detail::t_own_lane;
        lane != nullptr && lane->engine == core_.get() && (shard == kAnyShard || shard == lane->index) &&
        lane->open.load(std::memory_order_relaxed)) [[likely]] {
      if (detail::Node* const node = lane->pool->take_recycled()) [[likely]] {
        detail::store_callable(node, std::forward<F>(fn));
        return {lane->shard, node, link_own(node, lane->shard, when, relative)};
      }
    }
    const detail::Reservation r = acquire(shard);
    if (r.status != Status::ok) return Timer(r.status);
    detail::store_callable(r.node, std::forward<F>(fn));
    if (r.producer == nullptr) return {r.shard, r.node, link_own(r.node, r.shard, when, relative)};
    return commit(r.node, r.shard, r.producer, when, relative);
  }
  // Tells the engine that a callable with a destructor is being stored, so that its teardown
  // looks for pending ones; compiles to nothing for a trivially destructible callable.
  template <class F>
  void note_destructor() noexcept {
    if constexpr (!std::is_trivially_destructible_v<std::decay_t<F>>) held_destructors();
  }
  void held_destructors() noexcept;
  detail::Reservation acquire(std::size_t shard) noexcept;  // picks the shard, admits, takes a node
  // Hands the node over: its parts as arguments, in registers (a struct read back right after the
  // callable's store stalled the owner's schedule).
  Timer commit(detail::Node* node, detail::Shard* shard, detail::ProducerState* producer, Nanos when,
               bool relative) noexcept;
  // The shard's own thread: straight into its wheel, in a function of its own, so that the owner's
  // schedule pays none of the hand-off's registers. Returns the generation, in a register: the
  // caller builds the Timer, since a 24-byte Timer returned through memory and read back at once
  // (a 16-byte load of two 8-byte stores) waits for the stores to retire.
  static std::uint32_t link_own(detail::Node* node, detail::Shard* shard, Nanos when, bool relative) noexcept;
  std::size_t walk_shard(std::size_t shard, void* context,
                         void (*each)(void* context, Timer timer, Nanos deadline));
  std::size_t stop_visiting(void* context, void (*each)(void* context, Timer timer) noexcept);
  std::uint64_t periodic_meta(Nanos period, const PeriodicOptions& opts) const noexcept;

  std::unique_ptr<detail::EngineCore> core_;
};

}  // namespace tickwheel
