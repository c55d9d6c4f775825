// Compile-fail check (must NOT compile): a callable that needs an argument. It must be refused with
// the static_assert that says the callback "must be callable as fn()".
#include "tickwheel/wheel.hpp"

int main() {
  tickwheel::Wheel wheel;
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), [](int) {});
  return id ? 0 : 1;
}
