// Compile-fail check (must NOT compile): a 32-byte callable. The node stores the callable inline in
// 24 bytes, so schedule_at must refuse it with the static_assert that says "larger than 24 bytes".
#include <cstdint>

#include "tickwheel/wheel.hpp"

int main() {
  tickwheel::Wheel wheel;
  std::uint64_t a = 1, b = 2, c = 3, d = 4;
  auto fn = [a, b, c, d] { static_cast<void>(a + b + c + d); };
  static_assert(sizeof(fn) == 32);
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), fn);
  return id ? 0 : 1;
}
