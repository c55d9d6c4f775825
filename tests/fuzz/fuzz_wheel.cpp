// tests/fuzz/fuzz_wheel.cpp — libFuzzer target: tickwheel::Wheel, operation by operation, against
// a plain reference model of the contract in wheel.hpp (wheel/model.hpp).
//
// The input. The first bytes pick the options (wheel/setup.hpp). Then each front byte is one
// operation, by its value mod 16:
//   0-3     a one-shot schedule, after / at (wheel/schedules.hpp)
//   4, 5    a periodic schedule (wheel/schedules.hpp)
//   6-8     a cancel of any kind of id (wheel/cancels.hpp, wheel/ids.hpp)
//   9       between advance() calls: a reschedule, the queries of an id, a walk of every pending
//           timer, a clear() (wheel/api_ops.hpp)
//   10-14   an advance, with or without an expiry limit (wheel/advance.hpp)
//   15      a look at the TimerId API (wheel/ids.hpp)
// Bytes taken from the back decide what each callback does (wheel/callbacks.hpp). After every
// operation the invariants are checked (wheel/checks.hpp); at the end ~Wheel must destroy every
// callable left without running it.
//
// The files of wheel/, one concept each: run.hpp (the run that holds the parts), setup, model,
// ids, schedules, cancels, api_ops, advance, callbacks, checks.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>

#include "fuzz_support.hpp"
#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void WheelRun::run() {
  setup.build();
  run_ops(in, *this);
  destroy_checking_callables(wheel, callbacks.destroying, callbacks.alive, "~Wheel left callables alive");
}

void WheelRun::step(std::uint8_t op) {
  switch (op % 16) {
    case 0:
    case 1:
    case 2:
    case 3: schedules.op_schedule(op); break;
    case 4:
    case 5: schedules.op_schedule_every(); break;
    case 6:
    case 7:
    case 8: cancels.op_cancel(); break;
    case 9: api.op_api(); break;
    case 15: ids.op_ids(); break;
    default: advancing.op_advance(); break;
  }
}

// A delay at every scale; also used as an absolute deadline.
std::int64_t WheelRun::delay() {
  const std::int64_t tick = model.tick;
  const std::uint8_t kind = in.u8();
  std::int64_t ticks = 0;
  switch (kind % 10) {
    case 0: return 0;
    case 1: ticks = (kind >> 4) & 7; break;
    case 2: ticks = in.u8(); break;
    case 3: ticks = in.u16(); break;
    case 4: {  // next to a level boundary: m units of level L, give or take a tick
      static constexpr std::int64_t kMult[] = {1, 255, 256, 257, 511, 512, 513};
      const unsigned level = in.u8() % Wheel::kLevels;
      ticks =
          sat_add(sat_mul(kMult[in.u8() % std::size(kMult)], std::int64_t{1} << (Wheel::kLevelBits * level)),
                  static_cast<std::int64_t>(in.u8() % 3) - 1);
      break;
    }
    case 5: return -sat_mul(in.u8(), tick) - in.u8();
    case 6: return in.u8() % 2 == 0 ? kI64Max : kI64Min;
    case 7:
      return sat_mul(static_cast<std::int64_t>(model.max_tick) - in.u8(), tick) -
             model.now;  // near the horizon
    case 8: return static_cast<std::int64_t>(in.u64() >> (1 + in.u8() % 63));
    default: return static_cast<std::int64_t>(in.u64());
  }
  // Now and then a little less than whole ticks, so that rounding up is exercised.
  const std::int64_t off = (kind & 0x80) != 0 ? in.u8() * (tick / 256) : 0;
  return sat_mul(ticks, tick) - off;
}

// An advance's expiry limit: none, or 0 to 7.
std::size_t WheelRun::limit() {
  const std::uint8_t b = in.u8();
  return (b & 0x80) != 0 ? b & 7 : std::numeric_limits<std::size_t>::max();
}

}  // namespace tickwheel::fuzz::wheel

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tickwheel::fuzz::Bytes in(data, size);
  tickwheel::fuzz::wheel::WheelRun(in).run();
  return 0;
}
