// bench/tails.cpp — tickwheel-bench --tickwheel_tails[=R]: the worst single call, not the average.
//
// Google Benchmark reports time per iteration averaged over many; a latency engineer asks what one
// call can cost. This mode times every call on its own and reports percentiles. It is a mode of
// tickwheel-bench rather than a Google Benchmark case because that model has no per-call samples.
//
// Stopwatch: the TSC, read as lfence; rdtsc; lfence before the call and rdtscp; lfence after it, so
// the call is neither started before the first read nor overlapped with the second. Its rate is
// calibrated against steady_clock over 200 ms at start-up, and its own overhead (the median of 1M
// empty readings, printed) is subtracted from every sample. The fences keep a call from overlapping
// its neighbours, so a sample is the latency of one isolated call, above the throughput average the
// Google Benchmark table reports.
//
// One run, for each N in {10k, 1M} and each of the wheel, the wheel with a reserve of N, the heap
// and the heap with a reserve of N (interleaved, so a slow spell of the machine falls on all four;
// then the platform row, below):
//   schedule (fresh)   N schedules into a queue just built: W1 (docs/benchmarks.md), memory
//                      faults included unless reserved;
//   schedule (steady)  65,536 schedules with N to N + 1,024 pending, in blocks of 1,024 cancelled
//                      untimed, after one such block untimed (so the pool has grown to its peak);
//   cancel             a random half of the N, in random order (the rest stay for the next phase);
//   advance            W3's stepping: 60,000 advance() calls, 1 ms apart, which fire the other half.
// Deadlines are uniform over [1 ms, 60 s], the same for all four queues, from fixed seeds. Each
// percentile printed is the median over the runs of that percentile within a run; the last two
// columns are the median counts of minor page faults and of involuntary context switches
// (getrusage, this thread) during the timed phase: a phase that was preempted has its max, and
// perhaps its p99.99, set by the scheduler, not by the queue.
//
// What the platform adds. After the four queues, each run times a fifth row, "platform", per phase
// and N: as many samples as the wheel's phase took (the wheel without a reserve, this run), each a
// spin on the TSC as long as that phase's mean call, so that the row lasts as long as the wheel's
// phase and meets as many of the machine's interruptions. It touches no queue and no memory; each
// sample is reported as its excess over the row's median sample (so its p50 is 0): what the machine
// alone added to a call, from interrupts, the hypervisor taking the vCPU away, SMIs. A queue's
// percentile near the platform's is the platform's, not the queue's. (It is a floor: an interrupt
// costs a memory-bound phase more, as its handler and the phase evict each other's cache lines.)
#include "tails.hpp"

#include <sys/resource.h>
#include <x86intrin.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "common.hpp"
#include "queues.hpp"

namespace tickwheel_bench {
namespace {

constexpr std::array<std::size_t, 2> kTailSizes = {10'000, 1'000'000};
constexpr std::size_t kSteadyBlock = 1024;
constexpr std::size_t kSteadySamples = 64 * kSteadyBlock;
constexpr std::int64_t kSteps = kMaxDelay / kTick;  // W3: 1 ms steps through 60 s
constexpr std::size_t kOverheadSamples = std::size_t{1} << 20;

std::uint64_t tsc_before() noexcept {
  _mm_lfence();
  const std::uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
}

std::uint64_t tsc_after() noexcept {
  unsigned aux = 0;
  const std::uint64_t t = __rdtscp(&aux);
  _mm_lfence();
  return t;
}

// TSC ticks per nanosecond, against steady_clock over `span` of spinning.
double calibrate(std::chrono::milliseconds span) {
  using Clock = std::chrono::steady_clock;
  const auto c0 = Clock::now();
  const std::uint64_t t0 = __rdtsc();
  while (Clock::now() - c0 < span) {
  }
  const auto c1 = Clock::now();
  const std::uint64_t t1 = __rdtsc();
  return static_cast<double>(t1 - t0) / static_cast<double>(std::chrono::nanoseconds(c1 - c0).count());
}

// The TSC's step as this machine shows it: the most common nonzero difference between back-to-back
// reads (1 on bare metal; a virtual machine may advance it in larger steps, which then bound the
// resolution of every sample).
std::uint64_t tsc_step() {
  std::array<std::uint32_t, 256> seen{};
  std::uint64_t prev = __rdtsc();
  for (int i = 0; i < 100'000; ++i) {
    const std::uint64_t t = __rdtsc();
    if (t != prev && t - prev < seen.size()) ++seen[t - prev];
    prev = t;
  }
  return static_cast<std::uint64_t>(std::max_element(seen.begin(), seen.end()) - seen.begin());
}

// What the kernel did to this thread so far: minor page faults, and involuntary context switches
// (preemptions: on a shared machine, what its worst samples are usually made of).
struct Kernel {
  std::uint64_t faults = 0;
  std::uint64_t preempted = 0;
  static Kernel now() {
    rusage usage{};
    ::getrusage(RUSAGE_THREAD, &usage);
    return {static_cast<std::uint64_t>(usage.ru_minflt), static_cast<std::uint64_t>(usage.ru_nivcsw)};
  }
  Kernel operator-(const Kernel& o) const { return {faults - o.faults, preempted - o.preempted}; }
  Kernel& operator+=(const Kernel& o) {
    faults += o.faults;
    preempted += o.preempted;
    return *this;
  }
};

// What one phase of one run measured, in ns (overhead subtracted).
struct Tail {
  double p50 = 0, p99 = 0, p999 = 0, p9999 = 0, max = 0;
  double mean = 0;  // ns per call, overhead subtracted
  double faults = 0, preempted = 0;
  std::size_t samples = 0;
};

// The stopwatch's state: rate, overhead, and the sample buffer (sized and touched once, so that
// recording a sample never faults).
struct Stopwatch {
  double ticks_per_ns = 1;
  std::uint64_t overhead = 0;  // median ticks of an empty reading
  std::vector<std::uint64_t> ticks;

  // Times op(i) for i in [0, count), each call on its own, into ticks[offset + i].
  template <class Op>
  void time_each(std::size_t count, Op&& op, std::size_t offset = 0) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint64_t t0 = tsc_before();
      op(i);
      const std::uint64_t t1 = tsc_after();
      ticks[offset + i] = t1 - t0;
    }
  }

  // Nearest-rank percentiles and the mean of the first `count` samples, less the overhead and
  // `base` more ticks (the platform row's median), in ns.
  Tail summarise(std::size_t count, Kernel kernel, std::uint64_t base = 0) {
    const auto first = ticks.begin();
    const auto last = first + static_cast<std::ptrdiff_t>(count);
    const double sum = std::accumulate(first, last, 0.0);
    std::sort(first, last);
    const auto at = [&](double q) {
      const auto rank = static_cast<std::size_t>(q * static_cast<double>(count) + 0.999999);
      const std::uint64_t t = ticks[std::min(count, std::max<std::size_t>(rank, 1)) - 1];
      return static_cast<double>(t > overhead + base ? t - overhead - base : 0) / ticks_per_ns;
    };
    const double mean = sum / static_cast<double>(count) - static_cast<double>(overhead + base);
    return Tail{at(0.50),
                at(0.99),
                at(0.999),
                at(0.9999),
                at(1.0),
                std::max(mean, 0.0) / ticks_per_ns,
                static_cast<double>(kernel.faults),
                static_cast<double>(kernel.preempted),
                count};
  }
};

// The workload of one N, shared by the four queues: deadlines and the cancel order.
struct Workload {
  std::size_t n;
  std::vector<Nanos> deadlines;        // n for the fresh schedules, then kSteadySamples + a block
  std::vector<std::uint32_t> victims;  // the half cancelled, in order

  explicit Workload(std::size_t pending) : n(pending), deadlines(pending + kSteadySamples + kSteadyBlock) {
    Rng rng(kSeed ^ pending);
    for (auto& d : deadlines) d = rng.delay();
    std::vector<std::uint32_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = static_cast<std::uint32_t>(i);
    shuffle(order, rng);
    victims.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n / 2));
  }
};

enum Phase : std::size_t { kFresh, kSteady, kCancel, kAdvance, kPhases };
constexpr std::array<std::string_view, kPhases> kPhaseNames = {"schedule (fresh)", "schedule (steady)",
                                                               "cancel", "advance"};
using Tails = std::array<Tail, kPhases>;

// One run of the four phases on a fresh Q, reserved for w.n timers or not. False if a timer was lost.
template <class Q>
bool run_once(const Workload& w, bool reserve, Stopwatch& sw, const Tails& /*wheel*/, Tails& out) {
  std::uint64_t fired = 0;
  auto q = Queue<Q>::make(reserve ? w.n : 0);
  std::vector<IdOf<Q>> ids(w.n);  // touched before any timing
  std::vector<IdOf<Q>> block(kSteadyBlock);
  std::size_t failed = 0;

  Kernel k0 = Kernel::now();
  sw.time_each(w.n, [&](std::size_t i) { ids[i] = q->schedule_at(w.deadlines[i], Bump{&fired}); });
  out[kFresh] = sw.summarise(w.n, Kernel::now() - k0);
  for (const auto& id : ids) failed += id ? 0 : 1;

  // Steady: one block untimed (the pool grows to its peak), then timed blocks, each cancelled
  // untimed; the samples of all blocks go into one buffer.
  const Nanos* extra = w.deadlines.data() + w.n;
  for (std::size_t i = 0; i < kSteadyBlock; ++i) block[i] = q->schedule_at(extra[i], Bump{&fired});
  for (const auto& id : block) failed += q->cancel(id) ? 0 : 1;
  extra += kSteadyBlock;
  Kernel steady_kernel;
  for (std::size_t b = 0; b < kSteadySamples / kSteadyBlock; ++b) {
    k0 = Kernel::now();
    sw.time_each(
        kSteadyBlock, [&](std::size_t i) { block[i] = q->schedule_at(extra[i], Bump{&fired}); },
        b * kSteadyBlock);
    steady_kernel += Kernel::now() - k0;
    for (const auto& id : block) failed += q->cancel(id) ? 0 : 1;
    extra += kSteadyBlock;
  }
  out[kSteady] = sw.summarise(kSteadySamples, steady_kernel);

  std::size_t cancelled = 0;
  k0 = Kernel::now();
  sw.time_each(w.victims.size(), [&](std::size_t i) { cancelled += q->cancel(ids[w.victims[i]]) ? 1 : 0; });
  out[kCancel] = sw.summarise(w.victims.size(), Kernel::now() - k0);
  failed += w.victims.size() - cancelled;

  Nanos now{0};
  k0 = Kernel::now();
  sw.time_each(static_cast<std::size_t>(kSteps), [&](std::size_t) {
    now += kTick;
    q->advance(now);
  });
  out[kAdvance] = sw.summarise(static_cast<std::size_t>(kSteps), Kernel::now() - k0);
  if (fired != w.n - w.victims.size() || q->pending_count() != 0) ++failed;
  return failed == 0;
}

// Spins until `ticks` TSC ticks have passed since it began: a call of a known length that does no
// work and touches no memory.
void spin(std::uint64_t ticks) noexcept {
  const std::uint64_t t0 = __rdtsc();
  while (__rdtsc() - t0 < ticks) {
  }
}

// The platform row (see the top of the file): for each phase, as many samples as the wheel's phase
// (`wheel`, measured just before in this run) took, each a spin of its mean call, reported as the
// excess over the median sample.
bool run_platform(const Workload& /*w*/, bool /*reserve*/, Stopwatch& sw, const Tails& wheel, Tails& out) {
  for (std::size_t p = 0; p < kPhases; ++p) {
    const std::size_t count = wheel[p].samples;
    const auto length = static_cast<std::uint64_t>(wheel[p].mean * sw.ticks_per_ns);
    const Kernel k0 = Kernel::now();
    sw.time_each(count, [&](std::size_t) { spin(length); });
    const Kernel kernel = Kernel::now() - k0;
    const auto middle = sw.ticks.begin() + static_cast<std::ptrdiff_t>(count / 2);
    std::nth_element(sw.ticks.begin(), middle, sw.ticks.begin() + static_cast<std::ptrdiff_t>(count));
    out[p] = sw.summarise(count, kernel, *middle > sw.overhead ? *middle - sw.overhead : 0);
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string fmt(double ns) {
  std::array<char, 32> buf{};
  if (ns < 1000) {
    std::snprintf(buf.data(), buf.size(), "%.0f ns", ns);
  } else if (ns < 1e6) {
    std::snprintf(buf.data(), buf.size(), "%.1f us", ns / 1e3);
  } else {
    std::snprintf(buf.data(), buf.size(), "%.2f ms", ns / 1e6);
  }
  return buf.data();
}

struct Config {
  std::string_view queue;
  bool reserve;
  std::string_view reserve_column;
  // Runs one config's phases into the last argument; the one before is the wheel's (config 0) from
  // this run, which only the platform row reads.
  bool (*run)(const Workload&, bool, Stopwatch&, const Tails&, Tails&);
};
constexpr std::array<Config, 5> kConfigs = {
    Config{"wheel", false, "none", &run_once<tickwheel::Wheel>},
    Config{"wheel", true, "N", &run_once<tickwheel::Wheel>},
    Config{"heap", false, "none", &run_once<HeapTimerQueue>},
    Config{"heap", true, "N", &run_once<HeapTimerQueue>},
    Config{"platform", false, "-", &run_platform},
};

}  // namespace

int run_tails(int runs, bool thp_off) {
  Stopwatch sw;
  sw.ticks_per_ns = calibrate(std::chrono::milliseconds(200));
  sw.ticks.assign(std::max(kTailSizes.back(), kOverheadSamples), 0);
  sw.time_each(kOverheadSamples, [](std::size_t) {});
  std::sort(sw.ticks.begin(), sw.ticks.begin() + static_cast<std::ptrdiff_t>(kOverheadSamples));
  sw.overhead = sw.ticks[kOverheadSamples / 2];
  const double overhead_p99 = static_cast<double>(sw.ticks[kOverheadSamples * 99 / 100]) / sw.ticks_per_ns;
  const double resolution = static_cast<double>(tsc_step()) / sw.ticks_per_ns;

  // results[size][config][phase][run]
  std::vector<std::vector<std::array<std::vector<Tail>, kPhases>>> results(
      kTailSizes.size(), std::vector<std::array<std::vector<Tail>, kPhases>>(kConfigs.size()));
  std::vector<Workload> workloads;
  for (const std::size_t n : kTailSizes) workloads.emplace_back(n);
  bool ok = true;
  for (int r = 0; r < runs; ++r) {
    for (std::size_t s = 0; s < kTailSizes.size(); ++s) {
      Tails wheel;
      for (std::size_t c = 0; c < kConfigs.size(); ++c) {
        Tails t;
        if (!kConfigs[c].run(workloads[s], kConfigs[c].reserve, sw, wheel, t)) {
          std::fprintf(stderr, "tickwheel-bench: %s lost a timer at N = %zu\n", kConfigs[c].queue.data(),
                       kTailSizes[s]);
          ok = false;
        }
        for (std::size_t p = 0; p < kPhases; ++p) results[s][c][p].push_back(t[p]);
        if (c == 0) wheel = t;
      }
    }
  }

  std::array<double, 3> load{};
  if (::getloadavg(load.data(), 1) != 1) load[0] = -1;
  std::printf(
      "tickwheel-bench --tickwheel_tails: ns per single call, median over %d runs of each percentile; "
      "TSC %.3f GHz (calibrated against steady_clock), read in steps of %.1f ns; stopwatch overhead %.1f ns "
      "median (subtracted), %.1f ns p99; THP %s; load average at the end %.2f\n\n",
      runs, sw.ticks_per_ns, resolution, static_cast<double>(sw.overhead) / sw.ticks_per_ns, overhead_p99,
      thp_off ? "off for this process" : "as the system sets it", load[0]);
  std::printf(
      "| operation | N | queue | reserve | calls | p50 | p99 | p99.9 | p99.99 | max | minor faults | "
      "preempted |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (std::size_t p = 0; p < kPhases; ++p) {
    for (std::size_t s = 0; s < kTailSizes.size(); ++s) {
      for (std::size_t c = 0; c < kConfigs.size(); ++c) {
        const std::vector<Tail>& v = results[s][c][p];
        const auto med = [&](double Tail::*field) {
          std::vector<double> xs;
          for (const Tail& t : v) xs.push_back(t.*field);
          return median(xs);
        };
        std::printf("| %s | %zu | %s | %s | %zu | %s | %s | %s | %s | %s | %.0f | %.0f |\n",
                    kPhaseNames[p].data(), kTailSizes[s], kConfigs[c].queue.data(),
                    kConfigs[c].reserve_column.data(), v.front().samples, fmt(med(&Tail::p50)).c_str(),
                    fmt(med(&Tail::p99)).c_str(), fmt(med(&Tail::p999)).c_str(),
                    fmt(med(&Tail::p9999)).c_str(), fmt(med(&Tail::max)).c_str(), med(&Tail::faults),
                    med(&Tail::preempted));
      }
    }
  }
  return ok ? 0 : 1;
}

}  // namespace tickwheel_bench
