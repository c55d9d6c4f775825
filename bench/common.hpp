// bench/common.hpp — what every benchmark binary shares: the workload's delay range and its
// random numbers (the same sequence on every platform, so runs are comparable across machines).
#pragma once

#include <chrono>
#include <cstdint>

namespace tickwheel_bench {

using Nanos = std::chrono::nanoseconds;

// Deadlines are uniform over [now + kMinDelay, now + kMaxDelay]: the workload.
constexpr Nanos kMinDelay = std::chrono::milliseconds(1);
constexpr Nanos kMaxDelay = std::chrono::seconds(60);

// splitmix64: small, fast, and the same sequence everywhere.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) noexcept : state_(seed) {}
  std::uint64_t next() noexcept {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n), by Lemire's multiply-shift (the bias is below 2^-30 for our n).
  std::uint64_t below(std::uint64_t n) noexcept {
    __extension__ using u128 = unsigned __int128;
    return static_cast<std::uint64_t>((static_cast<u128>(next()) * n) >> 64);
  }
  // A delay uniform over [kMinDelay, kMaxDelay].
  Nanos delay() noexcept {
    const auto span = static_cast<std::uint64_t>((kMaxDelay - kMinDelay).count()) + 1;
    return kMinDelay + Nanos(static_cast<Nanos::rep>(below(span)));
  }

 private:
  std::uint64_t state_;
};

}  // namespace tickwheel_bench
