// tickwheel/wheel_types.hpp — the values a Wheel takes and gives: TimerId, the periodic options,
// WheelOptions and WheelStats. Included by tickwheel/wheel.hpp; the Engine shares the periodic
// options.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tickwheel/status.hpp"

namespace tickwheel {
namespace detail {
template <class Policy>
class WheelCore;
}  // namespace detail

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
  friend class detail::WheelCore;
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
  // this core's L2 holds, at 64 bytes per timer (1 MiB where the CPU does not say). 0 = that
  // default; 1 = always queue; SIZE_MAX = never. Either way a cancel destroys the callable at once
  // and is exact; this only moves the unlink (bench/'s cancel and churn cases measure both sides).
  std::size_t cancel_batch_from = 0;
};

// Counters for tests, benchmarks and the stress report. Cheap to read (a copy of a few fields).
//
// Accounting. Every link of a timer, by a schedule or by a periodic re-arm, ends in exactly one run,
// skip or cancel, or is still pending; so between advance() calls
//     scheduled + rearmed == fired + skipped + cancelled + pending_count().
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

}  // namespace tickwheel
