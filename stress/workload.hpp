// stress/workload.hpp — a stress run's timers as the harness tracks them: the slot table, the
// callables the engine stores, the per-shard recorder their callbacks write, and the delay draw.
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
// Recording without locks. A timer's callable carries a pointer to the recorder of the shard that
// runs it (producers learn their home shard before they schedule; a periodic timer re-arms on its
// own shard), so a recorder is written only by its shard's worker thread. Its histograms and
// counters are single-writer atomics that the sampler thread may read while the run goes on.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
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
  // The handle of the current instance. Written by the slot's arming thread only: its producer,
  // or, for a periodic slot after the first instance, its shard's worker. Read by that thread, by
  // canceller threads through a copy passed with the job, and by the end checks after every thread
  // that writes it has been joined.
  Timer timer;
};

class ShardRecorder;

// The callable of a one-shot timer: 24 bytes, trivially copyable, so the engine stores it inline.
struct FireOnce {
  ShardRecorder* rec;
  std::int64_t deadline;  // steady_clock ns, exactly the time point given to schedule_at()
  std::uint32_t slot;
  std::uint32_t seq;
  void operator()() const noexcept;
};

// The callable of a periodic timer: it records its fire and re-arms itself (see on_periodic()).
struct FirePeriodic {
  ShardRecorder* rec;
  std::int64_t deadline;  // a lower bound of the engine's deadline after a re-arm (see on_periodic())
  std::uint32_t slot;
  std::uint32_t seq;
  void operator()() const noexcept;
};

static_assert(sizeof(FireOnce) <= 24 && sizeof(FirePeriodic) <= 24,
              "a timer's callable must fit the engine's 24 inline bytes");

// What the callbacks of one shard measure and check. Cache-line aligned: two shards' recorders are
// written by two workers, and must not share a line.
class alignas(kCacheLine) ShardRecorder {
 public:
  // Set up before the engine runs any of the run's timers; read-only afterwards.
  void init(Engine* engine, Slot* slots, std::size_t index, std::int64_t tick_ns,
            std::int64_t period_ns) noexcept;
  std::size_t index() const noexcept { return index_; }

  // The worker of this shard only, at the start of a callback (t is its first clock read).
  void on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot, std::uint32_t seq) noexcept;
  void on_periodic(std::int64_t t, std::int64_t deadline, std::uint32_t slot, std::uint32_t seq) noexcept;

  // Written by the worker, read at any time (the sampler) with relaxed loads. Lateness is kept per
  // kind because a periodic timer's re-arm from its callback starts a tick late by construction
  // (see on_periodic()), which would otherwise hide the one-shots' figures.
  ConcurrentHistogram oneshot_lateness;  // callback start - deadline, ns (an early fire counts as 0)
  ConcurrentHistogram periodic_lateness;
  ConcurrentHistogram past_tick;  // callback start - deadline rounded up to the tick, both kinds
  Counter fired;                  // callbacks run
  Counter rearmed;                // periodic re-arms that succeeded

  // Written by the worker, read only after stop() has joined it.
  std::uint64_t double_fires = 0;
  std::uint64_t fired_after_cancel = 0;
  std::uint64_t stray_fires = 0;
  std::uint64_t early_fires = 0;        // callback start < deadline
  std::uint64_t fired_before_tick = 0;  // callback start < deadline rounded up to the tick
  std::uint64_t off_shard = 0;          // a re-armed timer that landed on another shard
  std::int64_t min_lateness_ns = std::numeric_limits<std::int64_t>::max();
  StatusCounts rearm_rejected{};  // re-arms refused, by Status

 private:
  void record(std::int64_t t, std::int64_t deadline, ConcurrentHistogram& lateness) noexcept;
  void resolve(std::uint32_t slot, std::uint32_t seq) noexcept;

  Engine* engine_ = nullptr;
  Slot* slots_ = nullptr;
  std::size_t index_ = 0;
  std::int64_t tick_ns_ = 1;
  std::int64_t period_ns_ = 1;
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
