// tests/fuzz/wheel/setup.hpp — the first bytes of an input: the wheel's options (tick, start,
// max_pending, the cancel strategy); now and then a raw set of options whose validation is checked
// instead, before the wheel the run drives is built.
#pragma once

namespace tickwheel::fuzz::wheel {

class WheelRun;

class WheelSetup {
 public:
  explicit WheelSetup(WheelRun& run) noexcept : run_(run) {}

  // Decodes the options, builds the wheel and starts the model at its start.
  void build();

 private:
  void check_option_validation();

  WheelRun& run_;
};

}  // namespace tickwheel::fuzz::wheel
