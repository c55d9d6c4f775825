// stress/producer.hpp — the threads that load the engine: producers, which keep their slots armed,
// cancel a share of their timers and push another share back (reschedule), and cancellers, which
// take a share of those cancels from other threads. See docs/stress.md, "Producers and cancellers".
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "options.hpp"
#include "tickwheel/wheel.hpp"
#include "workload.hpp"

namespace tickwheel::stress {

class Canceller;

// What the driver shares with every producer and canceller. Set up before any thread starts.
struct RunShared {
  const Options* options = nullptr;
  Engine* engine = nullptr;
  Slot* slots = nullptr;
  SlotRange periodic;  // every producer's periodic timers (not the tick probes)
  Recorders* recorders = nullptr;
  std::vector<Canceller*> cancellers;
  std::atomic<unsigned> probed{0};  // producers past their probe
  std::atomic<bool> go{false};      // the driver's start signal (after start_ns is set)
  std::atomic<bool> stop{false};    // producers finish their loop
  double rate_per_producer = 0;     // schedule calls per second each producer may make; 0 = unpaced
  std::int64_t start_ns = 0;        // written before go (release), read after it (acquire)
};

// Calls and the time spent inside them, bracketed per batch. Single writer (the owning thread).
struct CallTimes {
  Counter calls;
  Counter ns;  // sum over batches of (clock after - clock before)
  Counter batches;
  void add(std::size_t n, std::int64_t took_ns, std::size_t brackets = 1) noexcept {
    calls.add(n);
    ns.add(static_cast<std::uint64_t>(took_ns));
    batches.add(brackets);
  }
};

// The reschedules one producer made, and the fires of the timers they moved. Single writer.
struct MoveCounters {
  CallTimes times;
  Counter moved;    // reschedule() returned true
  Counter refused;  // ... false: the timer had fired or was firing
  // Single writer; read at the end. Fires of moved timers, judged against their deadlines
  // (judge_moved_fire()):
  std::uint64_t fires = 0;
  std::uint64_t raced = 0;  // at the deadline before the last move, which had come: allowed
  std::uint64_t early = 0;  // before the earliest deadline the moves left it, or its tick: a broken rule
  // reschedule() returned false, though no pass could have claimed the timer yet: a broken rule.
  std::uint64_t refused_pending = 0;
};

// A cancel handed to a canceller thread.
struct CancelJob {
  Timer timer;
  std::uint32_t slot;
  std::uint32_t seq;
};

// Counters of the cancels one thread made. Single writer.
struct CancelCounters {
  CallTimes times;
  Counter cancelled;  // cancel() returned true (one-shot and periodic)
  Counter lost;       // cancel() returned false on a one-shot: the fire won the race
  Counter periodic;   // of `cancelled`, periodic timers
  // Single writer; read at the end. cancel() returned true, but the slot's instance had already
  // fired or been resolved:
  std::uint64_t true_not_pending = 0;
  // cancel() returned false on a periodic timer, which is cancelled once and never fires for good:
  std::uint64_t periodic_refused = 0;
};

// One entry of a producer's agenda (a Wheel of its own): what to do with a slot, and when.
enum class EventKind : std::uint32_t {
  cancel,      // cancel the slot's timer now (or hand the cancel to a canceller thread)
  check,       // look at the slot: re-arm it if its timer fired or was cancelled, else look again later
  reschedule,  // push the slot's timer back (an idle timeout reset, see docs/stress.md)
};

struct Event {
  std::int64_t t;  // steady_clock ns
  std::uint32_t slot;
  std::uint32_t tag;  // seq << 2 | kind (a seq has 29 bits, see workload.hpp)
  std::uint32_t seq() const noexcept { return tag >> 2; }
  EventKind kind() const noexcept { return static_cast<EventKind>(tag & 3); }
  static Event make(std::int64_t t, std::uint32_t slot, std::uint32_t seq, EventKind kind) noexcept {
    return Event{t, slot, seq << 2 | static_cast<std::uint32_t>(kind)};
  }
};

class Producer {
 public:
  static constexpr std::size_t kBatch = 256;  // schedule or cancel calls per timed bracket

  Producer(RunShared& shared, unsigned index, SlotRange oneshots, SlotRange periodic, SlotRange burst);
  void run() noexcept;  // the thread body

  // After the probe (the driver waits for RunShared::probed).
  std::size_t home() const noexcept { return home_; }
  bool owns(std::uint32_t slot) const noexcept {
    return oneshots_.contains(slot) || periodic_.contains(slot) || burst_.contains(slot);
  }
  const std::string& setup_error() const noexcept { return setup_error_; }

  // Live: single writer (this producer's thread), any reader.
  CallTimes schedules;     // one-shot, periodic-start and burst schedule calls (bursts included)
  Counter scheduled;       // calls that returned a timer
  CancelCounters cancels;  // the cancels this producer made itself
  MoveCounters moves;      // the reschedules it made (all of them: none is handed to a canceller)
  Counter agenda_bytes;    // its agenda's node memory beyond agenda_base_bytes(): grows with the population
  // Its agenda's memory at construction (the Wheel's slot arrays), before the run's RSS baseline.
  std::uint64_t agenda_base_bytes() const noexcept { return agenda_base_bytes_; }
  Counter bursts;
  Counter burst_calls;
  Counter burst_ns;  // time inside the bursts' schedule calls
  Counter max_burst_ns;
  // The thread's kernel id, stored as it starts (relaxed: the driver reads it after `probed`).
  std::atomic<pid_t> tid{0};
  // Read after the thread is joined.
  StatusCounts rejected_by{};
  std::uint64_t periodic_started = 0;
  // Periodic timers whose first grid point is known only as a lower bound: their schedule call
  // took a tick or more (see start_periodic()).
  std::uint64_t periodic_inexact = 0;
  std::uint64_t probes = 0;          // probe timers scheduled (each cancelled at once)
  std::uint64_t probe_failures = 0;  // a probe whose cancel() returned false
  std::uint64_t off_shard = 0;       // a timer that landed on another shard than the home one

 private:
  struct Plan {
    std::uint32_t slot;
    std::uint32_t seq;
    std::int64_t delay;  // periodic: the phase of the first run into the period
    double cancel_at;    // share of the delay at which to cancel, or < 0: let it fire
    std::int64_t deadline;
    std::int64_t call_ns = 0;  // periodic: between the clock reads before and after its schedule
    std::uint8_t moves = 0;    // reschedules planned (cancel_at < 0 then)
  };

  bool probe();
  void loop();
  void on_event(const Event& e, std::int64_t now);
  std::size_t cancel_own(std::int64_t now);
  std::size_t move_own();
  void plan_move(std::uint32_t slot, std::uint32_t seq, std::int64_t from, std::int64_t deadline);
  void flush_jobs();
  void arm(std::span<const std::uint32_t> slots, bool burst);
  void start_periodic();
  void make_ready(std::uint32_t slot);
  // After a batch: whether the plan's schedule returned a timer, counted as scheduled (and
  // off_shard) or as refused (rejected_by).
  bool took(const Plan& p) noexcept;
  void refill_tokens(std::int64_t now) noexcept;

  RunShared& shared_;
  const Options& o_;
  const unsigned index_;
  const SlotRange oneshots_;
  const SlotRange periodic_;
  const SlotRange burst_;
  std::size_t home_ = 0;
  std::string setup_error_;

  std::mt19937_64 rng_;
  DelayDraw delay_;
  std::bernoulli_distribution cancel_pick_;
  std::bernoulli_distribution periodic_cancel_pick_;
  // Of the timers not cancelled, the share rescheduled (reschedule_share / (1 - cancel_share)), and
  // how many times; no draw at all with --reschedule-share 0, so the older runs' fates replay.
  std::bernoulli_distribution move_pick_;
  std::uniform_int_distribution<unsigned> move_count_{1, kMaxMoves};
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  // The agenda: one event per slot this producer owns, up to millions, one schedule and one fire
  // per timer it arms, so O(1) both ways: the library's own Wheel, at a coarse tick (an event runs
  // up to a tick after its time, which a cancel at a random time or a re-arm check can spare).
  // agenda_now_ is the now of the advance() running its callbacks.
  static constexpr std::int64_t kAgendaTick = 100'000;
  tickwheel::Wheel agenda_;
  std::uint64_t agenda_base_bytes_ = 0;
  std::int64_t agenda_now_ = 0;
  void push(const Event& e);
  std::int64_t retry_ns_;  // when a check finds the timer still pending, look again
  // Slots to re-arm, oldest first: a ring as large as the one-shot range, since a slot is in it
  // at most once (a slot is always in exactly one of: the ring, the agenda, burst_idle_).
  std::vector<std::uint32_t> ready_;
  std::size_t ready_head_ = 0;
  std::size_t ready_count_ = 0;
  std::vector<std::uint32_t> arm_buf_;
  std::vector<std::uint32_t> burst_idle_;  // burst slots waiting for the next burst
  std::vector<std::uint32_t> flood_;       // the slots of the burst being armed
  std::vector<Plan> plan_;
  std::vector<std::uint32_t> own_cancels_;  // slots whose cancel is due, made by this thread
  std::vector<std::uint32_t> own_seqs_;
  std::vector<std::uint32_t> own_moves_;  // slots whose reschedule is due, with their seqs
  std::vector<std::uint32_t> own_move_seqs_;
  std::vector<std::int64_t> move_from_;       // per due reschedule: the deadline it moves
  std::vector<std::int64_t> move_to_;         // ... and the one it asks for
  std::vector<std::vector<CancelJob>> jobs_;  // per canceller, flushed once per loop
  std::size_t next_route_ = 0;                // round robin: 0 = this thread, i = canceller i-1
  double tokens_ = 0;                         // schedule calls allowed now (--schedule-rate)
  std::int64_t tokens_at_ = 0;
  // After a batch with rejected schedules (max_pending_reached, out_of_memory), no re-arm before
  // arm_after_; the back-off doubles while batches keep being refused, so a full shard costs a
  // batch of refusals per back-off, not a busy loop of them.
  std::int64_t arm_after_ = 0;
  std::int64_t backoff_ns_ = 0;
};

class Canceller {
 public:
  explicit Canceller(RunShared& shared) : shared_(shared) {}
  // Any producer: moves the jobs in under the inbox lock (one lock per batch, never per cancel,
  // and never around a cancel() call) and wakes the canceller if it was idle.
  void post(std::vector<CancelJob>& jobs);
  // No more posts will come: run() drains the inbox and returns.
  void finish();
  void run() noexcept;  // the thread body

  CancelCounters cancels;     // single writer: this canceller's thread
  std::atomic<pid_t> tid{0};  // stored as the thread starts; read by the driver at the end

 private:
  RunShared& shared_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<CancelJob> inbox_;  // under mutex_
  bool finished_ = false;         // under mutex_
};

// The cancels' side of the slot protocol, shared by producers and cancellers: after cancel()
// returned `won` for the slot's instance `seq`, moves the slot to cancelled (or counts the broken
// rule if the instance had fired). A periodic slot (see docs/stress.md) goes to cancelled_in_run
// instead if a run is recorded in progress.
void settle_cancel(Slot& slot, std::uint32_t seq, bool won, bool periodic, CancelCounters& c) noexcept;

// A one-shot slot seen (seq, fired) through an acquire load: if a reschedule of the instance returned
// true, judges its fire (judge_moved_fire()) into `c` and clears the slot's move flags, so it is
// judged once. The producer calls it before a re-arm; the end checks for the slots it did not.
void settle_moved_fire(Slot& slot, std::int64_t tick, MoveCounters& c) noexcept;

}  // namespace tickwheel::stress
