// tests/fuzz/wheel/schedules.cpp — the schedule calls against the model.
#include "wheel/schedules.hpp"

#include <utility>

#include "tickwheel/status.hpp"
#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

// Op bit 4: schedule_at (else schedule_after); bit 5 with it, a deadline of its own (else now + the
// delay); bits 5-7 all set, a null function pointer.
void ScheduleOps::op_schedule(std::uint8_t op) {
  Wheel& wheel = *run_.wheel;
  const std::int64_t d = run_.delay();
  const bool at = (op & 0x10) != 0;
  const bool absolute = (op & 0x20) != 0;  // schedule_at a deadline of its own, not now + d
  const std::int64_t deadline = at && absolute ? d : sat_add(run_.model.now, d);
  if ((op & 0xE0) == 0xE0)
    return null_callback(at ? wheel.schedule_at(Nanos(deadline), kNullFn)
                            : wheel.schedule_after(Nanos(d), kNullFn));
  const std::uint32_t serial = next_serial_++;
  TimerId id;
  {
    Fire fn(&run_, serial);
    id = at ? wheel.schedule_at(Nanos(deadline), std::move(fn))
            : wheel.schedule_after(Nanos(d), std::move(fn));
  }
  ModelTimer t;
  expect_scheduled(id, serial, t, due_tick(deadline, run_.model.tick));
}

void ScheduleOps::op_schedule_every() {
  Wheel& wheel = *run_.wheel;
  const std::int64_t tick = run_.model.tick;
  const PeriodicCall call = PeriodicCall::decode(run_.in, tick, [this] { return run_.delay(); });
  const std::int64_t p = call.period_ns;
  if (call.null_fn) return null_callback(wheel.schedule_every(Nanos(p), kNullFn, call.options));
  const std::uint32_t serial = next_serial_++;
  TimerId id;
  {
    Fire fn(&run_, serial);
    id = wheel.schedule_every(Nanos(p), std::move(fn), call.options);
  }
  if (call.refused(tick)) {
    check(!id && id.status() == Status::bad_period, "a bad period was not refused with bad_period", p);
    run_.ids.check_failed(id);
    return;
  }
  ModelTimer t;
  t.periodic = true;
  t.rule = call.rule(tick);
  expect_scheduled(id, serial, t, due_tick(sat_add(run_.model.now, call.first_delay()), tick));
}

// Checks a schedule's outcome and records the timer. Linked for `due`: in the due slot if that is
// at or before the tick being processed, else in the wheel.
void ScheduleOps::expect_scheduled(TimerId id, std::uint32_t serial, ModelTimer t, std::uint64_t due) {
  WheelModel& model = run_.model;
  const std::uint64_t limit = model.max_pending != 0 ? model.max_pending : kPoolLimit;
  if (model.timers.size() >= limit) {
    check(!id && id.status() == Status::max_pending_reached, "a schedule past max_pending was not refused",
          static_cast<long long>(model.timers.size()));
    ++model.rejected;
    run_.ids.check_failed(id);
    return;
  }
  check(static_cast<bool>(id), "a schedule failed", static_cast<long long>(id.status()));
  check(id.status() == Status::ok && TimerId::from_raw(id.raw()) == id,
        "a good id's status or raw form is wrong");
  check(model.by_raw.count(id.raw()) == 0, "a schedule returned the id of a pending timer");
  ++model.scheduled;
  t.id = id;
  t.due = due;
  model.add(serial, t);
  TICKWHEEL_FUZZ_TRACE("  #%u scheduled%s: due tick %llu, %s (P %llu)", serial, t.periodic ? " periodic" : "",
                       ull(due), due <= model.P ? "due slot" : "wheel", ull(model.P));
}

// A null function pointer is refused before anything else (max_pending, a bad period), with
// nothing changed and nothing counted.
void ScheduleOps::null_callback(TimerId id) {
  check(!id && id.status() == Status::null_callback,
        "a null function pointer was not refused with null_callback");
  run_.ids.check_failed(id);
}

}  // namespace tickwheel::fuzz::wheel
