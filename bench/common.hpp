// bench/common.hpp — what every benchmark binary shares: the workload (delay range, tick, seed) and
// its random numbers (the same sequence on every platform, so runs are comparable across machines),
// how a table of scenarios names each scenario once for every queue it runs on, and the JSON
// context tools/bench_table.py reads the cases from.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tickwheel_bench {

using Nanos = std::chrono::nanoseconds;

// Deadlines are uniform over [now + kMinDelay, now + kMaxDelay]: the workload of W1..W4
// (docs/benchmarks.md).
constexpr Nanos kMinDelay = std::chrono::milliseconds(1);
constexpr Nanos kMaxDelay = std::chrono::seconds(60);
constexpr Nanos kTick = std::chrono::milliseconds(1);
constexpr std::uint64_t kSeed = 0x7469636b77686565;  // "tickwhee"

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

template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {  // Fisher-Yates, the same permutation on every platform
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// A scenario is a function template over the queue it runs on, and Google Benchmark registers a
// plain function per queue. A table row names the scenario once, as a captureless lambda
// []<class Q>(On<Q>, benchmark::State&) that calls it for queue Q; run_on<Scenario, Q> is the
// function registered for queue Q (a function template itself cannot be passed as an argument).
template <class Q>
struct On {};

template <class Scenario, class Q>
void run_on(benchmark::State& state) {
  Scenario{}(On<Q>{}, state);
}

// The JSON context tools/bench_table.py reads a binary's cases from: adds `name` to `cases` (a
// comma-separated list, published as "cases" once every case is in) and its one-line description
// as "case:<name>".
inline void add_case(std::string& cases, std::string_view name, std::string_view description) {
  if (!cases.empty()) cases += ',';
  cases += name;
  benchmark::AddCustomContext("case:" + std::string(name), std::string(description));
}

// The build a binary's figures come from: the compiler, and whether assertions were on.
inline void add_build_context() {
  benchmark::AddCustomContext("compiler", __VERSION__);
#ifdef NDEBUG
  benchmark::AddCustomContext("tickwheel_build", "NDEBUG (assertions off)");
#else
  benchmark::AddCustomContext("tickwheel_build", "assertions ON: not a release build");
#endif
}

}  // namespace tickwheel_bench
