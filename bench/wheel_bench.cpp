// bench/wheel_bench.cpp — tickwheel::Wheel against the binary-heap baseline and the reference wheel
// (reference_wheel.hpp), in one binary.
//
// Every scenario is one function template instantiated for each queue and registered by one loop
// (the reference wheel has no periodic timers, so no periodic case), so the queues always run
// exactly the same workload: the same sizes, the same seeds, the same deadlines, the same operation
// order. Names are <case>/<queue>/<pending>, e.g. schedule/wheel/1000000, schedule/heap/1000000 and
// schedule/ref/1000000; tools/bench_table.py pairs them by name and takes each case's one-line
// description from the JSON context, where main() puts it from the same table that registers the
// case.
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
// Keeping the optimiser honest: every id a timed schedule returns is stored and later checked or
// cancelled, every cancel's result is summed and checked, and every callback increments a counter that is
// checked, so no queue work can be dropped; a mismatch fails the benchmark (SkipWithError) rather
// than report a figure for work that did not happen. benchmark::DoNotOptimize is not applied to
// stored ids: its read-write "+m,r" form on a vector element can lose the stored id (GCC 12 with
// Google Benchmark 1.7.1: every later cancel fails), so it is used on rvalues only.
//
// Extra flags, read before Google Benchmark's own: --tickwheel_cpu=K pins the process to CPU K;
// --tickwheel_thp=off turns transparent huge pages off for the process (prctl PR_SET_THP_DISABLE),
// for the with/without comparison of the library's huge-page advice; --tickwheel_tails[=R] runs
// the per-call tail mode of tails.cpp (R runs, 3 by default) instead of Google Benchmark, whose
// model (time per iteration, averaged) has no place for the worst single call.
#include <benchmark/benchmark.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common.hpp"
#include "queues.hpp"
#include "tails.hpp"
#include "tickwheel/wheel.hpp"

namespace {

using Nanos = std::chrono::nanoseconds;
using tickwheel_bench::add_build_context;
using tickwheel_bench::add_case;
using tickwheel_bench::Bump;
using tickwheel_bench::HeapTimerQueue;
using tickwheel_bench::IdOf;
using tickwheel_bench::kMaxDelay;
using tickwheel_bench::kMinDelay;
using tickwheel_bench::kSeed;
using tickwheel_bench::kTick;
using tickwheel_bench::On;
using tickwheel_bench::PeriodicRun;
using tickwheel_bench::populate;
using tickwheel_bench::Queue;
using tickwheel_bench::ReferenceWheel;
using tickwheel_bench::Rng;
using tickwheel_bench::run_on;
using tickwheel_bench::shuffle;

constexpr std::size_t kBlock = 4096;  // timed operations between two pauses
// The populations of the table: every case runs at each (periodic at three of them).
constexpr std::array<std::int64_t, 5> kSizes = {1'000, 10'000, 100'000, 1'000'000, 10'000'000};
constexpr std::array<std::int64_t, 3> kPeriodicSizes = {10'000, 1'000'000, 10'000'000};
// The prefetched cases: a prefetch has nothing to hide while the timers fit in cache, so from 10k.
constexpr std::array<std::int64_t, 4> kPrefetchSizes = {10'000, 100'000, 1'000'000, 10'000'000};
// How many calls ahead the prefetched cases prefetch: far enough for the line to arrive before its
// call, and no farther, so that it has little time to be evicted again.
constexpr std::size_t kPrefetchAhead = 8;

std::size_t pending_of(benchmark::State& state) { return static_cast<std::size_t>(state.range(0)); }

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
double bytes_per_pending(const Q& q) {
  return static_cast<double>(Queue<Q>::bytes(q)) / static_cast<double>(q.pending_count());
}

// What the steady-state cases start from, untimed: a queue holding N pending timers whose callbacks
// count into `fired`, their ids, the queue's bytes per timer at N, and the generator that drew their
// deadlines, which draws the case's own after them.
template <class Q>
struct Population {
  Population(benchmark::State& state, std::uint64_t* fired)
      : n(pending_of(state)),
        queue(Queue<Q>::make()),
        rng(kSeed ^ n),
        ids(populate(*queue, n, rng, Nanos{0}, fired)),
        bytes_per_timer(bytes_per_pending(*queue)) {}
  std::size_t n;
  std::unique_ptr<Q> queue;
  Rng rng;
  std::vector<IdOf<Q>> ids;
  double bytes_per_timer;
};

// schedule: one schedule into a queue already holding N pending timers. After every 4096 timed
// schedules the new timers are cancelled while timing is paused, so the population stays in
// [N, N + 4096].
template <class Q>
void BM_Schedule(benchmark::State& state) {
  std::uint64_t fired = 0;
  Population<Q> pop(state, &fired);
  Q& q = *pop.queue;
  std::vector<IdOf<Q>> block(kBlock);
  std::vector<Nanos> deadlines(kBlock);
  for (auto& d : deadlines) d = pop.rng.delay();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    block[i] = q.schedule_at(deadlines[i], Bump{&fired});
    if (++i == kBlock) {
      state.PauseTiming();
      for (const auto& id : block) cancelled += q.cancel(id);
      for (auto& d : deadlines) d = pop.rng.delay();
      i = 0;
      state.ResumeTiming();
    }
  }
  const auto blocks = static_cast<std::size_t>(state.iterations()) / kBlock;
  if (cancelled != blocks * kBlock || q.pending_count() != pop.n + i) {
    state.SkipWithError("schedule: a timer went missing (cancel of a fresh timer failed)");
  }
  report<Q>(state, pop.bytes_per_timer, 1);
}

// fresh: schedule N timers into a fresh queue (W1 in docs/benchmarks.md); one iteration is the N
// schedules, from the queue's construction to the last one. Everything that first fills a queue is
// in the time: mapping and faulting in its memory (CPU time counts the kernel's share), the heap's
// array copies as it doubles. kReserve: the queue is built with a reserve of N first
// (WheelOptions::reserve, or HeapTimerQueue::reserve), untimed, as a process does at start-up, so
// the schedules find their memory mapped and touched. The deadlines are drawn, and the previous
// queue destroyed, untimed.
template <class Q, bool kReserve>
void BM_Fresh(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  std::vector<Nanos> deadlines(n);
  for (auto& d : deadlines) d = rng.delay();
  std::vector<IdOf<Q>> ids(n);
  std::unique_ptr<Q> q;
  double bpt = 0;
  std::size_t scheduled = 0;
  for (auto _ : state) {
    state.PauseTiming();
    q.reset();
    q = Queue<Q>::make(kReserve ? n : 0);
    state.ResumeTiming();
    for (std::size_t i = 0; i < n; ++i) ids[i] = q->schedule_at(deadlines[i], Bump{&fired});
    state.PauseTiming();
    for (const auto& id : ids) scheduled += id ? 1 : 0;
    bpt = bytes_per_pending(*q);
    state.ResumeTiming();
  }
  if (scheduled != static_cast<std::size_t>(state.iterations()) * n || q->pending_count() != n) {
    state.SkipWithError("fresh: a schedule into a fresh queue failed");
  }
  report<Q>(state, bpt, static_cast<double>(n));
}

// cancel: cancel one timer, in random order, from a population of N. When half the population
// has been cancelled, timing pauses, the cancelled half is scheduled again and the order is
// reshuffled, so the population stays in (N/2, N]. With kAhead != 0 (cancel_prefetched), each
// cancel is preceded by the queue's prefetch() of the timer kAhead cancels later, as a loop over a
// batch of known timers does.
template <class Q, std::size_t kAhead>
void BM_Cancel(benchmark::State& state) {
  std::uint64_t fired = 0;
  Population<Q> pop(state, &fired);
  Q& q = *pop.queue;
  shuffle(pop.ids, pop.rng);
  const std::size_t half = std::max<std::size_t>(pop.n / 2, 1);
  std::size_t k = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    if constexpr (kAhead != 0) {
      if (k + kAhead < half) q.prefetch(pop.ids[k + kAhead]);
    }
    cancelled += q.cancel(pop.ids[k]);
    if (++k == half) {
      state.PauseTiming();
      for (std::size_t j = 0; j < k; ++j) {
        pop.ids[j] = q.schedule_at(pop.rng.delay(), Bump{&fired});
      }
      shuffle(pop.ids, pop.rng);
      k = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations())) {
    state.SkipWithError("cancel: a cancel of a pending timer returned false");
  }
  report<Q>(state, pop.bytes_per_timer, 1);
}

// churn: with N pending, cancel a random pending timer and schedule a new one in its place (the
// idle timeout reset on every packet). One iteration is the pair. Victims are drawn without
// repetition within a block of 4096 and their ids gathered into a small array while timing is
// paused (the new ids are scattered back at the next pause), so the timed loop pays for the
// queue's work and not for a cache miss on the benchmark's own id table, which a real caller
// takes on its connection object anyway. With kAhead != 0 (churn_prefetched), each pair is
// preceded by the queue's prefetch() of the victim kAhead pairs later.
template <class Q, std::size_t kAhead>
void BM_Churn(benchmark::State& state) {
  std::uint64_t fired = 0;
  Population<Q> pop(state, &fired);
  Q& q = *pop.queue;
  std::vector<std::uint32_t> order(pop.n);  // victims are taken from a shuffled order, block by block
  for (std::size_t j = 0; j < pop.n; ++j) order[j] = static_cast<std::uint32_t>(j);
  shuffle(order, pop.rng);
  const std::size_t block_size = std::min(kBlock, pop.n);
  std::size_t next = 0;  // the next unused entry of `order`
  std::vector<IdOf<Q>> victims(block_size);
  std::vector<IdOf<Q>> fresh(block_size);
  std::vector<Nanos> deadlines(block_size);
  const auto draw = [&] {
    if (next + block_size > pop.n) {
      shuffle(order, pop.rng);
      next = 0;
    }
    for (std::size_t j = 0; j < block_size; ++j) victims[j] = pop.ids[order[next + j]];
    for (auto& d : deadlines) d = pop.rng.delay();
  };
  const auto scatter = [&](std::size_t count) {
    for (std::size_t j = 0; j < count; ++j) pop.ids[order[next + j]] = fresh[j];
    next += block_size;
  };
  draw();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    if constexpr (kAhead != 0) {
      if (i + kAhead < block_size) q.prefetch(victims[i + kAhead]);
    }
    cancelled += q.cancel(victims[i]);
    fresh[i] = q.schedule_at(deadlines[i], Bump{&fired});
    if (++i == block_size) {
      state.PauseTiming();
      scatter(i);
      draw();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations()) || q.pending_count() != pop.n) {
    state.SkipWithError("churn: a cancel of a pending timer returned false");
  }
  report<Q>(state, pop.bytes_per_timer, 1);
}

// hot_pair: with N pending, schedule a timer and cancel it right away (the request answered in
// time). One iteration is the pair.
template <class Q>
void BM_HotPair(benchmark::State& state) {
  std::uint64_t fired = 0;
  Population<Q> pop(state, &fired);
  Q& q = *pop.queue;
  std::vector<Nanos> deadlines(kBlock);
  for (auto& d : deadlines) d = pop.rng.delay();
  std::size_t i = 0;
  std::size_t cancelled = 0;
  for (auto _ : state) {
    const auto id = q.schedule_at(deadlines[i], Bump{&fired});
    cancelled += q.cancel(id);
    if (++i == kBlock) {
      state.PauseTiming();
      for (auto& d : deadlines) d = pop.rng.delay();
      i = 0;
      state.ResumeTiming();
    }
  }
  if (cancelled != static_cast<std::size_t>(state.iterations()) || q.pending_count() != pop.n) {
    state.SkipWithError("hot_pair: a cancel of a fresh timer returned false");
  }
  report<Q>(state, pop.bytes_per_timer, 1);
}

// W3's stepping: kMaxDelay / kTick steps of one tick from `t`, which reach every deadline a timer
// scheduled at `t` can have; returns the final time.
constexpr std::int64_t kFireSteps = kMaxDelay / kTick;
template <class Q>
Nanos step_through(Q& q, Nanos t) {
  for (std::int64_t i = 0; i < kFireSteps; ++i) {
    t += kTick;
    q.advance(t);
  }
  return t;
}

// W3's population: n timers with deadlines uniform over [t + 1 ms, t + 60 s], made by
// make(deadline), then a random half of them cancelled. Untimed setup.
template <class Q, class Make>
void schedule_and_cancel_half(Q& q, std::size_t n, Rng& rng, Nanos t, Make make) {
  std::vector<IdOf<Q>> ids(n);
  for (auto& id : ids) {
    const Nanos deadline = t + rng.delay();
    id = q.schedule_at(deadline, make(deadline));
  }
  shuffle(ids, rng);
  for (std::size_t i = 0; i < n / 2; ++i) benchmark::DoNotOptimize(q.cancel(ids[i]));
}

// What the instrumented run checks: every timer runs exactly once, never before its deadline
// and less than one tick after it (the clock steps one tick at a time).
struct Lateness {
  Nanos now{0};  // the time passed to the advance() in progress
  Nanos max{0};  // the largest now - deadline seen
  std::uint64_t early = 0;
  std::uint64_t ran = 0;
};

// The instrumented run's callback: 16 bytes, records its own lateness.
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

// The same stepping, timing each advance() with steady_clock, over W3's population of n timers
// with the Check callback. Returns the final time; fills the duration of every advance() call.
template <class Q>
Nanos step_through_timed(Q& q, std::size_t n, Rng& rng, Nanos t, Lateness& lateness,
                         std::vector<Nanos>& durations) {
  using Clock = std::chrono::steady_clock;
  schedule_and_cancel_half(q, n, rng, t, [&lateness](Nanos deadline) { return Check{&lateness, deadline}; });
  durations.clear();
  for (std::int64_t i = 0; i < kFireSteps; ++i) {
    t += kTick;
    lateness.now = t;
    const auto start = Clock::now();
    q.advance(t);
    durations.push_back(std::chrono::duration_cast<Nanos>(Clock::now() - start));
  }
  return t;
}

// fire: W3 in docs/benchmarks.md. N timers with deadlines uniform over [1 ms, 60 s], a random half
// cancelled (untimed), then the clock stepped 1 ms at a time through 60 s, 60,000 advance() calls,
// which run the other half; time per fired timer, the steps that run nothing included (at small N
// they are most of it). The timed runs read no clock. One more run after them, untimed, times each
// advance() with steady_clock: worst_advance_us is the slowest call, p999_advance_us the 99.9th
// percentile (the worst is exposed to preemption and interrupts; the percentile much less). That
// run also checks that every timer left ran once, none early, none a tick or more late
// (max_late_us); a failure fails the benchmark. For the wheel, max_pass_work is the most fires +
// moves one advance() did over all the runs.
template <class Q>
void BM_Fire(benchmark::State& state) {
  const std::size_t n = pending_of(state);
  auto q = Queue<Q>::make();
  std::uint64_t fired = 0;
  Rng rng(kSeed ^ n);
  Nanos now{0};
  double bpt = 0;
  std::vector<Nanos> durations;
  durations.reserve(static_cast<std::size_t>(kFireSteps));
  for (auto _ : state) {
    state.PauseTiming();
    schedule_and_cancel_half(*q, n, rng, now, [&fired](Nanos) { return Bump{&fired}; });
    bpt = static_cast<double>(Queue<Q>::bytes(*q)) / static_cast<double>(n);  // per timer scheduled
    state.ResumeTiming();
    now = step_through(*q, now);
  }
  Lateness lateness;
  now = step_through_timed(*q, n, rng, now, lateness, durations);
  const std::size_t left = n - n / 2;
  if (fired != static_cast<std::size_t>(state.iterations()) * left || lateness.ran != left ||
      q->pending_count() != 0) {
    state.SkipWithError("fire: the number of callbacks run is not the number of timers left pending");
    return;
  }
  if (lateness.early != 0 || lateness.max >= kTick) {
    state.SkipWithError("fire: a timer ran before its deadline or a tick or more after it");
    return;
  }
  std::sort(durations.begin(), durations.end());
  const auto us = [](Nanos d) { return std::chrono::duration<double, std::micro>(d).count(); };
  report<Q>(state, bpt, static_cast<double>(left));
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
  const double bpt = bytes_per_pending(*q);
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
  if (cancelled != n || q->pending_count() != 0) {
    state.SkipWithError("periodic: a timer's current id did not cancel it");
    return;
  }
  report<Q>(state, bpt, static_cast<double>(expected) / static_cast<double>(state.iterations()));
  Queue<Q>::fire_counters(state, *q);
}

// Iterations are fixed per case and size so that a run's length is predictable and the costly
// setup of a large population is done once per run, not once per Google Benchmark probe; they are
// as few as keep the whole table (3 repetitions) short enough to run before every change.
benchmark::IterationCount ops_iterations(std::int64_t) { return std::int64_t{1} << 21; }
benchmark::IterationCount per_timer_iterations(std::int64_t n) {  // an iteration handles n timers
  return std::max<std::int64_t>(1, (std::int64_t{1} << 21) / n);
}
benchmark::IterationCount fire_iterations(std::int64_t n) {  // an iteration: n timers, 60,000 steps
  return std::max<std::int64_t>(1, (std::int64_t{1} << 22) / (n + 2 * kFireSteps));
}

struct Case {
  std::string_view name;
  std::string_view description;
  void (*wheel)(benchmark::State&);
  void (*heap)(benchmark::State&);
  void (*ref)(benchmark::State&);  // the reference wheel's run; nullptr where it has no such timers
  benchmark::IterationCount (*iterations)(std::int64_t pending);
  std::span<const std::int64_t> sizes;
};

// A case the reference wheel does not run (it has no periodic timers).
template <class Scenario>
constexpr Case make_case_without_ref(std::string_view name, std::string_view description, Scenario,
                                     benchmark::IterationCount (*iterations)(std::int64_t),
                                     std::span<const std::int64_t> sizes) {
  return Case{name,
              description,
              &run_on<Scenario, tickwheel::Wheel>,
              &run_on<Scenario, HeapTimerQueue>,
              nullptr,
              iterations,
              sizes};
}

template <class Scenario>
constexpr Case make_case(std::string_view name, std::string_view description, Scenario scenario,
                         benchmark::IterationCount (*iterations)(std::int64_t),
                         std::span<const std::int64_t> sizes = kSizes) {
  Case c = make_case_without_ref(name, description, scenario, iterations, sizes);
  c.ref = &run_on<Scenario, ReferenceWheel>;
  return c;
}

// The one table of scenarios: registration, names and the descriptions in docs/benchmarks.md come from it.
const std::array kCases = {
    make_case(
        "fresh", "schedule N timers into a fresh queue (W1): its memory mapped and faulted in as it fills",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Fresh<Q, false>(s); }, per_timer_iterations),
    make_case(
        "fresh_reserved", "schedule N timers into a fresh queue built with a reserve of N (untimed)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Fresh<Q, true>(s); }, per_timer_iterations),
    make_case(
        "schedule", "one schedule into a queue already holding N pending timers",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Schedule<Q>(s); }, ops_iterations),
    make_case(
        "cancel", "one cancel, in random order, from N pending (refilled when half are gone)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Cancel<Q, 0>(s); }, ops_iterations),
    make_case(
        "fire",
        "N scheduled over [1 ms, 60 s], half cancelled, then 1 ms steps through 60 s (W3); "
        "cost per fired timer",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Fire<Q>(s); }, fire_iterations),
    make_case(
        "churn", "cancel a random pending timer and schedule a new one (idle-timeout reset)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Churn<Q, 0>(s); }, ops_iterations),
    make_case(
        "hot_pair", "schedule a timer and cancel it at once (request answered in time)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_HotPair<Q>(s); }, ops_iterations),
    make_case(
        "cancel_prefetched",
        "cancel, with prefetch() of the timer 8 cancels ahead (a loop over known timers)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Cancel<Q, kPrefetchAhead>(s); }, ops_iterations,
        kPrefetchSizes),
    make_case(
        "churn_prefetched", "churn, with prefetch() of the victim 8 pairs ahead (a loop over known timers)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Churn<Q, kPrefetchAhead>(s); }, ops_iterations,
        kPrefetchSizes),
    make_case_without_ref(
        "periodic",
        "N periodic timers (periods: see workload) advanced in 1-tick steps; "
        "cost per run (wheel: schedule_every; heap: each run schedules the next)",
        []<class Q>(On<Q>, benchmark::State& s) { BM_Periodic<Q>(s); }, per_timer_iterations, kPeriodicSizes),
};

void register_all() {
  std::string names;
  for (const Case& c : kCases) {
    add_case(names, c.name, c.description);
    for (const auto& [queue, fn] :
         {std::pair{Queue<tickwheel::Wheel>::kName, c.wheel}, std::pair{Queue<HeapTimerQueue>::kName, c.heap},
          std::pair{Queue<ReferenceWheel>::kName, c.ref}}) {
      if (fn == nullptr) continue;
      for (const std::int64_t n : c.sizes) {
        benchmark::RegisterBenchmark((std::string(c.name) + "/" + std::string(queue)).c_str(), fn)
            ->Arg(n)
            ->Iterations(c.iterations(n))
            ->Unit(benchmark::kNanosecond);
      }
    }
  }
  benchmark::AddCustomContext("cases", names);
  const auto text = [](auto v) { return std::to_string(v); };
  benchmark::AddCustomContext(
      "workload", "deadlines uniform over [" + text(kMinDelay.count()) + ", " + text(kMaxDelay.count()) +
                      "] ns, tick " + text(kTick.count()) + " ns, seed " + text(kSeed) +
                      "; periodic: periods uniform over [" + text(kPeriodMin) + ", " + text(kPeriodMax) +
                      "] ticks, " + text(kPeriodicSpan) + " ticks per iteration");
  add_build_context();
}

// This binary's own flags, taken out of argv before Google Benchmark sees it.
struct Flags {
  int cpu = -1;          // --tickwheel_cpu=K: pin the process to CPU K
  bool thp_off = false;  // --tickwheel_thp=off: no transparent huge pages for this process
  int tails_runs = 0;    // --tickwheel_tails[=R]: the per-call tail mode instead, R runs (3)
};

bool parse_flags(int& argc, char** argv, Flags& flags) {
  constexpr std::string_view kCpu = "--tickwheel_cpu=";
  constexpr std::string_view kThp = "--tickwheel_thp=";
  constexpr std::string_view kTails = "--tickwheel_tails";
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with(kCpu)) {
      flags.cpu = std::atoi(argv[i] + kCpu.size());
    } else if (arg.starts_with(kThp)) {
      const std::string_view value = arg.substr(kThp.size());
      if (value != "on" && value != "off") {
        std::fprintf(stderr, "tickwheel-bench: --tickwheel_thp takes on or off, got %s\n",
                     argv[i] + kThp.size());
        return false;
      }
      flags.thp_off = value == "off";
    } else if (arg == kTails) {
      flags.tails_runs = 3;
    } else if (arg.starts_with(kTails) && arg[kTails.size()] == '=') {
      flags.tails_runs = std::atoi(argv[i] + kTails.size() + 1);
      if (flags.tails_runs < 1) {
        std::fprintf(stderr, "tickwheel-bench: --tickwheel_tails=R needs R >= 1, got %s\n", argv[i]);
        return false;
      }
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  return true;
}

// Applies --tickwheel_cpu and --tickwheel_thp to this process.
bool apply(const Flags& flags) {
  if (flags.cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(flags.cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::fprintf(stderr, "tickwheel-bench: cannot pin to CPU %d: %s\n", flags.cpu, std::strerror(errno));
      return false;
    }
    benchmark::AddCustomContext("pinned_cpu", std::to_string(flags.cpu));
  }
  // The library advises its large blocks for transparent huge pages; turning THP off for the
  // process is how a deployment opts out, and how --tickwheel_thp=off measures without huge pages.
  if (flags.thp_off && ::prctl(PR_SET_THP_DISABLE, 1UL, 0UL, 0UL, 0UL) != 0) {
    std::fprintf(stderr, "tickwheel-bench: PR_SET_THP_DISABLE refused: %s\n", std::strerror(errno));
    return false;
  }
  benchmark::AddCustomContext("thp", flags.thp_off ? "off (PR_SET_THP_DISABLE)" : "as the system sets it");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!parse_flags(argc, argv, flags) || !apply(flags)) return 1;
  if (flags.tails_runs != 0) return tickwheel_bench::run_tails(flags.tails_runs, flags.thp_off);
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
