// stress/workload.hpp — a stress run's timers as the harness tracks them: the slot table, the
// callables the engine stores, the per-thread recorders their callbacks write, and the delay draw.
//
// Slots. Every timer of the run belongs to a slot: the one-shot population, the burst timers and
// the periodic timers each have a range of slots. A slot holds one timer at a time, an instance,
// numbered by a sequence number that grows by one each time the slot is armed. Its state word is
// seq << 2 | state, and each transition has one owner:
//   arming thread  (seq-1, anything but pending) -> (seq, pending), stored before the schedule call,
//                  so the engine's hand-off publishes it to the callback; back to (seq, idle) if the
//                  schedule fails (the instance never existed)
//   the callback   (seq, pending) -> (seq, fired), compare-and-swap
//   a cancel() that returned true
//                  (seq, pending) -> (seq, cancelled), compare-and-swap
// The engine promises that exactly one of a timer's fire and its cancel wins, so neither
// compare-and-swap can fail while the engine keeps its contract. When one does, the value it found
// names the broken rule: a fire that finds its own instance fired is a double fire, one that finds
// it cancelled is a fire after a successful cancel, one that finds another instance is a stray fire
// (a timer that ran for an instance already resolved); a successful cancel that finds the
// instance fired is a cancel that returned true for a timer that ran. A slot whose timer never fires
// and is never returned by stop() shows up at the end as a pending slot stop() did not return.
//
// A periodic slot holds one instance for the timer's whole life: the engine re-arms it after each
// run (Engine::schedule_every, fixed rate, Misfire::catch_up). Each run moves it (seq, pending)
// -> (seq, fired) as it starts and back to (seq, pending) as it ends, so a run that finds it fired
// overlaps another run of the same timer (the engine promises runs never overlap). The harness
// never cancels a periodic timer: stop() returns every one, pending.
//
// Periodic lateness. With catch_up every point of a fixed-rate timer's grid runs exactly once, in
// order (a timer that falls behind runs each missed period, one per pass, never skipping one), so
// run k is due at exactly g0 + k * period, g0 being the first run's tick. The producer picks g0 (a
// tick boundary) and an initial delay that lands on it (see Producer::start_periodic()), and each
// run measures its lateness against its own grid point, then moves the slot's next grid point on by
// one period. Engine::stats() must then show rearmed == the runs the harness saw (every run is
// followed by a next period) and skipped == 0.
//
// Tick probes. One more periodic timer per shard, put there by the driver with schedule_every_on()
// at a period of one tick (Misfire::fire_once_now, so a stall is one late run, not a run of
// catch-up runs): the harness's view of each shard's tick lag, one sample per tick, the engine-side
// counterpart of the control thread (control.hpp). A probe run is due at the first tick boundary
// after the pass that ran the previous one read its clock; the harness knows only the previous
// run's own clock read, which is later, so it takes the first tick boundary after that (no later
// than the run's own tick boundary): the recorded lag is exact unless a tick boundary passed between
// the pass's clock read and the probe's callback, and then an underestimate. The probe also counts,
// with the inline executor, the callbacks its worker ran since the previous probe run: the fires of
// one tick. Probe runs count as periodic runs everywhere, but are not checked for earliness (their
// due time is a bound, not known exactly).
//
// Recording without locks. Callbacks run on the shards' workers (--executor inline) or on a
// thread pool's threads (--executor pool), so a callable cannot name its recorder: each thread that
// runs a callback takes a Recorder of its own on its first callback (Recorders::mine(): one
// thread_local compare per callback, one atomic increment per thread, ever) and is its only writer.
// Its histograms and counters are single-writer atomics that the sampler thread may read while the
// run goes on; the driver merges them at the end.
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

enum class SlotState : std::uint32_t { idle = 0, pending = 1, fired = 2, cancelled = 3 };

inline constexpr std::uint32_t kSeqMask = (std::uint32_t{1} << 30) - 1;
constexpr std::uint32_t slot_word(std::uint32_t seq, SlotState s) noexcept {
  return (seq & kSeqMask) << 2 | static_cast<std::uint32_t>(s);
}
constexpr std::uint32_t seq_of(std::uint32_t word) noexcept { return word >> 2; }
constexpr SlotState state_of(std::uint32_t word) noexcept { return static_cast<SlotState>(word & 3); }
constexpr std::uint32_t next_seq(std::uint32_t seq) noexcept { return (seq + 1) & kSeqMask; }

struct Slot {
  std::atomic<std::uint32_t> state{0};  // see the header comment for who writes it
  // The handle of the current instance. Written by the slot's arming thread only (its producer),
  // read by it, by canceller threads through a copy passed with the job, and by the end checks
  // after every thread that writes it has been joined.
  Timer timer;
};

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
  std::int64_t deadline;  // steady_clock ns, exactly the time point given to schedule_at()
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

// What the callbacks of one thread measure and check. Cache-line aligned: two threads' recorders
// are written by two threads, and must not share a line.
class alignas(kCacheLine) Recorder {
 public:
  // Written by the recorder's thread, read at any time (the sampler) with relaxed loads. Lateness
  // is kept per kind, one-shot and periodic, so that each can be read apart.
  ConcurrentHistogram oneshot_lateness;   // callback start - deadline, ns (an early fire counts as 0)
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
  std::uint64_t early_fires = 0;        // callback start < deadline
  std::uint64_t fired_before_tick = 0;  // callback start < deadline rounded up to the tick
  std::int64_t min_lateness_ns = std::numeric_limits<std::int64_t>::max();
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
  std::int64_t next_due = 0;           // the next run's tick boundary (a bound, see above)
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
  // probes, probe i on shard i.
  Recorders(Slot* slots, SlotRange periodic, SlotRange probes, std::size_t threads, std::int64_t tick_ns,
            std::int64_t period_ns);

  // The arming producer, before it schedules the periodic timer of `slot`: its first run's grid
  // point (a multiple of the tick). The engine's hand-off publishes it to the first run.
  void set_first_run(std::uint32_t slot, std::int64_t due) noexcept {
    next_due_[slot - periodic_.begin] = due;
    if (probes_.contains(slot)) probe_state_[slot - probes_.begin].next_due = due;
  }

  // Callbacks, on whatever thread runs them (t is the callback's first clock read).
  void on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot, std::uint32_t seq) noexcept;
  void on_periodic(std::int64_t t, std::uint32_t slot, std::uint32_t seq) noexcept;

  // Any thread: the recorders taken so far (each already counts from zero).
  std::span<const Recorder> claimed() const noexcept;
  // Any thread: the shards' tick probes, probe i on shard i.
  std::span<const ProbeState> probes() const noexcept { return {probe_state_.get(), probes_.size()}; }
  const SlotRange& probe_slots() const noexcept { return probes_; }
  // Callbacks that found every recorder taken (the engine ran them on an unexpected thread).
  std::uint64_t unrecorded() const noexcept { return unrecorded_.load(std::memory_order_relaxed); }

 private:
  Recorder* mine(std::uint32_t slot) noexcept;
  void record(Recorder& r, std::int64_t t, std::int64_t deadline, ConcurrentHistogram& lateness) noexcept;
  void on_probe(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept;

  Slot* const slots_;
  const SlotRange periodic_;
  const SlotRange probes_;
  const std::size_t capacity_;
  const std::int64_t tick_ns_;
  const std::int64_t period_ns_;
  std::unique_ptr<Recorder[]> recorders_;
  // Per periodic slot, the grid point of its next run: written by the producer before the
  // schedule, then by each run, which the engine orders after the run before (runs never overlap,
  // and the node's return to its shard and its next hand-off are release/acquire pairs).
  std::unique_ptr<std::int64_t[]> next_due_;
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
