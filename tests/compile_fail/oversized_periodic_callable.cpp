// Compile-fail check (must NOT compile): a 24-byte callable for a periodic timer. A periodic node
// keeps its 8-byte schedule word beside the callable in the 24 bytes of inline storage, so
// schedule_every must refuse it with the static_assert that says "larger than 16 bytes" (the same
// callable is fine for a one-shot timer: see control_ok.cpp).
#include <cstdint>

#include "tickwheel/wheel.hpp"

int main() {
  tickwheel::Wheel wheel;
  std::uint64_t a = 1, b = 2, c = 3;
  auto fn = [a, b, c] { static_cast<void>(a + b + c); };
  static_assert(sizeof(fn) == 24);
  auto id = wheel.schedule_every(std::chrono::milliseconds(1), fn);
  return id ? 0 : 1;
}
