// Compile-fail check (must NOT compile): a callable whose copy constructor may throw, passed as an
// lvalue (so the node copy-constructs it). schedule_at is noexcept, so it must be refused with the
// static_assert that says "constructing the callback may throw".
#include "tickwheel/wheel.hpp"

struct ThrowingCopy {
  ThrowingCopy() = default;
  ThrowingCopy(const ThrowingCopy&) noexcept(false) {}
  ThrowingCopy(ThrowingCopy&&) noexcept(false) {}
  void operator()() const {}
};

int main() {
  tickwheel::Wheel wheel;
  ThrowingCopy fn;
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), fn);
  return id ? 0 : 1;
}
