// tickwheel/detail/arith.hpp — time arithmetic that clamps instead of overflowing, and the division
// of a deadline by the tick without a divide instruction. Not public API.
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

// Nanoseconds -> ticks for one fixed tick, by a multiplication with the tick's reciprocal instead
// of a 64-bit divide (20 to 90 cycles of latency on the x86 cores we run on, against about 5 for
// the two multiplications here): a schedule divides its deadline by the tick, so this is on the
// hot path of every schedule, standalone or cross-thread. Exact for every value a Nanos can hold.
class TickDivider {
 public:
  // Precondition: tick_ns >= 1.
  explicit TickDivider(std::uint64_t tick_ns) noexcept
      : tick_(tick_ns),
        inverse_(~std::uint64_t{0} / tick_ns),
        max_tick_(static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / tick_ns) {}

  // floor(n / tick). inverse_ is floor((2^64 - 1) / tick), so the product's high half q is
  // floor(n / tick) or one less (n * (2^64 / tick - 1) / 2^64 > n / tick - 1 for any n < 2^64);
  // one compare of the remainder settles which.
  std::uint64_t floor(std::uint64_t n) const noexcept {
    std::uint64_t q = mul_high(n, inverse_);
    if (n - q * tick_ >= tick_) ++q;
    return q;
  }
  // The tick of a deadline: ceil(deadline / tick) (a timer never fires early), 0 for a deadline
  // at or before 0, and at most max_tick().
  std::uint64_t due(std::chrono::nanoseconds deadline) const noexcept {
    if (deadline.count() <= 0) return 0;
    // ceil(n / tick) = floor((n + tick - 1) / tick). The sum stays below 2^64 (n < 2^63, tick <
    // 2^42), and the reasoning of floor() holds up to 2^64: the high half is the quotient or one
    // less.
    const std::uint64_t n = static_cast<std::uint64_t>(deadline.count()) + tick_ - 1;
    std::uint64_t q = mul_high(n, inverse_);
    if (n - q * tick_ >= tick_) ++q;
    return q < max_tick_ ? q : max_tick_;
  }
  // The last tick a Nanos can reach: floor(Nanos::max() / tick).
  std::uint64_t max_tick() const noexcept { return max_tick_; }
  std::uint64_t tick() const noexcept { return tick_; }

 private:
  static std::uint64_t mul_high(std::uint64_t a, std::uint64_t b) noexcept {
    __extension__ using Wide = unsigned __int128;  // GCC's and clang's 128-bit product, -pedantic clean
    return static_cast<std::uint64_t>((static_cast<Wide>(a) * b) >> 64U);
  }

  std::uint64_t tick_;
  std::uint64_t inverse_;
  std::uint64_t max_tick_;
};

}  // namespace tickwheel::detail
