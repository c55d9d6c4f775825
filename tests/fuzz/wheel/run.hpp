// tests/fuzz/wheel/run.hpp — one run of the wheel target over one input: the wheel, the model, and
// the parts that drive and check them, each a concept of its own file. The parts call one another
// through the run (a callback schedules and cancels; an advance runs callbacks), so each holds the
// run, and the run holds every part.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz_support.hpp"
#include "tickwheel/wheel.hpp"
#include "wheel/advance.hpp"
#include "wheel/api_ops.hpp"
#include "wheel/callbacks.hpp"
#include "wheel/cancels.hpp"
#include "wheel/checks.hpp"
#include "wheel/ids.hpp"
#include "wheel/model.hpp"
#include "wheel/schedules.hpp"
#include "wheel/setup.hpp"

namespace tickwheel::fuzz::wheel {

class WheelRun {
 public:
  explicit WheelRun(Bytes& input) noexcept : in(input) {}

  // The whole input: the options, every operation, ~Wheel.
  void run();
  // One operation, by its front byte (see fuzz_wheel.cpp), and the checks after it.
  void step(std::uint8_t op);
  void check_invariants() { checks.check_all(); }

  // The decoders the parts share.
  std::int64_t delay();
  std::size_t limit();

  Bytes& in;
  WheelModel model;
  WheelSetup setup{*this};
  IdOps ids{*this};
  ScheduleOps schedules{*this};
  CancelOps cancels{*this};
  AdvanceOps advancing{*this};
  ApiOps api{*this};
  Callbacks callbacks{*this};
  WheelChecks checks{*this};
  std::unique_ptr<Wheel> wheel;  // last: its callables reach the parts above

 private:
  friend class Fire<WheelRun>;  // calls born(), on_fire() and died()

  void born(std::uint32_t serial) { callbacks.born(serial); }
  void on_fire(std::uint32_t serial) { callbacks.on_fire(serial); }
  void died(std::uint32_t serial) { callbacks.died(serial); }
};

}  // namespace tickwheel::fuzz::wheel
