// tests/fuzz/wheel/schedules.hpp — the schedule calls: a one-shot (schedule_after / schedule_at,
// with a delay from zero and negative to level boundaries, the horizon and past it) and a periodic
// one (every cadence and misfire policy, good and bad periods, with and without an initial delay),
// either now and then with a null function pointer; from the top level and from callbacks. Each
// outcome is checked (max_pending, the status, the id) and a timer that succeeds is placed where
// the model says the wheel holds it.
#pragma once

#include <cstdint>

#include "tickwheel/wheel.hpp"
#include "wheel/model.hpp"

namespace tickwheel::fuzz::wheel {

class WheelRun;

class ScheduleOps {
 public:
  explicit ScheduleOps(WheelRun& run) noexcept : run_(run) {}

  void op_schedule(std::uint8_t op);
  void op_schedule_every();

 private:
  void expect_scheduled(TimerId id, std::uint32_t serial, ModelTimer t, std::uint64_t due);
  void null_callback(TimerId id);

  WheelRun& run_;
  std::uint32_t next_serial_ = 1;
};

}  // namespace tickwheel::fuzz::wheel
