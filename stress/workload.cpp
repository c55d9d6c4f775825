// stress/workload.cpp — the callbacks' side of the run: what a fire records and checks, and the
// periodic re-arm.
#include "workload.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "clock.hpp"

namespace tickwheel::stress {

void FireOnce::operator()() const noexcept { rec->on_fire(Clock::now(), deadline, slot, seq); }

void FirePeriodic::operator()() const noexcept { rec->on_periodic(Clock::now(), deadline, slot, seq); }

void ShardRecorder::init(Engine* engine, Slot* slots, std::size_t index, std::int64_t tick_ns,
                         std::int64_t period_ns) noexcept {
  engine_ = engine;
  slots_ = slots;
  index_ = index;
  tick_ns_ = tick_ns;
  period_ns_ = period_ns;
}

void ShardRecorder::record(std::int64_t t, std::int64_t deadline, ConcurrentHistogram& lateness) noexcept {
  const std::int64_t late = t - deadline;
  if (late < 0) ++early_fires;
  min_lateness_ns = std::min(min_lateness_ns, late);
  lateness.record(late > 0 ? static_cast<std::uint64_t>(late) : 0);
  // The wheel's ticks count from steady_clock's epoch, the axis of `deadline`, so this is the
  // engine's own due time: the part of the lateness that the tick does not explain starts here.
  const std::int64_t due = (deadline + tick_ns_ - 1) / tick_ns_ * tick_ns_;
  if (t < due) ++fired_before_tick;
  past_tick.record(t > due ? static_cast<std::uint64_t>(t - due) : 0);
  fired.add(1);
}

void ShardRecorder::resolve(std::uint32_t slot, std::uint32_t seq) noexcept {
  std::uint32_t found = slot_word(seq, SlotState::pending);
  // acq_rel: the acquire half pairs with the arming thread's store of (seq, pending) (which the
  // engine's hand-off also publishes); the release half pairs with the producer's acquire load
  // that sees (seq, fired) and re-arms the slot.
  if (slots_[slot].state.compare_exchange_strong(found, slot_word(seq, SlotState::fired),
                                                 std::memory_order_acq_rel, std::memory_order_acquire)) {
    return;
  }
  if (seq_of(found) != seq || state_of(found) == SlotState::idle) {
    ++stray_fires;
  } else if (state_of(found) == SlotState::fired) {
    ++double_fires;
  } else {
    ++fired_after_cancel;
  }
}

void ShardRecorder::on_fire(std::int64_t t, std::int64_t deadline, std::uint32_t slot,
                            std::uint32_t seq) noexcept {
  record(t, deadline, oneshot_lateness);
  resolve(slot, seq);
}

// The engine has no periodic timers yet, so a periodic timer is a callback that re-arms itself with
// schedule_after() from inside the callback: that goes straight into this worker's own wheel, with
// no queue. (To be switched to the engine's schedule_every once it exists.) The engine computes the
// new deadline from its own clock read inside the call, a few ns after `armed`, and the harness
// cannot see it; it records armed + period, a lower bound, so a periodic fire's lateness is
// overstated by those few ns, never understated, and the early-fire check stays sound. Since the
// callback runs just after a tick boundary, armed + period lies just after one too, and rounds up
// to the next: with this re-arm a periodic timer is late by about one tick on every period, and
// drifts by that much per period. The report shows it apart from the one-shots' lateness.
void ShardRecorder::on_periodic(std::int64_t t, std::int64_t deadline, std::uint32_t slot,
                                std::uint32_t seq) noexcept {
  record(t, deadline, periodic_lateness);
  resolve(slot, seq);
  const std::uint32_t next = next_seq(seq);
  Slot& s = slots_[slot];
  // Relaxed: after its first instance a periodic slot is touched only by this worker, and by the
  // end checks once stop() has joined it.
  s.state.store(slot_word(next, SlotState::pending), std::memory_order_relaxed);
  const std::int64_t armed = Clock::now();
  const Timer timer = engine_->schedule_after(std::chrono::nanoseconds(period_ns_),
                                              FirePeriodic{this, armed + period_ns_, slot, next});
  if (!timer) {
    // Status::stopped once stop() has begun: the expected end of every periodic timer that fires
    // while the engine stops. Counted by reason; the report lists the reasons.
    s.state.store(slot_word(next, SlotState::idle), std::memory_order_relaxed);
    ++rearm_rejected[static_cast<std::size_t>(timer.status())];
    return;
  }
  if (timer.shard() != index_) ++off_shard;
  s.timer = timer;
  rearmed.add(1);
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
