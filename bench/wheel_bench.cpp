// bench/wheel_bench.cpp — tickwheel::Wheel against the binary-heap baseline, in one binary.
//
// Every scenario is one function template instantiated for both queues and registered by one
// loop, so the wheel and the heap always run exactly the same workload: the same sizes, the same
// seeds, the same deadlines, the same operation order. Names are <case>/<queue>/<pending>, e.g.
// schedule/wheel/1000000 and schedule/heap/1000000; tools/bench_table.py pairs them by name and
// takes each case's one-line description from the JSON context, where main() puts it from the
// same table that registers the case.
//
// Workload: deadlines uniform over [1 ms, 60 s] from the queue's current time (periodic: periods
// uniform over a range of whole ticks, see BM_Periodic), a 1 ms tick, a driven clock (the
// benchmarks never read a clock to drive a queue), fixed seeds. Random numbers are drawn while
// timing is paused, in blocks of 4096, so the timed loop does only queue work.
//
// Counters (all cases): ops_per_iter (operations one iteration performs; ns/op = time / it),
// bytes_per_timer (memory held per pending timer with the population at N: the wheel's
// stats().bytes, the heap's pool plus heap array), items_per_second. fire adds worst_advance_us
// and p999_advance_us (the slowest and the 99.9th-percentile advance() of an instrumented drain)
// and, for the wheel, max_pass_work and moves_per_fire (node moves between levels per fire);
// periodic adds the wheel's two as well (there a fire is a run, and the moves include re-armed
// timers' moves down).
//
// Keeping the optimiser honest: every id a timed schedule returns is stored and later cancelled,
// every cancel's result is summed and checked, and every callback increments a counter that is
// checked, so no queue work can be dropped; a mismatch fails the benchmark (SkipWithError) rather
// than report a figure for work that did not happen. benchmark::DoNotOptimize is not applied to
// stored ids: with GCC 12 and Google Benchmark 1.7.1 its read-write "+m,r" form on a vector
// element lost the stored id (every later cancel failed), so it is used on rvalues only.
//
// Extra flag, read before Google Benchmark's own: --tickwheel_cpu=K pins the process to CPU K.
#include <benchmark/benchmark.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common.hpp"
#include "heap_baseline.hpp"
#include "tickwheel/wheel.hpp"

namespace {

using Nanos = std::chrono::nanoseconds;
using tickwheel_bench::HeapTimerQueue;
using tickwheel_bench::kMaxDelay;
using tickwheel_bench::kMinDelay;
using tickwheel_bench::Rng;

constexpr Nanos kTick = std::chrono::milliseconds(1);
constexpr std::size_t kBlock = 4096;                 // timed operations between two pauses
constexpr std::uint64_t kSeed = 0x7469636b77686565;  // "tickwhee"
constexpr std::int64_t kSizes[] = {10'000, 1'000'000, 10'000'000};

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

// What differs between the two queues, and nothing else.
template <class Q>
struct Queue;

template <>
struct Queue<tickwheel::Wheel> {
  static constexpr std::string_view kName = "wheel";
  static std::unique_ptr<tickwheel::Wheel> make() {
    return std::make_unique<tickwheel::Wheel>(tickwheel::WheelOptions{.tick = kTick});
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
  static std::unique_ptr<HeapTimerQueue> make() { return std::make_unique<HeapTimerQueue>(); }
  static std::uint64_t bytes(const HeapTimerQueue& q) { return q.bytes(); }
  // The same timer as a chain of one-shot timers, each run scheduling the next (see Rearm); `slot`
  // is where the chain keeps its current handle.
  static HeapTimerQueue::Handle every(const PeriodicRun<HeapTimerQueue>& run, HeapTimerQueue::Handle* slot,
                                      std::uint32_t first, std::uint32_t period) {
    return run.q->schedule_at(kTick * first, Rearm{&run, slot, first, period});
  }
  static void fire_counters(benchmark::State&, const HeapTimerQueue&) {}
};

template <class Q>
using IdOf = decltype(std::declval<Q&>().schedule_at(Nanos{}, Bump{}));

std::size_t pending_of(benchmark::State& state) { return static_cast<std::size_t>(state.range(0)); }

// Untimed setup shared by all cases: n timers due uniformly over the next minute from `base`.
template <class Q>
std::vector<IdOf<Q>> populate(Q& q, std::size_t n, Rng& rng, Nanos base, std::uint64_t* counter) {
  std::vector<IdOf<Q>> ids(n);
  for (auto& id : ids) id = q.schedule_at(base + rng.delay(), Bump{counter});
  return ids;
}

template <class T>
void shuffle(std::vector<T>& v, Rng& rng) {  // Fisher-Yates, the same permutation on every platform
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

// Counters every case reports; `per_iter` operations make one iteration (on average, where
// iterations differ, as periodic's do).
template <class Q>
void report(benchmark::State& state, double bytes_per_timer, double per_iter) {
  state.SetItemsProcessed(std::llround(static_cast<double>(state.iterations()) * per_iter));
  state.counters["ops_per_iter"] = per_iter;
  state.counters["bytes_per_timer"] = bytes_per_timer;
  state.SetLabel(std::string(Queue<Q>::kName));
}

template <class Q>
double bytes_per_timer(const Q& q) {
  return static_cast<double>(Queue<Q>::bytes(q)) / static_cast<double>(q.pending());
}

// schedule: one schedule into a queue already holding N pending timers. After every 4096 timed
// schedules the new timers are cancelled while timing is paused, so the population stays in
// [N, N + 4096].
template <class Q>
void BM_Schedule(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  const auto ids = populate(*q, n, rng, Nanos{0}, &fired);
  const double bpt = bytes_per_timer(*q);
  std::vector<IdOf<Q>> block(kBlock);
  std::vector<Nanos> deadlines(kBlock);
  for (auto& d : deadlines) d = rng.delay();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    block[i] = q->schedule_at(deadlines[i], Bump{&fired});
    if (++i == kBlock) {
      state.PauseTiming();
      for (const auto& id : block) cancelled += q->cancel(id);
      for (auto& d : deadlines) d = rng.delay();
      i = 0;
      state.ResumeTiming();
    }
  }
  const auto blocks = static_cast<std::size_t>(state.iterations()) / kBlock;
  if (cancelled != blocks * kBlock || q->pending() != n + i) {
    state.SkipWithError("schedule: a timer went missing (cancel of a fresh timer failed)");
  }
  report<Q>(state, bpt, 1);
}

// cancel: cancel one timer, in random order, from a population of N. When half the population
// has been cancelled, timing pauses, the cancelled half is scheduled again and the order is
// reshuffled, so the population stays in (N/2, N].
template <class Q>
void BM_Cancel(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  auto ids = populate(*q, n, rng, Nanos{0}, &fired);
  const double bpt = bytes_per_timer(*q);
  shuffle(ids, rng);
  const std::size_t half = std::max<std::size_t>(n / 2, 1);
  std::size_t k = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    cancelled += q->cancel(ids[k]);
    if (++k == half) {
      state.PauseTiming();
      for (std::size_t j = 0; j < k; ++j) {
        ids[j] = q->schedule_at(rng.delay(), Bump{&fired});
      }
      shuffle(ids, rng);
      k = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations())) {
    state.SkipWithError("cancel: a cancel of a pending timer returned false");
  }
  report<Q>(state, bpt, 1);
}

// churn: with N pending, cancel a random pending timer and schedule a new one in its place (the
// idle timeout reset on every packet). One iteration is the pair. Victims are drawn without
// repetition within a block of 4096 and their ids gathered into a small array while timing is
// paused (the new ids are scattered back at the next pause), so the timed loop pays for the
// queue's work and not for a cache miss on the benchmark's own id table, which a real caller
// takes on its connection object anyway.
template <class Q>
void BM_Churn(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  auto ids = populate(*q, n, rng, Nanos{0}, &fired);
  const double bpt = bytes_per_timer(*q);
  std::vector<std::uint32_t> order(n);  // victims are taken from a shuffled order, block by block
  for (std::size_t j = 0; j < n; ++j) order[j] = static_cast<std::uint32_t>(j);
  shuffle(order, rng);
  const std::size_t block_size = std::min(kBlock, n);
  std::size_t next = 0;  // the next unused entry of `order`
  std::vector<IdOf<Q>> victims(block_size);
  std::vector<IdOf<Q>> fresh(block_size);
  std::vector<Nanos> deadlines(block_size);
  const auto draw = [&] {
    if (next + block_size > n) {
      shuffle(order, rng);
      next = 0;
    }
    for (std::size_t j = 0; j < block_size; ++j) victims[j] = ids[order[next + j]];
    for (auto& d : deadlines) d = rng.delay();
  };
  const auto scatter = [&](std::size_t count) {
    for (std::size_t j = 0; j < count; ++j) ids[order[next + j]] = fresh[j];
    next += block_size;
  };
  draw();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    cancelled += q->cancel(victims[i]);
    fresh[i] = q->schedule_at(deadlines[i], Bump{&fired});
    if (++i == block_size) {
      state.PauseTiming();
      scatter(i);
      draw();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations()) || q->pending() != n) {
    state.SkipWithError("churn: a cancel of a pending timer returned false");
  }
  report<Q>(state, bpt, 1);
}

// hot_pair: with N pending, schedule a timer and cancel it right away (the request answered in
// time). One iteration is the pair.
template <class Q>
void BM_HotPair(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  const auto ids = populate(*q, n, rng, Nanos{0}, &fired);
  const double bpt = bytes_per_timer(*q);
  std::vector<Nanos> deadlines(kBlock);
  for (auto& d : deadlines) d = rng.delay();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    const auto id = q->schedule_at(deadlines[i], Bump{&fired});
    cancelled += q->cancel(id);
    if (++i == kBlock) {
      state.PauseTiming();
      for (auto& d : deadlines) d = rng.delay();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations()) || q->pending() != n) {
    state.SkipWithError("hot_pair: a cancel of a fresh timer returned false");
  }
  report<Q>(state, bpt, 1);
}

// Runs advance() in tick steps from `t` until nothing is pending; returns the final time.
template <class Q>
Nanos drain(Q& q, Nanos t) {
  while (q.pending() != 0) {
    t += kTick;
    q.advance(t);
  }
  return t;
}

// What the instrumented drain checks: every timer runs exactly once, never before its deadline
// and less than one tick after it (the drain steps the clock one tick at a time).
struct Lateness {
  Nanos now{0};  // the time passed to the advance() in progress
  Nanos max{0};  // the largest now - deadline seen
  std::uint64_t early = 0;
  std::uint64_t ran = 0;
};

// The instrumented drain's callback: 16 bytes, records its own lateness.
struct Check {
  Lateness* l;
  Nanos deadline;
  void operator()() const noexcept {
    ++l->ran;
    const Nanos late = l->now - deadline;
    if (late < Nanos{0}) ++l->early;
    l->max = std::max(l->max, late);
  }
};

// The same drain, timing each advance() with steady_clock, over n timers scheduled with the
// Check callback. Returns the final time; fills the duration of every advance() call.
template <class Q>
Nanos drain_timed(Q& q, std::size_t n, Rng& rng, Nanos t, Lateness& lateness, std::vector<Nanos>& durations) {
  using Clock = std::chrono::steady_clock;
  for (std::size_t i = 0; i < n; ++i) {
    const Nanos deadline = t + rng.delay();
    benchmark::DoNotOptimize(q.schedule_at(deadline, Check{&lateness, deadline}));
  }
  durations.clear();
  while (q.pending() != 0) {
    t += kTick;
    lateness.now = t;
    const auto start = Clock::now();
    q.advance(t);
    durations.push_back(std::chrono::duration_cast<Nanos>(Clock::now() - start));
  }
  return t;
}

// fire: N pending, drained by advance() in 1 ms steps until all have fired; time per fired timer.
// The timed drains read no clock. One more drain after them, untimed, times each advance() with
// steady_clock: worst_advance_us is the slowest call, p999_advance_us the 99.9th percentile (the
// worst is exposed to preemption and interrupts; the percentile much less). That drain also checks
// that every timer ran once, none early, none a tick or more late (max_late_us); a failure fails
// the benchmark. For the wheel, max_pass_work is the most fires + moves one advance() did over all
// the drains.
template <class Q>
void BM_Fire(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  Nanos now{0};
  double bpt = 0;
  std::vector<Nanos> durations;
  durations.reserve(static_cast<std::size_t>((kMaxDelay / kTick) + 2));
  for (auto _ : state) {
    state.PauseTiming();
    benchmark::DoNotOptimize(populate(*q, n, rng, now, &fired));
    bpt = bytes_per_timer(*q);
    state.ResumeTiming();
    now = drain(*q, now);
  }
  Lateness lateness;
  now = drain_timed(*q, n, rng, now, lateness, durations);
  if (fired != static_cast<std::size_t>(state.iterations()) * n || lateness.ran != n) {
    state.SkipWithError("fire: the number of callbacks run is not the number of timers scheduled");
    return;
  }
  if (lateness.early != 0 || lateness.max >= kTick) {
    state.SkipWithError("fire: a timer ran before its deadline or a tick or more after it");
    return;
  }
  std::sort(durations.begin(), durations.end());
  const auto us = [](Nanos d) { return std::chrono::duration<double, std::micro>(d).count(); };
  report<Q>(state, bpt, static_cast<double>(n));
  state.counters["worst_advance_us"] = us(durations.back());
  state.counters["p999_advance_us"] = us(durations[durations.size() * 999 / 1000]);
  state.counters["max_late_us"] = us(lateness.max);
  Queue<Q>::fire_counters(state, *q);
}

// periodic: N periodic timers, each with a period drawn uniformly over [kPeriodMin, kPeriodMax]
// whole ticks (100 ms .. 10 s: heartbeats, keepalive probes, flushes) and its first run at a tick
// drawn uniformly over its first period, so the runs are spread evenly from the start; each
// iteration advances the queue by kPeriodicSpan ticks (1 s) in 1-tick steps. Time per run, the
// steps that run nothing included. The wheel's timers are schedule_every() timers, re-armed in
// their own nodes; the heap's are chains of one-shot timers, each run scheduling the next and
// storing its handle (Rearm). After the timed loop: the number of runs must be exactly what the
// periods and first ticks imply, and every timer must be cancelled through the id held for it
// now; either failure fails the case.
constexpr std::uint32_t kPeriodMin = 100;       // ticks
constexpr std::uint32_t kPeriodMax = 10'000;    // ticks
constexpr std::uint32_t kPeriodicSpan = 1'000;  // ticks advanced per iteration

// The period and first tick of the next timer: drawn once to schedule, again to check.
std::pair<std::uint32_t, std::uint32_t> draw_periodic(Rng& rng) {
  const std::uint64_t span = kPeriodMax - kPeriodMin + 1;
  const auto period = static_cast<std::uint32_t>(kPeriodMin + rng.below(span));
  return {period, static_cast<std::uint32_t>(1 + rng.below(period))};
}

template <class Q>
void BM_Periodic(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  const PeriodicRun<Q> run{q.get(), &fired};
  std::vector<IdOf<Q>> ids(n);  // never resized: the heap's callbacks write into it
  Rng rng(kSeed ^ n);
  for (auto& id : ids) {
    const auto [period, first] = draw_periodic(rng);
    id = Queue<Q>::every(run, &id, first, period);
  }
  const double bpt = bytes_per_timer(*q);
  std::uint32_t tick = 0;
  for (auto _ : state) {
    for (const std::uint32_t end = tick + kPeriodicSpan; tick != end;) q->advance(kTick * ++tick);
  }
  // A timer runs at its first tick, then every period: (tick - first) / period + 1 times by now.
  std::uint64_t expected = 0;
  Rng again(kSeed ^ n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto [period, first] = draw_periodic(again);
    if (first <= tick) expected += (tick - first) / period + 1;
  }
  std::size_t cancelled = 0;
  for (const auto& id : ids) cancelled += q->cancel(id);
  if (fired != expected) {
    state.SkipWithError("periodic: the number of runs is not what the periods imply");
    return;
  }
  if (cancelled != n || q->pending() != 0) {
    state.SkipWithError("periodic: a timer's current id did not cancel it");
    return;
  }
  report<Q>(state, bpt, static_cast<double>(expected) / static_cast<double>(state.iterations()));
  Queue<Q>::fire_counters(state, *q);
}

// Iterations are fixed per case and size so that a run's length is predictable and the costly
// setup of a large population is done once per run, not once per Google Benchmark probe.
benchmark::IterationCount ops_iterations(std::int64_t) { return std::int64_t{1} << 21; }
benchmark::IterationCount fire_iterations(std::int64_t n) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 21) / n);
}

struct Case {
  std::string_view name;
  std::string_view description;
  void (*wheel)(benchmark::State&);
  void (*heap)(benchmark::State&);
  benchmark::IterationCount (*iterations)(std::int64_t pending);
};

template <template <class> class Fn>
constexpr Case make_case(std::string_view name, std::string_view description,
                         benchmark::IterationCount (*iterations)(std::int64_t)) {
  return Case{name, description, &Fn<tickwheel::Wheel>::run, &Fn<HeapTimerQueue>::run, iterations};
}

template <class Q>
struct Schedule {
  static void run(benchmark::State& s) { BM_Schedule<Q>(s); }
};
template <class Q>
struct Cancel {
  static void run(benchmark::State& s) { BM_Cancel<Q>(s); }
};
template <class Q>
struct Fire {
  static void run(benchmark::State& s) { BM_Fire<Q>(s); }
};
template <class Q>
struct Churn {
  static void run(benchmark::State& s) { BM_Churn<Q>(s); }
};
template <class Q>
struct HotPair {
  static void run(benchmark::State& s) { BM_HotPair<Q>(s); }
};
template <class Q>
struct Periodic {
  static void run(benchmark::State& s) { BM_Periodic<Q>(s); }
};

// The one table of scenarios: registration, names and the README's descriptions all come from it.
const Case kCases[] = {
    make_case<Schedule>("schedule", "one schedule into a queue already holding N pending timers",
                        ops_iterations),
    make_case<Cancel>("cancel", "one cancel, in random order, from N pending (refilled when half are gone)",
                      ops_iterations),
    make_case<Fire>("fire", "N pending drained by advance() in 1 ms steps; cost per fired timer",
                    fire_iterations),
    make_case<Churn>("churn", "cancel a random pending timer and schedule a new one (idle-timeout reset)",
                     ops_iterations),
    make_case<HotPair>("hot_pair", "schedule a timer and cancel it at once (request answered in time)",
                       ops_iterations),
    make_case<Periodic>("periodic",
                        "N periodic timers (periods: see workload) advanced in 1-tick steps; "
                        "cost per run (wheel: schedule_every; heap: each run schedules the next)",
                        fire_iterations),
};

void register_all() {
  std::string names;
  for (const Case& c : kCases) {
    if (!names.empty()) names += ',';
    names += c.name;
    for (const auto& [queue, fn] : {std::pair{Queue<tickwheel::Wheel>::kName, c.wheel},
                                    std::pair{Queue<HeapTimerQueue>::kName, c.heap}}) {
      for (const std::int64_t n : kSizes) {
        benchmark::RegisterBenchmark((std::string(c.name) + "/" + std::string(queue)).c_str(), fn)
            ->Arg(n)
            ->Iterations(c.iterations(n))
            ->Unit(benchmark::kNanosecond);
      }
    }
    benchmark::AddCustomContext("case:" + std::string(c.name), std::string(c.description));
  }
  benchmark::AddCustomContext("cases", names);
  const auto text = [](auto v) { return std::to_string(v); };
  benchmark::AddCustomContext(
      "workload", "deadlines uniform over [" + text(kMinDelay.count()) + ", " + text(kMaxDelay.count()) +
                      "] ns, tick " + text(kTick.count()) + " ns, seed " + text(kSeed) +
                      "; periodic: periods uniform over [" + text(kPeriodMin) + ", " + text(kPeriodMax) +
                      "] ticks, " + text(kPeriodicSpan) + " ticks per iteration");
  benchmark::AddCustomContext("compiler", __VERSION__);
#ifdef NDEBUG
  benchmark::AddCustomContext("tickwheel_build", "NDEBUG (assertions off)");
#else
  benchmark::AddCustomContext("tickwheel_build", "assertions ON: not a release build");
#endif
}

// Consumes --tickwheel_cpu=K (pins the process to CPU K) before Google Benchmark sees argv.
bool pin_from_args(int& argc, char** argv) {
  constexpr std::string_view kFlag = "--tickwheel_cpu=";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, kFlag.size()) != kFlag) {
      argv[out++] = argv[i];
      continue;
    }
    const int cpu = std::atoi(argv[i] + kFlag.size());
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "tickwheel-bench: cannot pin to CPU %d: %s\n", cpu, std::strerror(errno));
      return false;
    }
    benchmark::AddCustomContext("pinned_cpu", std::to_string(cpu));
  }
  argc = out;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!pin_from_args(argc, argv)) return 1;
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
