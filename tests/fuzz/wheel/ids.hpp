// tests/fuzz/wheel/ids.hpp — the TimerIds an operation acts on, and the TimerId API itself. An id
// to act on is mostly a live one, and also every kind of id that must act on nothing: fired or
// cancelled, default, failed, a neighbouring generation of a live or dead one, random. The TimerId
// API (from_raw(raw()), status(), checked()) is checked on ids the wheel issued: live, fired or
// cancelled, failed, default (an arbitrary from_raw() value is not one: its status() means
// nothing).
#pragma once

#include "tickwheel/wheel.hpp"

namespace tickwheel::fuzz::wheel {

class WheelRun;

class IdOps {
 public:
  explicit IdOps(WheelRun& run) noexcept : run_(run) {}

  // An id to cancel, move or ask about, as the input says.
  TimerId pick();
  void op_ids();
  // A schedule failed with this id: it cancels nothing, and checked() throws its status.
  void check_failed(TimerId id);

  TimerId last_failure;

 private:
  // Whether checked(id) throws ScheduleError with the id's status.
  static bool checked_throws(TimerId id);

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
