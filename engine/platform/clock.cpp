// engine/platform/clock.cpp — the deadline clock's set-up: whether the TSC may stand in for the clock, and
// its rate, measured once per process.
#include "platform/clock.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <thread>

namespace tickwheel::detail {
namespace {

constexpr std::int64_t kCalibrationNs = 2'000'000;  // 2 ms of spinning, once per process
constexpr std::int64_t kMinAgeNs = 1'000;           // an anchor younger than this does not pay
constexpr std::int64_t kMaxAgeNs = 1'000'000;
constexpr unsigned kAgeShift = 4;  // the anchor's age: 1/16 of the tick

// Whether the kernel keeps time with the TSC: then it found it invariant and synchronised.
bool kernel_uses_tsc() noexcept {
  const int fd =
      ::open("/sys/devices/system/clocksource/clocksource0/current_clocksource", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  std::array<char, 32> name{};
  const ssize_t got = ::read(fd, name.data(), name.size() - 1);
  ::close(fd);
  return got >= 4 && std::strncmp(name.data(), "tsc\n", 4) == 0;
}

// ns per TSC tick with the 25% margin, in 32.32 fixed point; 0 if the TSC is not to be used.
std::uint64_t measure_mult() noexcept {
  if (!kernel_uses_tsc()) return 0;
  const double ns_per_tick = ns_per_tsc_tick([] { return monotonic_now().count(); }, [] { return __rdtsc(); },
                                             [] { std::this_thread::yield(); }, kCalibrationNs);
  const double mult = ns_per_tick * 1.25 * 4294967296.0;
  return mult > 0 && mult < 4294967296.0 ? static_cast<std::uint64_t>(mult) : 0;
}

}  // namespace

DeadlineClock::DeadlineClock(Nanos tick) noexcept {
  const std::int64_t age = std::min(tick.count() >> kAgeShift, kMaxAgeNs);
  if (age < kMinAgeNs) return;
  static const std::uint64_t process_mult = measure_mult();  // thread-safe, once
  if (process_mult == 0) return;
  mult_ = process_mult;
  // The age in ticks at the true rate, which the margin makes 1.25 times the rate used above.
  max_age_ = static_cast<std::uint64_t>(age) * (std::uint64_t{5} << 32) / (mult_ * 4);
}

}  // namespace tickwheel::detail
