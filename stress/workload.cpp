// stress/workload.cpp — the callbacks' side of the run: which recorder a callback writes, and
// what a fire or a periodic run records and checks.
#include "workload.hpp"

#include <algorithm>
#include <cmath>

#include "clock.hpp"
#include "platform.hpp"

namespace tickwheel::stress {
namespace {

// The calling thread's recorder, and the Recorders it was taken from (a process runs one stress
// run, but the owner is compared rather than assumed).
struct Claim {
  const Recorders* owner = nullptr;
  Recorder* recorder = nullptr;  // null: every recorder was taken
};
thread_local Claim t_claim;

// A callback whose compare-and-swap found `found`, not (seq, pending): another instance's (a stray),
// a fire or run of its own already recorded (`again`), or a cancel's.
void count_broken(Recorder& r, std::uint32_t found, std::uint32_t seq, std::uint64_t& again) noexcept {
  if (seq_of(found) != seq || state_of(found) == SlotState::idle) {
    ++r.stray_fires;
  } else if (state_of(found) == SlotState::fired) {
    ++again;
  } else {
    ++r.fired_after_cancel;
  }
}

}  // namespace

void FireOnce::operator()() const noexcept { recorders->on_fire(Clock::now(), deadline, slot, seq); }

void FirePeriodic::operator()() const noexcept { recorders->on_periodic(Clock::now(), slot, seq); }

Recorders::Recorders(Slot* slots, SlotRange periodic, SlotRange probes, std::size_t threads, const Options& o)
    : slots_(slots),
      periodic_(periodic),
      probes_(probes),
      capacity_(threads),
      tick_ns_(o.tick_ns),
      period_ns_(o.period_ns),
      policy_(o.periodic_policy),
      misfire_every_ns_(o.misfire_every_ns),
      inline_(o.executor == ExecutorKind::inline_),
      recorders_(std::make_unique<Recorder[]>(threads)),
      track_(std::make_unique<PeriodicTrack[]>(periodic.size())),
      probe_state_(std::make_unique<ProbeState[]>(probes.size())) {}

std::span<const Recorder> Recorders::claimed() const noexcept {
  // Relaxed: a recorder's fields are atomics that count from zero, whether or not its thread has
  // written them yet.
  return {recorders_.get(), std::min(taken_.load(std::memory_order_relaxed), capacity_)};
}

Recorder* Recorders::mine(std::uint32_t slot) noexcept {
  if (t_claim.owner != this) [[unlikely]] {
    // This thread's first callback. Relaxed: the index is all it takes; the sampler reads only
    // atomics, and the end reads first_slot after stop() has synchronised with this thread.
    const std::size_t i = taken_.fetch_add(1, std::memory_order_relaxed);
    t_claim = Claim{this, i < capacity_ ? &recorders_[i] : nullptr};
    if (t_claim.recorder != nullptr) {
      t_claim.recorder->first_slot = slot;
      t_claim.recorder->tid.store(current_tid(), std::memory_order_relaxed);
    }
  }
  if (t_claim.recorder == nullptr) [[unlikely]] {
    unrecorded_.fetch_add(1, std::memory_order_relaxed);  // a count, read after stop()
  }
  return t_claim.recorder;
}

void Recorders::record(Recorder& r, std::int64_t t, std::int64_t first, std::int64_t at) noexcept {
  const std::int64_t late = t - at;  // negative only if at == first (see on_fire)
  if (late < 0) ++r.early_fires;
  r.min_lateness_ns = std::min(r.min_lateness_ns, late);
  r.oneshot_lateness.record(late > 0 ? static_cast<std::uint64_t>(late) : 0);
  // The wheel's ticks count from steady_clock's epoch, the axis of the deadlines, so this is the
  // engine's own due time: the part of the lateness that the tick does not explain starts here.
  // The rule takes the first deadline (every later one follows it), the measure the lateness's.
  if (t < due_at_tick(first, tick_ns_)) ++r.fired_before_tick;
  const std::int64_t due = due_at_tick(at, tick_ns_);
  r.past_tick.record(t > due ? static_cast<std::uint64_t>(t - due) : 0);
  r.fired.add(1);
}

void Recorders::on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot,
                        std::uint32_t seq) noexcept {
  Recorder* r = mine(slot);
  if (r == nullptr) return;
  Slot& s = slots_[slot];
  // The latest deadline of the instance not after t (docs/stress.md, "Reschedules"): 0 is none,
  // and the producer reset both before the schedule's hand-off, so neither is an older instance's.
  // Acquire: pairs with the producer's release store of moved_to, so that a moved_to of the next
  // move comes with its moved_from, the deadline this fire may be for.
  std::int64_t at = deadline;
  const std::int64_t to = s.moved_to.load(std::memory_order_acquire);
  const std::int64_t from = s.moved_from.load(std::memory_order_relaxed);
  if (to <= t) at = std::max(at, to);
  if (from <= t) at = std::max(at, from);
  record(*r, t, deadline, at);
  // Relaxed: the compare-and-swap's release below publishes it.
  s.fired_at.store(t, std::memory_order_relaxed);
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // acq_rel: the acquire half pairs with the arming thread's store of (seq, pending) (which the
  // engine's hand-off also publishes); the release half pairs with the producer's acquire load
  // that sees (seq, fired) and re-arms the slot (or judges the fire first, see judge_moved_fire()).
  if (s.state.compare_exchange_strong(found, slot_word(seq, SlotState::fired), std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
    return;
  }
  count_broken(*r, found, seq, r->double_fires);
}

MovedFire judge_moved_fire(const Slot& slot, std::int64_t t, std::int64_t tick) noexcept {
  // Relaxed: read by the producer that wrote them (or after it was joined).
  const std::int64_t to = slot.moved_to.load(std::memory_order_relaxed);
  const std::int64_t earliest =
      (slot.move_flags & kRaced) != 0 ? slot.moved_from.load(std::memory_order_relaxed) : to;
  if (t < due_at_tick(earliest, tick)) return MovedFire::early;
  return t < to ? MovedFire::raced : MovedFire::on_time;
}

void Recorders::on_probe(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept {
  ProbeState& p = probe_state_[slot - probes_.begin];
  // No later than this run's own tick boundary (docs/stress.md, "Tick probes"), so never after t.
  const std::int64_t due = std::min(p.next_due, t / tick_ns_ * tick_ns_);
  const auto lag = static_cast<std::uint64_t>(t - due);
  p.lag.record(lag);
  r.periodic_lateness.record(lag);
  r.past_tick.record(lag);
  r.min_lateness_ns = std::min(r.min_lateness_ns, t - due);
  r.fired.add(1);
  if (p.last == &r) p.fires_per_tick.record(r.fired.get() - p.fired_at_last - 1);  // not itself
  p.last = &r;
  p.fired_at_last = r.fired.get();
  p.next_due = (t / tick_ns_ + 1) * tick_ns_;
  if (p.tid.load(std::memory_order_relaxed) == 0) p.tid.store(current_tid(), std::memory_order_release);
}

std::int64_t Recorders::first_grid_point_after(const PeriodicTrack& k, std::int64_t t) const noexcept {
  return t < k.first_due ? k.first_due : k.first_due + ((t - k.first_due) / period_ns_ + 1) * period_ns_;
}

void Recorders::time_run(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept {
  PeriodicTrack& k = track_[slot - periodic_.begin];
  const PeriodicPolicy kind = kind_of(slot);
  PolicyCounts& counts = r.policy[static_cast<std::size_t>(kind)];
  ++counts.runs;
  ++k.runs;
  const std::int64_t due = k.next_due;
  if (t < due) {
    ++counts.before_bound;
  } else {
    r.min_lateness_ns = std::min(r.min_lateness_ns, t - due);
  }
  // `due` is a tick boundary, so lateness past the tick is the same figure.
  const auto late = static_cast<std::uint64_t>(std::max<std::int64_t>(t - due, 0));
  r.periodic_lateness.record(late);
  r.past_tick.record(late);
  r.fired.add(1);
  if (kind == PeriodicPolicy::catch_up && misfire_every_ns_ == 0) {
    k.next_due = due + period_ns_;  // every grid point runs, however late this one is
    return;
  }
  // Relaxed: the value is all that matters (see GridState).
  GridState grid = k.grid.load(std::memory_order_relaxed);
  if (grid == GridState::undecided) {
    k.grid.compare_exchange_strong(grid, GridState::inexact, std::memory_order_relaxed);
    grid = k.grid.load(std::memory_order_relaxed);
  }
  const bool exact = grid == GridState::exact;
  if (k.skip_due) {
    // This run's link came after the forced misfire's, so that one was handled: dropped.
    ++r.forced_skips;
    k.skip_due = false;
  }
  std::int64_t end = t;
  bool forced = false;
  // The last grid point t can be for, and the end of a forced misfire two periods and a tick past it.
  const std::int64_t last_grid = t < k.first_due ? k.first_due : first_grid_point_after(k, t) - period_ns_;
  // With every policy, each fixed-rate one in turn; with one, that one (never fixed_delay: the
  // options refuse --misfire-every then).
  if (misfire_every_ns_ != 0 && (policy_ != PeriodicPolicy::all || kind == r.misfire_turn)) {
    if (r.next_misfire == 0) r.next_misfire = t + misfire_every_ns_;
    if (t >= r.next_misfire) {
      const std::int64_t until = last_grid + 2 * period_ns_ + tick_ns_;
      while ((end = Clock::now()) < until) {
      }
      forced = true;
      ++counts.forced;
      r.next_misfire = end + misfire_every_ns_;
      r.misfire_turn = static_cast<PeriodicPolicy>((static_cast<std::size_t>(kind) + 1) %
                                                   static_cast<std::size_t>(PeriodicPolicy::fixed_delay));
    }
  }
  if (kind != PeriodicPolicy::catch_up && !forced) end = Clock::now();
  switch (kind) {
    case PeriodicPolicy::catch_up: k.next_due = due + period_ns_; break;
    case PeriodicPolicy::fire_once_now:
    case PeriodicPolicy::skip: {
      std::int64_t next = due + period_ns_;
      if (exact && inline_) {
        // This run's pass read its clock after the previous run ended (docs/stress.md, "Periodic
        // policies and their bounds").
        if (k.prev_end != 0) next = std::max(next, first_grid_point_after(k, k.prev_end));
        // A skip timer's next period is last_grid + period at the latest; the pass that handles it
        // starts after `end`, a whole period past it: it must be dropped. Counted once a later run
        // shows the period was handled (a cancel or stop() may take it first).
        if (kind == PeriodicPolicy::skip && forced && end >= last_grid + 2 * period_ns_) {
          k.skip_due = true;
          next = std::max(next, first_grid_point_after(k, end));
        }
      }
      k.next_due = next;
      break;
    }
    case PeriodicPolicy::fixed_delay:
      k.next_due = (end + period_ns_ + tick_ns_ - 1) / tick_ns_ * tick_ns_;
      break;
    case PeriodicPolicy::all: break;  // never a timer's kind
  }
  k.prev_end = end;
}

void Recorders::on_periodic(std::int64_t t, std::uint32_t slot, std::uint32_t seq) noexcept {
  Recorder* r = mine(slot);
  if (r == nullptr) return;
  r->periodic_runs.add(1);
  std::atomic<std::uint32_t>& state = slots_[slot].state;
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // Acquire: pairs with the release that ended the run before (on this thread or, with a pool, on
  // another), which the engine's own hand-offs order before this run anyway, and with a
  // canceller's release of (seq, cancelled).
  bool ours = state.compare_exchange_strong(found, slot_word(seq, SlotState::fired),
                                            std::memory_order_acquire, std::memory_order_relaxed);
  bool last = false;  // the run begun before a successful cancel() returned
  if (!ours && found == slot_word(seq, SlotState::cancelled)) {
    last = state.compare_exchange_strong(found, slot_word(seq, SlotState::ran_after_cancel),
                                         std::memory_order_acquire, std::memory_order_relaxed);
    if (last) ++r->runs_after_cancel;
  }
  if (!ours && !last) count_broken(*r, found, seq, r->overlapping_runs);
  if (probes_.contains(slot)) {
    on_probe(*r, t, slot);
  } else if (ours || last) {
    time_run(*r, t, slot);
  } else {
    // A broken rule, counted above: sampled, but the slot's bounds are not touched (another run
    // may be using them).
    r->periodic_lateness.record(0);
    r->past_tick.record(0);
    r->fired.add(1);
  }
  if (!ours) return;
  found = slot_word(seq, SlotState::fired);
  // Release: pairs with the next run's acquire. It fails only if a cancel took the timer during
  // this run (cancelled_in_run): then this run was the last, and the slot stays so.
  state.compare_exchange_strong(found, slot_word(seq, SlotState::pending), std::memory_order_release,
                                std::memory_order_relaxed);
}

DelayDraw::DelayDraw(const Options& o)
    : kind_(o.delay),
      fixed_ns_(o.delay_mean_ns),
      short_ns_(o.delay_short_ns),
      long_ns_(o.delay_long_ns),
      uniform_(o.delay_min_ns, std::max(o.delay_min_ns, o.delay_max_ns)),
      exponential_(o.delay_mean_ns > 0 ? 1.0 / static_cast<double>(o.delay_mean_ns) : 1.0),
      is_short_(o.short_share) {}

std::int64_t DelayDraw::operator()(std::mt19937_64& rng) {
  switch (kind_) {
    case DelayKind::fixed: return fixed_ns_;
    case DelayKind::uniform: return uniform_(rng);
    case DelayKind::exponential:
      return fixed_ns_ > 0 ? static_cast<std::int64_t>(std::llround(exponential_(rng))) : 0;
    case DelayKind::bimodal: return is_short_(rng) ? short_ns_ : long_ns_;
  }
  return 0;
}

}  // namespace tickwheel::stress
