// tests/fuzz/wheel/callbacks.cpp — each callback checked against the model, and what it does.
#include "wheel/callbacks.hpp"

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void Callbacks::on_fire(std::uint32_t serial) {
  WheelModel& model = run_.model;
  check(!destroying, "~Wheel ran a callback", serial);
  check(model.in_call, "a callback ran outside advance()", serial);
  const auto it = model.timers.find(serial);
  check(it != model.timers.end(), "a callback ran after its timer fired or was cancelled", serial);
  ModelTimer& t = it->second;
  check_may_run(serial, t);
  ++model.ran;
  ++model.fired;
  const bool periodic = t.periodic;
  const TimerId self_id = t.id;
  if (periodic) {
    model.unplace(serial, t);
    t.place = Place::running;
  } else {
    model.forget(serial);
  }
  // Everything pending is alive, and the running callable, and nothing else.
  check(alive.size() == model.timers.size() + (periodic ? 0 : 1) && alive.count(serial) == 1,
        "callables alive inside a callback are not the pending timers plus the running one",
        static_cast<long long>(alive.size()), static_cast<long long>(model.timers.size()));
  check(run_.wheel->pending_count() == model.timers.size(), "pending() inside a callback",
        static_cast<long long>(run_.wheel->pending_count()), static_cast<long long>(model.timers.size()));
  const bool do_throw = act(serial, self_id, periodic);
  if (periodic) {
    ++model.rearmed;  // the period after this run: re-armed, or taken by a cancel during the run
    if (const auto self = model.timers.find(serial); self != model.timers.end())
      model.relink(
          serial, self->second,
          self->second.rule.next_run(self->second.due, model.T, model.now, model.tick, model.max_tick));
  }
  if (do_throw) throw Thrown{};
}

// Where the model's pass must be for this run, and what the contract says of it.
void Callbacks::check_may_run(std::uint32_t serial, const ModelTimer& t) {
  WheelModel& model = run_.model;
  check(t.place != Place::due, "a timer ran in the advance() call that linked it at or before its tick",
        serial);
  check(t.place != Place::wheel || t.due <= model.T, "early: a timer ran before its tick",
        static_cast<long long>(t.due), static_cast<long long>(model.T));
  check(model.ran < model.limit, "more callbacks than the limit", static_cast<long long>(model.limit));
  model.reach(serial, t);
  TICKWHEEL_FUZZ_TRACE("  #%u runs (due %llu, P %llu)", serial, ull(t.due), ull(model.P));
  check(!model.skip_due(t), "a Misfire::skip timer a whole period behind ran", serial);
}

// What a callback does, read from the back. Returns whether it then throws.
bool Callbacks::act(std::uint32_t serial, TimerId self_id, bool periodic) {
  WheelModel& model = run_.model;
  Wheel& wheel = *run_.wheel;
  Bytes& in = run_.in;
  Bytes::FromBack nested(in);
  const std::uint8_t what = in.u8();
  if (what != 0) TICKWHEEL_FUZZ_TRACE("  callback of #%u does %u", serial, what);
  switch (what % 8) {
    case 4: run_.cancels.nested_cancel(run_.ids.pick()); break;
    case 5: run_.schedules.op_schedule(in.u8()); break;
    case 6: run_.schedules.op_schedule_every(); break;
    case 7:
      // True for a periodic timer (no further run), false for a one-shot (already firing).
      check(run_.cancels.cancel(self_id, serial) == periodic, "a callback cancelling itself", periodic);
      if (periodic) run_.cancels.cancelled(serial);
      break;
    default: break;
  }
  if ((what & 8) != 0) {
    const std::size_t before = wheel.pending_count();
    check(wheel.advance(Nanos::max()) == 0, "advance() from a callback ran something");
    check(wheel.pending_count() == before && wheel.now().count() == model.now,
          "advance() from a callback changed the wheel");
  }
  return what >= 0xF0;
}

void Callbacks::died(std::uint32_t serial) {
  check(alive.erase(serial) == 1, "a callable was destroyed twice", serial);
  const auto it = run_.model.timers.find(serial);
  check(destroying || clearing || serial == cancelling || it == run_.model.timers.end(),
        "the callable of a pending timer was destroyed", serial);
}

}  // namespace tickwheel::fuzz::wheel
