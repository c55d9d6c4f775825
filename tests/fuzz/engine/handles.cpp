// tests/fuzz/engine/handles.cpp — cancel(), reschedule() and deadline() against the model.
#include "engine/handles.hpp"

#include <algorithm>
#include <optional>

#include "engine/clock.hpp"
#include "engine/run.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz::engine {

// Timer::cancel on a recorded timer (bits 4-7: how), a default handle or a failed one.
void HandleOps::op_cancel() {
  const std::uint8_t kind = run_.in.u8();
  if (kind % 8 == 6 || run_.model.serials.empty()) {
    tickwheel::Timer none;
    check(
        !none.cancel() && !none && none.status() == Status::no_timer && !none.cancelled() && !none.expired(),
        "a default handle is not an empty no_timer handle");
    return;
  }
  if (kind % 8 == 7) {
    check(!run_.schedules.last_failure.cancel(), "cancel() of a failed handle returned true");
    return;
  }
  cancel(run_.any_timer(), kind >> 4);  // the handle or its raw form
}

// True iff the timer was not cancelled before and, a one-shot, is still pending; a periodic
// timer cancels wherever it is, and no run starts after that.
void HandleOps::cancel(std::uint32_t serial, unsigned how, const tickwheel::Timer* use) {
  EngineModel& model = run_.model;
  Lifetimes& lives = run_.lifetimes;
  Rec& r = model.recs.at(serial);
  const bool expected = EngineModel::is_pending(r);
  tickwheel::Timer h = use != nullptr ? *use : handle(r, how);
  lives.cancelling = serial;
  const bool got = h.cancel();
  lives.cancelling = 0;
  TICKWHEEL_FUZZ_TRACE("cancel #%u -> %d", serial, got);
  check(got == expected, "cancel() returned what the model does not", got, expected);
  if (!got) return;
  model.won_cancel(serial);
  check(r.handle.cancelled() && !r.handle.expired() && !r.handle.is_pending(),
        "a handle just cancelled does not say so");
  if (model.stopped) {
    // After stop() a cancel retires the timer at once: its callable is gone, and it is counted.
    check(lives.alive.count(serial) == 0, "cancel() after stop() did not destroy the callable", serial);
    ++model.shards[r.shard].published_cancelled;
  }
}

// A recorded timer's handle, itself or (bit 0 of `how`) what timer_from_raw() gives back for its
// raw(): that names the same timer, whatever state it is in, so every call answers the same.
tickwheel::Timer HandleOps::handle(const Rec& r, unsigned how) {
  if ((how & 1) == 0) return r.handle;
  const std::uint64_t raw = r.handle.raw();
  const tickwheel::Timer back = run_.engine->timer_from_raw(raw);
  check(raw != 0 && back && back.status() == Status::ok && back.raw() == raw && back.shard() == r.shard,
        "timer_from_raw(raw()) is not a handle of the same timer", lu(raw));
  return back;
}

// A default handle and the last failed one: nothing to cancel, move, ask or name.
void HandleOps::check_empty_handles() {
  ScheduleOps::check_empty(tickwheel::Timer{});
  ScheduleOps::check_empty(run_.schedules.last_failure);
}

void HandleOps::op_reschedule() {
  const std::uint8_t how = run_.in.u8();
  if (run_.model.serials.empty() || how % 8 == 7) return check_empty_handles();
  reschedule(run_.any_timer(), how);
}

// Timer::reschedule (bit 0 of `how`) or reschedule_after, through the handle or its raw form (bit
// 1), or through `use`. On the shard's own thread, but for a walk of it, the moves posted before
// are applied and then this one, and true says it was: exactly when the timer is pending between
// runs. Elsewhere it is posted: true iff the timer was pending between runs when asked and stop()
// had not begun; the shard applies it when it next drains its records, if the timer still is
// (EngineModel::drain_moves).
void HandleOps::reschedule(std::uint32_t serial, std::uint8_t how, const tickwheel::Timer* use) {
  EngineModel& model = run_.model;
  const Rec& r = model.recs.at(serial);
  const bool absolute = (how & 1) != 0;
  const std::int64_t d = run_.delay();
  tickwheel::Timer h = use != nullptr ? *use : handle(r, how >> 1);
  ShardModel& m = model.shards[r.shard];
  const bool here = model.own_thread(r.shard) && !m.walking;
  const bool expected = EngineModel::movable(r) && (here || !model.stopped);
  const std::int64_t deadline = absolute ? d : sat_add(here ? m.loop_now : g_clock, d);
  const bool got = absolute ? h.reschedule(Nanos(d)) : h.reschedule_after(Nanos(d));
  TICKWHEEL_FUZZ_TRACE("reschedule #%u to %lld (%s) -> %d", serial, ll(deadline), here ? "here" : "posted",
                       got);
  check(got == expected, "reschedule() returned what the model does not", got, expected);
  if (!got) return;
  const std::uint64_t due = due_tick(deadline, run_.config.tick);
  if (here) {
    // The moves posted before this one are applied first: the last to return wins.
    model.drain_moves(r.shard, model.tick_of(m.wheel_now));
    model.apply_move(serial, due, model.tick_of(m.wheel_now));
  } else {
    m.moves.push_back(Move{serial, due});
  }
  check(h.is_pending() && r.handle.is_pending(), "a timer just moved does not say pending", serial);
}

void HandleOps::op_deadline() {
  const std::uint8_t how = run_.in.u8();
  if (run_.model.serials.empty() || how % 8 == 7) return check_empty_handles();
  check_deadline(run_.any_timer(), how >> 1);
}

// Timer::deadline() and remaining(), from any thread: the time of the due tick iff the timer is
// pending between runs (a posted move counts once its shard applied it), and that less the
// engine's clock, or zero.
void HandleOps::check_deadline(std::uint32_t serial, unsigned how, const tickwheel::Timer* use) {
  const EngineModel& model = run_.model;
  const Rec& r = model.recs.at(serial);
  const tickwheel::Timer h = use != nullptr ? *use : handle(r, how);
  const std::optional<Nanos> when = h.deadline();
  const std::optional<Nanos> left = h.remaining();
  TICKWHEEL_FUZZ_TRACE("deadline #%u -> %lld", serial, when ? ll(when->count()) : -1LL);
  check(when.has_value() == EngineModel::movable(r),
        "deadline() has a value other than iff the timer is pending between runs", serial, when.has_value());
  if (!when) {
    check(!left, "remaining() has a value where deadline() has none", serial);
    return;
  }
  check(model.deadline_ok(r, when->count()), "deadline() is not the time of the tick the timer is due at",
        when->count(), model.ns_of(r.due));
  check(left && left->count() == std::max<std::int64_t>(when->count() - g_clock, 0),
        "remaining() is not deadline() less the engine's clock, or zero", serial);
}

}  // namespace tickwheel::fuzz::engine
