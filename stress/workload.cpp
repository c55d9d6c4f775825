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

}  // namespace

void FireOnce::operator()() const noexcept { recorders->on_fire(Clock::now(), deadline, slot, seq); }

void FirePeriodic::operator()() const noexcept { recorders->on_periodic(Clock::now(), slot, seq); }

Recorders::Recorders(Slot* slots, SlotRange periodic, SlotRange probes, std::size_t threads,
                     std::int64_t tick_ns, std::int64_t period_ns)
    : slots_(slots),
      periodic_(periodic),
      probes_(probes),
      capacity_(threads),
      tick_ns_(tick_ns),
      period_ns_(period_ns),
      recorders_(std::make_unique<Recorder[]>(threads)),
      next_due_(std::make_unique<std::int64_t[]>(periodic.size())),
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

void Recorders::record(Recorder& r, std::int64_t t, std::int64_t deadline,
                       ConcurrentHistogram& lateness) noexcept {
  const std::int64_t late = t - deadline;
  if (late < 0) ++r.early_fires;
  r.min_lateness_ns = std::min(r.min_lateness_ns, late);
  lateness.record(late > 0 ? static_cast<std::uint64_t>(late) : 0);
  // The wheel's ticks count from steady_clock's epoch, the axis of `deadline`, so this is the
  // engine's own due time: the part of the lateness that the tick does not explain starts here.
  const std::int64_t due = (deadline + tick_ns_ - 1) / tick_ns_ * tick_ns_;
  if (t < due) ++r.fired_before_tick;
  r.past_tick.record(t > due ? static_cast<std::uint64_t>(t - due) : 0);
  r.fired.add(1);
}

void Recorders::on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot,
                        std::uint32_t seq) noexcept {
  Recorder* r = mine(slot);
  if (r == nullptr) return;
  record(*r, t, deadline, r->oneshot_lateness);
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // acq_rel: the acquire half pairs with the arming thread's store of (seq, pending) (which the
  // engine's hand-off also publishes); the release half pairs with the producer's acquire load
  // that sees (seq, fired) and re-arms the slot.
  if (slots_[slot].state.compare_exchange_strong(found, slot_word(seq, SlotState::fired),
                                                 std::memory_order_acq_rel, std::memory_order_acquire)) {
    return;
  }
  if (seq_of(found) != seq || state_of(found) == SlotState::idle) {
    ++r->stray_fires;
  } else if (state_of(found) == SlotState::fired) {
    ++r->double_fires;
  } else {
    ++r->fired_after_cancel;
  }
}

void Recorders::on_probe(Recorder& r, std::int64_t t, std::uint32_t slot) noexcept {
  ProbeState& p = probe_state_[slot - probes_.begin];
  // No later than this run's own tick boundary (see the header), so never after t.
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

void Recorders::on_periodic(std::int64_t t, std::uint32_t slot, std::uint32_t seq) noexcept {
  Recorder* r = mine(slot);
  if (r == nullptr) return;
  std::int64_t& due = next_due_[slot - periodic_.begin];
  if (probes_.contains(slot)) {
    on_probe(*r, t, slot);
  } else {
    record(*r, t, due, r->periodic_lateness);
  }
  r->periodic_runs.add(1);
  std::atomic<std::uint32_t>& state = slots_[slot].state;
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // Acquire: pairs with the release store that ended the run before (on this thread or, with a
  // pool, on another), which the engine's own hand-offs order before this run anyway.
  if (!state.compare_exchange_strong(found, slot_word(seq, SlotState::fired), std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
    if (seq_of(found) != seq || state_of(found) == SlotState::idle) {
      ++r->stray_fires;
    } else if (state_of(found) == SlotState::fired) {
      ++r->overlapping_runs;
    } else {
      ++r->fired_after_cancel;
    }
    return;
  }
  due += period_ns_;  // catch_up: the next run is for the next grid point, however late this one is
                      // (unused for a probe, whose ProbeState keeps its own)
  state.store(slot_word(seq, SlotState::pending), std::memory_order_release);
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
