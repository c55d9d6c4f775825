// stress/producer.cpp — the producer loop, the timed schedule and cancel batches, and the
// canceller threads.
#include "producer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <new>
#include <optional>
#include <thread>

#include "clock.hpp"
#include "platform.hpp"

namespace tickwheel::stress {
namespace {

constexpr std::int64_t kHour = 3'600 * kSecond;
// Work per loop iteration, so the stop flag and the other duties are looked at every millisecond
// or two even when a producer cannot keep up.
constexpr std::size_t kEventBudget = 16'384;
constexpr std::size_t kArmBudget = 16'384;
// The longest a producer sleeps at once, so it notices the stop flag promptly when it is idle.
constexpr std::int64_t kMaxSleepNs = 10'000'000;
// Schedule credit a paced producer may bank while it is busy elsewhere: 10 ms of its rate.
constexpr double kTokenHorizonS = 0.01;
// The longest pause of re-arms after refused schedules.
constexpr std::int64_t kMaxBackoffNs = 100'000'000;

// An event's tag holds a seq and an EventKind in 32 bits (producer.hpp).
static_assert(32 - kStateBits + 2 <= 32, "a seq and an event kind must fit an Event's tag");

// The share of the timers not cancelled that are rescheduled, so that reschedule_share of all are.
double move_share(const Options& o) noexcept {
  return o.cancel_share < 1.0 ? std::min(1.0, o.reschedule_share / (1.0 - o.cancel_share)) : 0.0;
}

// Each producer its own stream, reproducible from the run's seed.
std::mt19937_64 seeded(std::uint64_t seed, unsigned index) {
  std::seed_seq seq{seed, seed >> 32, std::uint64_t{index}};
  return std::mt19937_64(seq);
}

// Runs `call(j)` for each j in [0, total) in timed brackets of at most kBatch calls: for a batch,
// first `prepare(j, now)` for each of its calls, outside the bracket (`now` a clock read before
// them), then the calls between two clock reads, then `settle(j, returned, t1)`, t1 the read that
// closed the bracket (after each call returned).
template <class Prepare, class Call, class Settle>
void timed_batches(std::size_t total, CallTimes& times, Prepare&& prepare, Call&& call, Settle&& settle) {
  std::array<bool, Producer::kBatch> returned{};
  for (std::size_t from = 0; from < total; from += Producer::kBatch) {
    const std::size_t n = std::min(Producer::kBatch, total - from);
    const std::int64_t now = Clock::now();
    for (std::size_t i = 0; i < n; ++i) prepare(from + i, now);
    const std::int64_t t0 = Clock::now();
    for (std::size_t i = 0; i < n; ++i) returned[i] = call(from + i);
    const std::int64_t t1 = Clock::now();
    times.add(n, t1 - t0);
    for (std::size_t i = 0; i < n; ++i) settle(from + i, returned[i], t1);
  }
}
constexpr auto kNoPreparation = [](std::size_t, std::int64_t) {};

}  // namespace

void settle_cancel(Slot& slot, std::uint32_t seq, bool won, bool periodic, CancelCounters& c) noexcept {
  if (!won) {
    if (periodic) {
      ++c.periodic_refused;
    } else {
      c.lost.add(1);
    }
    return;
  }
  c.cancelled.add(1);
  if (periodic) c.periodic.add(1);
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // acq_rel: the acquire half pairs with a fire's release, so a fire that got there first (which
  // the engine says cannot happen after a cancel() that returned true) is seen; the release half
  // pairs with the producer's acquire load that sees (seq, cancelled) and re-arms the slot. A
  // periodic slot found in a run goes to cancelled_in_run instead: the loop runs again only when a
  // run ended between the load and the swap.
  for (;;) {
    SlotState next = SlotState::cancelled;
    if (periodic && found == slot_word(seq, SlotState::fired)) {
      next = SlotState::cancelled_in_run;
    } else if (found != slot_word(seq, SlotState::pending)) {
      ++c.true_not_pending;  // fired, or cancelled before: the engine let a second cancel() win
      return;
    }
    if (slot.state.compare_exchange_strong(found, slot_word(seq, next), std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      return;
    }
  }
}

void settle_moved_fire(Slot& slot, std::int64_t tick, MoveCounters& c) noexcept {
  if ((slot.move_flags & kMoved) == 0) return;
  ++c.fires;
  // Relaxed: the caller's acquire load of (seq, fired) pairs with the callback's release, which
  // came after its store of fired_at.
  switch (judge_moved_fire(slot, slot.fired_at.load(std::memory_order_relaxed), tick)) {
    case MovedFire::on_time: break;
    case MovedFire::raced: ++c.raced; break;
    case MovedFire::early: ++c.early; break;
  }
  slot.move_flags = 0;
}

// ---- Producer ----

Producer::Producer(RunShared& shared, unsigned index, SlotRange oneshots, SlotRange periodic, SlotRange burst)
    : shared_(shared),
      o_(*shared.options),
      index_(index),
      oneshots_(oneshots),
      periodic_(periodic),
      burst_(burst),
      rng_(seeded(shared.options->seed, index)),
      delay_(*shared.options),
      cancel_pick_(shared.options->cancel_share),
      periodic_cancel_pick_(shared.options->periodic_cancel),
      move_pick_(move_share(*shared.options)),
      agenda_(tickwheel::WheelOptions{.tick = Nanos(kAgendaTick), .start = Nanos(Clock::now())}),
      retry_ns_(shared.options->tick_ns + kAgendaTick),
      ready_(oneshots.size()),
      jobs_(shared.cancellers.size()) {
  // Everything a producer needs per slot is allocated here, before the driver's RSS baseline, so
  // that the memory growth it measures during the run is the engine's (and the agendas', which
  // are counted and subtracted).
  agenda_base_bytes_ = agenda_.stats().bytes;
  for (std::uint32_t s = oneshots.begin; s < oneshots.end; ++s) make_ready(s);
  burst_idle_.reserve(burst.size());
  for (std::uint32_t s = burst.begin; s < burst.end; ++s) burst_idle_.push_back(s);
  plan_.reserve(std::max<std::size_t>(kBatch, burst.size()));
  arm_buf_.reserve(kBatch);
  own_cancels_.reserve(kEventBudget);
  own_seqs_.reserve(kEventBudget);
  own_moves_.reserve(kEventBudget);
  own_move_seqs_.reserve(kEventBudget);
  move_from_.reserve(kEventBudget);
  move_to_.reserve(kEventBudget);
}

void Producer::run() noexcept {
  tid.store(current_tid(), std::memory_order_relaxed);
  const bool ok = probe();
  // Release: the driver's acquire load of `probed` then sees home_ and setup_error_.
  shared_.probed.fetch_add(1, std::memory_order_release);
  while (!shared_.go.load(std::memory_order_acquire))
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (!ok || shared_.stop.load(std::memory_order_relaxed)) return;
  start_periodic();
  loop();
}

bool Producer::probe() {
  Timer probe = shared_.engine->schedule_at(Nanos(Clock::now() + kHour), []() noexcept {});
  if (!probe) {
    setup_error_ = "producer " + std::to_string(index_) + ": its first schedule failed (" +
                   std::string(to_string(probe.status())) + ")";
    return false;
  }
  ++probes;
  home_ = probe.shard();
  if (!probe.cancel()) ++probe_failures;
  return true;
}

bool Producer::took(const Plan& p) noexcept {
  const Timer& t = shared_.slots[p.slot].timer;
  if (t) {
    scheduled.add(1);
    if (t.shard() != home_) ++off_shard;
    return true;
  }
  // Refused: the instance never existed.
  shared_.slots[p.slot].state.store(slot_word(p.seq, SlotState::idle), std::memory_order_relaxed);
  ++rejected_by[static_cast<std::size_t>(t.status())];
  return false;
}

void Producer::make_ready(std::uint32_t slot) {
  if (burst_.contains(slot)) {
    burst_idle_.push_back(slot);
    return;
  }
  ready_[(ready_head_ + ready_count_) % ready_.size()] = slot;
  ++ready_count_;
}

// Each periodic timer's first run on a tick boundary g it picks, exact when its schedule call took
// less than a tick, each call its own timed bracket (docs/stress.md, "Periodic policies and their
// bounds").
void Producer::start_periodic() {
  Slot* slots = shared_.slots;
  Recorders* recorders = shared_.recorders;
  const std::int64_t tick = o_.tick_ns;
  std::uniform_int_distribution<std::int64_t> phase(0, o_.period_ns - 1);
  const std::int64_t run_end = shared_.start_ns + o_.duration_ns;
  for (std::uint32_t from = periodic_.begin; from < periodic_.end;) {
    const std::uint32_t to =
        from + static_cast<std::uint32_t>(std::min<std::size_t>(kBatch, periodic_.end - from));
    plan_.clear();
    for (std::uint32_t s = from; s < to; ++s) {
      plan_.push_back(Plan{s, begin_instance(slots[s]), phase(rng_), -1.0, 0});
    }
    const std::int64_t t0 = Clock::now();
    std::int64_t before = t0;
    for (Plan& p : plan_) {
      p.deadline = (before + tick + p.delay + tick - 1) / tick * tick;
      recorders->set_first_run(p.slot, p.deadline);
      PeriodicOptions every;
      switch (recorders->kind_of(p.slot)) {
        case PeriodicPolicy::catch_up: every.misfire = Misfire::catch_up; break;
        case PeriodicPolicy::fire_once_now: every.misfire = Misfire::fire_once_now; break;
        case PeriodicPolicy::skip: every.misfire = Misfire::skip; break;
        case PeriodicPolicy::fixed_delay: every.cadence = Cadence::fixed_delay; break;
        case PeriodicPolicy::all: break;  // never a timer's kind
      }
      every.initial_delay = Nanos(p.deadline - before - (tick - 1));
      slots[p.slot].timer =
          shared_.engine->schedule_every(Nanos(o_.period_ns), FirePeriodic{recorders, p.slot, p.seq}, every);
      const std::int64_t after = Clock::now();
      p.call_ns = after - before;
      if (slots[p.slot].timer) recorders->settle_grid(p.slot, p.call_ns <= tick - 1);
      before = after;
    }
    schedules.add(plan_.size(), before - t0, plan_.size());
    for (const Plan& p : plan_) {
      if (!took(p)) continue;
      ++periodic_started;
      if (p.call_ns > tick - 1) ++periodic_inexact;
      if (periodic_cancel_pick_(rng_) && run_end > p.deadline) {
        const auto at =
            p.deadline + static_cast<std::int64_t>(static_cast<double>(run_end - p.deadline) * unit_(rng_));
        push(Event::make(at, p.slot, p.seq, EventKind::cancel));
      }
    }
    from = to;
  }
}

void Producer::arm(std::span<const std::uint32_t> which, bool burst) {
  Slot* slots = shared_.slots;
  plan_.clear();
  for (const std::uint32_t s : which) {
    const std::uint32_t seq = begin_instance(slots[s]);
    const std::int64_t delay = delay_(rng_) + o_.lead_ns;
    Plan& p = plan_.emplace_back(Plan{s, seq, delay, cancel_pick_(rng_) ? unit_(rng_) : -1.0, 0});
    if (p.cancel_at < 0 && move_pick_.p() > 0 && move_pick_(rng_)) {
      p.moves = static_cast<std::uint8_t>(move_count_(rng_));
    }
    Slot& slot = slots[s];
    slot.moves_left = p.moves;
    slot.move_flags = 0;
    slot.idle_ns = delay;
    // No deadline moved yet (docs/stress.md). Relaxed: the hand-off publishes them, as the state.
    slot.moved_from.store(0, std::memory_order_relaxed);
    slot.moved_to.store(0, std::memory_order_relaxed);
  }
  // The timed part: the schedule calls and the store of each handle, nothing else. A deadline is
  // the batch's start plus the delay, so it is exact for the harness and at most one batch
  // (kBatch calls, microseconds) earlier than "now + delay" at the call itself.
  const std::int64_t t0 = Clock::now();
  for (Plan& p : plan_) {
    p.deadline = t0 + p.delay;
    slots[p.slot].timer = shared_.engine->schedule_at(Nanos(p.deadline),
                                                      FireOnce{shared_.recorders, p.deadline, p.slot, p.seq});
  }
  const std::int64_t t1 = Clock::now();
  const auto ns = static_cast<std::uint64_t>(t1 - t0);
  schedules.add(plan_.size(), t1 - t0);
  if (burst) {
    bursts.add(1);
    burst_calls.add(plan_.size());
    burst_ns.add(ns);
    max_burst_ns.raise_to(ns);
  }
  bool refused = false;
  for (const Plan& p : plan_) {
    if (!took(p)) {
      slots[p.slot].moves_left = 0;
      make_ready(p.slot);  // tried again after the back-off
      refused = true;
      continue;
    }
    if (p.cancel_at >= 0) {
      const auto at = t0 + static_cast<std::int64_t>(static_cast<double>(p.delay) * p.cancel_at);
      push(Event::make(at, p.slot, p.seq, EventKind::cancel));
    } else if (p.moves != 0) {
      // The deadline the first move moves. Relaxed: to the callback, 0 and it say the same.
      slots[p.slot].moved_from.store(p.deadline, std::memory_order_relaxed);
      slots[p.slot].moved_to.store(p.deadline, std::memory_order_relaxed);
      plan_move(p.slot, p.seq, t0, p.deadline);
    } else {
      push(Event::make(p.deadline + retry_ns_, p.slot, p.seq, EventKind::check));
    }
  }
  backoff_ns_ = refused ? std::min(std::max(2 * backoff_ns_, retry_ns_), kMaxBackoffNs) : 0;
  arm_after_ = refused ? t1 + backoff_ns_ : 0;
}

// The next reschedule of a slot's instance whose deadline was last set at `from`: at a time uniform
// between then and the deadline.
void Producer::plan_move(std::uint32_t slot, std::uint32_t seq, std::int64_t from, std::int64_t deadline) {
  const std::int64_t span = std::max<std::int64_t>(deadline - from, 0);
  const auto at = from + static_cast<std::int64_t>(static_cast<double>(span) * unit_(rng_));
  push(Event::make(at, slot, seq, EventKind::reschedule));
}

void Producer::push(const Event& e) {
  if (!agenda_.schedule_at(Nanos(e.t), [this, e] { on_event(e, agenda_now_); })) {
    throw std::bad_alloc();  // the agenda's pool could not grow: the only way its schedule fails
  }
}

void Producer::on_event(const Event& e, std::int64_t now) {
  Slot& slot = shared_.slots[e.slot];
  if (e.kind() == EventKind::check) {
    // Acquire: pairs with the release of the fire's or the cancel's compare-and-swap.
    const SlotState state = state_of(slot.state.load(std::memory_order_acquire));
    if (state == SlotState::pending) {
      push(Event::make(now + retry_ns_, e.slot, e.seq(), EventKind::check));
      return;
    }
    if (state == SlotState::fired) settle_moved_fire(slot, o_.tick_ns, moves);
    if (o_.rearm) make_ready(e.slot);
    return;
  }
  if (e.kind() == EventKind::reschedule) {
    own_moves_.push_back(e.slot);
    own_move_seqs_.push_back(e.seq());
    return;
  }
  const std::size_t route = next_route_;
  next_route_ = route == jobs_.size() ? 0 : route + 1;
  if (route == 0) {
    own_cancels_.push_back(e.slot);
    own_seqs_.push_back(e.seq());
    return;
  }
  jobs_[route - 1].push_back(CancelJob{slot.timer, e.slot, e.seq()});
  // The canceller settles the slot; a check finds it resolved and re-arms it (a one-shot: a
  // periodic slot is cancelled once, for good).
  if (!periodic_.contains(e.slot)) push(Event::make(now + retry_ns_, e.slot, e.seq(), EventKind::check));
}

std::size_t Producer::cancel_own(std::int64_t now) {
  Slot* slots = shared_.slots;
  const std::size_t total = own_cancels_.size();
  timed_batches(
      total, cancels.times, kNoPreparation,
      [&](std::size_t j) { return slots[own_cancels_[j]].timer.cancel(); },
      [&](std::size_t j, bool won, std::int64_t) {
        const std::uint32_t s = own_cancels_[j];
        const bool periodic = periodic_.contains(s);
        settle_cancel(slots[s], own_seqs_[j], won, periodic, cancels);
        if (periodic) return;  // cancelled once, for good
        if (!won) {
          push(Event::make(now + retry_ns_, s, own_seqs_[j], EventKind::check));
        } else if (o_.rearm) {
          make_ready(s);  // a message reset the timer: re-armed at once
        }
      });
  own_cancels_.clear();
  own_seqs_.clear();
  return total;
}

// The due reschedules, in timed batches as the cancels. Each pushes its timer back to the batch's
// clock read plus the timer's delay; what each result means, and the bound it is checked against,
// in docs/stress.md ("Reschedules"). t1, the read after the batch, is after each call returned.
std::size_t Producer::move_own() {
  Slot* slots = shared_.slots;
  const std::size_t total = own_moves_.size();
  move_from_.resize(total);
  move_to_.resize(total);
  const auto prepare = [&](std::size_t j, std::int64_t now) {
    Slot& slot = slots[own_moves_[j]];
    // Relaxed loads: this thread wrote them. The stores come before the call, so the move's record
    // publishes them to the callback; release on moved_to pairs with the callback's acquire, so a
    // moved_to it sees comes with this moved_from.
    move_from_[j] = slot.moved_to.load(std::memory_order_relaxed);
    move_to_[j] = std::max(move_from_[j], now + slot.idle_ns);
    slot.moved_from.store(move_from_[j], std::memory_order_relaxed);
    slot.moved_to.store(move_to_[j], std::memory_order_release);
  };
  const auto call = [&](std::size_t j) { return slots[own_moves_[j]].timer.reschedule(Nanos(move_to_[j])); };
  timed_batches(total, moves.times, prepare, call, [&](std::size_t j, bool moved, std::int64_t t1) {
    const std::uint32_t s = own_moves_[j];
    const std::uint32_t seq = own_move_seqs_[j];
    Slot& slot = slots[s];
    // Whether a pass could have claimed the timer at the deadline it had, before the call returned
    // (docs/stress.md): only then may the move lose to the fire, or reschedule() refuse.
    const bool old_came = due_at_tick(move_from_[j], o_.tick_ns) <= t1 + kMoveSlackNs;
    if (!moved) {
      moves.refused.add(1);
      if (!old_came) ++moves.refused_pending;
      // The timer keeps the deadline it had (the last move that returned true, or its first).
      slot.moved_to.store(move_from_[j], std::memory_order_relaxed);
      slot.moves_left = 0;
      push(Event::make(t1 + retry_ns_, s, seq, EventKind::check));
      return;
    }
    moves.moved.add(1);
    slot.move_flags |= kMoved;
    slot.moves_left = old_came ? 0 : static_cast<std::uint8_t>(slot.moves_left - 1);
    if (old_came) slot.move_flags |= kRaced;  // it may fire at either deadline: moved no more
    if (slot.moves_left != 0) {
      plan_move(s, seq, t1, move_to_[j]);
    } else {
      push(Event::make(move_to_[j] + retry_ns_, s, seq, EventKind::check));
    }
  });
  own_moves_.clear();
  own_move_seqs_.clear();
  return total;
}

void Producer::flush_jobs() {
  for (std::size_t i = 0; i < jobs_.size(); ++i) {
    if (!jobs_[i].empty()) shared_.cancellers[i]->post(jobs_[i]);
  }
}

void Producer::refill_tokens(std::int64_t now) noexcept {
  const double rate = shared_.rate_per_producer;
  tokens_ = std::min(tokens_ + static_cast<double>(now - tokens_at_) * rate / 1e9,
                     std::max(1.0, rate * kTokenHorizonS));
  tokens_at_ = now;
}

void Producer::loop() {
  const double rate = shared_.rate_per_producer;
  std::int64_t next_burst = burst_.size() != 0 ? shared_.start_ns + o_.burst_every_ns : kNever;
  tokens_at_ = Clock::now();
  while (!shared_.stop.load(std::memory_order_relaxed)) {
    const std::int64_t now = Clock::now();
    agenda_now_ = now;
    std::size_t work = agenda_.advance(Nanos(now), kEventBudget);
    work += cancel_own(now);
    work += move_own();
    flush_jobs();
    if (now >= next_burst) {
      if (!burst_idle_.empty()) {
        // Swapped out first: a refused schedule puts its slot back into burst_idle_.
        flood_.swap(burst_idle_);
        arm(flood_, /*burst=*/true);
        flood_.clear();
        ++work;
      }
      while (next_burst <= now) next_burst += o_.burst_every_ns;
    }

    std::size_t allowed = now >= arm_after_ ? std::min(ready_count_, kArmBudget) : 0;
    if (rate > 0) {
      refill_tokens(now);
      allowed = std::min(allowed, static_cast<std::size_t>(tokens_));
    }
    std::size_t armed = 0;
    while (armed < allowed && now >= arm_after_) {  // a refused batch starts a back-off
      const std::size_t n = std::min(kBatch, allowed - armed);
      arm_buf_.clear();
      for (std::size_t i = 0; i < n; ++i) {
        arm_buf_.push_back(ready_[ready_head_]);
        ready_head_ = (ready_head_ + 1) % ready_.size();
      }
      ready_count_ -= n;
      arm(arm_buf_, /*burst=*/false);
      armed += n;
    }
    if (rate > 0) tokens_ -= static_cast<double>(armed);
    work += armed;
    agenda_bytes.raise_to(agenda_.stats().bytes - agenda_base_bytes_);

    if (work == 0) {
      const std::optional<Nanos> due = agenda_.next_deadline();
      std::int64_t wake = std::min({due ? due->count() : kNever, next_burst, now + kMaxSleepNs});
      if (ready_count_ != 0) {
        // Re-arms are waiting: for the back-off to end, or for the next schedule token.
        std::int64_t arm_at = std::max(arm_after_, now);
        if (rate > 0) {
          arm_at = std::max(arm_at, now + static_cast<std::int64_t>((1.0 - tokens_) / rate * 1e9) + 1);
        }
        wake = std::min(wake, arm_at);
      }
      Clock::sleep_until(wake);
    }
  }
  flush_jobs();
}

// ---- Canceller ----

void Canceller::post(std::vector<CancelJob>& jobs) {
  bool was_empty = false;
  {
    std::lock_guard lock(mutex_);
    was_empty = inbox_.empty();
    if (was_empty) {
      inbox_.swap(jobs);
    } else {
      inbox_.insert(inbox_.end(), jobs.begin(), jobs.end());
    }
  }
  jobs.clear();
  // A canceller with work in its inbox has not gone to sleep on it, or will find it before it does.
  if (was_empty) wake_.notify_one();
}

void Canceller::finish() {
  {
    std::lock_guard lock(mutex_);
    finished_ = true;
  }
  wake_.notify_one();
}

void Canceller::run() noexcept {
  tid.store(current_tid(), std::memory_order_relaxed);
  std::vector<CancelJob> work;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return !inbox_.empty() || finished_; });
      if (inbox_.empty()) return;
      work.swap(inbox_);
    }
    timed_batches(
        work.size(), cancels.times, kNoPreparation, [&](std::size_t j) { return work[j].timer.cancel(); },
        [&](std::size_t j, bool won, std::int64_t) {
          settle_cancel(shared_.slots[work[j].slot], work[j].seq, won,
                        shared_.periodic.contains(work[j].slot), cancels);
        });
    work.clear();
  }
}

}  // namespace tickwheel::stress
