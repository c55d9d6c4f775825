// bench/wheel_api_bench.cpp — reschedule in place (Wheel::reschedule) against cancel + schedule, on
// the wheel and on the heap baseline (heap_baseline.hpp), in the tickwheel-bench binary. The cases
// register themselves when the binary starts; main() is wheel_bench.cpp's.
//
// Cases, each at 10k, 1M and 10M pending, named <case>/<queue>/<pending> as in wheel_bench.cpp, so
// that tools/bench_table.py pairs the wheel and the heap and takes the descriptions from the JSON
// context:
//   reschedule_near       move a pending timer 1-4 ms past its deadline (an idle timeout pushed
//                         back by a packet): Wheel::reschedule(), whose same-slot shortcut takes
//                         most of these, against the heap's decrease/increase-key
//   cancel_schedule_near  the same moves done as cancel + schedule, a new id each
//   reschedule_far        move a pending timer to a new deadline uniform over [1 ms, 60 s]: for
//                         the wheel nearly always another slot
//   cancel_schedule_far   the same moves done as cancel + schedule
//
// Workload: N timers pending with deadlines uniform over [1 ms, 60 s] (bench/common.hpp), a 1 ms
// tick, the queue's clock at 0 throughout (nothing fires), fixed seeds. One iteration is one move.
// Victims are taken in the order of a stride permutation of [0, N) (a stride near 0.618 N, coprime
// with N): every timer once per N moves, consecutive victims far apart in memory, and no shuffled
// table to read. Each block of 4096 victims has its ids and new deadlines gathered into small
// arrays while timing is paused (new ids are scattered back at the next pause), as wheel_bench.cpp's
// churn does, so the timed loop pays for the queue's work and not for the benchmark's tables.
//
// Counters: ops_per_iter, bytes_per_timer (as in wheel_bench.cpp) and, for the wheel's reschedule
// cases, in_place: the share of moves that took the same-slot shortcut (stats().
// rescheduled_in_place / rescheduled). Every move's result is summed and checked, and the pending
// count must stay N; a mismatch fails the case (SkipWithError) instead of reporting a figure.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common.hpp"
#include "heap_baseline.hpp"
#include "tickwheel/wheel.hpp"

namespace {

using tickwheel_bench::HeapTimerQueue;
using tickwheel_bench::kTick;
using tickwheel_bench::Nanos;
using tickwheel_bench::Rng;

constexpr std::size_t kBlock = 4096;
constexpr std::uint64_t kSeed = 0x72657363686564;  // "resched"
constexpr Nanos kNearMin = std::chrono::milliseconds(1);
constexpr Nanos kNearMax = std::chrono::milliseconds(4);

template <class Q>
struct Traits;

template <>
struct Traits<tickwheel::Wheel> {
  static constexpr std::string_view kName = "wheel";
  static std::unique_ptr<tickwheel::Wheel> make() {
    return std::make_unique<tickwheel::Wheel>(tickwheel::WheelOptions{.tick = kTick});
  }
  static double bytes(const tickwheel::Wheel& q) { return static_cast<double>(q.stats().bytes); }
  static void counters(benchmark::State& state, const tickwheel::Wheel& q) {
    const tickwheel::WheelStats s = q.stats();
    if (s.rescheduled != 0) {
      state.counters["in_place"] =
          static_cast<double>(s.rescheduled_in_place) / static_cast<double>(s.rescheduled);
    }
  }
};

template <>
struct Traits<HeapTimerQueue> {
  static constexpr std::string_view kName = "heap";
  static std::unique_ptr<HeapTimerQueue> make() { return std::make_unique<HeapTimerQueue>(); }
  static double bytes(const HeapTimerQueue& q) { return static_cast<double>(q.bytes()); }
  static void counters(benchmark::State&, const HeapTimerQueue&) {}
};

enum class Move : std::uint8_t { near, far };
enum class How : std::uint8_t { reschedule, cancel_schedule };

// A stride near 0.618 n that is coprime with n, so that i -> (i + stride) % n visits all of [0, n).
std::size_t golden_stride(std::size_t n) {
  auto stride = std::max<std::size_t>(1, static_cast<std::size_t>(static_cast<double>(n) * 0.6180339887));
  while (std::gcd(stride, n) != 1) ++stride;
  return stride;
}

template <class Q, Move M, How H>
void BM_Move(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  auto q = Traits<Q>::make();
  std::uint64_t fired = 0;  // the callbacks' counter: nothing fires here, the clock stays at 0
  const auto callback = [c = &fired] { ++*c; };
  using Id = decltype(q->schedule_at(Nanos{}, callback));
  Rng rng(kSeed ^ n);
  std::vector<Id> ids(n);
  std::vector<Nanos> deadlines(n);  // each timer's current deadline, for the near moves
  for (std::size_t i = 0; i < n; ++i) {
    deadlines[i] = rng.delay();
    ids[i] = q->schedule_at(deadlines[i], callback);
  }
  const double bytes_per_timer = Traits<Q>::bytes(*q) / static_cast<double>(n);
  const std::size_t stride = golden_stride(n);
  const std::size_t block = std::min(kBlock, n);
  std::size_t cursor = 0;
  std::vector<std::size_t> victims(block);
  std::vector<Id> moving(block);
  std::vector<Id> fresh(block);
  std::vector<Nanos> targets(block);
  const auto near_span = static_cast<std::uint64_t>((kNearMax - kNearMin).count()) + 1;
  const auto draw = [&] {
    for (std::size_t j = 0; j < block; ++j) {
      victims[j] = cursor;
      cursor = (cursor + stride) % n;
      moving[j] = ids[victims[j]];
      targets[j] = M == Move::near ? deadlines[victims[j]] + kNearMin +
                                         Nanos(static_cast<Nanos::rep>(rng.below(near_span)))
                                   : rng.delay();
    }
  };
  const auto scatter = [&] {
    for (std::size_t j = 0; j < block; ++j) {
      deadlines[victims[j]] = targets[j];
      if (H == How::cancel_schedule) ids[victims[j]] = fresh[j];
    }
  };
  draw();
  std::size_t i = 0;
  std::size_t done = 0;
  for (auto _ : state) {
    if constexpr (H == How::reschedule) {
      done += q->reschedule(moving[i], targets[i]);
    } else {
      done += q->cancel(moving[i]);
      fresh[i] = q->schedule_at(targets[i], callback);
    }
    if (++i == block) {
      state.PauseTiming();
      scatter();
      draw();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (done != static_cast<std::size_t>(state.iterations()) || q->pending_count() != n || fired != 0) {
    state.SkipWithError("a move of a pending timer failed, or a timer went missing or fired");
    return;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()));
  state.counters["ops_per_iter"] = 1;
  state.counters["bytes_per_timer"] = bytes_per_timer;
  state.SetLabel(std::string(Traits<Q>::kName));
  Traits<Q>::counters(state, *q);
}

struct Case {
  std::string_view name;
  std::string_view description;
  void (*wheel)(benchmark::State&);
  void (*heap)(benchmark::State&);
};

template <Move M, How H>
constexpr Case make_case(std::string_view name, std::string_view description) {
  return Case{name, description, &BM_Move<tickwheel::Wheel, M, H>, &BM_Move<HeapTimerQueue, M, H>};
}

// The one table of these cases: registration, names and descriptions all come from it.
const Case kCases[] = {
    make_case<Move::near, How::reschedule>(
        "reschedule_near",
        "move a pending timer 1-4 ms past its deadline in place (idle timeout pushed back); "
        "heap: decrease/increase-key"),
    make_case<Move::near, How::cancel_schedule>(
        "cancel_schedule_near", "the same moves as reschedule_near, done as cancel + schedule"),
    make_case<Move::far, How::reschedule>(
        "reschedule_far",
        "move a pending timer in place to a new deadline uniform over [1 ms, 60 s]; heap: "
        "decrease/increase-key"),
    make_case<Move::far, How::cancel_schedule>("cancel_schedule_far",
                                               "the same moves as reschedule_far, done as cancel + schedule"),
};

bool register_cases() {
  constexpr std::int64_t kSizes[] = {10'000, 1'000'000, 10'000'000};
  for (const Case& c : kCases) {
    for (const auto& [queue, fn] : {std::pair{Traits<tickwheel::Wheel>::kName, c.wheel},
                                    std::pair{Traits<HeapTimerQueue>::kName, c.heap}}) {
      for (const std::int64_t n : kSizes) {
        benchmark::RegisterBenchmark((std::string(c.name) + "/" + std::string(queue)).c_str(), fn)
            ->Arg(n)
            ->Iterations(std::int64_t{1} << 21)
            ->Unit(benchmark::kNanosecond);
      }
    }
    benchmark::AddCustomContext("case:" + std::string(c.name), std::string(c.description));
  }
  return true;
}

[[maybe_unused]] const bool kRegistered = register_cases();

}  // namespace
