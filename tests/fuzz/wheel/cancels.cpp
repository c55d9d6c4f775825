// tests/fuzz/wheel/cancels.cpp — cancel() against the model.
#include "wheel/cancels.hpp"

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void CancelOps::op_cancel() {
  const TimerId id = run_.ids.pick();
  const std::uint32_t serial = run_.model.find(id);
  const bool expected = serial != 0;
  const bool got = cancel(id, serial);
  TICKWHEEL_FUZZ_TRACE("cancel(raw %llx) -> %d (#%u)", ull(id.raw()), got, serial);
  check(got == expected, "cancel() returned what the model does not", got, expected);
  if (!got) return;
  cancelled(serial);
  run_.model.step_on_after_cancel();
}

void CancelOps::nested_cancel(TimerId id) {
  const std::uint32_t serial = run_.model.find(id);
  const bool expected = serial != 0;
  check(cancel(id, serial) == expected, "cancel() from a callback returned what the model does not");
  if (expected) cancelled(serial);
}

bool CancelOps::cancel(TimerId id, std::uint32_t serial) {
  run_.callbacks.cancelling = serial;
  const bool got = run_.wheel->cancel(id);
  run_.callbacks.cancelling = 0;
  return got;
}

void CancelOps::cancelled(std::uint32_t serial) {
  WheelModel& model = run_.model;
  ++model.cancelled;
  const ModelTimer& t = model.timers.at(serial);
  const bool running = t.place == Place::running;
  // A skip timer of the group the pass is in may have been dropped (and counted) before this
  // cancel, or not: the call's end reads which from the counters.
  if (model.in_call && model.skip_due(t) &&
      (model.late_phase ? t.place == Place::late : t.place == Place::wheel && t.due == model.P)) {
    ++model.cancelled_skips;
  }
  model.forget(serial);
  // A running periodic timer's callable is in use: it goes when the callback returns.
  if (!running)
    check(run_.callbacks.alive.count(serial) == 0, "cancel() returned before destroying the callable",
          serial);
}

}  // namespace tickwheel::fuzz::wheel
