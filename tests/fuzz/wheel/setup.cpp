// tests/fuzz/wheel/setup.cpp — decoding the wheel's options, and checking their validation.
#include "wheel/setup.hpp"

#include <iterator>
#include <memory>
#include <stdexcept>

#include "wheel/run.hpp"

namespace tickwheel::fuzz::wheel {

void WheelSetup::build() {
  static constexpr std::int64_t kTicks[] = {1'000, 1'000'000, 1'234'567, 3'600'000'000'000, 7'000};
  Bytes& in = run_.in;
  WheelModel& model = run_.model;
  const std::uint8_t t = in.u8();
  if (t >= 0xF0) check_option_validation();
  model.tick = kTicks[t % std::size(kTicks)];
  model.max_tick = static_cast<std::uint64_t>(kI64Max / model.tick);
  std::int64_t start = 0;
  switch (in.u8() % 6) {
    case 2: start = sat_add(sat_mul(in.u16(), model.tick), in.u8()); break;
    case 3: start = static_cast<std::int64_t>(in.u64() >> 2); break;
    case 4: start = kI64Max - sat_mul(in.u16(), model.tick) - in.u8(); break;  // near the end of time
    case 5: start = static_cast<std::int64_t>(in.u64() >> 1); break;
    default: break;
  }
  const std::uint8_t mp = in.u8();
  model.max_pending = mp >= 0xC0 ? 1 + mp % 8 : 0;
  // Both cancel strategies, from a bit the byte above leaves unused (the corpus keeps its meaning):
  // always queue the unlink, or the default, which unlinks at once at these populations.
  const std::size_t batch_from = mp % 2 == 0 ? 1 : 0;
  run_.wheel = std::make_unique<Wheel>(WheelOptions{.tick = Nanos(model.tick),
                                                    .start = Nanos(start),
                                                    .max_pending = model.max_pending,
                                                    .cancel_batch_from = batch_from});
  model.now = start;
  model.P = model.T = static_cast<std::uint64_t>(start / model.tick);
  TICKWHEEL_FUZZ_TRACE("wheel: tick %lld ns, start %lld ns (tick %llu), max_pending %zu, cancel batch %s",
                       ll(model.tick), ll(start), ull(model.P), model.max_pending,
                       batch_from == 1 ? "always" : "default");
  const Wheel& wheel = *run_.wheel;
  check(wheel.now().count() == start, "now() after construction is not start");
  check(wheel.tick().count() == model.tick, "tick() is not the tick asked for");
  check(wheel.horizon().count() == static_cast<std::int64_t>(model.max_tick) * model.tick,
        "horizon() is not the last whole tick");
}

// A raw set of options: the constructor must throw std::invalid_argument exactly when one of them
// is outside its documented range.
void WheelSetup::check_option_validation() {
  Bytes& in = run_.in;
  std::int64_t tick = 0;
  switch (in.u8() % 5) {
    case 0: tick = 999; break;
    case 1: tick = 1'000; break;
    case 2: tick = 3'600'000'000'000; break;
    case 3: tick = 3'600'000'000'001; break;
    default: tick = static_cast<std::int64_t>(in.u64()); break;
  }
  std::int64_t start = 0;
  switch (in.u8() % 3) {
    case 0: start = 0; break;
    case 1: start = -1; break;
    default: start = static_cast<std::int64_t>(in.u64()); break;
  }
  std::uint64_t max_pending = 0;
  switch (in.u8() % 4) {
    case 0: max_pending = 0; break;
    case 1: max_pending = kPoolLimit; break;
    case 2: max_pending = kPoolLimit + 1; break;
    default: max_pending = in.u64(); break;
  }
  const bool valid = tick >= 1'000 && tick <= 3'600'000'000'000 && start >= 0 && max_pending <= kPoolLimit;
  bool threw = false;
  try {
    Wheel w(WheelOptions{
        .tick = Nanos(tick), .start = Nanos(start), .max_pending = static_cast<std::size_t>(max_pending)});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  check(threw != valid, "the constructor's validation disagrees with the documented ranges", tick, start);
}

}  // namespace tickwheel::fuzz::wheel
