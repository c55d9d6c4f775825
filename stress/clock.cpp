// stress/clock.cpp — the absolute sleep and the start-up measurements behind Clock.
#include "clock.hpp"

#include <time.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace tickwheel::stress {

namespace {

std::int64_t monotonic_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * kSecond + ts.tv_nsec;
}

}  // namespace

void Clock::sleep_until(std::int64_t t) noexcept {
  // Absolute CLOCK_MONOTONIC: the same clock as now() (see the header), so the sleep aims at t
  // itself and a signal that interrupts it does not stretch it.
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t / kSecond);
  ts.tv_nsec = static_cast<long>(t % kSecond);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

std::int64_t Clock::monotonic_offset_ns() noexcept {
  std::int64_t best = -1;
  for (int i = 0; i < 16; ++i) {
    const std::int64_t a = now();
    const std::int64_t m = monotonic_ns();
    const std::int64_t b = now();
    // m was read between a and b on the same clock iff a <= m <= b; otherwise the distance to
    // that interval is the offset (plus at most one read).
    const std::int64_t off = m < a ? a - m : (m > b ? m - b : 0);
    if (best < 0 || off < best) best = off;
  }
  return best;
}

double Clock::measure_read_cost(unsigned rounds, unsigned reads) noexcept {
  std::vector<double> per_read;
  per_read.reserve(rounds);
  std::uint64_t sink = 0;  // unsigned: the sum of a million timestamps wraps, which is fine here
  for (unsigned r = 0; r < rounds; ++r) {
    const std::int64_t t0 = now();
    for (unsigned i = 0; i < reads; ++i) sink += static_cast<std::uint64_t>(now());
    const std::int64_t t1 = now();
    per_read.push_back(static_cast<double>(t1 - t0) / reads);
  }
  // Keep the reads observable so the loop cannot be dropped.
  volatile std::uint64_t keep = sink;
  (void)keep;
  std::sort(per_read.begin(), per_read.end());
  return per_read.empty() ? 0.0 : per_read[per_read.size() / 2];
}

}  // namespace tickwheel::stress
