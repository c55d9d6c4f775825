// Compile-fail harness control (MUST compile and link): the largest callable the contract accepts,
// 24 bytes of captures, built exactly like the compile-fail cases. If this stops building, the
// compile-fail cases prove nothing.
#include <cstdint>

#include "tickwheel/wheel.hpp"

int main() {
  tickwheel::Wheel wheel;
  std::uint64_t a = 1, b = 2, c = 3;
  auto fn = [a, b, c] { static_cast<void>(a + b + c); };
  static_assert(sizeof(fn) == 24);
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), fn);
  return id ? 0 : 1;
}
