// bench/queues.hpp — the queues the benchmarks run, behind one adapter (Queue<Q>), so that the
// Google Benchmark scenarios (wheel_bench.cpp) and the per-call tail mode (tails.cpp) give the wheel
// and its baselines (the heap; the reference wheel, in the scenarios that fit its one-shot timers)
// exactly the same workload: the same callback, the same deadlines, the same setup.
#pragma once

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "common.hpp"
#include "heap_baseline.hpp"
#include "reference_wheel.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel_bench {

// The callback every timer carries: 8 bytes, a side effect the optimiser must keep.
struct Bump {
  std::uint64_t* counter;
  void operator()() const noexcept { ++*counter; }
};

// What the callbacks of the periodic case share: the queue (the heap's callbacks schedule their
// next period on it) and the run counter.
template <class Q>
struct PeriodicRun {
  Q* q;
  std::uint64_t* fired;
};

// The heap's periodic timer, as a careful user writes it: the callback counts its run, schedules
// the next period as a new timer at a fixed rate (one period after this run's deadline, not after
// now, so it never drifts) and stores the new handle where the old one was, so that the timer
// stays cancellable, as a wheel's periodic id does. 24 bytes; times are in ticks.
struct Rearm {
  const PeriodicRun<HeapTimerQueue>* run;
  HeapTimerQueue::Handle* slot;
  std::uint32_t due;     // this run's tick
  std::uint32_t period;  // in ticks
  void operator()() const {
    ++*run->fired;
    const std::uint32_t next = due + period;
    *slot = run->q->schedule_at(kTick * next, Rearm{run, slot, next, period});
  }
};

// What differs between the queues, and nothing else.
template <class Q>
struct Queue;

template <>
struct Queue<tickwheel::Wheel> {
  static constexpr std::string_view kName = "wheel";
  // A fresh wheel; with reserve != 0, its pool's memory for that many timers mapped and touched.
  static std::unique_ptr<tickwheel::Wheel> make(std::size_t reserve = 0) {
    return std::make_unique<tickwheel::Wheel>(tickwheel::WheelOptions{.tick = kTick, .reserve = reserve});
  }
  static std::uint64_t bytes(const tickwheel::Wheel& q) { return q.stats().bytes; }
  // A periodic timer first due at tick `first`, then every `period` ticks: the wheel re-arms it
  // in its own node.
  static tickwheel::TimerId every(const PeriodicRun<tickwheel::Wheel>& run, tickwheel::TimerId*,
                                  std::uint32_t first, std::uint32_t period) {
    return run.q->schedule_every(kTick * period, Bump{run.fired},
                                 {.initial_delay = kTick * first - run.q->now()});
  }
  static void fire_counters(benchmark::State& state, const tickwheel::Wheel& q) {
    const tickwheel::WheelStats s = q.stats();
    state.counters["max_pass_work"] = static_cast<double>(s.max_pass_work);
    state.counters["moves_per_fire"] = static_cast<double>(s.moved) / static_cast<double>(s.fired);
  }
};

template <>
struct Queue<HeapTimerQueue> {
  static constexpr std::string_view kName = "heap";
  static std::unique_ptr<HeapTimerQueue> make(std::size_t reserve = 0) {
    auto q = std::make_unique<HeapTimerQueue>();
    if (reserve != 0) q->reserve(reserve);
    return q;
  }
  static std::uint64_t bytes(const HeapTimerQueue& q) { return q.bytes(); }
  // The same timer as a chain of one-shot timers, each run scheduling the next (see Rearm); `slot`
  // is where the chain keeps its current handle.
  static HeapTimerQueue::Handle every(const PeriodicRun<HeapTimerQueue>& run, HeapTimerQueue::Handle* slot,
                                      std::uint32_t first, std::uint32_t period) {
    return run.q->schedule_at(kTick * first, Rearm{&run, slot, first, period});
  }
  static void fire_counters(benchmark::State&, const HeapTimerQueue&) {}
};

template <>
struct Queue<ReferenceWheel> {
  static constexpr std::string_view kName = "ref";
  static std::unique_ptr<ReferenceWheel> make(std::size_t reserve = 0) {
    auto q = std::make_unique<ReferenceWheel>(kTick);
    if (reserve != 0) q->reserve(reserve);
    return q;
  }
  static std::uint64_t bytes(const ReferenceWheel& q) { return q.bytes(); }
  static void fire_counters(benchmark::State&, const ReferenceWheel&) {}
};

template <class Q>
using IdOf = decltype(std::declval<Q&>().schedule_at(Nanos{}, Bump{}));

// Untimed setup shared by all cases: n timers due uniformly over the next minute from `base`.
template <class Q>
std::vector<IdOf<Q>> populate(Q& q, std::size_t n, Rng& rng, Nanos base, std::uint64_t* counter) {
  std::vector<IdOf<Q>> ids(n);
  for (auto& id : ids) id = q.schedule_at(base + rng.delay(), Bump{counter});
  return ids;
}

}  // namespace tickwheel_bench
