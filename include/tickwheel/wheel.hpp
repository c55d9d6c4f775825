// tickwheel/wheel.hpp — a single-threaded hierarchical timing wheel, driven by its caller's clock.
//
// Reasons you might want this
//   - O(1) schedule and cancel with millions of timers pending, and no heap allocation per timer:
//     a pending timer is one 64-byte pooled node with the callback stored inline.
//   - Periodic timers (schedule_every) at fixed rate or fixed delay, with a choice of what to do
//     after falling behind: one node for the timer's whole life, re-linked after each run, so a
//     period costs no allocation and the TimerId stays valid until it is cancelled.
//   - No idle ticking: occupancy bitmaps find the next non-empty slot with a count-trailing-zeros,
//     so advance() jumps over empty time for free and next_deadline() tells an event loop how long
//     it may sleep.
//   - No cascade bursts: the upper-level slot that comes due next is moved down a batch at a time
//     (8 nodes or more), in proportion to the time that passed, instead of all at once when its time
//     comes (a slot of fewer than 8 timers moves at its boundary).
//   - Time is an integer you pass in. The wheel never reads a clock, so a trading loop can drive it
//     from its own clock, and tests are deterministic.
//
// Reasons not to use it
//   - It is not thread safe. One thread owns it: every call below is for that thread only (the
//     multicore tickwheel::Engine wraps one wheel per shard and adds the cross-thread hand-off).
//   - Resolution is the tick. Deadlines are rounded up to the tick, so a timer fires up to one tick
//     after its deadline, never before it.
//   - Callbacks run inside advance(), on the caller's thread, and must be short.
//
// Geometry. Time is counted in ticks. There are kLevels = 7 levels; level L has a granularity of
// 256^L ticks and 512 slots, so it covers two revolutions of its own granularity. A timer lives in
// the lowest level whose 512 slots reach it. The second half of each level is what makes paced
// cascading possible: while the wheel is inside one level-L unit, the next unit's timers are moved
// down into the second half of level L-1, a share per pass. The 256x step keeps moves rare: at a
// 1 ms tick everything up to two minutes out is at most one move from firing. The table is
// recomputed from the constants by a test (tests/wheel_geometry_test.cpp), so it cannot drift:
//
//   level  granularity (ticks)  holds less than (ticks ahead)  at a 1 ms tick    at a 1 us tick
//   0      1                    512                            512 ms            512 us
//   1      256                  131072                         2.2 min           131 ms
//   2      65536                33554432                       9.3 h             33.6 s
//   3      16777216             8589934592                     99 days           2.4 h
//   4      4294967296           2199023255552                  70 years          25 days
//   5      1099511627776        562949953421312                17.8 k years      17.8 years
//   6      281474976710656      144115188075855872             4.6 M years       4567 years
//
// With the smallest legal tick (1 us) the top level reaches past the last nanosecond a Nanos can
// hold, so every representable deadline is representable in the wheel; the one clamp is at the end
// of Nanos (see horizon()).
//
// Costs (the figures are in docs/benchmarks.md; here only the shape):
//   schedule    O(1): pop a pooled node, store the callable, link it at a slot head, set one bit.
//   cancel      O(1): one generation compare, an unlink, a push on the free list; the callable's
//               destructor is called only if it has one.
//   fire        O(1) per callback: a tag in the node says whether it is periodic, one indirect call
//               runs it; a periodic timer is then re-linked in place, as a schedule would link it.
//   reschedule  O(1): one generation compare; within the slot's time span only the deadline is
//               written, otherwise a move queued like a cancel's unlink (see reschedule()).
//   queries     O(1): is_pending(), deadline(), remaining() read the node's generation and due.
//   prefetch    O(1): a prefetch of the node's line, for a cancel or reschedule of it soon after.
//   clear, for_each_pending  O(pending + kLevels * kSlots / 64): only occupied slots are walked.
//   advance     O(timers fired + timers moved down + non-empty slots crossed); empty time is free,
//               and a call that meets nothing on its way is inline, a compare and two stores.
//   next_deadline  O(levels): two bit scans per level, and the deadlines of at most kDeadlineScan
//               timers of each upper level's earliest slot where that slot starts before anything
//               found below it.
// Each slot is one cache line holding 8 independent sub-lists, and every walk of a slot round-robins
// over them with a prefetch of each successor, so firing or moving a slot keeps 8 node misses in
// flight instead of chasing one pointer chain. Until the wheel first holds 2,048 timers (or is
// built with a reserve of that many) links use one sub-list per slot: so few timers are in cache,
// and spread eight ways they would leave most sub-lists empty and every link's and unlink's test
// of an empty sub-list a coin toss for the branch predictor.
//
// Example, a caller-owned loop:
//
//   tickwheel::Wheel wheel({.tick = std::chrono::microseconds(100)});
//   auto id = wheel.schedule_after(std::chrono::milliseconds(5), [&conn] { conn.on_timeout(); });
//   ...
//   wheel.cancel(id);                       // the reply came in time
//   for (;;) {
//     wait_for_io_until(wheel.next_deadline());
//     wheel.advance(my_clock_now(), /*limit=*/1000);
//   }
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>

#include "tickwheel/detail/arith.hpp"
#include "tickwheel/detail/memory.hpp"
#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/pool.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel {
namespace detail {
struct PlainPolicy;
class ShardWheel;
}  // namespace detail
template <class Policy>
class BasicWheel;
// The wheel this header is about: BasicWheel with the plain policy (below). The other policy,
// the Engine's, lives in the engine's own sources; users never name either.
using Wheel = BasicWheel<detail::PlainPolicy>;

using Nanos = std::chrono::nanoseconds;

// Identifies one scheduled timer. Eight bytes, trivially copyable: the node's pool index and the
// generation of the node's lifetime when the timer was scheduled. Once the timer fires or is
// cancelled the generation moves on, so an old id cancels nothing, even after its node has been
// recycled for another timer (a false match would need 2^30 reuses of one node while the old id
// is still held). A default-constructed id, or one from a failed schedule, tests
// false; the latter carries the reason in status().
class TimerId {
 public:
  constexpr TimerId() noexcept = default;

  constexpr explicit operator bool() const noexcept { return gen_ != 0; }
  // Status::ok for an id that named a timer (whether or not it is still pending), otherwise why
  // the schedule failed (Status::no_timer for a default-constructed id).
  constexpr Status status() const noexcept {
    return gen_ != 0 ? Status::ok : (index_ == 0 ? Status::no_timer : static_cast<Status>(index_));
  }
  // A single integer for storage in user structures; from_raw(raw()) == *this.
  constexpr std::uint64_t raw() const noexcept { return (std::uint64_t{gen_} << 32) | index_; }
  static constexpr TimerId from_raw(std::uint64_t raw) noexcept {
    return {static_cast<std::uint32_t>(raw), static_cast<std::uint32_t>(raw >> 32)};
  }
  friend constexpr bool operator==(TimerId, TimerId) noexcept = default;

 private:
  template <class Policy>
  friend class BasicWheel;
  constexpr TimerId(std::uint32_t index, std::uint32_t gen) noexcept : index_(index), gen_(gen) {}
  static constexpr TimerId failure(Status why) noexcept { return {static_cast<std::uint32_t>(why), 0}; }

  std::uint32_t index_ = 0;  // node index; the Status when gen_ == 0
  std::uint32_t gen_ = 0;    // 0 = no timer
};
static_assert(sizeof(TimerId) == 8);

// Throwing convenience over a schedule: returns the id, or throws ScheduleError naming the reason.
// Example: auto id = tickwheel::checked(wheel.schedule_after(5ms, fn));
TimerId checked(TimerId id);

// Periodic timers (Wheel::schedule_every). Time is the wheel's: the caller's now, in ticks.
//
// Cadence. fixed_rate runs on a grid d, d + p, d + 2p, ... where d is the first run's tick and p
// the period, which must be a whole number of ticks: the wheel runs timers only on ticks, and a
// grid kept in whole ticks never drifts (for any other period use fixed_delay or a finer tick).
// fixed_delay runs each time one period after the now of the advance() call that ran it before,
// rounded up to the tick like any deadline. The wheel never reads a clock, so a long callback
// delays the next run only as far as the caller's next now says. (An Engine's wheels end each run
// at the engine's clock read when the callback returned: see Engine::schedule_every.)
enum class Cadence : std::uint8_t { fixed_rate, fixed_delay };

// Misfire: what a fixed-rate timer does once it is a whole period or more behind, that is, when the
// advance() that runs the period for tick d has now >= d + p, so several periods are due at once
// (the caller stalled, or advances less often than every period). Less than a period behind, the
// run is just late and the next one stays on the grid. fixed_delay ignores it.
//   catch_up       every missed period runs, in order, one per advance() call: the next run is
//                  d + p even though that is already past, and a past run waits for the next call,
//                  so a timer that has fallen behind never makes a call run it twice;
//   fire_once_now  the run that is due runs once for all of them, and the timer resumes at the
//                  first grid point after now;
//   skip           none of them runs: the due period is dropped (counted in WheelStats::skipped)
//                  and the timer resumes at the first grid point after now. A grid point that
//                  falls exactly on now is dropped with the rest, so a loop that advances only
//                  every two periods or less often never runs a skip timer: drive the wheel from
//                  next_deadline(), or use fire_once_now.
enum class Misfire : std::uint8_t { catch_up, fire_once_now, skip };

struct PeriodicOptions {
  Cadence cadence = Cadence::fixed_rate;
  std::optional<Nanos> initial_delay;  // first run after this (a negative delay counts as zero);
                                       // default: one period
  Misfire misfire = Misfire::fire_once_now;
};

namespace detail {
// The schedule word of a periodic timer (see PeriodicMeta), or 0 for a period schedule_every()
// refuses: period <= 0 or > 2^60 - 1 ns, or fixed rate and not a whole number of ticks.
std::uint64_t periodic_meta(Nanos period, const PeriodicOptions& opts, Nanos tick) noexcept;
}  // namespace detail

// Runtime options, validated by the constructor (std::invalid_argument naming the bad value).
struct WheelOptions {
  Nanos tick{std::chrono::milliseconds(1)};  // resolution; from 1 us to 1 h
  Nanos start{0};                            // the wheel's now() at construction; >= 0
  std::size_t max_pending = 0;               // 0 = unlimited; at most 2^32 - 1 either way
  // Timers to make room for at construction: node memory for this many is mapped and first-touched
  // by the constructor, so that no schedule takes a page fault or a system call until more than
  // `reserve` timers are pending at once (past it the pool grows as without one: a segment mapped
  // at a time, each page faulted in by its first timer). 0 = none: memory is mapped and touched as
  // timers arrive. At most 2^32 - 1, and at most max_pending when that is set.
  std::size_t reserve = 0;
  // Also lock the reserve in memory (mlock), so that it is never paged out. Needs a reserve, and
  // CAP_IPC_LOCK or an RLIMIT_MEMLOCK of at least 64 bytes per reserved timer.
  bool lock_memory = false;
  // From this many pending timers on, cancel() queues the unlink of the timer's node and does 32 at
  // a time with their neighbours prefetched, so that the misses of nodes in DRAM overlap; below it,
  // cancel() unlinks at once, which is cheaper while the nodes are in cache. By default as many as
  // this core's L2 holds, at 64 bytes per timer (1 MiB where the C library cannot tell). 0 = that
  // default; 1 = always queue; SIZE_MAX = never. Either way a cancel destroys the callable at once
  // and is exact; this only moves the unlink (bench/'s cancel and churn cases measure both sides).
  std::size_t cancel_batch_from = 0;
};

// Counters for tests, benchmarks and the stress report. Cheap to read (a copy of a few fields).
//
// Accounting. Every link of a timer, by a schedule or by a periodic re-arm, ends in exactly one run,
// skip or cancel, or is still pending; so between advance() calls
//     scheduled + rearmed == fired + skipped + cancelled + pending().
// A periodic timer cancelled while its own callback runs has no link to cancel: that cancel takes
// the period the re-arm would have linked, which counts in `rearmed` when the callback returns.
// A reschedule moves a pending timer and changes none of these; it counts in `rescheduled` only.
struct WheelStats {
  // Successful schedules, one-shot and periodic. Not counted as they happen: stats() derives it
  // from the identity above, which every path that changes the others keeps, so that a schedule
  // changes one wheel counter (pending) instead of two.
  std::uint64_t scheduled = 0;
  std::uint64_t rejected = 0;     // schedules refused (max_pending, out of memory; not bad_period)
  std::uint64_t cancelled = 0;    // cancels that returned true, and timers clear() cancelled
  std::uint64_t fired = 0;        // callbacks started (each run of a periodic timer counts)
  std::uint64_t rearmed = 0;      // periodic runs and skips after which the timer had a next
                                  // period: linked again, or taken by a cancel during the run
  std::uint64_t skipped = 0;      // periodic runs dropped by Misfire::skip
  std::uint64_t moved = 0;        // node moves from an upper level to a lower one
  std::uint64_t moved_ahead = 0;  // of those, moves done ahead of time by pacing
  // advance() calls that went past the inline case: a pass, or a call that moved a paced share,
  // crossed a unit boundary or finished queued unlinks. A call that only moves time on is not
  // counted: a count there is a load and a store of one word on every call, a chain through memory
  // that a loop calling advance() far more often than timers fire would pay on every call.
  std::uint64_t passes = 0;
  std::uint64_t max_pass_work = 0;  // most fires + moves done by one advance() call
  std::uint64_t pool_nodes = 0;     // nodes ever handed out by the pool (its high-water mark)
  std::uint64_t pool_capacity = 0;  // nodes in mapped pool segments
  std::uint64_t pool_segments = 0;  // pool growth steps (each one a mapping)
  std::uint64_t bytes = 0;          // pool bytes touched plus the wheel's own slot arrays
  // Reschedules that returned true, and of those the ones that moved no node: only the deadline
  // changed (see Wheel::reschedule()).
  std::uint64_t rescheduled = 0;
  std::uint64_t rescheduled_in_place = 0;
};

namespace detail {
// How a wheel claims a due node, runs it and re-arms it: the one thing the standalone wheel and an
// Engine's shard do differently. The wheel's code (engine/wheel_impl.hpp) is the same for both and
// calls its policy at these points; the policy is a compile-time parameter, so the standalone
// wheel pays for no test of the Engine's needs on its hot path. This is the standalone wheel's:
// one thread owns every node, so a claim and a re-arm are plain stores (relaxed: no other thread
// reads them), and every run is inline. The Engine's (engine/shard_wheel.hpp) claims by
// compare-and-swap against cancels from other threads and may hand runs to an executor.
struct PlainPolicy {
  // Others may cancel this wheel's nodes from other threads; the wheel then counts the cancels its
  // claims and re-arms lose. Never, here.
  static constexpr bool kShared = false;
  // Takes a due node whose generation the wheel loaded as `gen` from pending to `state` (kFired for
  // a one-shot timer, kRunning for a periodic one); false if a cancel took it first.
  static bool claim(Node* node, std::uint32_t gen, std::uint32_t state) noexcept {
    assert((gen & 3) == kPending);
    node->gen.store(in_state(gen, state), std::memory_order_relaxed);
    return true;
  }
  // Takes a periodic node whose run ended from `running` back to pending (the same lifetime, so its
  // id stays valid); false if a cancel took it during the run. Here only cancel() from inside the
  // callback can have, and that cancel counted itself.
  static bool rearm(Node* node, std::uint32_t running) noexcept {
    if (node->gen.load(std::memory_order_relaxed) != running) return false;
    node->gen.store(pending_of_running(running), std::memory_order_relaxed);
    return true;
  }
  // Hands a claimed node to another thread to run instead of running it in the pass: never here.
  static constexpr bool dispatch(Node* /*node*/) noexcept { return false; }
  // When an inline run of a fixed-delay timer ended: the now of the advance() that ran it, since a
  // standalone wheel never reads a clock.
  static constexpr Nanos run_end(Nanos pass_now) noexcept { return pass_now; }
};
}  // namespace detail

template <class Policy>
class BasicWheel {
 public:
  static constexpr unsigned kLevelBits = 8;              // each level is 256x coarser
  static constexpr unsigned kSlotBits = kLevelBits + 1;  // 512 slots: two revolutions
  static constexpr unsigned kSlots = 1U << kSlotBits;
  static constexpr unsigned kLevels = 7;
  static constexpr unsigned kWays = 8;  // sub-lists per slot
  // The most timers of one upper-level slot whose deadlines next_deadline() reads (see there).
  static constexpr unsigned kDeadlineScan = 8;
  static constexpr Nanos kMinTick = std::chrono::microseconds(1);
  static constexpr Nanos kMaxTick = std::chrono::hours(1);

  // Throws std::invalid_argument if tick is outside [kMinTick, kMaxTick], start is negative,
  // max_pending or reserve exceeds the pool's 2^32 - 1 node limit, reserve exceeds a max_pending
  // that is set, or lock_memory is asked without a reserve; the message names the value. Maps the
  // slot arrays (about 238 KiB of address space, a page committed as links first write there, all
  // of it with a reserve; std::bad_alloc if the mapping is refused) and allocates nothing per
  // timer. The pool maps its first segment lazily, unless opts.reserve asks for node memory now:
  // that costs a mapping per pool segment and a write of 64 bytes per reserved timer, and throws
  // std::system_error if the memory cannot be mapped (ENOMEM) or, with lock_memory, if mlock is
  // refused (EPERM, ENOMEM or EAGAIN; the message names the bytes and RLIMIT_MEMLOCK).
  explicit BasicWheel(WheelOptions opts = {}, Policy policy = {});
  // Destroys the callables of all pending timers without running them; unmaps the pool.
  ~BasicWheel();
  BasicWheel(const BasicWheel&) = delete;
  BasicWheel& operator=(const BasicWheel&) = delete;

  // Schedules fn() to run in the first advance(now) with now >= deadline rounded up to the tick.
  // A deadline whose tick is at or before the current one (in the past, or a zero or negative delay
  // taken on a tick boundary) fires on the next advance(); a zero delay taken between boundaries
  // rounds up to the next tick like any deadline, so an advance() to the same now runs nothing.
  // A deadline past horizon() is clamped to it. fn must be callable as fn(), at most
  // 24 bytes, at most 8-byte aligned, and nothrow to construct from the argument and to destroy:
  // anything else is a compile error that says what to do. O(1); no allocation once the pool has
  // grown to the peak population. Fails (a false id whose status() says why, nothing changed) when
  // max_pending timers are pending or the pool cannot grow, and with Status::null_callback (not
  // counted as rejected) for a null function pointer.
  template <class F>
  [[nodiscard]] TimerId schedule_at(Nanos deadline, F&& fn) noexcept {
    detail::check_callable<F>();
    if (detail::is_null_callable(fn)) return TimerId::failure(Status::null_callback);
    detail::Node* node = acquire_node();
    if (node == nullptr) return TimerId::failure(acquire_failure());
    detail::store_callable(node, std::forward<F>(fn));
    return commit(node, deadline);
  }

  // schedule_at(now() + delay, fn), with the sum saturating instead of overflowing. The delay counts
  // from now(): the now of the last advance() (or WheelOptions::start), not the caller's clock and,
  // inside a callback, not the tick the callback was due at. When the caller's clock has moved on
  // since the last advance(), the timer is due that much early by the caller's clock: a 10 ms
  // timeout taken 3 ms after the last advance() is due 7 ms after it was taken. With your own now at
  // hand, write schedule_at(your_now + delay, fn). (No overload takes a now: two Nanos parameters
  // in a row swap silently.)
  template <class F>
  [[nodiscard]] TimerId schedule_after(Nanos delay, F&& fn) noexcept {
    return schedule_at(detail::saturating_add(now_, delay), std::forward<F>(fn));
  }

  // Schedules fn() to run every `period` (see Cadence and Misfire above) until cancelled, the first
  // time at now() + opts.initial_delay (one period if unset, zero if negative), rounded up to the
  // tick and clamped to horizon() like any deadline. The timer keeps its node and its id for its
  // whole life: after each run it is linked again, at no allocation, and cancel(id) stops it, also
  // from inside its own callback. fn is as for schedule_at but at most 16 bytes: the node keeps the
  // schedule in the other 8 (a compile error otherwise). A periodic timer counts once in pending()
  // and against max_pending from the schedule until it is cancelled, its runs included. If fn
  // throws, the timer keeps its schedule (it is re-armed as if the run returned) and the exception
  // propagates from advance() as for a one-shot timer. At the end of time (the horizon reached)
  // every next run is due at once, so a periodic timer then runs on every advance() call. O(1).
  // Fails, with nothing changed, with Status::bad_period if period <= 0, period > 2^60 - 1 ns, or
  // the cadence is fixed_rate and period is not a whole number of ticks; otherwise as schedule_at.
  template <class F>
  [[nodiscard]] TimerId schedule_every(Nanos period, F&& fn, PeriodicOptions opts = {}) noexcept {
    detail::check_periodic_callable<F>();
    if (detail::is_null_callable(fn)) return TimerId::failure(Status::null_callback);
    const std::uint64_t meta = detail::periodic_meta(period, opts, tick_);
    if (meta == 0) return TimerId::failure(Status::bad_period);
    detail::Node* node = acquire_node();
    if (node == nullptr) return TimerId::failure(acquire_failure());
    detail::store_periodic_callable(node, meta, std::forward<F>(fn));
    const Nanos delay = opts.initial_delay.value_or(period);
    return commit(node, detail::saturating_add(now_, delay > Nanos(0) ? delay : Nanos(0)));
  }

  // True iff the timer was pending and now never fires; its callable is destroyed before cancel
  // returns. A node deep in its slot's list (its neighbours cold) is unlinked in a batch (of 32
  // cancels, or at the next advance()), its neighbours prefetched when it is queued, so such a
  // cancel waits for one cache line instead of three and their misses overlap with later calls. Also
  // true for a periodic timer whose callback is running (cancelled from inside it): that run goes
  // on, no further run starts, and the callable is destroyed once the callback returns. False, with
  // nothing touched, for a default or failed id, an id whose one-shot timer already fired (or is
  // firing: a one-shot callback cancelling itself gets false) or was cancelled, or an id whose node
  // now holds another timer. O(1). Safe from inside callbacks.
  bool cancel(TimerId id) noexcept;

  // Starts loading the cache line of id's timer, for a cancel(), reschedule() or query of it a few
  // calls later. Past the L2's worth of timers each of those calls first waits for that line from
  // DRAM, and the core overlaps that wait with only the next call or two; a loop that knows its
  // next timers (the connections of an epoll batch, say) and prefetches the one about 8 calls ahead
  // overlaps eight (bench/'s churn cases measure it with and without). A hint only: it changes
  // nothing the wheel does or reports, whatever the id. A stale, failed or forged id at most loads
  // a line of the pool; one whose index is past the pool's is ignored. A bounds test, a table load
  // and a prefetch instruction: no fault, no wait. Owning thread only, as every call.
  void prefetch(TimerId id) const noexcept {
    if (id.index_ < pool_.touched()) detail::prefetch_node(pool_.at(id.index_));
  }

  // Moves a pending timer to a new deadline in place, keeping its id and its callable (nothing is
  // destroyed or constructed): the Linux kernel's mod_timer(), ratas's schedule() of an active
  // event, tokio's Sleep::reset(). The deadline is taken as schedule_at() takes it: rounded up to
  // the tick, clamped to horizon(), and due in the next advance() if its tick is at or before the
  // current one. True iff the timer was pending and now runs at the new deadline instead. False,
  // with nothing touched, for a default or failed id, and for a timer that fired, was cancelled, or
  // whose node now holds another timer; also for a timer whose callback is running (a one-shot
  // timer rescheduling itself from its callback is firing: schedule a new one; a periodic timer's
  // next run is linked when its callback returns: reschedule it after advance() returns). A
  // periodic timer between its runs: its next run moves to the new deadline, and the runs after it
  // follow from that one, as if it had been scheduled with that initial delay (fixed rate: the grid
  // restarts at the new tick; fixed delay: one period after that run ends).
  // Cost: O(1), no allocation. When the new deadline lies in the same time unit as the old one at
  // the level the timer is in (for a timer between 512 ticks and 2 minutes out at a 1 ms tick, the
  // same 256 ms: the common idle timeout pushed back by a few ms), only its deadline changes:
  // nothing is unlinked or linked and no cache line but the node's is touched (the kernel's
  // same-slot shortcut; counted in WheelStats::rescheduled_in_place). Otherwise the node moves to
  // its new slot: like a cancel's unlink, the move is queued and done in a batch of 32 (or at the
  // next advance(), next_deadline() or walk) with the neighbours of the whole batch prefetched
  // together, so the call itself touches the node's line only; inside advance(), or while the
  // wheel waits after a pass cut short by its limit, it moves at once. Either way it saves what
  // cancel + schedule add: destroying and constructing the callable, giving back and taking a pool
  // node, and a new id to store. Safe from inside callbacks: a timer moved by a callback runs when
  // its new tick comes, in this pass if the pass has not reached that tick yet (as a timer a
  // callback schedules), except a periodic timer moved to a tick at or before this call's now,
  // which waits for the next call, so that no periodic timer runs twice in one call.
  bool reschedule(TimerId id, Nanos deadline) noexcept;

  // reschedule(id, now() + delay), the sum saturating. Counts from now(), as schedule_after() does
  // (see there): with your own clock, reschedule(id, your_now + delay).
  bool reschedule_after(TimerId id, Nanos delay) noexcept {
    return reschedule(id, detail::saturating_add(now_, delay));
  }

  // Whether the timer will run (again) unless it is cancelled: true for a pending timer, and for a
  // periodic timer whose callback is running (asked from inside it: cancel() would still stop it).
  // False for a default, failed or forged id, a one-shot timer that fired or is firing (asked from
  // inside its own callback), a cancelled timer (a periodic one cancelled from inside its callback
  // included), and an id whose node now holds another timer. O(1): one load of the node's
  // generation word. Ratas: active().
  bool is_pending(TimerId id) const noexcept;

  // The time a pending timer is due: its deadline as scheduled (or rescheduled) rounded up to the
  // tick and clamped to horizon(), i.e. the now an advance() must reach to run it; for a periodic
  // timer, its next run's. A timer already due (a deadline in the past, a pass cut short by its
  // limit) reads its own tick, which may be before now() (a negative deadline reads 0). nullopt
  // for everything is_pending() calls false, and for a periodic timer whose callback is running
  // (its next run is not known until the callback returns). O(1). Agrona: deadline(timerId).
  std::optional<Nanos> deadline(TimerId id) const noexcept;

  // deadline(id) - now(), or zero once that is negative: how far the wheel's clock must still move
  // before the timer can run. It counts from now(), the last advance()'s time, not from the
  // caller's clock: with your own now, deadline(id) - your_now. nullopt as deadline(). O(1).
  // folly: getTimeRemaining().
  std::optional<Nanos> remaining(TimerId id) const noexcept;

  // Cancels every pending timer: destroys their callables without running them and ends their ids
  // (each then answers as a cancelled timer: cancel() and reschedule() false, is_pending() false).
  // Each counts in WheelStats::cancelled, so the accounting identity there holds. now(), the
  // wheel's position and its pool are kept (the nodes go back to the pool, which keeps its memory),
  // so the wheel is ready for new timers at once. Returns how many it cancelled. Cost: O(pending)
  // plus one test per 64 slots (only non-empty slots are walked), no allocation. From inside a
  // callback it is refused: returns 0 and does nothing (a callback that must drop everything sets
  // a flag, and its loop calls clear() after advance() returns). Agrona: clear(); folly:
  // cancelAll().
  std::size_t clear() noexcept;

  // Calls visit(id, deadline) once for every pending timer, deadline as deadline(id) reads it, in
  // no particular order (slot by slot). A periodic timer whose callback is running is not visited
  // (its next run is not linked yet). Read-only: visit may call the const members (deadline(),
  // is_pending(), next_deadline(), ...) but must not schedule, cancel, reschedule, clear or advance
  // this wheel (debug builds assert it); collect ids and act on them afterwards. An exception from
  // visit leaves the walk and the wheel as it is. Cost: O(pending) plus one test per 64 slots, no
  // allocation. Agrona: forEach().
  template <class Visit>
  requires std::invocable<Visit&, TimerId, Nanos>
  void for_each_pending(Visit&& visit) const {
    finish_unlinks();  // so that no queued unlink can change a list under the walk
    const ScopedFlag visiting(visiting_);
    visit_pending([&](const Node* node) {
      visit(TimerId(node->index, node->gen.load(std::memory_order_relaxed)),
            Nanos(static_cast<Nanos::rep>(node->due) * tick_.count()));
    });
  }

  // Moves the wheel's time to `now` (time never goes back: an earlier now is treated as now()) and
  // runs every due callback, at most `limit` of them. Rules:
  //   - a timer runs in the first advance(now) with now >= its deadline rounded up to the tick,
  //     unless `limit` callbacks already ran in that call; then it runs in the next call, before
  //     anything due later (earliest tick first). A call that reaches its limit still moves the
  //     wheel on to the first tick that has callbacks waiting, so what is scheduled afterwards is
  //     placed, and next_deadline() answered, against the present, not a stale position;
  //   - a timer scheduled at or before the tick being processed (a past deadline, a zero delay)
  //     counts as due at that tick, as Netty places a late timeout in the current bucket, and
  //     runs at the start of the next call, before anything that call finds due (such timers run
  //     in no particular order among themselves);
  //   - ticks are processed in order: every timer of tick T runs before any timer of tick T+1;
  //     within one tick the order is unspecified;
  //   - callbacks may schedule and cancel any timer, themselves included; a timer cancelled by an
  //     earlier callback of the same pass does not run; a timer a callback schedules at a deadline
  //     not yet reached by the pass runs in this pass when its tick comes, one at or before the
  //     tick being processed runs in the next call (so a callback re-arming itself at zero delay
  //     cannot livelock the pass);
  //   - a periodic timer runs at most once per call: its next run is linked after each run, and
  //     one already due by this call's now (a fixed-rate timer behind by a period, Misfire::
  //     catch_up) waits for the next call like a timer scheduled in the past. A run counts
  //     against `limit`; a run dropped by Misfire::skip does not;
  //   - calling advance() from inside a callback is refused: it returns 0 and does nothing;
  //   - if a callback throws, its timer counts as fired, the wheel is left consistent (the rest of
  //     the pass resumes in the next call; a periodic timer is re-armed as after any run) and the
  //     exception propagates to the caller.
  // Returns how many callbacks ran. Cost: O(fired + moved + non-empty slots crossed); the timers
  // moved down ahead of time are a share of the next upper slot in proportion to the time passed
  // since the last share moved, 8 or more at a time (a slot of fewer moves at its boundary), so a
  // pass every tick never meets a cascade burst. A call with nothing to
  // run and nothing to move down on its way (the common step of a loop that advances every tick,
  // or polls faster) is inline: a compare and two stores.
  std::size_t advance(Nanos now, std::size_t limit = std::numeric_limits<std::size_t>::max());

  // The earliest time at which advance() could run a callback: now() if a timer is already due,
  // nullopt if nothing is pending, otherwise the earliest pending deadline, rounded up to the tick,
  // with one exception. A timer scheduled 512 ticks or more ahead waits in an upper level until its
  // 256-tick unit begins; an upper level's earliest slot of more than kDeadlineScan timers counts
  // as the start of its unit, and where that start comes before the earliest deadline it is the
  // answer: a lower bound, so an event loop that sleeps until then may wake, find nothing to run
  // and ask again (no timer fires early). Cost: see the table above. An event loop may sleep until
  // then. Inside a periodic timer's callback that timer's next run is not linked yet and not
  // counted.
  std::optional<Nanos> next_deadline() const noexcept;

  // Timers scheduled and not yet fired (one-shot) or cancelled; a periodic timer counts once.
  std::size_t pending() const noexcept { return pending_; }
  Nanos now() const noexcept { return now_; }  // the last advance()'s now, or start
  Nanos tick() const noexcept { return tick_; }
  // The latest deadline a timer can have: the last tick that a Nanos can represent.
  Nanos horizon() const noexcept { return Nanos(static_cast<Nanos::rep>(ticks_.max_tick()) * tick_.count()); }
  WheelStats stats() const noexcept;

 private:
  // Everything below is the wheel's own (engine/wheel_impl.hpp). The Engine's shard wheel
  // (engine/shard_wheel.hpp) derives from the core with its own policy and adds, through this
  // friendship, the hooks its queues need; nothing of it is on the standalone wheel's path.
  friend class detail::ShardWheel;
  using Node = detail::Node;

  static constexpr unsigned kWheelSlots = kLevels * kSlots;
  static constexpr unsigned kDueSlot = kWheelSlots;        // due by the current call, for the next one
  static constexpr unsigned kLateSlot = kWheelSlots + 1;   // due slot contents being run, ahead of the batch
  static constexpr unsigned kBatchSlot = kWheelSlots + 2;  // the timers of tick cur_ being run
  static constexpr unsigned kAllSlots = kWheelSlots + 3;
  static constexpr unsigned kUnlinkBatch = 32;
  // From this many pending timers on, links spread over all kWays sub-lists (way_mask_).
  static constexpr std::size_t kSpreadFrom = 2048;
  // The fewest nodes the look-ahead cascade moves in one call while a slot holds more (plan_pace()):
  // at 8 nodes of about 60 instructions each a paced call stays well under a microsecond, and a
  // slot of a few dozen timers is not moved one node per call, each call paying the levels' scan.
  static constexpr std::uint64_t kPaceBatch = 8;
  // Set in a node's due while a move reschedule() queued is pending (engine/wheel_impl.hpp, I6). A due
  // in ticks is below 2^54 (horizon() at the smallest tick), so the bit is free.
  static constexpr std::uint64_t kMoving = std::uint64_t{1} << 63;
  static_assert(static_cast<std::uint64_t>(std::numeric_limits<Nanos::rep>::max() / kMinTick.count()) <
                    kMoving,
                "no tick a wheel can reach has the kMoving bit");
  static constexpr unsigned kWordsPerLevel = kSlots / 64;
  static constexpr unsigned kBitmapWords = (kAllSlots + 63) / 64;
  static_assert(kSlots % 64 == 0, "each level's occupancy is a whole number of bitmap words");
  static_assert(kBitmapWords <= 64, "one bit of nonempty_words_ per bitmap word");
  static_assert(kWordsPerLevel <= 8 && kLevels * kWordsPerLevel <= 64, "a level's words are one byte of it");
  static_assert(std::uint64_t{kSlots} << (kLevelBits * (kLevels - 1)) >=
                    (std::uint64_t{1} << 63) / kMinTick.count(),
                "the top level must reach the last tick a Nanos can hold at the smallest tick");

  struct alignas(detail::kCacheLine) Slot {
    std::array<Node*, kWays> head;
  };
  static_assert(sizeof(Slot) == detail::kCacheLine, "one slot is one cache line of sub-list heads");
  // The slot array's size: a link whose offset from the array's start (head_offset()) is below it
  // is a slot's head, any other a node's `next`.
  static constexpr std::uintptr_t kSlotBytes = sizeof(Slot) * kAllSlots;

  // Sets a flag for its scope, and clears it however the scope is left: visiting_ for a
  // for_each_pending() walk (debug builds catch a visitor that changes the wheel under it), and the
  // Engine shard's walking flag.
  class ScopedFlag {
   public:
    explicit ScopedFlag(bool& flag) noexcept : flag_(flag) { flag = true; }
    ScopedFlag(const ScopedFlag&) = delete;
    ScopedFlag& operator=(const ScopedFlag&) = delete;
    ~ScopedFlag() { flag_ = false; }

   private:
    bool& flag_;
  };

  // A pass's scope, however it is left: in_advance_ set (a nested advance() is refused), and no
  // cancel() queues its unlink, since the pass walks the lists and they must be exact whenever a
  // callback returns.
  class PassScope {
   public:
    explicit PassScope(BasicWheel& wheel) noexcept : wheel_(wheel) {
      wheel.in_advance_ = true;
      wheel.queue_unlinks_from_ = std::numeric_limits<std::size_t>::max();
    }
    PassScope(const PassScope&) = delete;
    PassScope& operator=(const PassScope&) = delete;
    ~PassScope() {
      wheel_.in_advance_ = false;
      wheel_.queue_unlinks_from_ = wheel_.cancel_batch_from_;
    }

   private:
    BasicWheel& wheel_;
  };

  // Calls fn(node) for every linked node whose state is pending: the occupied slots only, found
  // from the bitmap, each sub-list in turn.
  template <class Fn>
  void visit_pending(Fn&& fn) const {
    for (unsigned w = 0; w < kBitmapWords; ++w) {
      for (std::uint64_t bits = occupied_[w]; bits != 0; bits &= bits - 1) {
        const unsigned s = w * 64 + static_cast<unsigned>(std::countr_zero(bits));
        for (Node* node : (*slots_)[s].head) {
          for (; node != nullptr; node = node->next) {
            if ((node->gen.load(std::memory_order_relaxed) & 3) == detail::kPending) fn(node);
          }
        }
      }
    }
  }

  Node* acquire_node() noexcept;
  Status acquire_failure() const noexcept;
  Node* pending_node(TimerId id) const noexcept;
  bool cancel_running(Node* node, std::uint32_t pending_gen) noexcept;
  bool cancel_marked(Node* node) noexcept;
  bool finish_cancel(Node* node) noexcept;
  // Queues a move of a linked node to `due` (I6): flagged in its due, moved by flush_moves().
  // Precondition: the wheel caught up (cur_ == target_), outside a pass.
  void queue_move(Node* node, std::uint32_t gen, std::uint64_t due) noexcept;
  // Out of line (never inlined), so that cancel() itself makes no call and GCC gives it no
  // prologue: every instruction of a cancel at a million timers is one more in the window the core
  // overlaps its node's DRAM miss with (with the flush inlined, every cancel saved and restored
  // two registers).
  [[gnu::noinline]] bool cancel_slow(Node* node) noexcept;
  [[gnu::noinline]] bool flush_and_queue(Node* node) noexcept;
  // Queues a cancelled node's unlink, done with up to 31 others by flush_unlinks(), its neighbours
  // fetched meanwhile. Precondition: cur_ == target_ outside a pass, and the queue has room.
  void queue_unlink(Node* node) noexcept {
    assert(cur_ == target_ && !in_advance_ && unlink_queued_ < kUnlinkBatch);
    // The next advance() finishes the queue (I9). Zeroed by the first unlink queued only: nothing
    // raises quiet_end_ before the queue is flushed, and two stores fewer a cancel leave more room
    // in the store buffer while the node's miss holds everything after it.
    if (unlink_queued_ == 0) set_quiet_end(0);
    unlink_queue_[unlink_queued_++] = node;
    detail::prefetch_neighbours(node);
    assert(quiet_end_ == 0);
  }
  void finish_unlinks() const noexcept;
  bool in_place(std::uint64_t old_due, std::uint64_t due) const noexcept;
  TimerId commit(Node* node, Nanos deadline) noexcept;
  std::uint64_t due_tick(Nanos deadline) const noexcept;
  unsigned wheel_level(std::uint64_t due) const noexcept;
  unsigned wheel_slot(std::uint64_t due) const noexcept;
  unsigned upper_slot(std::uint64_t due) const noexcept;
  void push(Node* node, unsigned slot) noexcept;
  void link(Node* node, unsigned slot) noexcept;
  void unlink(Node* node) noexcept;
  Node* pop_head(unsigned slot, unsigned way) noexcept;
  unsigned ways_in_use(unsigned slot) const noexcept;
  void note_way_empty(unsigned slot, unsigned way) noexcept;
  // Every bit set if `node` is a node, none if it is null: a mask where a branch on whether a list
  // goes on would mispredict (unlink(), move_down()).
  static std::uintptr_t if_node(const Node* node) noexcept {
    return std::uintptr_t{0} - static_cast<std::uintptr_t>(node != nullptr);
  }
  // Where to write the back link (`pprev`) of `next`, the node after one taken out of a list:
  // next's own, or spare_link_ if there is none (has_next = if_node(next)). Chosen by mask: GCC
  // turns a ?: here back into the branch it is there to avoid.
  Node*** back_link_of(Node* next, std::uintptr_t has_next) noexcept {
    const std::uintptr_t own = reinterpret_cast<std::uintptr_t>(next) + offsetof(Node, pprev);
    const auto spare = reinterpret_cast<std::uintptr_t>(&spare_link_);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): one of the two addresses, chosen by the mask
    return reinterpret_cast<Node***>((own & has_next) | (spare & ~has_next));
  }
  std::uintptr_t head_offset(Node* const* link) const noexcept;
  bool is_slot_head(Node* const* link) const noexcept;
  bool occupied(unsigned slot) const noexcept;
  void set_occupied(unsigned slot) noexcept {
    occupied_[slot / 64] |= std::uint64_t{1} << (slot % 64);
    nonempty_words_ |= std::uint64_t{1} << (slot / 64);
  }
  void clear_occupied(unsigned slot) noexcept {
    std::uint64_t& word = occupied_[slot / 64];
    word &= ~(std::uint64_t{1} << (slot % 64));
    if (word == 0) nonempty_words_ &= ~(std::uint64_t{1} << (slot / 64));
  }
  std::uint64_t move_down(unsigned slot, std::uint64_t max_nodes) noexcept;
  void splice(unsigned from, unsigned to) noexcept;
  void merge(unsigned from, unsigned to) noexcept;
  void flush_unlinks() noexcept;
  void flush_moves() noexcept;
  std::size_t clear_slot(unsigned slot) noexcept;
  std::size_t fire(unsigned slot, std::size_t budget);
  std::size_t fire_periodic(Node* node, std::uint64_t meta);
  std::uint64_t next_run(std::uint64_t meta, std::uint64_t due, Nanos ran_until) const noexcept;
  std::uint64_t first_grid_point_after_now(std::uint64_t due, std::uint64_t period) const noexcept;
  void rearm(Node* node, std::uint32_t running, std::uint64_t next) noexcept;
  std::size_t pass(std::uint64_t target, std::size_t limit);
  bool pass_stays_in_unit(std::uint64_t target, std::size_t limit) const noexcept;
  [[gnu::always_inline]] std::size_t pass_in_unit(std::uint64_t target);
  std::size_t step(std::uint64_t target, std::size_t budget);
  std::uint64_t pace(std::uint64_t target, unsigned top) noexcept;
  void cascade_at(std::uint64_t t, unsigned top) noexcept;
  unsigned top_level() const noexcept;
  std::uint64_t next_level0_tick() const noexcept;
  bool level_empty(unsigned level) const noexcept;
  bool current_units_empty(unsigned top) const noexcept;
  bool summary_exact() const noexcept;
  bool quiet_until(std::uint64_t target) const noexcept;
  std::uint64_t quiet_end() const noexcept;
  void set_quiet_end(std::uint64_t tick) noexcept {
    quiet_end_ = tick;
    // Below 2^64: quiet_end() is at most the level-1 unit after cur_'s, cur_ <= max_tick().
    quiet_end_ns_ = tick * ticks_.tick();
  }
  void catch_up() noexcept;
  // Commits every page of the slot arrays now, for a reserve's promise of no page fault on a
  // schedule: every byte written with the value it holds, so that the heads already linked stay as
  // they are, and so that a sanitizer's shadow of the arrays, mapped as lazily, is committed too.
  // Start-up paths only: a write per byte of the arrays.
  void commit_slots() noexcept {
    for (volatile unsigned char& byte : std::span<volatile unsigned char>(
             reinterpret_cast<volatile unsigned char*>(arrays_.get()), sizeof(SlotArrays))) {
      byte = byte;
    }
  }
  // Counts a timer linked by a schedule (or an Engine's hand-off); the first time the count
  // reaches kSpreadFrom, links start spreading over every sub-list (way_mask_).
  void add_pending() noexcept {
    if (++pending_ == kSpreadFrom) way_mask_ = kWays - 1;
  }
  // The slot of unit `unit` (a due shifted down to the level's granularity) at `level`.
  static constexpr unsigned slot_of(unsigned level, std::uint64_t unit) noexcept {
    return level * kSlots + static_cast<unsigned>(unit & (kSlots - 1));
  }
  // Whether a node due at `due` counts as due already, so that it waits in the due slot (I3): at
  // or before cur_, or, while inline advance() calls left cur_ behind now_'s tick, at or before
  // that tick (I1). The second test is a multiplication, made only for a due before lag_bound_:
  // every later tick is after now_'s too.
  bool due_now(std::uint64_t due) const noexcept {
    return due <= cur_ ||
           (due < lag_bound_ && due * ticks_.tick() <= static_cast<std::uint64_t>(now_.count()));
  }
  // Whether inline advance() calls left cur_ behind now_'s tick (I1).
  bool lags_now() const noexcept {
    return (cur_ + 1) * ticks_.tick() <= static_cast<std::uint64_t>(now_.count());
  }
  // The slot a node due at `due` is linked into outside a periodic re-arm: the due slot if it is
  // due already, else the wheel slot that holds it. A node beyond level 0 while cur_ lags behind
  // now_'s tick (I1) first brings cur_ up to it, so that it lands where it would had the inline
  // advance() calls moved cur_, and a timer less than 512 ticks ahead of now_ is in level 0, where
  // next_deadline() is exact: a multiplication for such a link, a division once per lag.
  unsigned slot_for(std::uint64_t due) noexcept {
    if (due_now(due)) return kDueSlot;
    if (due - cur_ < kSlots) return slot_of(0, due);
    if (lags_now()) {
      catch_up();
      return wheel_slot(due);
    }
    return upper_slot(due);
  }
  // The slot a moved (rescheduled) node goes to: where a schedule links it (slot_for()), except
  // that a periodic timer is linked as its re-arm is: due by this call's now means the next call,
  // so it never runs twice in one call (I3). The two differ only while cur_ lags behind target_
  // (inside advance(), or after a pass cut short).
  unsigned move_slot(const Node* node, std::uint64_t due) noexcept {
    if (cur_ != target_ && detail::callable_meta(node) != 0) {
      return due <= target_ ? kDueSlot : wheel_slot(due);
    }
    return slot_for(due);
  }
  // Sets quiet_end_ exactly, and lag_bound_ with it: where advance_slow() and clear() leave the
  // wheel (I9).
  void settle_quiet_end() noexcept {
    set_quiet_end(quiet_end());
    lag_bound_ = quiet_end_;
  }
  std::size_t advance_slow(Nanos now, std::size_t limit);
  void quiet_advance(std::uint64_t target) noexcept;
  void plan_pace(unsigned top) noexcept;
  bool lookahead_occupied(unsigned top) const noexcept;
  std::uint64_t next_event_tick(unsigned top, bool dues = false) const noexcept;
  std::uint64_t earliest_due(unsigned slot, std::uint64_t start) const noexcept;
  using LevelWords = std::span<const std::uint64_t, kWordsPerLevel>;  // one level's occupancy bits
  LevelWords level_words(unsigned level) const noexcept;
  static unsigned find_from(LevelWords words, unsigned start) noexcept;
  template <class Fn>
  void for_each_upcoming_slot(Fn&& fn) const noexcept;
  void prefetch_upcoming(bool successors) const noexcept;

  // All fields: the owning thread only.
  Nanos tick_;
  Nanos now_;
  std::uint64_t cur_ = 0;          // the tick being processed; every timer due before it has run
  std::uint64_t target_ = 0;       // the tick of the last advance()'s now: cur_ <= target_
  std::size_t max_pending_;        // the effective limit: WheelOptions::max_pending, or the pool's
  std::size_t cancel_batch_from_;  // WheelOptions::cancel_batch_from, resolved
  // The population from which cancel() queues the unlink of a node that is not first in its
  // sub-list: cancel_batch_from_, or never during a pass (PassScope), so that one compare says both.
  std::size_t queue_unlinks_from_;
  std::size_t pending_ = 0;
  // The sub-lists a link spreads over, less one: 0 (sub-list 0 only) until the wheel first holds
  // kSpreadFrom timers (or was built with a reserve of that many), kWays - 1 from then on. Eight
  // sub-lists a slot are there to overlap a walk's cache misses; a few thousand timers are in
  // cache, and spread over eight sub-lists of a few hundred slots they leave most sub-lists
  // empty, so every link and unlink would branch at random on whether its sub-list was or
  // becomes empty. Never narrowed again: a wheel that once held many timers keeps spreading.
  unsigned way_mask_ = 0;
  // Takes the write of a back link that has no node to go to (back_link_of()); never read.
  Node** spare_link_ = nullptr;
  bool in_advance_ = false;
  [[no_unique_address]] Policy policy_;  // see detail::PlainPolicy
  detail::TickDivider
      ticks_;  // tick_ as a divisor, for every deadline's tick; max_tick(): horizon() in ticks
  mutable bool visiting_ = false;  // inside for_each_pending(): see ScopedFlag
  // The slot heads and their counts, in one mapping of their own (detail::map_zeroed()): a page of
  // it is committed when a link first writes there, so a wheel whose timers fall in a few levels
  // (a 1 ms wheel's first two minutes are levels 0 and 1) holds those levels' pages and none of
  // the rest. Committed whole by a reserve (commit_slots()), which promises no page fault.
  struct SlotArrays {
    std::array<Slot, kAllSlots> heads;
    std::array<std::uint32_t, kAllSlots> count;
  };
  struct UnmapSlots {
    void operator()(SlotArrays* arrays) const noexcept { detail::unmap_zeroed(arrays, sizeof(SlotArrays)); }
  };
  std::unique_ptr<SlotArrays, UnmapSlots> arrays_;
  std::array<Slot, kAllSlots>* slots_ = nullptr;        // arrays_->heads: one cache line per slot
  std::array<std::uint64_t, kBitmapWords> occupied_{};  // bit s set <=> slot s has a node
  // Bit w set <=> occupied_[w] != 0: a level's emptiness and the top level in one load and a bit
  // scan, instead of a walk of 8 words per level several times a pass (I4').
  std::uint64_t nonempty_words_ = 0;
  // A lower bound of the next tick at which something happens in the wheel levels (I7), so that
  // an advance() with nothing to do skips the level scans (quiet_until()).
  std::uint64_t next_event_ = 0;
  // The tick from which the look-ahead cascade (pace()) has a batch to move from an upper level's
  // look-ahead slot (the one of the unit after cur_'s), UINT64_MAX if none is occupied (I8); so a
  // quiet advance() that stays short of it and crosses no unit boundary looks at no level.
  std::uint64_t pace_at_ = ~std::uint64_t{0};
  // The tick up to which the look-ahead cascade has moved its share: the target of the last pace().
  std::uint64_t paced_ = 0;
  // The tick below which advance() has nothing to do but move time on (I9), and its first
  // nanosecond, quiet_end_ * tick: the inline advance() compares a now with it, no division.
  std::uint64_t quiet_end_ = 0;
  std::uint64_t quiet_end_ns_ = 0;
  // The quiet_end_ that advance_slow() last set, which links do not lower; 0 during a pass or a
  // step. Inline advance() calls since then stayed below it, so now_'s tick is below it too.
  std::uint64_t lag_bound_ = 0;
  // Nodes linked into each slot since it was empty, less those moved out: an upper bound that
  // paces the look-ahead cascade.
  std::array<std::uint32_t, kAllSlots>* count_ = nullptr;  // arrays_->count
  detail::NodePool pool_;
  WheelStats stats_;
  unsigned unlink_queued_ = 0;
  std::array<Node*, kUnlinkBatch> unlink_queue_{};  // cancelled nodes still linked, see flush_unlinks()
  unsigned moves_queued_ = 0;
  std::array<Node*, kUnlinkBatch> move_queue_{};        // rescheduled nodes to move, see flush_moves()
  std::array<std::uint32_t, kUnlinkBatch> move_gen_{};  // the pending generation each was queued with
  // Bit w of ways_[s] set <=> sub-list w of slot s is non-empty (I4''): a walk, and an unlink that
  // empties a sub-list, learn which sub-lists are in use from one byte instead of eight heads. Last,
  // so that the fields every call touches stay together.
  std::array<std::uint8_t, kAllSlots> ways_{};
};

// ---- The hot path, inline so that a schedule compiles down to straight-line code. ----

template <class Policy>
inline typename BasicWheel<Policy>::Node* BasicWheel<Policy>::acquire_node() noexcept {
  if (pending_ >= max_pending_) [[unlikely]] {
    ++stats_.rejected;
    return nullptr;
  }
  Node* node = pool_.acquire();
  if (node == nullptr) [[unlikely]] {
    ++stats_.rejected;
  }
  return node;
}

template <class Policy>
inline Status BasicWheel<Policy>::acquire_failure() const noexcept {
  return pending_ >= max_pending_ ? Status::max_pending_reached : Status::out_of_memory;
}

// Deadline -> tick, rounded up so that a timer never fires early, clamped to the horizon.
template <class Policy>
inline std::uint64_t BasicWheel<Policy>::due_tick(Nanos deadline) const noexcept {
  return ticks_.due(deadline);
}

// The lowest level whose kSlots slots reach `due`: the least L with (due >> bL) - (cur_ >> bL) <
// kSlots (b = kLevelBits). Precondition: due > cur_.
template <class Policy>
inline unsigned BasicWheel<Policy>::wheel_level(std::uint64_t due) const noexcept {
  const std::uint64_t delta = due - cur_;
  if (delta < kSlots) return 0;
  // delta < kSlots << (kLevelBits * L)  <=>  bit_width(delta) <= kSlotBits + kLevelBits * L; the
  // floor-shift difference can still be kSlots at that level, and then the next level holds it.
  unsigned level = (static_cast<unsigned>(std::bit_width(delta)) - kSlotBits + kLevelBits - 1) / kLevelBits;
  if ((due >> (kLevelBits * level)) - (cur_ >> (kLevelBits * level)) >= kSlots) ++level;
  return level;
}

// The slot of the lowest level whose kSlots slots reach `due`. Precondition: due > cur_. Levels 0
// and 1, where a 1 ms wheel keeps everything up to two minutes out, are tested first with constant
// shifts; wheel_level()'s bit scan only for the rest.
template <class Policy>
inline unsigned BasicWheel<Policy>::wheel_slot(std::uint64_t due) const noexcept {
  if (due - cur_ < kSlots) return slot_of(0, due);
  return upper_slot(due);
}

// wheel_slot() for a due that level 0 does not reach: due - cur_ >= kSlots.
template <class Policy>
inline unsigned BasicWheel<Policy>::upper_slot(std::uint64_t due) const noexcept {
  assert(due - cur_ >= kSlots);
  if ((due >> kLevelBits) - (cur_ >> kLevelBits) < kSlots) return slot_of(1, due >> kLevelBits);
  const unsigned level = wheel_level(due);
  return slot_of(level, due >> (kLevelBits * level));
}

// Puts a node at the head of its sub-list of `slot`, with the slot's bits and count (I4).
template <class Policy>
inline void BasicWheel<Policy>::push(Node* node, unsigned slot) noexcept {
  // The sub-list by the node's pool index: spread as evenly as a counter would spread it (a fresh
  // pool hands indices out in order), with no counter to load and store on every link.
  const unsigned way = node->index & way_mask_;
  Node** head = &(*slots_)[slot].head[way];
  Node* first = *head;
  node->next = first;
  node->pprev = head;
  *head = node;
  if (first != nullptr) {
    first->pprev = &node->next;  // the sub-list, so the slot, was in use: its bits are set (I4)
  } else {
    ways_[slot] |= static_cast<std::uint8_t>(1U << way);
    set_occupied(slot);
  }
  ++(*count_)[slot];
}

template <class Policy>
inline void BasicWheel<Policy>::link(Node* node, unsigned slot) noexcept {
  // Read before the first store: the stores below (64-bit and byte fields) could alias them as far
  // as the compiler can tell, and would make it load them again.
  const std::uint64_t due = node->due;
  const std::uint64_t cur = cur_;
  push(node, slot);
  if (slot < kWheelSlots) {  // the slot's event: its tick at level 0, its unit's start above (I7)
    const unsigned shift = kLevelBits * (slot >> kSlotBits);
    const std::uint64_t unit = due >> shift;
    const std::uint64_t event = unit << shift;
    // Branches, not a min and a store: a link rarely makes the earliest event. quiet_end_ <=
    // next_event_ (I9), so a link that leaves next_event_ leaves quiet_end_ too.
    assert(quiet_end_ <= next_event_);
    if (event < next_event_) [[unlikely]] {
      next_event_ = event;
      if (event < quiet_end_) set_quiet_end(event);  // I9
    }
    // A look-ahead slot is paced from the next tick on (I8). At level 0 this also holds for the
    // tick after cur_: a needless but harmless pace() call, cheaper than a test of the level.
    if (unit == (cur >> shift) + 1) [[unlikely]] {
      pace_at_ = std::min(pace_at_, cur + 1);
      if (cur + 1 < quiet_end_) set_quiet_end(cur + 1);
    }
  } else {
    set_quiet_end(0);  // something is due (I9)
  }
}

template <class Policy>
inline TimerId BasicWheel<Policy>::commit(Node* node, Nanos deadline) noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  const std::uint64_t due = due_tick(deadline);
  // The id is built from registers: re-reading gen and index right after storing gen makes the
  // compiler merge them into one 8-byte load that the 4-byte store cannot forward to: a
  // store-forwarding stall on every schedule.
  const std::uint32_t gen = detail::next_lifetime(node->gen.load(std::memory_order_relaxed));
  const std::uint32_t index = node->index;
  // Relaxed: in a standalone wheel only this thread reads it; an Engine publishes the node to
  // other threads only through its own synchronisation (the hand-off queue, or the caller's).
  node->gen.store(gen, std::memory_order_relaxed);
  node->due = due;
  link(node, slot_for(due));
  add_pending();  // and not stats_.scheduled, which stats() derives: see there
  return {index, gen};
}

template <class Policy>
inline bool BasicWheel<Policy>::occupied(unsigned slot) const noexcept {
  return ((occupied_[slot / 64] >> (slot % 64)) & 1) != 0;
}

// Byte offset of a list link from the start of the slot array; a link inside a node (its `next`)
// gives an offset past the array, as unsigned arithmetic wraps.
template <class Policy>
inline std::uintptr_t BasicWheel<Policy>::head_offset(Node* const* link) const noexcept {
  return reinterpret_cast<std::uintptr_t>(link) - reinterpret_cast<std::uintptr_t>(slots_->data());
}

template <class Policy>
inline bool BasicWheel<Policy>::is_slot_head(Node* const* link) const noexcept {
  return head_offset(link) < kSlotBytes;
}

// Sub-list `way` of `slot` has just been emptied: clears its bit, and the slot's (and its count)
// if it was the last (I4, I4'').
template <class Policy>
inline void BasicWheel<Policy>::note_way_empty(unsigned slot, unsigned way) noexcept {
  assert((*slots_)[slot].head[way] == nullptr);
  ways_[slot] &= static_cast<std::uint8_t>(~(1U << way));
  if (ways_[slot] != 0) return;
  clear_occupied(slot);
  (*count_)[slot] = 0;
}

// Unlinks a node from whatever slot holds it. The slot is looked up (from `pprev`) only when the
// node was the last of its sub-list, the one case where the slot can have become empty.
template <class Policy>
inline void BasicWheel<Policy>::unlink(Node* node) noexcept {
  Node* next = node->next;
  Node** pprev = node->pprev;
  *pprev = next;
  node->pprev = nullptr;
  // No branch on whether the node was last of its sub-list: with a few nodes a sub-list, as below
  // a million timers, that is at random, and the mispredictions cost a quarter of a cancel. The mask
  // that picks the back link to write also folds the two conditions of an emptied sub-list, the
  // node last and pprev a slot's head rather than a node's `next` (is_slot_head()), into one
  // rarely taken branch.
  const std::uintptr_t has_next = if_node(next);
  *back_link_of(next, has_next) = pprev;
  const std::uintptr_t offset = head_offset(pprev) | has_next;  // every bit set if there is a next
  if (offset < kSlotBytes) [[unlikely]] {
    note_way_empty(static_cast<unsigned>(offset / sizeof(Slot)),
                   static_cast<unsigned>(offset % sizeof(Slot) / sizeof(Node*)));
  }
}

template <class Policy>
inline bool BasicWheel<Policy>::cancel(TimerId id) noexcept {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  // Only a pending generation matches (I5), so a failed id (gen 0) or a free node never does; an
  // index never handed out has no node. Tested before the node is formed, so that no null test of
  // its address follows.
  if (id.index_ >= pool_.touched() || (id.gen_ & 3) != detail::kPending) [[unlikely]] {
    return false;
  }
  Node* node = pool_.at(id.index_);
  if (node->gen.load(std::memory_order_relaxed) != id.gen_) [[unlikely]] {
    return cancel_running(node, id.gen_);
  }
  node->gen.store(detail::in_state(id.gen_, detail::kCancelled), std::memory_order_relaxed);
  return cancel_marked(node);
}

// The rest of a cancel once the node is marked cancelled (cancel(), and an Engine shard's owner:
// ShardWheel::cancel_own). One branch for the two rare cases, both out of line: a callable with a
// destructor to run, and a wheel whose cur_ lags behind target_ (a pass under way, or one cut
// short by its limit).
template <class Policy>
inline bool BasicWheel<Policy>::cancel_marked(Node* node) noexcept {
  if (((node->thunk & detail::kDestructorTag) | (cur_ ^ target_)) != 0) [[unlikely]] {
    return cancel_slow(node);
  }
  return finish_cancel(node);
}

// The rest of a cancel once the node is marked cancelled and its callable is gone, in a wheel
// whose cur_ is target_. The unlink is done here, at once, while the population fits in L2 (the
// neighbours are in cache), during a pass (a walk may be under way: the lists must be exact when
// the callback returns; queue_unlinks_from_ says both), and for a node first in its sub-list
// (recently scheduled, with warm neighbours that batching would not help). Past L2 it is queued:
// the fewer instructions such a cancel takes, the more of the caller's next cancels the core
// overlaps with its node's miss. A full queue is flushed first, out of line.
template <class Policy>
inline bool BasicWheel<Policy>::finish_cancel(Node* node) noexcept {
  assert(cur_ == target_);
  --pending_;
  ++stats_.cancelled;
  if (pending_ >= queue_unlinks_from_ && !is_slot_head(node->pprev)) {
    if (unlink_queued_ == kUnlinkBatch) [[unlikely]] {
      return flush_and_queue(node);
    }
    queue_unlink(node);
  } else {
    unlink(node);
    pool_.release(node);
  }
  return true;
}

// Whether advance() to `target` meets no callback and no cascade on the way: nothing due or left
// from a pass cut short (the due, late and batch slots, which share the last bitmap word) and no
// event up to target (I7). Then the call's only work is the look-ahead cascade's share (pace(),
// once target reaches pace_at_, or a unit boundary is crossed and the look-ahead slots change).
template <class Policy>
inline bool BasicWheel<Policy>::quiet_until(std::uint64_t target) const noexcept {
  static_assert(kDueSlot / 64 == kBatchSlot / 64 && kDueSlot % 64 == 0, "the extra slots share one word");
  return target < next_event_ && ((nonempty_words_ >> (kDueSlot / 64)) & 1) == 0;
}

// The tick before which advance() has nothing to do but move time on (quiet_until() with no
// share for pace() and no unit boundary crossed): what advance_slow() leaves in quiet_end_ (I9).
template <class Policy>
inline std::uint64_t BasicWheel<Policy>::quiet_end() const noexcept {
  if (((nonempty_words_ >> (kDueSlot / 64)) & 1) != 0) return 0;
  return std::min({next_event_, pace_at_, ((cur_ >> kLevelBits) + 1) << kLevelBits});
}

// Inline for the call that only moves time on, the common case of a loop that advances every
// tick or faster: one compare of the new now against quiet_end_ns_ (I9), and now_ is all it
// changes; cur_ catches up in the next call that meets something (I1). Everything else is out of
// line (engine/wheel_impl.hpp).
template <class Policy>
inline std::size_t BasicWheel<Policy>::advance(Nanos now, std::size_t limit) {
  assert(!visiting_ && "for_each_pending(): a visitor must not change the wheel");
  const Nanos latest = std::max(now, now_);
  if (static_cast<std::uint64_t>(latest.count()) < quiet_end_ns_) [[likely]] {
    assert(!in_advance_ && unlink_queued_ == 0 && moves_queued_ == 0 && quiet_end_ <= quiet_end() &&
           quiet_end_ <= lag_bound_);  // I9
    // Not counted in stats().passes: see there.
    now_ = latest;
    return 0;
  }
  return advance_slow(now, limit);
}

// The standalone wheel's code is compiled once, in the library (engine/wheel.cpp).
extern template class BasicWheel<detail::PlainPolicy>;

}  // namespace tickwheel
