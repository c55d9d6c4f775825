// tests/fuzz/wheel/api_ops.cpp — reschedule(), the queries, the walk and clear() against the model.
#include "wheel/api_ops.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void ApiOps::op_api() {
  const std::uint8_t kind = run_.in.u8();
  switch (kind % 8) {
    case 5: return op_queries();
    case 6: return op_walk();
    case 7:
      if ((kind & 0x30) == 0x30) return op_clear();
      break;
    default: break;
  }
  op_reschedule(kind);
}

// A reschedule is a move of a pending timer's due, which then sits where a schedule (a periodic
// timer: a re-arm) would put it, and, as after a cancel, a stopped wheel whose waiting timer
// moved away steps on. Anything else: false, nothing touched. Bit 7 of `kind`: reschedule_after;
// bit 6, a pending timer's new deadline near its old one: within its slot's span, or not.
void ApiOps::op_reschedule(std::uint8_t kind) {
  WheelModel& model = run_.model;
  Wheel& wheel = *run_.wheel;
  const TimerId id = run_.ids.pick();
  const std::uint32_t serial = model.find(id);
  const bool expected = serial != 0;
  const std::int64_t d = run_.delay();
  bool after = (kind & 0x80) != 0;
  std::int64_t deadline = sat_add(model.now, d);
  if (expected && (kind & 0x40) != 0) {
    after = false;
    const auto due = static_cast<std::int64_t>(model.timers.at(serial).due);
    deadline = sat_add(sat_mul(due, model.tick), sat_mul(std::int64_t{run_.in.u8()} - 64, model.tick));
  }
  const bool got = after ? wheel.reschedule_after(id, Nanos(d)) : wheel.reschedule(id, Nanos(deadline));
  TICKWHEEL_FUZZ_TRACE("reschedule(raw %llx, %lld) -> %d", ull(id.raw()), static_cast<long long>(deadline),
                       got);
  check(got == expected, "reschedule() returned what the model does not", got, expected);
  if (!got) return;
  ++model.rescheduled;
  ModelTimer& t = model.timers.at(serial);
  model.unplace(serial, t);
  t.due = due_tick(deadline, model.tick);
  const std::uint64_t due_by = t.periodic && model.P != model.T ? model.T : model.P;
  model.place(serial, t, t.due <= due_by ? Place::due : Place::wheel);
  model.step_on_after_cancel();
  check(wheel.deadline(id) == Nanos(static_cast<std::int64_t>(t.due) * model.tick),
        "deadline() after a reschedule is not the rounded deadline", static_cast<long long>(t.due));
}

// is_pending(), deadline() and remaining() of any id, against the model.
void ApiOps::op_queries() {
  const WheelModel& model = run_.model;
  const Wheel& wheel = *run_.wheel;
  const TimerId id = run_.ids.pick();
  const std::uint32_t serial = model.find(id);
  const bool pending = serial != 0;
  check(wheel.is_pending(id) == pending, "is_pending() disagrees with the model", pending);
  const std::optional<Nanos> at = wheel.deadline(id);
  const std::optional<Nanos> left = wheel.remaining(id);
  if (!pending) {
    check(!at && !left, "deadline() or remaining() of a timer that is not pending has a value");
    return;
  }
  const std::int64_t due_ns = static_cast<std::int64_t>(model.timers.at(serial).due) * model.tick;
  check(at == Nanos(due_ns), "deadline() is not the rounded deadline", at ? at->count() : -1, due_ns);
  check(left == Nanos(std::max<std::int64_t>(due_ns - model.now, 0)),
        "remaining() is not deadline() - now()");
}

// for_each_pending() visits every pending timer once, with its deadline.
void ApiOps::op_walk() {
  const WheelModel& model = run_.model;
  std::size_t visits = 0;
  run_.wheel->for_each_pending([&](TimerId id, Nanos deadline) {
    ++visits;
    const auto it = model.by_raw.find(id.raw());
    check(it != model.by_raw.end(), "for_each_pending() visited an id that is not pending");
    const std::int64_t due_ns = static_cast<std::int64_t>(model.timers.at(it->second).due) * model.tick;
    check(deadline.count() == due_ns, "for_each_pending() gave a deadline that is not the rounded one",
          deadline.count(), due_ns);
  });
  check(visits == model.timers.size(), "for_each_pending() did not visit every pending timer once",
        static_cast<long long>(visits), static_cast<long long>(model.timers.size()));
}

// clear(): every pending timer cancelled, its callable destroyed, none run; the wheel catches up.
void ApiOps::op_clear() {
  WheelModel& model = run_.model;
  Callbacks& callbacks = run_.callbacks;
  const std::vector<std::uint32_t> pending(model.live);
  callbacks.clearing = true;
  const std::size_t got = run_.wheel->clear();
  callbacks.clearing = false;
  check(got == pending.size(), "clear() did not count every pending timer", static_cast<long long>(got),
        static_cast<long long>(pending.size()));
  for (const std::uint32_t serial : pending) {
    ++model.cancelled;
    model.forget(serial);
    check(callbacks.alive.count(serial) == 0, "clear() returned before destroying a callable", serial);
  }
  model.P = model.T;
}

}  // namespace tickwheel::fuzz::wheel
