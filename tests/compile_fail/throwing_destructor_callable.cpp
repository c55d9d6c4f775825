// Compile-fail check (must NOT compile): a callable whose destructor may throw. The wheel destroys
// callables inside noexcept cancel() and ~Wheel(), so it must be refused with the static_assert that
// says "destructor may throw".
#include "tickwheel/wheel.hpp"

struct ThrowingDestructor {
  ThrowingDestructor() noexcept = default;
  ThrowingDestructor(const ThrowingDestructor&) noexcept = default;
  ThrowingDestructor(ThrowingDestructor&&) noexcept = default;
  ~ThrowingDestructor() noexcept(false) {}
  void operator()() const {}
};

int main() {
  tickwheel::Wheel wheel;
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), ThrowingDestructor{});
  return id ? 0 : 1;
}
