// Compile-fail check (must NOT compile): a 16-byte-aligned callable. Node storage is 8-byte
// aligned, so it must be refused with the static_assert that says "more than 8-byte alignment".
#include "tickwheel/wheel.hpp"

struct alignas(16) OverAligned {
  void operator()() const {}
};

int main() {
  tickwheel::Wheel wheel;
  auto id = wheel.schedule_after(std::chrono::milliseconds(1), OverAligned{});
  return id ? 0 : 1;
}
