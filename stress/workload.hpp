// stress/workload.hpp — a stress run's timers as the harness tracks them: the slot table, the
// callables the engine stores, the per-thread recorders their callbacks write, and the delay draw.
// The design (slot protocol, periodic bounds, reschedules, tick probes, lock-free recording):
// docs/stress.md, "Inside the harness".
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <span>
#include <type_traits>

#include "histogram.hpp"
#include "options.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::stress {

inline constexpr std::size_t kCacheLine = 64;
// One counter per value a Status can hold (its underlying type's whole range), so that a reason
// the enum gains later still has its counter. Status::ok is never counted.
inline constexpr std::size_t kStatusCount =
    std::size_t{std::numeric_limits<std::underlying_type_t<Status>>::max()} + 1;
using StatusCounts = std::array<std::uint64_t, kStatusCount>;

// A counter with one writer thread and any number of readers: a relaxed load and a relaxed store,
// no read-modify-write, since no other thread writes it (the same reasoning as ConcurrentHistogram).
class Counter {
 public:
  void add(std::uint64_t n) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void raise_to(std::uint64_t n) noexcept {
    if (n > v_.load(std::memory_order_relaxed)) v_.store(n, std::memory_order_relaxed);
  }
  std::uint64_t get() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};
};

// A slot's state word is seq << 3 | state, each transition with one owner: the arming thread
// -> (seq, pending), the callback -> fired, a cancel() that returned true -> cancelled, both by
// compare-and-swap; a failed one names the broken rule (docs/stress.md, "The slot protocol").
enum class SlotState : std::uint32_t {
  idle = 0,
  pending = 1,
  fired = 2,
  cancelled = 3,
  cancelled_in_run = 4,  // periodic: cancelled while a run was recorded in progress
  ran_after_cancel = 5,  // periodic: the one run begun before its cancel() returned has started
};

// Reschedules (docs/stress.md, "Reschedules"): the most per instance, and the slack of the race
// bound.
inline constexpr unsigned kMaxMoves = 3;
inline constexpr std::int64_t kMoveSlackNs = 10'000;

inline constexpr unsigned kStateBits = 3;
inline constexpr std::uint32_t kSeqMask = (std::uint32_t{1} << (32 - kStateBits)) - 1;
constexpr std::uint32_t slot_word(std::uint32_t seq, SlotState s) noexcept {
  return (seq & kSeqMask) << kStateBits | static_cast<std::uint32_t>(s);
}
constexpr std::uint32_t seq_of(std::uint32_t word) noexcept { return word >> kStateBits; }
constexpr SlotState state_of(std::uint32_t word) noexcept {
  return static_cast<SlotState>(word & ((1U << kStateBits) - 1));
}

// One slot: the state word, the handle, and what a one-shot instance's reschedules need
// (docs/stress.md, "Reschedules"). One cache line: 1M slots take 64 MiB, allocated before the RSS
// baseline.
struct alignas(kCacheLine) Slot {
  std::atomic<std::uint32_t> state{0};  // who writes it: see SlotState
  // Owner: the slot's producer (and the end checks, after it is joined). The reschedules still
  // planned for the current instance, and what the ones made so far leave to check (kMoved...).
  std::uint8_t moves_left = 0;
  std::uint8_t move_flags = 0;
  // The handle of the current instance. Written by the slot's arming thread only (its producer),
  // read by it, by canceller threads through a copy passed with the job, and by the end checks
  // after every thread that writes it has been joined.
  Timer timer;
  // The one-shot callback's clock read, stored (relaxed) before its compare-and-swap, whose release
  // publishes it to the producer that sees (seq, fired).
  std::atomic<std::int64_t> fired_at{0};
  // The instance's deadline before its last reschedule and the one that reschedule asked for
  // (steady_clock ns; 0 = none: the callable's deadline). Written by the producer (reset before
  // the schedule call, set before each reschedule call, so the hand-off or the move's record
  // publishes them), read by the callback for the deadline its lateness is measured against.
  std::atomic<std::int64_t> moved_from{0};
  std::atomic<std::int64_t> moved_to{0};
  // Owner: the slot's producer. The instance's delay: each reschedule puts the deadline this far
  // past the moment it is made (an idle timeout reset by activity).
  std::int64_t idle_ns = 0;
};
static_assert(sizeof(Slot) == kCacheLine, "a slot is one cache line (see above)");

// The arming thread, before its schedule call: moves the slot to its next instance, (seq, pending),
// and returns seq. Relaxed: this thread is the slot's only arming thread and saw the previous
// instance resolved through an acquire load (or the slot was never armed); the schedule's hand-off
// publishes the store to the callback.
inline std::uint32_t begin_instance(Slot& slot) noexcept {
  const std::uint32_t seq = (seq_of(slot.state.load(std::memory_order_relaxed)) + 1) & kSeqMask;
  slot.state.store(slot_word(seq, SlotState::pending), std::memory_order_relaxed);
  return seq;
}

// Slot::move_flags.
inline constexpr std::uint8_t kMoved = 1;  // a reschedule returned true: the fire is checked by the
                                           // producer against moved_to (cleared once checked)
inline constexpr std::uint8_t kRaced = 2;  // ... the last one was asked once the deadline before it had
                                           // come: the timer may fire at either (moved_from or moved_to)

// The engine's due time of a deadline: rounded up to the tick, whose grid starts at steady_clock's
// epoch (the axis of every deadline here).
constexpr std::int64_t due_at_tick(std::int64_t deadline, std::int64_t tick) noexcept {
  return (deadline + tick - 1) / tick * tick;
}

// What the fire of a one-shot instance that was moved says about its reschedules
// (docs/stress.md, "Reschedules"): `t` its callback's clock read.
enum class MovedFire : std::uint8_t {
  on_time,  // at or after the deadline of the last reschedule that returned true
  raced,    // before it, but at or after the deadline before it, which had come while that move was
            // on its way (the engine's contract lets it fire there, once)
  early,    // before the earliest deadline it may fire at, rounded up to the tick: a broken rule
};
MovedFire judge_moved_fire(const Slot& slot, std::int64_t t, std::int64_t tick) noexcept;

// A half-open range of slot numbers.
struct SlotRange {
  std::uint32_t begin = 0;
  std::uint32_t end = 0;
  std::uint32_t size() const noexcept { return end - begin; }
  bool contains(std::uint32_t s) const noexcept { return s >= begin && s < end; }
};

class Recorders;

// The callable of a one-shot timer: 24 bytes, trivially copyable, so the engine stores it inline.
struct FireOnce {
  Recorders* recorders;
  std::int64_t deadline;  // steady_clock ns, exactly the time point given to schedule_at() (a
                          // reschedule moves it later: see Slot::moved_to)
  std::uint32_t slot;
  std::uint32_t seq;
  void operator()() const noexcept;
};

// The callable of a periodic timer: 16 bytes, the most schedule_every() stores. Its runs' grid
// points are kept by Recorders, per slot.
struct FirePeriodic {
  Recorders* recorders;
  std::uint32_t slot;
  std::uint32_t seq;
  void operator()() const noexcept;
};

static_assert(sizeof(FireOnce) <= 24 && sizeof(FirePeriodic) <= 16,
              "a timer's callable must fit the engine's inline bytes (24, periodic 16)");

// Whether the harness knows a periodic timer's grid exactly (docs/stress.md, "Periodic policies
// and their bounds"). The producer decides after its schedule call; a run that finds it undecided
// decides inexact first (both by compare-and-swap, so one of them decides, and a run never uses a
// grid decided exact after it).
enum class GridState : std::uint8_t { undecided, exact, inexact };

// One periodic slot's rule state (not the probes'). Written by the producer before the schedule
// call, then by each run, one at a time: the engine orders each run after the one before (runs never
// overlap, and the node's hand-offs are release/acquire pairs), and the producer's writes reach the
// first run through the schedule's hand-off.
struct PeriodicTrack {
  std::int64_t first_due = 0;  // g0, the first run's grid point (a tick boundary)
  // The earliest the next run may start: its grid point (catch_up, and the others while on time), a
  // lower bound of it, or for fixed_delay the tick after the previous end plus a period.
  std::int64_t next_due = 0;
  std::int64_t prev_end = 0;  // the previous run's last clock read; 0 before the first run
  std::uint64_t runs = 0;
  bool skip_due = false;  // a forced misfire left a period that must be dropped (skip)
  std::atomic<GridState> grid{GridState::undecided};
};

// What one kind of periodic timer did: on one thread (its Recorder, written by that thread and read
// after stop()), or over the run (the report).
struct PolicyCounts {
  std::uint64_t timers = 0;        // the report's: started (schedule_every returned a timer)
  std::uint64_t runs = 0;          // runs recorded against the kind's bound
  std::uint64_t before_bound = 0;  // of those, started before the policy let them (a broken rule)
  std::uint64_t forced = 0;        // forced misfires: runs that spun past two periods
  void add(const PolicyCounts& o) noexcept {
    runs += o.runs;
    before_bound += o.before_bound;
    forced += o.forced;
  }
};

// What the callbacks of one thread measure and check. Cache-line aligned: two threads' recorders
// are written by two threads, and must not share a line.
class alignas(kCacheLine) Recorder {
 public:
  // Written by the recorder's thread, read at any time (the sampler) with relaxed loads. Lateness
  // is kept per kind, one-shot and periodic, so that each can be read apart.
  ConcurrentHistogram oneshot_lateness;   // callback start - deadline, ns (an early fire counts as 0;
                                          // a rescheduled timer's deadline: see "Reschedules")
  ConcurrentHistogram periodic_lateness;  // callback start - the run's grid point
  ConcurrentHistogram past_tick;          // callback start - deadline rounded up to the tick, both kinds
  Counter fired;                          // callbacks run, periodic runs included
  Counter periodic_runs;

  // Written by the recorder's thread, read only after stop() has returned (which joined the
  // workers and waited for every task handed to the executor).
  std::uint64_t double_fires = 0;
  std::uint64_t fired_after_cancel = 0;
  std::uint64_t stray_fires = 0;
  std::uint64_t overlapping_runs = 0;   // a periodic run that started while another one ran
  std::uint64_t early_fires = 0;        // one-shot callback start < its first deadline
  std::uint64_t fired_before_tick = 0;  // one-shot callback start < that rounded up to the tick
  std::int64_t min_lateness_ns = std::numeric_limits<std::int64_t>::max();
  // Periodic runs by kind (not the probes'); skips a forced misfire made certain (docs/stress.md,
  // "Forced misfires"); the allowed runs begun before a periodic cancel() returned.
  std::array<PolicyCounts, kPeriodicKinds> policy{};
  std::uint64_t forced_skips = 0;
  std::uint64_t runs_after_cancel = 0;
  // Forced misfires on this thread: when the next may come, and which fixed-rate kind it takes.
  std::int64_t next_misfire = 0;
  PeriodicPolicy misfire_turn = PeriodicPolicy::catch_up;
  std::uint32_t first_slot = 0;  // the slot of the first timer this thread ran (names a worker's
                                 // shard: one-shot and periodic timers are on their producer's)
  // The thread's kernel id, stored at its first callback (relaxed: read by the driver after the
  // tick probe that names it, or after stop(), which order it).
  std::atomic<pid_t> tid{0};
};

// What one shard's tick probe measured. The probe's runs are written by whichever thread runs
// them, one at a time: the engine orders each run after the previous one (runs never overlap, and
// the node's hand-offs are release/acquire pairs), so each field has one writer at a time.
struct alignas(kCacheLine) ProbeState {
  ConcurrentHistogram lag;             // callback start - the tick boundary it was due at, ns
  ConcurrentHistogram fires_per_tick;  // inline executor: the worker's callbacks since the last run
  std::int64_t next_due = 0;           // the next run's tick boundary (a bound: docs/stress.md)
  const Recorder* last = nullptr;      // the recorder of the previous run's thread
  std::uint64_t fired_at_last = 0;     // its fired count at the previous run
  // The thread that ran the first run: the shard's worker with the inline executor. Release by that
  // run, acquire by the driver waiting for it.
  std::atomic<pid_t> tid{0};
};

// The recorders of one run, one per thread that runs callbacks, and the periodic timers' grid.
class Recorders {
 public:
  // Set up before the engine runs any of the run's timers. `threads`: how many threads may run
  // callbacks (the workers, plus the pool's threads with an executor); a callback on one more is
  // counted in unrecorded() and not recorded.
  // `periodic` holds every periodic slot; the last `probes.size()` of them are the shards' tick
  // probes, probe i on shard i. The options give the tick, the period, each periodic timer's
  // policy, the forced misfires and the executor (which decides the bounds: docs/stress.md,
  // "Periodic policies and their bounds").
  Recorders(Slot* slots, SlotRange periodic, SlotRange probes, std::size_t threads, const Options& o);

  // The kind of the periodic timer of `slot` (not a probe).
  PeriodicPolicy kind_of(std::uint32_t slot) const noexcept {
    return policy_ != PeriodicPolicy::all
               ? policy_
               : static_cast<PeriodicPolicy>((slot - periodic_.begin) % kPeriodicKinds);
  }

  // The arming producer, before it schedules the periodic timer of `slot`: its first run's grid
  // point (a multiple of the tick). The engine's hand-off publishes it to the first run.
  void set_first_run(std::uint32_t slot, std::int64_t due) noexcept {
    if (probes_.contains(slot)) {
      probe_state_[slot - probes_.begin].next_due = due;
      return;
    }
    PeriodicTrack& k = track_[slot - periodic_.begin];
    k.first_due = due;
    k.next_due = due;
    // Relaxed: the schedule's hand-off publishes it with the rest.
    k.grid.store(GridState::undecided, std::memory_order_relaxed);
  }
  // The arming producer, once its schedule call returned: whether the first grid point is exact
  // (the call took less than a tick). Relaxed: only the value matters, not what precedes it.
  void settle_grid(std::uint32_t slot, bool exact) noexcept {
    GridState undecided = GridState::undecided;
    track_[slot - periodic_.begin].grid.compare_exchange_strong(
        undecided, exact ? GridState::exact : GridState::inexact, std::memory_order_relaxed);
  }
  // After stop(): one periodic slot's rule state.
  const PeriodicTrack& track(std::uint32_t slot) const noexcept { return track_[slot - periodic_.begin]; }

  // Callbacks, on whatever thread runs them (t is the callback's first clock read).
  void on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot, std::uint32_t seq) noexcept;
  void on_periodic(std::int64_t t, std::uint32_t slot, std::uint32_t seq) noexcept;

  // Any thread: the recorders taken so far (each already counts from zero).
  std::span<const Recorder> claimed() const noexcept;
  // Any thread: the shards' tick probes, probe i on shard i.
  std::span<const ProbeState> probes() const noexcept { return {probe_state_.get(), probes_.size()}; }
  // Callbacks that found every recorder taken (the engine ran them on an unexpected thread).
  std::uint64_t unrecorded() const noexcept { return unrecorded_.load(std::memory_order_relaxed); }

 private:
  Recorder* mine(std::uint32_t slot) noexcept;
  // `first`: the instance's first deadline; `at`: the one its lateness is measured against.
  void record(Recorder& r, std::int64_t t, std::int64_t first, std::int64_t at) noexcept;
  void on_probe(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept;
  // A periodic run's timing: its check, its lateness, a forced misfire, the next run's bound.
  void time_run(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept;
  std::int64_t first_grid_point_after(const PeriodicTrack& k, std::int64_t t) const noexcept;

  Slot* const slots_;
  const SlotRange periodic_;
  const SlotRange probes_;
  const std::size_t capacity_;
  const std::int64_t tick_ns_;
  const std::int64_t period_ns_;
  const PeriodicPolicy policy_;
  const std::int64_t misfire_every_ns_;
  const bool inline_;  // callbacks on the shard's own thread (no executor): the tighter bounds hold
  std::unique_ptr<Recorder[]> recorders_;
  std::unique_ptr<PeriodicTrack[]> track_;  // per periodic slot (the probes' entries unused)
  std::unique_ptr<ProbeState[]> probe_state_;
  std::atomic<std::size_t> taken_{0};         // recorders handed out (may pass capacity_)
  std::atomic<std::uint64_t> unrecorded_{0};  // any thread; only past capacity_
};

// Draws one-shot delays from the configured distribution, in ns (>= 0).
class DelayDraw {
 public:
  explicit DelayDraw(const Options& o);
  std::int64_t operator()(std::mt19937_64& rng);

 private:
  DelayKind kind_;
  std::int64_t fixed_ns_;
  std::int64_t short_ns_;
  std::int64_t long_ns_;
  std::uniform_int_distribution<std::int64_t> uniform_;
  std::exponential_distribution<double> exponential_;
  std::bernoulli_distribution is_short_;
};

}  // namespace tickwheel::stress
