// bench/mix_bench.cpp — the mixes users run: each shard's timers scheduled and cancelled partly by
// the thread that owns the shard and partly by another thread, on a caller-driven Engine beside
// mutex-guarded heap lanes under the same mix. Part of tickwheel-engine-bench (engine_bench.cpp
// calls register_mix()); --benchmark_filter=mix selects it.
//
// mix/<engine|heap>/<owner share %>/<shards>: S shards (lanes), each with an owner thread and a
// producer thread, 2S threads in all. Each performs cancel+schedule pairs on its shard's timers,
// kPairs per shard between them: the owner `share` percent of them (on the Engine straight into
// its wheel, Engine::own_shard), the producer the rest (a hand-off and a cancel record, which the
// owner's polls absorb: it polls every kPollEvery of its own pairs, then, yielding between polls,
// until its producer is done).
// A heap lane is a std::mutex and an indexed binary heap that both threads lock for each pair.
// Deadlines are 10 s to 70 s out, so nothing fires while a round lasts; each side keeps
// kPendingPerSide timers pending, scheduled before the timing starts. Time per round: from the
// threads' start (a barrier) until all have finished, the owners' last polls included
// (UseManualTime); items_per_second is pairs per second over all shards. S shards run 2S threads,
// so a machine with fewer than 2S CPUs time-shares them, and the curve to 16 shards needs 32.
#include <benchmark/benchmark.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "heap_baseline.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel_bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::int64_t kPairs = 200'000;            // cancel+schedule pairs per shard per round
constexpr std::size_t kPendingPerSide = 50'000;     // timers each thread keeps pending
constexpr std::int64_t kPollEvery = 64;             // owner pairs between two polls
constexpr Nanos kFloor = std::chrono::seconds(10);  // added to every delay: nothing fires

Nanos far_delay(Rng& rng) noexcept { return kFloor + rng.delay(); }

// The Engine side: caller-driven, one shard per owner thread.
struct EngineMix {
  static constexpr const char* kName = "engine";
  using Handle = tickwheel::Timer;
  explicit EngineMix(std::size_t shards)
      : engine([shards] {
          tickwheel::EngineOptions o;
          o.shards = shards;
          o.threads = tickwheel::Threads::manual;
          return o;
        }()) {}
  tickwheel::Engine engine;

  void enter_owner(std::size_t s) { engine.own_shard(s); }
  void leave_owner(std::size_t s) {
    (void)engine.poll(s);
    engine.release_shard(s);
  }
  void poll(std::size_t s) { (void)engine.poll(s); }
  Handle schedule(std::size_t s, Rng& rng) {
    return engine.schedule_after_on(s, far_delay(rng), [] {});
  }
  bool cancel(std::size_t /*s*/, Handle& h) { return h.cancel(); }
};

// The baseline: one lane per shard, a mutex and a heap, locked by whichever thread acts.
struct HeapMix {
  static constexpr const char* kName = "heap";
  using Handle = HeapTimerQueue::Handle;
  struct alignas(64) Lane {
    std::mutex mutex;
    HeapTimerQueue heap;
  };
  explicit HeapMix(std::size_t shards) : lanes(shards) {}
  std::vector<Lane> lanes;

  void enter_owner(std::size_t /*s*/) {}
  void leave_owner(std::size_t /*s*/) {}
  void poll(std::size_t /*s*/) {}  // nothing is ever due: there is no work to take in
  Handle schedule(std::size_t s, Rng& rng) {
    const Nanos at = Clock::now().time_since_epoch() + far_delay(rng);
    const std::lock_guard lock(lanes[s].mutex);
    return lanes[s].heap.schedule_at(at, [] {});
  }
  bool cancel(std::size_t s, Handle& h) {
    const std::lock_guard lock(lanes[s].mutex);
    return lanes[s].heap.cancel(h);
  }
};

// One thread's side of a shard: its pending timers, replaced one pair at a time.
template <class Q>
struct Side {
  std::vector<typename Q::Handle> pending;
  std::size_t next = 0;
  std::uint64_t refused = 0;  // cancels that lost (a schedule failed, or a timer fired)

  void fill(Q& q, std::size_t s, Rng& rng) {
    pending.resize(kPendingPerSide);
    for (auto& h : pending) h = q.schedule(s, rng);
  }
  void pair(Q& q, std::size_t s, Rng& rng) {
    auto& h = pending[next];
    refused += q.cancel(s, h) ? 0 : 1;
    h = q.schedule(s, rng);
    if (++next == pending.size()) next = 0;
  }
};

template <class Q>
void BM_Mix(benchmark::State& state) {
  const auto share = static_cast<std::int64_t>(state.range(0));
  const auto shards = static_cast<std::size_t>(state.range(1));
  const std::int64_t owner_pairs = kPairs * share / 100;
  const std::int64_t producer_pairs = kPairs - owner_pairs;
  Q q(shards);
  std::vector<Side<Q>> owners(shards), producers(shards);
  std::vector<Rng> owner_rng, producer_rng;
  for (std::size_t s = 0; s < shards; ++s) {
    owner_rng.emplace_back(0x6f776e6572 + s);
    producer_rng.emplace_back(0x70726f64 + s);
  }
  // Prefill on the threads that will act, the owners as owners.
  {
    std::vector<std::thread> threads;
    for (std::size_t s = 0; s < shards; ++s) {
      threads.emplace_back([&, s] {
        q.enter_owner(s);
        owners[s].fill(q, s, owner_rng[s]);
        q.leave_owner(s);
      });
      threads.emplace_back([&, s] { producers[s].fill(q, s, producer_rng[s]); });
    }
    for (auto& t : threads) t.join();
  }
  for (auto _ : state) {
    std::vector<std::atomic<bool>> producer_done(shards);
    std::barrier start(static_cast<std::ptrdiff_t>(2 * shards + 1));
    std::vector<std::thread> threads;
    for (std::size_t s = 0; s < shards; ++s) {
      threads.emplace_back([&, s] {
        q.enter_owner(s);
        start.arrive_and_wait();
        for (std::int64_t i = 0; i < owner_pairs; ++i) {
          owners[s].pair(q, s, owner_rng[s]);
          if (i % kPollEvery == kPollEvery - 1) q.poll(s);
        }
        // Its own pairs done, it takes in its producer's until that one is done too, yielding
        // between polls: with more threads than CPUs a spinning owner would take its producer's.
        while (!producer_done[s].load(std::memory_order_acquire)) {
          q.poll(s);
          std::this_thread::yield();
        }
        q.leave_owner(s);
      });
      threads.emplace_back([&, s] {
        start.arrive_and_wait();
        for (std::int64_t i = 0; i < producer_pairs; ++i) producers[s].pair(q, s, producer_rng[s]);
        producer_done[s].store(true, std::memory_order_release);
      });
    }
    start.arrive_and_wait();
    const auto began = Clock::now();
    for (auto& t : threads) t.join();
    state.SetIterationTime(std::chrono::duration<double>(Clock::now() - began).count());
  }
  std::uint64_t refused = 0;
  for (std::size_t s = 0; s < shards; ++s) refused += owners[s].refused + producers[s].refused;
  if (refused != 0) state.SkipWithError("a cancel of a pending timer returned false");
  state.SetItemsProcessed(state.iterations() * kPairs * static_cast<std::int64_t>(shards));
  state.SetLabel(Q::kName);
}

}  // namespace

void register_mix(std::string& cases) {
  for (const auto& [name, fn] :
       {std::pair{EngineMix::kName, &BM_Mix<EngineMix>}, std::pair{HeapMix::kName, &BM_Mix<HeapMix>}}) {
    auto* b = benchmark::RegisterBenchmark((std::string("mix/") + name).c_str(), fn);
    for (const std::int64_t share : {100, 90, 50, 0}) {
      for (const std::int64_t shards : {1, 2}) b->Args({share, shards});
    }
    b->Iterations(3)->UseManualTime()->Unit(benchmark::kNanosecond);
  }
  add_case(cases, "mix",
           "cancel+schedule pairs on each shard, first arg the percent made by the shard's owner "
           "(caller-driven, own_shard), the rest by another thread; second arg shards, each with its "
           "owner and its other thread; the heap: a mutex-guarded heap lane per shard under the same "
           "mix; time per round of pairs, items_per_second pairs per second over all shards");
}

}  // namespace tickwheel_bench
