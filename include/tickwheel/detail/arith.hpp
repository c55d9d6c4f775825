// tickwheel/detail/arith.hpp — time arithmetic that clamps instead of overflowing. Not public API.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>

namespace tickwheel::detail {

// a + b, saturating at the ends of std::chrono::nanoseconds instead of wrapping.
inline std::chrono::nanoseconds saturating_add(std::chrono::nanoseconds a,
                                               std::chrono::nanoseconds b) noexcept {
  std::chrono::nanoseconds::rep sum = 0;
  if (__builtin_add_overflow(a.count(), b.count(), &sum)) {
    return b.count() > 0 ? std::chrono::nanoseconds::max() : std::chrono::nanoseconds::min();
  }
  return std::chrono::nanoseconds(sum);
}

// a + b, saturating at the largest std::uint64_t.
inline std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) noexcept {
  std::uint64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<std::uint64_t>::max() : sum;
}

}  // namespace tickwheel::detail
