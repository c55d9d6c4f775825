// bench/engine_bench.cpp — cross-thread schedule and cancel on the multicore tickwheel::Engine,
// beside the baseline a user would write by hand, and the executor hand-off beside the inline
// path, in one binary.
//
// The baseline ("heap"): heap_baseline.hpp's indexed binary heap behind a std::mutex, with one
// consumer thread that sleeps on a condition_variable until its next wake-up and fires what is
// due; a producer that hands it a deadline earlier than that wake-up notifies it. With S shards
// the baseline is S such lanes, each its own mutex, heap and consumer, and producer thread t uses
// lane t % S: the sharding a user would do by hand, so that "2 shards" means the same on both
// sides. (The consumer wakes at the next tick boundary while anything is pending, because
// HeapTimerQueue has no earliest-deadline accessor; with the population uniform over 60 s the
// earliest deadline is always less than one 1 ms tick away, about 17 timers per ms at 1M, so this
// is the same as sleeping until it, rounded to the tick as the engine rounds.)
//
// Every scenario is one function template run on both queues and registered by one loop, so the
// engine and the heap run the same workload: the same population, the same seeds, the same
// delays, the same operation order per producer. Names are <case>/<queue>/<shards> followed by
// Google Benchmark's /iterations:N/real_time/threads:T, e.g. schedule/engine/2/.../threads:2.
//
// Workload: delays uniform over [1 ms, 60 s] (each producer cycles through its own 4096 delays,
// drawn once from a fixed seed), a 1 ms tick, the engine's default `sleep` wait strategy,
// --tickwheel_pending (default 1,000,000) timers pending in total, each producer owning an equal
// share that it scheduled itself with the call it is measured on. A small fraction of the
// population fires while a run lasts (1M timers over 60 s is about 17 per ms); the `fired`
// counter says how many, and a cancel that lost to a fire is not an error.
//
// Timing. Multi-threaded cases are measured in real time (UseRealTime): CPU time leaves out a
// producer blocked on the baseline's mutex, and the engine's work on its worker threads. Google
// Benchmark divides the threads' average wall time by the iterations of all threads, so with T
// producers "ns per op" is the inverse of the aggregate rate, and one thread's own cost per op is
// T times it. items_per_second is the aggregate rate. Setup (the prefill, a refill, a burst of
// cancels that keeps the population stable) runs with timing paused, the producers meeting at a
// barrier and thread 0 then waiting until the queue has settled: every hand-off taken into a
// wheel, every cancel that returned true completed by its worker, every fire's callback started,
// by the queue's own counters. A timed section so starts at the nominal population, no backlog.
//
// Counters (thread 0 sets them after the run, once the queue has settled): pending (the queue's
// own count at the end: stats().pending, the heaps' sizes), fired (callbacks it ran during the
// run), producer_shards (distinct shards the producers' timers went to); engine only, from
// stats() over the whole run, prefill included: transfer_cap_hits, passes, wakeups, and
// workers_bound (shards whose worker is pinned). pending_expected appears only when pending is
// not scheduled - cancelled - fired as the producers counted them: the queue's count is wrong.
// throughput only, from the first timed pair until the queue has absorbed the last: producer_cpu_ns
// and worker_cpu_ns, the CPU time per pair of the producer threads and of the threads the queue
// started (the engine's workers, the heap lanes' consumers; /proc/self/task/<tid>/schedstat), so
// that the work a hand-off moves onto the worker is counted beside what the producer saves.
//
// Keeping the optimiser and ourselves honest: every handle a schedule returns is kept and later
// cancelled or counted, every cancel result is counted, every callback increments a counter of
// its producer, and after the run: no schedule failed, every cancel that returned false is matched
// by a fire of that producer's timers, and the queue settled (a lost hand-off or cancel never
// does). A failure fails the benchmark (SkipWithError) rather than report a figure for work that
// did not happen; a wrong pending count is reported (pending_expected), as the work did happen.
//
// The executor cases (handoff, handoff_periodic) measure the cost per fired timer of handing
// callbacks to an executor (EngineOptions::executor), beside the inline path (no executor) as
// their baseline: a caller-driven engine (Threads::manual, one shard, a driven clock) polled by
// the benchmark's own thread, M timers due at once. Names are <case>/<executor>/<M> followed by
// /iterations:N/real_time, executor `inline` or `pool` (a ThreadPoolExecutor of one thread,
// pinned to another CPU than the polling thread), e.g. handoff/pool/1000/...; bench_table.py
// pairs the two sides. With the pool the time runs until every callback has run and a poll has
// taken every node back (Handoff::tick). Counters: ops_per_iter (M, the fired timers per
// iteration: ns per timer = time / it), fired and rearmed (the engine's stats()). Checked after
// the run: every poll's count, the callbacks' count and the engine's equal iterations x M, no
// schedule failed, nothing ran early or was left pending, every periodic timer cancels.
// --tickwheel_shards, _producers, _pending and _wait do not apply to them.
//
// Threads are pinned (rigtorp's habit): producers take the CPUs of --tickwheel_cpus from the
// front, shard workers and heap consumers from the back, and producer t's home is shard (lane)
// t % S. On two CPUs a lone producer and a lone worker never share one, and with two of each
// every hand-off crosses cores (producer 0 on CPU 0 feeds shard 0 on CPU 1, and producer 1 on
// CPU 1 feeds shard 1 on CPU 0); each core then also runs the other pair's worker, which is what
// bounds scaling on a two-core machine. throughput_together instead pins shard s's worker to
// producer s's CPU, so each core runs one producer and the worker of its own shard. Extra flags,
// read before Google Benchmark's own:
//   --tickwheel_cpus=LIST     comma-separated CPU numbers to use (default: the CPUs this process
//                             may run on); --tickwheel_cpus=none pins nothing (pin_workers = false)
//   --tickwheel_wait=W        the engine's wait strategy: sleep (default), spin or hybrid
//   --tickwheel_pending=N     timers pending in total (default 1000000)
//   --tickwheel_shards=LIST   shard counts to run (default 1,2), e.g. 1,2,4,8,16 for a curve
//   --tickwheel_producers=LIST  producer thread counts (default 1,2)
#include <benchmark/benchmark.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "common.hpp"
#include "heap_baseline.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel_bench {
void register_mix(std::string& cases);  // mix_bench.cpp: the owner/other-thread mixes
}  // namespace tickwheel_bench

namespace {

using Nanos = std::chrono::nanoseconds;
using Clock = std::chrono::steady_clock;
using tickwheel_bench::add_build_context;
using tickwheel_bench::add_case;
using tickwheel_bench::HeapTimerQueue;
using tickwheel_bench::kMaxDelay;
using tickwheel_bench::kMinDelay;
using tickwheel_bench::kSeed;
using tickwheel_bench::kTick;
using tickwheel_bench::On;
using tickwheel_bench::Rng;
using tickwheel_bench::run_on;
using tickwheel_bench::shuffle;

constexpr std::size_t kBlock = 4096;                           // schedules between two cancel bursts
constexpr std::int64_t kOpsPerThread = std::int64_t{1} << 20;  // iterations per producer
constexpr auto kSettleTimeout = std::chrono::seconds(10);
static_assert((kBlock & (kBlock - 1)) == 0 && kOpsPerThread % kBlock == 0);

// Command-line configuration, set once in main() before any benchmark runs.
struct Config {
  std::vector<unsigned> cpus;  // empty: pin nothing
  cpu_set_t startup_mask{};    // the affinity the process started with
  tickwheel::WaitStrategy wait = tickwheel::WaitStrategy::sleep;
  std::size_t pending = 1'000'000;
  std::vector<unsigned> shards{1, 2};     // shard (lane) counts to run
  std::vector<unsigned> producers{1, 2};  // producer thread counts
};
Config g_config;

Nanos now_ns() noexcept { return Clock::now().time_since_epoch(); }

// Pins the calling thread to `cpu`, or gives it back the process's startup mask for cpu < 0.
void pin_self(int cpu) noexcept {
  if (g_config.cpus.empty()) return;
  cpu_set_t set = g_config.startup_mask;
  if (cpu >= 0) {
    CPU_ZERO(&set);
    CPU_SET(static_cast<unsigned>(cpu), &set);
  }
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // best effort: a refusal only
}  // costs precision, never a result

int producer_cpu(std::size_t producer) {  // from the front of the list
  const auto& c = g_config.cpus;
  return c.empty() ? -1 : static_cast<int>(c[producer % c.size()]);
}
// Where a shard's worker (a lane's consumer) runs relative to the producers that feed it.
enum class Placement {
  apart,     // from the back of the list: on two CPUs, never on its producer's CPU
  together,  // on the CPU of its home producer (shard s is producer s's home)
};
int worker_cpu(std::size_t shard, Placement placement) {
  const auto& c = g_config.cpus;
  if (c.empty()) return -1;
  if (placement == Placement::together) return producer_cpu(shard);
  return static_cast<int>(c[c.size() - 1 - shard % c.size()]);
}

// The callback every timer carries: 8 bytes; counts the fires of one producer's timers (of one
// executor case's, in those cases).
struct Fire {
  std::atomic<std::uint64_t>* fired;
  void operator()() const noexcept { fired->fetch_add(1, std::memory_order_relaxed); }
};

// ---- CPU time: a thread's own, and that of the threads a queue starts. ----

// The calling thread's CPU time.
std::uint64_t own_cpu_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000U + static_cast<std::uint64_t>(ts.tv_nsec);
}

std::set<std::string> thread_ids() {
  std::set<std::string> ids;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task", ec)) {
    ids.insert(entry.path().filename().string());
  }
  return ids;
}

// The threads that appeared in this process between construction and seal(): those a queue's
// constructor started, the producers (Google Benchmark's threads) being there before. Their CPU
// time comes from /proc/self/task/<tid>/schedstat (its first field, ns on a CPU), which is
// current for a thread that is not running; cpu_ns() is read once the queue has settled.
class StartedThreads {
 public:
  StartedThreads() : before_(thread_ids()) {}
  void seal() {
    for (const std::string& id : thread_ids()) {
      if (!before_.contains(id)) tids_.push_back(id);
    }
    before_.clear();
  }
  // Their CPU time so far, or nullopt if a thread's could not be read (no schedstat, or a thread
  // that has exited).
  std::optional<std::uint64_t> cpu_ns() const {
    std::uint64_t sum = 0;
    for (const std::string& id : tids_) {
      std::ifstream in("/proc/self/task/" + id + "/schedstat");
      std::uint64_t ns = 0;
      if (!(in >> ns)) return std::nullopt;
      sum += ns;
    }
    return sum;
  }

 private:
  std::set<std::string> before_;
  std::vector<std::string> tids_;
};

// What a queue says about itself.
struct Snapshot {
  std::uint64_t pending = 0;    // its own count of pending timers (stats().pending; heap sizes)
  std::uint64_t queued = 0;     // handed over, not yet in a wheel (the engine's hand-off queues)
  std::uint64_t cancelled = 0;  // cancels it has completed (the engine: its workers retired)
  std::uint64_t fired = 0;      // callbacks it has started
};

// ---- The engine. ----

class EngineQueue {
 public:
  static constexpr std::string_view kName = "engine";
  using Handle = tickwheel::Timer;

  EngineQueue(std::size_t shards, Placement placement) : engine_(options(shards, placement)) {
    engine_.start();
  }

  // `producer` is unused: schedule_after keeps each thread on the shard it was assigned on its
  // first schedule (round robin), which is what is measured.
  Handle schedule(std::size_t /*producer*/, Nanos delay, Fire fn) noexcept {
    return engine_.schedule_after(delay, fn);
  }
  static bool cancel(Handle& h) noexcept { return h.cancel(); }
  static std::size_t lane_of(const Handle& h) noexcept { return h.shard(); }
  static std::string_view failure(const Handle& h) noexcept { return to_string(h.status()); }

  Snapshot snapshot() const {
    const tickwheel::EngineStats s = engine_.stats();
    return {s.pending, s.queue_depth, s.cancelled, s.fired};
  }

  void report(benchmark::State& state) const {
    const tickwheel::EngineStats s = engine_.stats();
    state.counters["transfer_cap_hits"] = static_cast<double>(s.transfer_cap_hits);
    state.counters["passes"] = static_cast<double>(s.passes);
    state.counters["wakeups"] = static_cast<double>(s.wakeups);
    state.counters["workers_bound"] = static_cast<double>(std::count_if(
        s.shards.begin(), s.shards.end(), [](const tickwheel::ShardStats& sh) { return sh.bound_cpu >= 0; }));
  }

 private:
  static tickwheel::EngineOptions options(std::size_t shards, Placement placement) {
    tickwheel::EngineOptions o;
    o.shards = shards;
    o.tick = kTick;
    o.wait = g_config.wait;
    o.pin_workers = !g_config.cpus.empty();
    for (std::size_t s = 0; s < shards; ++s) {
      if (o.pin_workers) o.cpus.push_back(static_cast<unsigned>(worker_cpu(s, placement)));
    }
    o.log = [](std::string_view line) {  // once per process, not once per benchmark run
      static std::atomic<bool> said{false};
      if (!said.exchange(true)) {
        std::fprintf(stderr, "tickwheel-engine-bench: engine says: %.*s\n", static_cast<int>(line.size()),
                     line.data());
      }
    };
    return o;
  }

  tickwheel::Engine engine_;
};

// ---- The baseline: mutex-guarded heaps, one consumer thread each. ----

class HeapQueue {
 public:
  static constexpr std::string_view kName = "heap";
  struct Handle {
    std::uint32_t lane = 0;
    HeapTimerQueue::Handle id;
    explicit operator bool() const noexcept { return static_cast<bool>(id); }
  };

  HeapQueue(std::size_t lanes, Placement placement) {
    for (std::size_t l = 0; l < lanes; ++l) lanes_.push_back(std::make_unique<Lane>());
    for (std::size_t l = 0; l < lanes; ++l) {
      Lane& lane = *lanes_[l];
      lane.consumer = std::thread([&lane, cpu = worker_cpu(l, placement)] { consume(lane, cpu); });
    }
  }
  ~HeapQueue() {
    for (auto& lane : lanes_) {
      {
        const std::lock_guard lock(lane->mu);
        lane->stop = true;
      }
      lane->cv.notify_one();
      lane->consumer.join();
    }
  }
  HeapQueue(const HeapQueue&) = delete;
  HeapQueue& operator=(const HeapQueue&) = delete;

  // What a careful hand-written version does: read the clock outside the lock, insert under it,
  // notify (after unlocking) only when the new deadline is earlier than the consumer's wake-up.
  Handle schedule(std::size_t producer, Nanos delay, Fire fn) {
    const auto l = static_cast<std::uint32_t>(producer % lanes_.size());
    Lane& lane = *lanes_[l];
    const Nanos deadline = now_ns() + delay;
    std::unique_lock lock(lane.mu);
    const HeapTimerQueue::Handle id = lane.heap.schedule_at(deadline, fn);
    const bool wake = deadline < lane.planned;
    lock.unlock();
    if (wake) lane.cv.notify_one();
    return Handle{l, id};
  }
  bool cancel(Handle& h) {  // never wakes the consumer, like the engine's cancel
    Lane& lane = *lanes_[h.lane];
    const std::lock_guard lock(lane.mu);
    const bool won = lane.heap.cancel(h.id);
    lane.cancelled += won;
    return won;
  }
  static std::size_t lane_of(const Handle& h) noexcept { return h.lane; }
  static std::string_view failure(const Handle&) noexcept { return "heap schedule failed"; }

  Snapshot snapshot() {
    Snapshot s;
    for (auto& lane : lanes_) {
      const std::lock_guard lock(lane->mu);
      s.pending += lane->heap.pending_count();
      s.cancelled += lane->cancelled;
      s.fired += lane->fired;
    }
    return s;
  }
  void report(benchmark::State& state) {
    std::uint64_t wakeups = 0;
    for (auto& lane : lanes_) {
      const std::lock_guard lock(lane->mu);
      wakeups += lane->wakeups;
    }
    state.counters["wakeups"] = static_cast<double>(wakeups);
  }

 private:
  static constexpr Nanos kNever = Nanos::max();

  struct alignas(64) Lane {  // one cache-aligned block per lane, so two lanes share no line
    std::mutex mu;
    std::condition_variable cv;
    HeapTimerQueue heap;          // guarded by mu
    Nanos planned = kNever;       // guarded by mu: when the consumer looks next (kNever: when told)
    std::uint64_t wakeups = 0;    // guarded by mu
    std::uint64_t cancelled = 0;  // guarded by mu
    std::uint64_t fired = 0;      // guarded by mu
    bool stop = false;            // guarded by mu
    std::thread consumer;
  };

  static void consume(Lane& lane, int cpu) {
    pin_self(cpu);
    std::unique_lock lock(lane.mu);
    while (!lane.stop) {
      const Nanos now = now_ns();
      lane.fired += lane.heap.advance(now);  // callbacks run under the lock; Fire is one add
      if (lane.heap.pending_count() == 0) {
        lane.planned = kNever;
        lane.cv.wait(lock);
      } else {
        lane.planned = (now / kTick + 1) * kTick;
        lane.cv.wait_until(lock, Clock::time_point(lane.planned));
      }
      ++lane.wakeups;
    }
  }

  std::vector<std::unique_ptr<Lane>> lanes_;
};

// ---- What the producers of one run share. ----

// One producer's tallies. Written by that producer only, read by thread 0 after a barrier; the
// fire counter is bumped by whichever thread runs the callbacks, so it has its own line.
struct alignas(64) Tally {
  std::atomic<std::uint64_t> fired{0};
  alignas(64) std::uint64_t scheduled = 0;
  std::uint64_t failed = 0;    // schedules that returned a false handle
  std::uint64_t attempts = 0;  // cancels tried
  std::uint64_t won = 0;       // cancels that returned true
  std::size_t lane = 0;        // the shard of the producer's first timer
  std::string_view failure;    // why the first failed schedule failed
  std::uint64_t cpu_ns = 0;    // throughput: the thread's CPU time over its timed pairs
};

struct FixtureBase {
  virtual ~FixtureBase() = default;
};

// The fixture of the run in progress. Thread 0 replaces it at the start of each run, when Google
// Benchmark has joined the previous run's threads, so no producer thread outlives its engine's
// fixture mid-run; the last one is destroyed at the end of main().
std::unique_ptr<FixtureBase> g_fixture;

template <class Q>
struct Fixture : FixtureBase {
  Fixture(std::size_t shards, std::size_t threads, Placement placement)
      : queue(shards, placement), meet(static_cast<std::ptrdiff_t>(threads)), tallies(threads) {
    started.seal();
  }

  std::uint64_t fired() const {
    std::uint64_t sum = 0;
    for (const Tally& t : tallies) sum += t.fired.load(std::memory_order_relaxed);
    return sum;
  }

  // Thread 0, with every producer stopped at a barrier: waits until the queue has taken in every
  // hand-off, completed every cancel that returned true, and started the callback of every
  // timer that fired (two polls in a row). Returns "" when it has, else what it saw last.
  std::string settle() {
    std::uint64_t won = 0;
    for (const Tally& t : tallies) won += t.won;
    const auto give_up = Clock::now() + kSettleTimeout;
    int agreed = 0;
    for (;;) {
      const Snapshot q = queue.snapshot();
      const std::uint64_t f = fired();
      if (q.queued == 0 && q.cancelled == won && q.fired == f) {
        if (++agreed == 2) return {};
      } else {
        agreed = 0;
      }
      if (Clock::now() > give_up) {
        return "the queue did not settle in " + std::to_string(kSettleTimeout.count()) + " s: queued " +
               std::to_string(q.queued) + ", cancelled " + std::to_string(q.cancelled) + " of " +
               std::to_string(won) + ", fired " + std::to_string(q.fired) + " (callbacks run " +
               std::to_string(f) + ")";
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }

  // Every producer comes here the same number of times; thread 0 settles the queue in between.
  // The leader also reads the queue's threads' CPU time then, while they have nothing to do.
  void rendezvous(bool leader) {
    meet.arrive_and_wait();
    if (leader && error.empty()) error = settle();
    if (leader) started_cpu = started.cpu_ns();
    meet.arrive_and_wait();
  }

  StartedThreads started;  // before the queue: it lists the threads there before the queue's
  std::optional<std::uint64_t> started_cpu;  // their CPU time at the last rendezvous
  Q queue;
  std::barrier<> meet;
  std::vector<Tally> tallies;
  std::string error;  // the first failure; thread 0 only. Kept here: it outlives the function
};

// One producer thread's view of a run.
template <class Q>
class Producer {
 public:
  using Handle = typename Q::Handle;

  // Thread 0 builds the run's fixture (unpinned, so threads it starts do not inherit its CPU);
  // every producer then pins itself.
  Producer(benchmark::State& state, Placement placement)
      : state_(state),
        index_(static_cast<std::size_t>(state.thread_index())),
        rng_(kSeed ^ (0x9E3779B97F4A7C15ull * (index_ + 1)) ^
             (static_cast<std::uint64_t>(state.range(0)) << 32) ^
             (static_cast<std::uint64_t>(state.threads()) << 40)),
        delays_(kBlock) {
    if (index_ == 0) {
      g_fixture.reset();
      pin_self(-1);
      g_fixture = std::make_unique<Fixture<Q>>(static_cast<std::size_t>(state.range(0)),
                                               static_cast<std::size_t>(state.threads()), placement);
    }
    pin_self(producer_cpu(index_));
    for (Nanos& d : delays_) d = rng_.delay();
  }

  // The fixture exists for every thread once the timed loop has begun (Google Benchmark's start
  // barrier orders thread 0's construction before it), so setup() runs in the first iteration:
  // with timing paused, the producers first use the queue one at a time in index order (the
  // engine gives each thread its home shard round robin on its first use, so producer t's is
  // shard t % S, as its heap lane is), then each runs `prefill`, then the queue settles.
  bool attached() const noexcept { return fx_ != nullptr; }
  template <class Fn>
  void setup(Fn&& prefill) {
    fx_ = static_cast<Fixture<Q>*>(g_fixture.get());
    tally_ = &fx_->tallies[index_];
    paused([&] {
      for (std::size_t turn = 0; turn < fx_->tallies.size(); ++turn) {
        if (turn == index_) {
          Handle first = schedule();
          cancel(first);
        }
        fx_->meet.arrive_and_wait();
      }
      prefill();
    });
  }

  // This producer's share of the population.
  std::size_t share() const noexcept { return g_config.pending / static_cast<std::size_t>(state_.threads()); }

  Handle schedule() {
    const Nanos delay = delays_[next_delay_];
    next_delay_ = (next_delay_ + 1) & (kBlock - 1);
    Handle h = fx_->queue.schedule(index_, delay, Fire{&tally_->fired});
    if (h) [[likely]] {
      if (tally_->scheduled++ == 0) tally_->lane = Q::lane_of(h);
    } else if (tally_->failed++ == 0) {
      tally_->failure = Q::failure(h);
    }
    return h;
  }
  bool cancel(Handle& h) {
    ++tally_->attempts;
    const bool won = fx_->queue.cancel(h);
    tally_->won += won;
    return won;
  }

  // Runs `work` with timing paused, then meets the other producers while the queue settles.
  template <class Fn>
  void paused(Fn&& work) {
    state_.PauseTiming();
    work();
    fx_->rendezvous(index_ == 0);
    state_.ResumeTiming();
  }
  // The same meeting with timing running: the end of a throughput run, whose time must include
  // the workers absorbing what the producers handed them.
  void meet_timed() {
    if (cpu_counted_) tally_->cpu_ns = own_cpu_ns() - cpu_start_;
    fx_->rendezvous(index_ == 0);
  }
  // throughput: CPU time is counted from here (after setup, the queue settled) to meet_timed(),
  // and finish() reports it per item.
  void count_cpu() {
    cpu_counted_ = true;
    cpu_start_ = own_cpu_ns();
    started_cpu_ = fx_->started_cpu;
  }

  Rng& rng() noexcept { return rng_; }

  // After the loop. Every thread counts its items; thread 0 settles the queue, checks the run's
  // accounting and sets the counters.
  void finish(std::int64_t items_per_iteration) {
    state_.SetItemsProcessed(state_.iterations() * items_per_iteration);
    if (index_ != 0 || fx_ == nullptr) return;
    Fixture<Q>& fx = *fx_;
    if (fx.error.empty()) fx.error = fx.settle();
    std::set<std::size_t> lanes;
    std::uint64_t live = 0;
    for (std::size_t t = 0; t < fx.tallies.size(); ++t) {
      const Tally& tally = fx.tallies[t];
      live += tally.scheduled - tally.won;
      lanes.insert(tally.lane);
      if (tally.failed != 0 && fx.error.empty()) {
        fx.error = "producer " + std::to_string(t) + ": " + std::to_string(tally.failed) +
                   " schedules failed (" + std::string(tally.failure) + ")";
      }
      if (tally.attempts - tally.won > tally.fired.load() && fx.error.empty()) {
        fx.error = "producer " + std::to_string(t) + ": " + std::to_string(tally.attempts - tally.won) +
                   " cancels returned false but only " + std::to_string(tally.fired.load()) +
                   " of its timers fired";
      }
    }
    if (!fx.error.empty()) {
      state_.SkipWithError(fx.error.c_str());
      return;
    }
    // The timers neither cancelled nor fired must all be pending. A queue that counts otherwise
    // is reported, not failed: the work measured did happen; the counter is what is wrong.
    const Snapshot end = fx.queue.snapshot();
    const std::uint64_t expected = live - fx.fired();
    state_.counters["pending"] = static_cast<double>(end.pending);
    if (end.pending != expected) {
      state_.counters["pending_expected"] = static_cast<double>(expected);
      static std::atomic<bool> said{false};
      if (!said.exchange(true)) {
        std::fprintf(stderr,
                     "tickwheel-engine-bench: %s: its pending count (%llu) is not scheduled - "
                     "cancelled - fired (%llu); see the pending_expected counter\n",
                     std::string(Q::kName).c_str(), static_cast<unsigned long long>(end.pending),
                     static_cast<unsigned long long>(expected));
      }
    }
    state_.counters["fired"] = static_cast<double>(end.fired);
    state_.counters["producer_shards"] = static_cast<double>(lanes.size());
    if (cpu_counted_) {
      const auto items = static_cast<double>(state_.iterations() * items_per_iteration * state_.threads());
      std::uint64_t producers = 0;
      for (const Tally& tally : fx.tallies) producers += tally.cpu_ns;
      state_.counters["producer_cpu_ns"] = static_cast<double>(producers) / items;
      if (started_cpu_ && fx.started_cpu) {
        state_.counters["worker_cpu_ns"] = static_cast<double>(*fx.started_cpu - *started_cpu_) / items;
      }
    }
    fx.queue.report(state_);
    state_.SetLabel(std::string(Q::kName));
  }

 private:
  benchmark::State& state_;
  std::size_t index_;
  Rng rng_;
  std::vector<Nanos> delays_;
  std::size_t next_delay_ = 0;
  Fixture<Q>* fx_ = nullptr;
  Tally* tally_ = nullptr;
  bool cpu_counted_ = false;
  std::uint64_t cpu_start_ = 0;
  std::optional<std::uint64_t> started_cpu_;  // the queue's threads' CPU time at count_cpu()
};

// ---- The scenarios. ----

// schedule: one cross-thread schedule_after onto an engine (or lanes) holding N pending. After
// every 4096 timed schedules each producer cancels them with timing paused and the queues settle,
// so the population stays in [N, N + 4096 x producers] and a timed block starts with no backlog.
// What the engine's worker later does with the hand-offs is not in this figure (see throughput).
template <class Q>
void BM_Schedule(benchmark::State& state) {
  Producer<Q> p(state, Placement::apart);
  std::vector<typename Q::Handle> block(kBlock);
  std::size_t i = 0;
  for (auto _ : state) {
    if (!p.attached()) [[unlikely]] {
      p.setup([&] {
        for (std::size_t j = p.share(); j != 0; --j) benchmark::DoNotOptimize(p.schedule());
      });
    }
    block[i] = p.schedule();
    if (++i == kBlock) {
      p.paused([&] {
        for (auto& h : block) p.cancel(h);
      });
      i = 0;
    }
  }
  p.finish(1);
}

// cancel: one cancel() of a pending timer the same thread scheduled, in random order from its
// share of N. When half its share is gone the producer schedules it again and reshuffles, with
// timing paused, and the queues settle; the population stays in (N/2, N].
template <class Q>
void BM_Cancel(benchmark::State& state) {
  Producer<Q> p(state, Placement::apart);
  std::vector<typename Q::Handle> ids;
  std::size_t half = 1;
  std::size_t k = 0;
  for (auto _ : state) {
    if (!p.attached()) [[unlikely]] {
      p.setup([&] {
        ids.resize(p.share());
        for (auto& h : ids) h = p.schedule();
        shuffle(ids, p.rng());
        half = std::max<std::size_t>(ids.size() / 2, 1);
      });
    }
    p.cancel(ids[k]);
    if (++k == half) {
      p.paused([&] {
        for (std::size_t j = 0; j < k; ++j) ids[j] = p.schedule();
        shuffle(ids, p.rng());
      });
      k = 0;
    }
  }
  p.finish(1);
}

// throughput: schedule+cancel pairs, the oldest of the producer's own timers cancelled and a new
// one scheduled in its place (its share of N stays pending, each timer cancelled about
// share/rate after it was scheduled, like a request or idle timeout that is reset). Nothing is
// paused, and the time includes the end of the run until the queues have absorbed every hand-off
// and cancel, so the figure is what the whole system sustains, workers included: one iteration
// is one pair. Run twice: with each shard's worker on another CPU than its producer (apart, as
// the other cases), and on its producer's CPU (together: the per-core deployment the engine is
// built for, where a core's threads use its own shard and the node lines stay in its caches).
template <class Q, Placement kPlacement>
void BM_Throughput(benchmark::State& state) {
  Producer<Q> p(state, kPlacement);
  std::vector<typename Q::Handle> ring;
  std::size_t j = 0;
  std::int64_t n = 0;
  for (auto _ : state) {
    if (!p.attached()) [[unlikely]] {
      p.setup([&] {
        ring.resize(std::max<std::size_t>(p.share(), 1));
        for (auto& h : ring) h = p.schedule();
      });
      p.count_cpu();
    }
    p.cancel(ring[j]);
    ring[j] = p.schedule();
    if (++j == ring.size()) j = 0;
    if (++n == state.max_iterations) p.meet_timed();
  }
  p.finish(1);
}

// ---- The executor hand-off: caller-driven, one shard, no baseline but the inline path. ----

// The caller-driven engines' clock (EngineOptions::clock): the thread that polls moves it, one
// tick at a time. Global because the option is a plain function pointer; never moved back, so
// one engine after another can share it.
std::atomic<std::int64_t> g_manual_ns{0};
Nanos manual_clock() noexcept { return Nanos(g_manual_ns.load(std::memory_order_relaxed)); }
Nanos manual_tick() noexcept {
  return Nanos(g_manual_ns.fetch_add(kTick.count(), std::memory_order_relaxed) + kTick.count());
}

// Where fired callbacks run: the two sides of each executor case.
enum class Run {
  inline_path,  // no executor: the poll runs each callback itself
  pool,         // a ThreadPoolExecutor of one thread
};
constexpr std::string_view name_of(Run r) { return r == Run::inline_path ? "inline" : "pool"; }

// Timers due at once in one poll (the benchmark's argument), and how many fire per case.
constexpr std::int64_t kDueCounts[] = {1'000, 100'000};
constexpr std::int64_t kFiresPerCase = std::int64_t{1} << 20;

// One caller-driven engine with one shard, polled by the benchmark's thread (pinned to the first
// CPU of --tickwheel_cpus), and for Run::pool a one-thread pool pinned where a shard's worker
// would be (worker_cpu(0, apart): another CPU than the polling thread's).
class Handoff {
 public:
  Handoff(benchmark::State& state, Run run)
      : state_(state), due_(static_cast<std::size_t>(state.range(0))), pool_(run == Run::pool) {
    // A single-threaded run: Google Benchmark has joined the last run's producers, so the engine
    // or heap lanes they left (worker and consumer threads with a million timers) can go, and do
    // not wake during this run.
    g_fixture.reset();
    pin_self(-1);  // the pool's thread does not inherit the polling thread's CPU
    tickwheel::EngineOptions o;
    o.shards = 1;
    o.tick = kTick;
    o.threads = tickwheel::Threads::manual;
    o.clock = &manual_clock;
    o.transfer_cap = due_;  // setup's one poll takes every hand-off into the wheel
    if (run == Run::pool) {
      tickwheel::ThreadPoolOptions p;
      p.threads = 1;
      p.pin = !g_config.cpus.empty();
      if (p.pin) p.cpus.push_back(static_cast<unsigned>(worker_cpu(0, Placement::apart)));
      o.executor = std::make_shared<tickwheel::ThreadPoolExecutor>(std::move(p));
    }
    engine_.emplace(std::move(o));
    engine_->start();
    pin_self(producer_cpu(0));
  }

  tickwheel::Engine& engine() noexcept { return *engine_; }
  std::size_t due() const noexcept { return due_; }
  Fire callback() noexcept { return Fire{&fired_}; }
  std::uint64_t fired() const noexcept { return fired_.load(std::memory_order_relaxed); }

  // Untimed: a poll at the present tick takes what was scheduled into the wheel; nothing is due
  // yet, so nothing may run.
  void transfer() { ran_early_ += engine_->poll(0, manual_clock()); }

  // Timed: moves the clock one tick and polls, firing the due() timers due. With the pool, then
  // waits until every callback handed over has run (counted by the callbacks) and every task has
  // given its node back (stats().executing == 0), and polls again, so the nodes handed back are
  // recycled (one-shot) or re-armed (periodic) within the time. False (the run failed) if the
  // pool does not finish within kSettleTimeout.
  bool tick() {
    const Nanos now = manual_tick();
    runs_ += due_;
    ran_ += engine_->poll(0, now);
    if (!pool_) return true;
    // Spins, never sleeps nor yields: the wait is timed, and a sleep or a yield would add the
    // scheduler's latency to it (the pool's thread is pinned to another CPU than this one, see
    // the constructor). It looks at the counter once per kLookEvery only, so that its reads do
    // not keep taking the counter's cache line from the pool's thread, which writes it once per
    // callback; stats(), which allocates, only once the counter is complete.
    const auto start = Clock::now();
    for (auto look = start;;) {
      const auto t = Clock::now();
      if (t < look) continue;
      if (fired() >= runs_ && engine_->stats().executing == 0) break;
      if (t - start > kSettleTimeout) {
        state_.SkipWithError("the pool did not run every handed-over callback in time");
        return false;
      }
      look = t + kLookEvery;
    }
    ran_ += engine_->poll(0, now);
    return true;
  }

  // After the loop, untimed: stops the engine (which waits for the pool's tasks) and checks that
  // no schedule failed, nothing ran early, the timed polls' count, the callbacks' count and the
  // engine's all equal iterations x due, `cancels_won` of the caller's `cancels` cancels of its
  // periodic timers returned true, stop() found nothing pending and no callback threw. Sets the
  // counters, or fails the run.
  void finish(std::size_t failed, std::size_t cancels_won, std::size_t cancels) {
    if (state_.error_occurred()) return;  // tick() said why
    const auto expected = static_cast<std::uint64_t>(state_.iterations()) * due_;
    const std::vector<tickwheel::Timer> left = engine_->stop();  // waits for the pool's tasks
    const tickwheel::EngineStats s = engine_->stats();
    std::string error;
    if (failed != 0) {
      error = std::to_string(failed) + " schedules failed";
    } else if (ran_early_ != 0) {
      error = std::to_string(ran_early_) + " callbacks ran before their tick";
    } else if (runs_ != expected || ran_ != expected || fired() != expected || s.fired != expected) {
      error = "polls ran " + std::to_string(ran_) + ", callbacks counted " + std::to_string(fired()) +
              ", engine fired " + std::to_string(s.fired) + "; expected " + std::to_string(expected);
    } else if (cancels_won != cancels) {
      error = std::to_string(cancels - cancels_won) + " periodic timers did not cancel";
    } else if (!left.empty() || s.callback_errors != 0) {
      error = std::to_string(left.size()) + " timers left pending, " + std::to_string(s.callback_errors) +
              " callback errors";
    }
    if (!error.empty()) {
      state_.SkipWithError(error.c_str());
      return;
    }
    state_.SetItemsProcessed(static_cast<std::int64_t>(expected));
    state_.counters["ops_per_iter"] = static_cast<double>(due_);
    state_.counters["fired"] = static_cast<double>(s.fired);
    state_.counters["rearmed"] = static_cast<double>(s.rearmed);
    state_.SetLabel(std::string(name_of(pool_ ? Run::pool : Run::inline_path)));
  }

 private:
  static constexpr auto kLookEvery = std::chrono::microseconds(1);

  benchmark::State& state_;
  std::size_t due_;
  bool pool_;
  std::optional<tickwheel::Engine> engine_;
  std::uint64_t runs_ = 0;     // the runs the ticks so far must have made
  std::size_t ran_ = 0;        // the timed polls' counts
  std::size_t ran_early_ = 0;  // the untimed polls' counts (must stay 0)
  // Bumped by the callbacks, on the pool's thread or ours: last, on a line of its own (the class
  // is 64-byte aligned), so that the pool's writes and the polling thread's use of the fields
  // above do not take one line from each other.
  alignas(64) std::atomic<std::uint64_t> fired_{0};
};

// handoff: M one-shot timers due at the same tick, fired by one poll(); real time per fired
// timer. Each iteration schedules them one tick ahead and takes them into the wheel with timing
// paused, then the timed part is Handoff::tick(): for the pool it lasts until every callback has
// run on the pool's thread and the next poll has recycled every node handed back. Inline, the
// same poll runs the callbacks and recycles the nodes itself: the difference is the hand-off.
template <Run kRun>
void BM_Handoff(benchmark::State& state) {
  Handoff h(state, kRun);
  tickwheel::Engine& e = h.engine();
  std::size_t failed = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (std::size_t i = 0; i < h.due(); ++i) failed += !e.schedule_after_on(0, kTick, h.callback());
    h.transfer();
    state.ResumeTiming();
    if (!h.tick()) break;
  }
  h.finish(failed, 0, 0);
}

// handoff_periodic: M periodic timers with a one-tick period (fixed rate), all due at every tick,
// fired by one poll() per tick; real time per run. Scheduled and taken into the wheel once,
// before the timed loop. Inline, the poll re-arms each timer in the wheel after its run; with the
// pool, each node comes back through the shard's returned queue and the second poll of
// Handoff::tick() re-arms it. After the loop every timer must cancel.
template <Run kRun>
void BM_HandoffPeriodic(benchmark::State& state) {
  Handoff h(state, kRun);
  tickwheel::Engine& e = h.engine();
  std::vector<tickwheel::Timer> timers(h.due());
  std::size_t failed = 0;
  for (auto& t : timers) failed += !(t = e.schedule_every_on(0, kTick, h.callback()));
  h.transfer();
  for (auto _ : state) {
    if (!h.tick()) break;
  }
  std::size_t won = 0;
  for (auto& t : timers) won += t.cancel();
  h.finish(failed, won, timers.size());
}

struct Case {
  std::string_view name;
  std::string_view description;
  void (*engine)(benchmark::State&);
  void (*heap)(benchmark::State&);
};

template <class Scenario>
constexpr Case make_case(std::string_view name, std::string_view description, Scenario) {
  return Case{name, description, &run_on<Scenario, EngineQueue>, &run_on<Scenario, HeapQueue>};
}

// The one table of scenarios: registration, names and the descriptions all come from it.
const Case kCases[] = {
    make_case("schedule",
              "producer-side cost of one cross-thread schedule_after onto N pending "
              "(cancelled in paused blocks of 4096)",
              []<class Q>(On<Q>, benchmark::State& s) { BM_Schedule<Q>(s); }),
    make_case("cancel",
              "producer-side cost of one cancel of a pending timer the thread scheduled, "
              "random order from its share of N",
              []<class Q>(On<Q>, benchmark::State& s) { BM_Cancel<Q>(s); }),
    make_case("throughput",
              "schedule+cancel pairs (cancel the producer's oldest timer, schedule a "
              "new one) with N pending, until the workers have absorbed them; one "
              "iteration is one pair; each shard's worker on another CPU than its "
              "producer",
              []<class Q>(On<Q>, benchmark::State& s) { BM_Throughput<Q, Placement::apart>(s); }),
    make_case("throughput_together",
              "as throughput, each shard's worker (lane's consumer) pinned "
              "to its producer's CPU: the per-core deployment",
              []<class Q>(On<Q>, benchmark::State& s) { BM_Throughput<Q, Placement::together>(s); }),
};

// ---- owned: a shard's owner calling straight into its wheel, beside a standalone Wheel ----

constexpr std::int64_t kOwnedPopulations[] = {10'000, 100'000, 1'000'000};
enum class OwnedOp : std::int64_t { schedule = 0, cancel = 1, reschedule = 2 };

// The Wheel and an owned caller-driven shard behind one interface, so both run the same loop.
struct OwnedWheel {
  static constexpr std::string_view kName = "wheel";
  tickwheel::Wheel w{tickwheel::WheelOptions{.tick = kTick}};
  using Handle = tickwheel::TimerId;
  Handle schedule(Nanos delay) noexcept {
    return w.schedule_after(delay, [] {});
  }
  bool cancel(Handle& h) noexcept { return w.cancel(h); }
  bool reschedule(Handle& h, Nanos delay) noexcept { return w.reschedule_after(h, delay); }
};
struct OwnedEngine {
  static constexpr std::string_view kName = "engine";
  tickwheel::Engine e{[] {
    tickwheel::EngineOptions o;
    o.shards = 1;
    o.tick = kTick;
    o.threads = tickwheel::Threads::manual;
    return o;
  }()};
  using Handle = tickwheel::Timer;
  OwnedEngine() { e.own_shard(0); }
  ~OwnedEngine() { e.release_shard(0); }
  OwnedEngine(const OwnedEngine&) = delete;
  OwnedEngine& operator=(const OwnedEngine&) = delete;
  Handle schedule(Nanos delay) noexcept {
    return e.schedule_after(delay, [] {});
  }
  static bool cancel(Handle& h) noexcept { return h.cancel(); }
  static bool reschedule(Handle& h, Nanos delay) noexcept { return h.reschedule_after(delay); }
};

// owned/<wheel|engine>/<op>/<N>: with N timers pending, op 0: one schedule_after (the block is
// cancelled with timing paused); 1: one cancel of a pending timer in random order (the cancelled
// half is scheduled again, paused); 2: one reschedule_after of a pending timer in random order to
// a new random delay. The owner's calls should cost what the Wheel's cost, within 20%.
template <class Q>
void BM_Owned(benchmark::State& state) {
  Q q;
  Rng rng(kSeed);
  const auto population = static_cast<std::size_t>(state.range(1));
  std::vector<typename Q::Handle> pending(population);
  for (auto& h : pending) h = q.schedule(rng.delay());
  const auto op = static_cast<OwnedOp>(state.range(0));
  std::vector<typename Q::Handle> block(kBlock);
  std::vector<std::size_t> order(population);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  shuffle(order, rng);
  std::size_t k = 0;
  std::uint64_t refused = 0;
  for (auto _ : state) {
    switch (op) {
      case OwnedOp::schedule:
        block[k] = q.schedule(rng.delay());
        if (++k == kBlock) {
          state.PauseTiming();
          for (auto& h : block) refused += q.cancel(h) ? 0 : 1;
          k = 0;
          state.ResumeTiming();
        }
        break;
      case OwnedOp::cancel:
        refused += q.cancel(pending[order[k]]) ? 0 : 1;
        if (++k == population / 2) {
          state.PauseTiming();
          for (std::size_t j = 0; j < k; ++j) pending[order[j]] = q.schedule(rng.delay());
          shuffle(order, rng);
          k = 0;
          state.ResumeTiming();
        }
        break;
      case OwnedOp::reschedule:
        refused += q.reschedule(pending[order[k]], rng.delay()) ? 0 : 1;
        if (++k == population) k = 0;
        break;
    }
  }
  if (refused != 0) state.SkipWithError("a cancel or reschedule of a pending timer returned false");
  state.SetLabel(std::string(Q::kName));
}

// ---- move: Timer::reschedule beside cancel + schedule, from a producer thread ----

enum class MoveOp : std::int64_t { reschedule = 0, cancel_schedule = 1 };
constexpr std::int64_t kMovePopulations[] = {1'000, 100'000, 1'000'000};

// move/<reschedule|cancel_schedule>/<N>: one producer (this thread, not the shard's) and one
// worker shard with N timers pending; each iteration moves one pending timer, in random order, to
// a new random delay: reschedule_after() on its handle (a record the worker applies), or what a
// user writes without it, cancel() then schedule_after() of the same callable kind, keeping the
// new handle. A timer that fired meanwhile (a few per run: 17 per ms at 1M) is scheduled again,
// in either case, and counted (refused). Producer-side cost; the worker absorbs the records, the
// cancels and the hand-offs on the other core (nudged once per 4096 posts, as always).
void BM_Move(benchmark::State& state) {
  const bool rescheduling = static_cast<MoveOp>(state.range(0)) == MoveOp::reschedule;
  const auto population = static_cast<std::size_t>(state.range(1));
  tickwheel::EngineOptions o;
  o.shards = 1;
  o.tick = kTick;
  o.pin_workers = false;
  tickwheel::Engine engine(o);
  std::atomic<std::uint64_t> fired{0};
  const auto fn = [&fired] { fired.fetch_add(1, std::memory_order_relaxed); };
  Rng rng(kSeed);
  std::vector<tickwheel::Timer> pending(population);
  for (auto& t : pending) t = engine.schedule_after_on(0, rng.delay(), fn);
  std::vector<std::size_t> order(population);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  shuffle(order, rng);
  std::size_t k = 0;
  std::uint64_t refused = 0;
  std::uint64_t failed = 0;
  for (auto _ : state) {
    tickwheel::Timer& t = pending[order[k]];
    const Nanos delay = rng.delay();
    if (rescheduling) {
      if (!t.reschedule_after(delay)) [[unlikely]] {
        ++refused;
        t = engine.schedule_after_on(0, delay, fn);
      }
    } else {
      refused += t.cancel() ? 0 : 1;
      t = engine.schedule_after_on(0, delay, fn);
    }
    failed += t ? 0 : 1;
    if (++k == population) k = 0;
  }
  state.counters["refused"] = static_cast<double>(refused);
  state.counters["fired"] = static_cast<double>(fired.load());
  (void)engine.stop(
      [](tickwheel::Timer timer) noexcept { (void)timer; });  // allocates nothing; the destructor frees them
  if (failed != 0) state.SkipWithError("a schedule failed");
  state.SetLabel(rescheduling ? "reschedule" : "cancel_schedule");
}

// The executor cases: each runs on both sides (Run), for each count of timers due at once.
struct ExecutorCase {
  std::string_view name;
  std::string_view description;
  void (*inline_path)(benchmark::State&);
  void (*pool)(benchmark::State&);
};

const ExecutorCase kExecutorCases[] = {
    {"handoff",
     "one poll() of a caller-driven engine firing M one-shot timers due at the same tick; time "
     "per fired timer; inline: the poll runs the callbacks; pool: a 1-thread pool runs them, "
     "timed until all have run and the next poll has recycled their nodes",
     &BM_Handoff<Run::inline_path>, &BM_Handoff<Run::pool>},
    {"handoff_periodic",
     "M periodic timers of one-tick period, all due at every tick, one poll() per tick; time per "
     "run; inline: the poll re-arms them; pool: a 1-thread pool runs them and a second poll "
     "re-arms them from the returned queue",
     &BM_HandoffPeriodic<Run::inline_path>, &BM_HandoffPeriodic<Run::pool>},
};

// What every case ran with: the queues, the workload, the CPUs, how time is counted, the build.
void add_run_context() {
  benchmark::AddCustomContext("queues",
                              std::string(EngineQueue::kName) + "," + std::string(HeapQueue::kName));
  benchmark::AddCustomContext("arg", "shards");
  const auto text = [](auto v) { return std::to_string(v); };
  std::string cpus;
  for (const unsigned c : g_config.cpus) {
    if (!cpus.empty()) cpus += ',';
    cpus += text(c);
  }
  const char* wait = g_config.wait == tickwheel::WaitStrategy::sleep  ? "sleep"
                     : g_config.wait == tickwheel::WaitStrategy::spin ? "spin"
                                                                      : "hybrid";
  benchmark::AddCustomContext("workload",
                              "N = " + text(g_config.pending) + " pending in total, delays uniform over [" +
                                  text(kMinDelay.count()) + ", " + text(kMaxDelay.count()) + "] ns, tick " +
                                  text(kTick.count()) + " ns, engine wait " + wait + ", seed " + text(kSeed));
  benchmark::AddCustomContext(
      "executor_workload",
      "M = the argument, timers due per poll; one shard, Threads::manual, driven clock, tick " +
          text(kTick.count()) + " ns; pool: ThreadPoolExecutor with 1 thread");
  benchmark::AddCustomContext("cpus", cpus.empty() ? "not pinned" : cpus);
  benchmark::AddCustomContext("time",
                              "real time; per iteration = the threads' average wall time "
                              "/ the iterations of all threads (aggregate)");
  add_build_context();
}

void register_all() {
  std::string names;
  for (const Case& c : kCases) {
    add_case(names, c.name, c.description);
    for (const auto& [queue, fn] :
         {std::pair{EngineQueue::kName, c.engine}, std::pair{HeapQueue::kName, c.heap}}) {
      for (const unsigned shards : g_config.shards) {
        auto* b = benchmark::RegisterBenchmark((std::string(c.name) + "/" + std::string(queue)).c_str(), fn);
        b->Arg(shards)->Iterations(kOpsPerThread)->UseRealTime()->Unit(benchmark::kNanosecond);
        for (const unsigned t : g_config.producers) b->Threads(static_cast<int>(t));
      }
    }
  }
  for (const ExecutorCase& c : kExecutorCases) {
    add_case(names, c.name, c.description);
    for (const auto& [run, fn] : {std::pair{Run::inline_path, c.inline_path}, std::pair{Run::pool, c.pool}}) {
      const std::string name = std::string(c.name) + "/" + std::string(name_of(run));
      for (const std::int64_t due : kDueCounts) {
        benchmark::RegisterBenchmark(name.c_str(), fn)
            ->Arg(due)
            ->Iterations(std::max<std::int64_t>(1, kFiresPerCase / due))
            ->UseRealTime()
            ->Unit(benchmark::kNanosecond);
      }
    }
  }
  add_case(names, "move",
           "producer-side cost of moving one pending timer to a new random delay from a thread other "
           "than its shard's, one shard with worker threads, N pending (second arg); first arg 0: "
           "Timer::reschedule_after, 1: cancel + schedule_after (a new handle)");
  for (const MoveOp op : {MoveOp::reschedule, MoveOp::cancel_schedule}) {
    const char* name = op == MoveOp::reschedule ? "move/reschedule" : "move/cancel_schedule";
    for (const std::int64_t n : kMovePopulations) {
      benchmark::RegisterBenchmark(name, &BM_Move)
          ->Args({static_cast<std::int64_t>(op), n})
          ->Iterations(kOpsPerThread)
          ->UseRealTime()
          ->Unit(benchmark::kNanosecond);
    }
  }
  tickwheel_bench::register_mix(names);
  add_case(names, "owned",
           "first arg 0: schedule_after, 1: cancel, 2: reschedule_after, from the thread that owns a "
           "caller-driven shard (straight into its wheel), beside the same calls on a standalone Wheel; "
           "second arg: timers pending");
  for (const auto& [queue, fn] : {std::pair{OwnedWheel::kName, &BM_Owned<OwnedWheel>},
                                  std::pair{OwnedEngine::kName, &BM_Owned<OwnedEngine>}}) {
    auto* b = benchmark::RegisterBenchmark(("owned/" + std::string(queue)).c_str(), fn);
    for (const OwnedOp op : {OwnedOp::schedule, OwnedOp::cancel, OwnedOp::reschedule}) {
      for (const std::int64_t n : kOwnedPopulations) b->Args({static_cast<std::int64_t>(op), n});
    }
    b->Iterations(kOpsPerThread)->Unit(benchmark::kNanosecond);
  }
  benchmark::AddCustomContext("cases", names);
  add_run_context();
}

// "1,2,4" -> {1, 2, 4}, each in [lo, hi]; false (with a message) on anything else.
bool parse_list(const char* flag, const char* text, unsigned lo, unsigned hi, std::vector<unsigned>& out) {
  out.clear();
  for (const char* s = text;;) {
    char* end = nullptr;
    const unsigned long v = std::strtoul(s, &end, 10);
    if (end == s || v < lo || v > hi || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "tickwheel-engine-bench: bad %s%s (a list of %u..%u)\n", flag, text, lo, hi);
      return false;
    }
    out.push_back(static_cast<unsigned>(v));
    if (*end == '\0') return true;
    s = end + 1;
  }
}

// Consumes the --tickwheel_* flags before Google Benchmark sees argv. False on a bad value.
bool parse_args(int& argc, char** argv) {
  if (sched_getaffinity(0, sizeof(g_config.startup_mask), &g_config.startup_mask) != 0) {
    CPU_ZERO(&g_config.startup_mask);
  }
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &g_config.startup_mask)) g_config.cpus.push_back(c);
  }
  const auto value = [](std::string_view arg, std::string_view flag) -> const char* {
    return arg.substr(0, flag.size()) == flag ? arg.data() + flag.size() : nullptr;
  };
  int out = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (const char* v = value(arg, "--tickwheel_cpus=")) {
      g_config.cpus.clear();
      if (std::string_view(v) == "none") continue;
      if (!parse_list("--tickwheel_cpus=", v, 0, CPU_SETSIZE - 1, g_config.cpus)) return false;
    } else if (const char* sh = value(arg, "--tickwheel_shards=")) {
      if (!parse_list("--tickwheel_shards=", sh, 1, 4096, g_config.shards)) return false;
    } else if (const char* pr = value(arg, "--tickwheel_producers=")) {
      if (!parse_list("--tickwheel_producers=", pr, 1, 1024, g_config.producers)) return false;
    } else if (const char* w = value(arg, "--tickwheel_wait=")) {
      const std::string_view s = w;
      if (s == "sleep") {
        g_config.wait = tickwheel::WaitStrategy::sleep;
      } else if (s == "spin") {
        g_config.wait = tickwheel::WaitStrategy::spin;
      } else if (s == "hybrid") {
        g_config.wait = tickwheel::WaitStrategy::hybrid;
      } else {
        std::fprintf(stderr, "tickwheel-engine-bench: bad --tickwheel_wait=%s\n", w);
        return false;
      }
    } else if (const char* n = value(arg, "--tickwheel_pending=")) {
      char* end = nullptr;
      const unsigned long long count = std::strtoull(n, &end, 10);
      if (end == n || *end != '\0' || count < 2) {
        std::fprintf(stderr, "tickwheel-engine-bench: bad --tickwheel_pending=%s (>= 2)\n", n);
        return false;
      }
      g_config.pending = static_cast<std::size_t>(count);
    } else {
      argv[out++] = argv[i];
    }
  }
  argc = out;
  const unsigned most = *std::max_element(g_config.producers.begin(), g_config.producers.end());
  if (g_config.pending < most) {
    std::fprintf(stderr,
                 "tickwheel-engine-bench: --tickwheel_pending=%zu is below the producer "
                 "count %u\n",
                 g_config.pending, most);
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (!parse_args(argc, argv)) return 1;
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  g_fixture.reset();
  benchmark::Shutdown();
  return 0;
}
