// tickwheel/wheel.hpp — a single-threaded hierarchical timing wheel, driven by its caller's clock.
//
// Use it for: O(1) schedule and cancel with millions of timers pending and no allocation per timer
// (a pending timer is one pooled 64-byte node, the callable stored inline); periodic timers that
// keep one node and one id for life; an advance() that jumps over empty time, and a
// next_deadline() that tells an event loop how long it may sleep; no cascade bursts (an upper
// level's next slot moves down a batch at a time as time passes). Time is an integer you pass in:
// the wheel never reads a clock.
//
// Not for: more than one thread (every call is for the owning thread; tickwheel::Engine wraps one
// wheel per shard and adds the cross-thread hand-off); resolution finer than the tick (a deadline
// is rounded up to it: a timer fires up to a tick late, never early); long callbacks (they run
// inside advance(), on the caller's thread).
//
// Geometry. Level L has a granularity of 256^L ticks and 512 slots; a timer lives in the lowest
// level that reaches it (tests/wheel_geometry_test.cpp recomputes this table from the constants):
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
// Why the wheel is built this way (paced cascade, sub-lists, batched unlinks): docs/DESIGN.md.
// Bad input: docs/bad-input.md. Figures: docs/benchmarks.md.
//
//   tickwheel::Wheel wheel({.tick = std::chrono::microseconds(100)});
//   auto id = wheel.schedule_after(std::chrono::milliseconds(5), [&conn] { conn.on_timeout(); });
//   wheel.cancel(id);                          // the reply came in time
//   for (;;) {
//     wait_for_io_until(wheel.next_deadline());
//     wheel.advance(my_clock_now(), /*limit=*/1000);
//   }
#pragma once

#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <utility>

#include "tickwheel/detail/wheel_core.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel {

// Every call: the owning thread only, and none allocates once the pool has grown to the peak
// population (or was reserved for it). None throws but the constructor, and advance() or
// for_each_pending() passing on a callback's or a visitor's exception.
class Wheel {
  using Core = detail::WheelCore<detail::PlainPolicy>;

 public:
  static constexpr unsigned kLevelBits = Core::kLevelBits;  // each level is 256x coarser
  static constexpr unsigned kSlotBits = Core::kSlotBits;    // 512 slots a level
  static constexpr unsigned kSlots = Core::kSlots;
  static constexpr unsigned kLevels = Core::kLevels;
  static constexpr unsigned kWays = Core::kWays;  // sub-lists a slot
  // The most timers of one upper-level slot whose deadlines next_deadline() reads.
  static constexpr unsigned kDeadlineScan = Core::kDeadlineScan;
  static constexpr Nanos kMinTick = Core::kMinTick;  // 1 us
  static constexpr Nanos kMaxTick = Core::kMaxTick;  // 1 h

  // Validates opts (std::invalid_argument naming the value: see WheelOptions) and maps the slot
  // arrays, committed as links first touch them; std::bad_alloc if the mapping is refused. A
  // reserve maps and touches its node memory now: std::system_error if that (or its mlock) fails.
  explicit Wheel(WheelOptions opts = {}) : core_(opts) {}
  // Destroys the callables of all pending timers without running them; unmaps the memory. Reads
  // every node ever handed out, in address order, if a callable with a destructor was ever
  // scheduled; otherwise touches no node.
  ~Wheel() = default;
  Wheel(const Wheel&) = delete;
  Wheel& operator=(const Wheel&) = delete;

  // Runs fn() in the first advance(now) with now >= deadline rounded up to the tick; a deadline at
  // or before the current tick runs in the next advance(), one past horizon() is clamped to it.
  // fn: callable as fn(), at most 24 bytes and 8-byte aligned, nothrow to construct and destroy (a
  // compile error otherwise). O(1). Fails with a false id whose status() says why, nothing
  // changed: max_pending_reached, out_of_memory, null_callback.
  template <class F>
  [[nodiscard]] TimerId schedule_at(Nanos deadline, F&& fn) noexcept {
    return core_.schedule_at(deadline, std::forward<F>(fn));
  }

  // schedule_at(now() + delay), saturating. The delay counts from now(), the last advance()'s
  // time, not from the caller's clock: with your own now at hand, schedule_at(your_now + delay).
  template <class F>
  [[nodiscard]] TimerId schedule_after(Nanos delay, F&& fn) noexcept {
    return core_.schedule_after(delay, std::forward<F>(fn));
  }

  // Runs fn() every `period` (Cadence, Misfire: wheel_types.hpp) until cancelled, first at now() +
  // opts.initial_delay (default one period; negative counts as zero). One node and one id for
  // life; counts once in pending_count(). fn as for schedule_at but at most 16 bytes. If fn throws
  // the timer stays scheduled and advance() passes the exception on. O(1). Fails as schedule_at,
  // and with bad_period for period <= 0, > 2^60 - 1 ns, or fixed_rate and not whole ticks.
  template <class F>
  [[nodiscard]] TimerId schedule_every(Nanos period, F&& fn, PeriodicOptions opts = {}) noexcept {
    return core_.schedule_every(period, std::forward<F>(fn), opts);
  }

  // True iff the timer was pending (or is a periodic timer whose callback is running) and now never
  // runs again; its callable is destroyed before the call returns (a running periodic one's, once
  // the callback returns). False, nothing touched, for a default, failed, fired, cancelled or
  // recycled id, and for a one-shot timer cancelling itself from its callback. O(1). Safe inside
  // callbacks.
  bool cancel(TimerId id) noexcept { return core_.cancel(id); }

  // Starts loading id's node, for a cancel(), reschedule() or query of it a few calls later (a loop
  // that knows its next ids prefetches about 8 ahead). A hint: any id is harmless. O(1).
  void prefetch(TimerId id) const noexcept { core_.prefetch(id); }

  // Moves a pending timer to a new deadline (taken as schedule_at takes it), keeping its id and
  // callable: the kernel's mod_timer(). True iff it was pending and now runs then; false, nothing
  // touched, as for cancel(), and for a timer whose callback is running. A periodic timer's next
  // run moves and its runs follow from that one. O(1); within the deadline's slot span only the
  // deadline is written. Safe inside callbacks (a moved periodic timer runs at most once a call).
  bool reschedule(TimerId id, Nanos deadline) noexcept { return core_.reschedule(id, deadline); }

  // reschedule(id, now() + delay), saturating; counts from now(), as schedule_after() does.
  bool reschedule_after(TimerId id, Nanos delay) noexcept { return core_.reschedule_after(id, delay); }

  // Whether the timer will run (again) unless cancelled: a pending timer, or a periodic one whose
  // callback is running. False for a default, failed, fired, cancelled or recycled id. O(1).
  bool is_pending(TimerId id) const noexcept { return core_.is_pending(id); }

  // A pending timer's due time: its deadline rounded up to the tick and clamped (for a periodic
  // timer, its next run's); a timer already due reads its own tick. nullopt where is_pending() is
  // false, and inside a periodic timer's own callback. O(1).
  std::optional<Nanos> deadline(TimerId id) const noexcept { return core_.deadline(id); }

  // deadline(id) - now(), at least zero; nullopt as deadline(). Counts from now(). O(1).
  std::optional<Nanos> remaining(TimerId id) const noexcept { return core_.remaining(id); }

  // Cancels every pending timer (callables destroyed, not run; ids end; each counts in
  // WheelStats::cancelled) and keeps now(), the position and the pool's memory. Returns how many.
  // O(pending + occupied slots). Refused inside a callback: returns 0 and does nothing.
  std::size_t clear() noexcept { return core_.clear(); }

  // Calls visit(id, deadline) for every pending timer, in no set order; not a periodic timer whose
  // callback is running. visit may call const members only (debug builds assert it). An exception
  // from visit ends the walk and leaves the wheel as it is. O(pending + occupied slots).
  template <class Visit>
  requires std::invocable<Visit&, TimerId, Nanos>
  void for_each_pending(Visit&& visit) const { core_.for_each_pending(std::forward<Visit>(visit)); }

  // Moves the wheel's time to `now` (an earlier now counts as now()) and runs what is due, at most
  // `limit` callbacks, earliest tick first; returns how many ran. The rules:
  //   - ticks run in order; within a tick the order is unspecified. Past `limit`, the rest runs in
  //     the next call, before anything due later; the wheel still moves to the first waiting tick.
  //   - a timer scheduled at or before the tick being run (a past deadline, a zero delay), and a
  //     periodic timer's run already due again, waits for the next call: no livelock, and no
  //     periodic timer runs twice in one call. A callback's timer due later runs in this pass.
  //   - callbacks may schedule, cancel and reschedule anything; one cancelled by an earlier
  //     callback of the pass does not run. advance() from inside a callback returns 0.
  //   - a callback's exception leaves the wheel consistent (the rest runs in the next call) and
  //     propagates; its timer counts as fired.
  // Cost: O(fired + moved down + non-empty slots crossed); a call with nothing due on its way is
  // inline, a compare and two stores.
  std::size_t advance(Nanos now, std::size_t limit = std::numeric_limits<std::size_t>::max()) {
    return core_.advance(now, limit);
  }

  // The earliest time advance() could run a callback: now() if one is due, nullopt if nothing is
  // pending, else the earliest deadline, or a lower bound (the start of an upper level's crowded
  // slot), so a loop sleeping until then may wake early and find nothing; never late. O(levels).
  std::optional<Nanos> next_deadline() const noexcept { return core_.next_deadline(); }

  std::size_t pending_count() const noexcept { return core_.pending_count(); }  // periodic: once
  Nanos now() const noexcept { return core_.now(); }  // the last advance()'s now, or opts.start
  Nanos tick() const noexcept { return core_.tick(); }
  Nanos horizon() const noexcept { return core_.horizon(); }  // the latest deadline a timer can have
  WheelStats stats() const noexcept { return core_.stats(); }

 private:
  Core core_;
};

}  // namespace tickwheel
