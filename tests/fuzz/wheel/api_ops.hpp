// tests/fuzz/wheel/api_ops.hpp — what the top level asks of the wheel between advance() calls:
// reschedule() / reschedule_after() of any id (near its deadline or anywhere), is_pending(),
// deadline() and remaining() of any id, a walk of every pending timer (for_each_pending()), and
// now and then clear().
#pragma once

#include <cstdint>

namespace tickwheel::fuzz::wheel {

class WheelRun;

class ApiOps {
 public:
  explicit ApiOps(WheelRun& run) noexcept : run_(run) {}

  // By byte `kind` % 8: 5 the queries, 6 a walk, 7 with bits 4-5 set a clear(), else a reschedule.
  void op_api();

 private:
  void op_reschedule(std::uint8_t kind);
  void op_queries();
  void op_walk();
  void op_clear();

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
