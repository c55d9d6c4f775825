// The Engine's exactly-once accounting under concurrency (run it under TSan too). Producer threads
// schedule (delays spread over 0..200 ms, a few far out or in the past, through schedule_after,
// schedule_after_on and schedule_at), canceller threads cancel handles picked at random among the
// recently published ones (a third of all timers are candidates; the others' states are only read),
// one callback in eight schedules a new timer (on its own shard, or handed to another), and stop()
// races all of it part-way through.
//
// Every timer has an id, captured in its callable, that indexes preallocated per-timer records.
// Afterwards, for every successful schedule: the timer fired, or a cancel() of it returned true,
// or stop() returned it — exactly one of the three. Nothing fired twice or before its deadline, no
// failed schedule ran, every callable was destroyed exactly once, and every schedule that began
// after stop() had returned failed with Status::stopped (the only failure allowed here).
//
// One overlap is legal and bounded, not ignored: a cancel() that was still running when stop()
// began may win after stop() collected its timer, which then is both cancelled and returned (the
// returned handle's own cancel() then loses). Such handles cannot be mapped to an id, so their
// number is checked against the number of cancels that finished after stop() was called.
//
// The same test runs a second time with the callbacks on a thread-pool executor.
//
// Size: TICKWHEEL_ENGINE_TIMERS producer schedules (default 1.5M in an optimised build, of which
// about 1.1M succeed before the stop; 500k under TSan; 300k in an unoptimised build). The seed is
// printed; TICKWHEEL_SEED replays the random choices, not the thread interleaving.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kDefaultTimers = kUnderTsan ? 500'000 : kOptimised ? 1'500'000 : 300'000;

constexpr std::size_t kShards = 2;
constexpr std::size_t kProducers = 2;
constexpr std::size_t kCancellers = 2;
constexpr std::size_t kCancelWindow = 4096;  // cancellers pick among the last this many ids

// A 64-bit mix (splitmix64's finaliser): the per-id choices of the callbacks.
constexpr std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
std::unique_ptr<T[]> zeroed(std::size_t n) {
  return std::unique_ptr<T[]>(new T[n]());
}

struct Ctx;

// The callable: 16 bytes. Move-only; exactly one of its moved copies counts its destruction.
class Job {
 public:
  Job(Ctx* ctx, std::size_t id) noexcept : ctx_(ctx), id_(static_cast<std::uint32_t>(id)) {}
  Job(Job&& o) noexcept : ctx_(o.ctx_), id_(o.id_), armed_(std::exchange(o.armed_, false)) {}
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;
  Job& operator=(Job&&) = delete;
  ~Job();
  void operator()();

 private:
  Ctx* ctx_;
  std::uint32_t id_;
  bool armed_ = true;
};
static_assert(sizeof(Job) <= 24);

enum How : int { kAfter = 0, kOn = 1, kAt = 2 };

struct Ctx {
  Ctx(std::size_t produced_ids, std::size_t reschedule_ids)
      : produced(produced_ids),
        capacity(produced_ids + reschedule_ids),
        due(zeroed<std::int64_t>(capacity)),
        floor(zeroed<std::int64_t>(capacity)),
        handle(new Timer[capacity]),
        ready(zeroed<std::atomic<bool>>(capacity)),
        scheduled(zeroed<std::uint8_t>(capacity)),
        fired(zeroed<std::atomic<std::uint8_t>>(capacity)),
        cancel_won(zeroed<std::atomic<std::uint8_t>>(capacity)),
        won_before_stop(zeroed<std::atomic<std::uint8_t>>(capacity)),
        destroyed(zeroed<std::atomic<std::uint8_t>>(capacity)),
        returned(zeroed<std::uint8_t>(capacity)),
        next_resched(produced_ids) {}

  Engine* engine = nullptr;
  const std::size_t produced;  // ids [0, produced) are the producers'; the rest, reschedules'
  const std::size_t capacity;
  // Per id. `due` and `handle` are written by the scheduling thread: due before the schedule (the
  // engine publishes it to the callback), handle before `ready` is released to the cancellers.
  std::unique_ptr<std::int64_t[]> due;  // earliest legal fire time (steady clock, ns)
  // A lower bound of the engine's deadline, a past one included (what a pass that runs the timer
  // has reached): what the timers its callback schedules count from (see maybe_reschedule()).
  std::unique_ptr<std::int64_t[]> floor;
  std::unique_ptr<Timer[]> handle;
  std::unique_ptr<std::atomic<bool>[]> ready;
  std::unique_ptr<std::uint8_t[]> scheduled;  // schedule succeeded; read after every thread joined
  std::unique_ptr<std::atomic<std::uint8_t>[]> fired, cancel_won, won_before_stop, destroyed;
  std::unique_ptr<std::uint8_t[]> returned;            // the checking thread only
  std::atomic<std::size_t> progress[kProducers] = {};  // ids each producer has attempted
  std::atomic<std::size_t> next_resched;

  // seq_cst: a thread that reads stop_returned == true began its schedule after stop() returned; a
  // canceller that reads stop_called == false after its cancel won finished it before stop() began.
  std::atomic<bool> stop_called{false}, stop_returned{false};

  std::atomic<std::uint64_t> early{0}, ok_after_stop{0}, bad_failure{0}, failed_stopped{0}, double_cancel{0},
      rescheduled{0}, both_states{0};

  // `from`: what the delay may count from, if not the clock now (see maybe_reschedule()).
  void attempt(std::size_t id, How how, Nanos delay, std::size_t shard,
               std::optional<std::int64_t> from = {}) {
    const bool after_stop = stop_returned.load();
    const std::int64_t start = now_ns();
    due[id] = from.value_or(start) + std::max<std::int64_t>(delay.count(), 0);
    floor[id] = from.value_or(start) + delay.count();
    Timer t;
    switch (how) {
      case kAfter: t = engine->schedule_after(delay, Job(this, id)); break;
      case kOn: t = engine->schedule_after_on(shard, delay, Job(this, id)); break;
      case kAt: t = engine->schedule_at(Nanos(start) + delay, Job(this, id)); break;
    }
    if (t) {
      scheduled[id] = 1;
      handle[id] = t;
      ready[id].store(true, std::memory_order_release);  // pairs with the cancellers' acquire
      if (after_stop) ok_after_stop.fetch_add(1, std::memory_order_relaxed);
    } else if (t.status() == Status::stopped) {
      failed_stopped.fetch_add(1, std::memory_order_relaxed);
    } else {
      bad_failure.fetch_add(1, std::memory_order_relaxed);
    }
  }

  // In a callback: one in eight schedules a new timer, 0..50 ms out, on its own shard (a direct
  // insertion) or handed to a chosen shard (possibly another worker's). On its own shard the delay
  // counts from the pass's now, not the clock: a pass that runs this timer has reached its
  // deadline (at least `floor`), but may have read its clock before this timer was even scheduled
  // (a hand-off due at once), so the new timer's earliest legal fire time is floor + delay.
  void maybe_reschedule(std::uint32_t id) {
    const std::uint64_t r = mix(id ^ 0x5eed);
    if (r % 8 != 0) return;
    const std::size_t nid = next_resched.fetch_add(1, std::memory_order_relaxed);
    if (nid >= capacity) return;
    rescheduled.fetch_add(1, std::memory_order_relaxed);
    const Nanos delay((r >> 8) % 50'000'000);
    attempt(nid, (r >> 40) % 2 == 0 ? kAfter : kOn, delay, (r >> 50) % kShards, floor[id]);
  }
};

Job::~Job() {
  if (armed_) ctx_->destroyed[id_].fetch_add(1, std::memory_order_relaxed);
}

void Job::operator()() {
  Ctx& c = *ctx_;
  if (now_ns() < c.due[id_]) c.early.fetch_add(1, std::memory_order_relaxed);
  c.fired[id_].fetch_add(1, std::memory_order_relaxed);
  c.maybe_reschedule(id_);
}

void produce(Ctx& c, std::size_t p, std::size_t quota, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::size_t base = p * quota;
  for (std::size_t i = 0; i < quota; ++i) {
    // The last quarter waits for stop() to begin (the test calls it once three quarters are
    // attempted), so that schedules race it however late the test thread gets to run.
    if (i == quota - quota / 4) {
      while (!c.stop_called.load()) std::this_thread::yield();
    }
    const std::uint64_t r = rng();
    Nanos delay((r >> 8) % 200'000'001);                       // 0..200 ms, any nanosecond
    if (r % 64 == 0) delay = std::chrono::seconds(5) + delay;  // far out: pending at the stop
    if (r % 97 == 1) delay = -delay;                           // in the past: due at once
    const How how = static_cast<How>((r >> 40) % 4 == 3 ? kAt : (r >> 40) % 4 == 2 ? kOn : kAfter);
    c.attempt(base + i, how, delay, (r >> 50) % kShards);
    c.progress[p].store(i + 1, std::memory_order_relaxed);  // a hint; `ready` is the publication
  }
}

void cancel_at_random(Ctx& c, std::size_t quota, std::uint64_t seed, const std::atomic<bool>& done) {
  std::mt19937_64 rng(seed);
  while (!done.load(std::memory_order_relaxed)) {
    const std::uint64_t r = rng();
    const std::size_t region = r % (kProducers + 1);
    std::size_t lo = 0, hi = 0;
    if (region < kProducers) {
      const std::size_t base = region * quota;
      const std::size_t made = c.progress[region].load(std::memory_order_relaxed);
      hi = base + made;
      lo = base + (made > kCancelWindow ? made - kCancelWindow : 0);
    } else {
      hi = std::min(c.next_resched.load(std::memory_order_relaxed), c.capacity);
      lo = std::max(c.produced, hi > kCancelWindow ? hi - kCancelWindow : 0);
    }
    if (hi <= lo) {
      std::this_thread::yield();
      continue;
    }
    const std::size_t id = lo + (r >> 16) % (hi - lo);
    if (!c.ready[id].load(std::memory_order_acquire)) continue;  // pairs with attempt()'s release
    Timer t = c.handle[id];
    if (mix(id ^ 0xca9ce1) % 3 != 0) {
      // Not one of the third of timers chosen for cancelling (so that many fire): only read its
      // state, racing the worker's claim. A lifetime is fired or cancelled, never both.
      if (t.expired() && t.cancelled()) c.both_states.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (!t.cancel()) continue;
    const bool stop_seen = c.stop_called.load();
    if (c.cancel_won[id].fetch_add(1, std::memory_order_relaxed) != 0) {
      c.double_cancel.fetch_add(1, std::memory_order_relaxed);
    }
    if (!stop_seen) c.won_before_stop[id].store(1, std::memory_order_relaxed);
  }
}

// `pool_threads` 0: callbacks run on the workers; otherwise on a ThreadPoolExecutor of that many
// threads, where the callbacks' reschedules go through the hand-off queues and stop() must also
// wait for the tasks it has handed over.
void exactly_once_with_stop_racing_everything(std::size_t pool_threads, std::size_t default_timers) {
  const std::uint64_t seed = seed_from_env_or_random();
  const std::size_t total = static_cast<std::size_t>(env_u64("TICKWHEEL_ENGINE_TIMERS", default_timers));
  const std::size_t quota = std::max<std::size_t>(total / kProducers, 1000);
  const std::size_t produced = quota * kProducers;
  const std::size_t stop_at = produced / 4 * 3;
  SCOPED_TRACE("seed " + std::to_string(seed) +
               " (replay the random choices: TICKWHEEL_SEED=" + std::to_string(seed) + ")");
  std::printf("[ engine stress ] seed %llu, %zu producer schedules, stop after %zu\n",
              static_cast<unsigned long long>(seed), produced, stop_at);

  Ctx c(produced, produced / 4);
  // Unpinned: the workers share the cores with the producers and cancellers.
  auto engine = std::make_unique<Engine>(workers(kShards, pool_threads != 0 ? pool(pool_threads) : nullptr));
  c.engine = engine.get();

  std::atomic<bool> cancellers_done{false};
  std::vector<std::thread> producers, cancellers;
  for (std::size_t p = 0; p < kProducers; ++p) {
    producers.emplace_back(produce, std::ref(c), p, quota, mix(seed + p));
  }
  for (std::size_t k = 0; k < kCancellers; ++k) {
    cancellers.emplace_back(cancel_at_random, std::ref(c), quota, mix(seed + 100 + k),
                            std::cref(cancellers_done));
  }

  // stop() part-way through, with producers, cancellers and callbacks all running.
  const auto give_up = Clock::now() + std::chrono::minutes(3);
  auto attempted = [&] {
    std::size_t n = 0;
    for (const auto& p : c.progress) n += p.load(std::memory_order_relaxed);
    return n;
  };
  while (attempted() < stop_at && Clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  c.stop_called.store(true);
  std::vector<Timer> returned = engine->stop();
  c.stop_returned.store(true);
  cancellers_done.store(true, std::memory_order_relaxed);

  {
    Timer late = engine->schedule_after(Nanos(0), [] {});
    EXPECT_FALSE(late);
    EXPECT_EQ(late.status(), Status::stopped);
  }
  for (std::thread& t : producers) t.join();
  for (std::thread& t : cancellers) t.join();
  EXPECT_TRUE(engine->stop().empty()) << "a second stop() returned timers";
  const EngineStats stats = engine->stats();

  // Which timer each returned handle names, through the public API: cancel every returned handle,
  // then see whose own handle turned cancelled() by it. Exact: once stopped no node is reused, and
  // a handle matches only its own lifetime of a node. A returned handle whose cancel() loses was
  // cancelled by a canceller after stop() collected it: it names no id, and is counted.
  std::vector<std::uint8_t> cancelled_before(c.capacity);
  for (std::size_t id = 0; id < c.capacity; ++id) cancelled_before[id] = c.handle[id].cancelled() ? 1 : 0;
  std::size_t unidentified = 0;
  for (Timer& t : returned) unidentified += t.cancel() ? 0 : 1;
  std::size_t identified = 0;
  for (std::size_t id = 0; id < c.capacity; ++id) {
    if (!cancelled_before[id] && c.handle[id].cancelled()) {
      c.returned[id] = 1;
      ++identified;
    }
  }
  EXPECT_EQ(identified + unidentified, returned.size())
      << "returned handles whose cancel() won name no scheduled timer, or the same one twice";
  engine.reset();  // destroys the callables of cancelled timers not yet recycled

  const std::size_t attempted_ids_end = std::min(c.next_resched.load(), c.capacity);
  std::uint64_t scheduled = 0, fired = 0, cancelled = 0, back = 0, overlap = 0;
  std::uint64_t twice = 0, cancelled_fired = 0, fired_returned = 0, lost = 0, phantom = 0, bad_destroy = 0;
  std::int64_t first_bad = -1;
  for (std::size_t id = 0; id < c.capacity; ++id) {
    const bool tried = id < attempted_ids_end;
    const unsigned f = c.fired[id].load();
    const unsigned k = c.cancel_won[id].load();
    const unsigned r = c.returned[id];
    const std::uint64_t bad_before = twice + cancelled_fired + fired_returned + lost + phantom + bad_destroy;
    if (c.destroyed[id].load() != (tried ? 1u : 0u)) ++bad_destroy;
    if (!c.scheduled[id]) {
      if (f + k + r != 0) ++phantom;
    } else {
      ++scheduled;
      fired += f != 0;
      cancelled += k != 0;
      back += r != 0;
      if (f > 1) ++twice;
      if (f != 0 && k != 0) ++cancelled_fired;
      if (f != 0 && r != 0) ++fired_returned;
      if (f + k + r == 0) ++lost;
      if (k != 0 && r == 0 && c.won_before_stop[id].load() == 0) ++overlap;
    }
    const std::uint64_t bad_after = twice + cancelled_fired + fired_returned + lost + phantom + bad_destroy;
    if (bad_after != bad_before && first_bad < 0) first_bad = static_cast<std::int64_t>(id);
  }
  std::printf(
      "[ engine stress ] scheduled %llu (rescheduled %llu), fired %llu, cancelled %llu, returned by stop %zu "
      "(%zu of them cancelled concurrently), refused after stop %llu\n",
      static_cast<unsigned long long>(scheduled), static_cast<unsigned long long>(c.rescheduled.load()),
      static_cast<unsigned long long>(fired), static_cast<unsigned long long>(cancelled), returned.size(),
      unidentified, static_cast<unsigned long long>(c.failed_stopped.load()));

  EXPECT_EQ(fired + cancelled + back, scheduled) << "fired + cancelled + returned by stop != scheduled";
  EXPECT_EQ(twice, 0u) << "timers that fired more than once";
  EXPECT_EQ(cancelled_fired, 0u) << "timers that fired although a cancel() of them returned true";
  EXPECT_EQ(fired_returned, 0u) << "timers that fired and were also returned by stop()";
  EXPECT_EQ(lost, 0u) << "timers scheduled that neither fired, nor were cancelled, nor were returned";
  EXPECT_EQ(phantom, 0u) << "failed schedules that fired, cancelled or were returned";
  EXPECT_EQ(bad_destroy, 0u) << "callables not destroyed exactly once";
  EXPECT_EQ(first_bad, -1) << "first id with a fault (ids >= " << produced << " are reschedules)";
  EXPECT_EQ(c.double_cancel.load(), 0u) << "cancel() returned true twice for one timer";
  EXPECT_EQ(c.both_states.load(), 0u) << "handles that read both expired() and cancelled()";
  EXPECT_EQ(c.early.load(), 0u) << "callbacks that started before their deadline";
  EXPECT_EQ(c.bad_failure.load(), 0u) << "schedules that failed for another reason than stopped";
  EXPECT_EQ(c.ok_after_stop.load(), 0u) << "schedules begun after stop() returned that succeeded";
  EXPECT_EQ(returned.size(), back + unidentified);
  EXPECT_LE(unidentified, overlap)
      << "returned handles already cancelled, beyond the cancels that overlapped stop()";
  EXPECT_EQ(stats.fired, fired) << "stats().fired differs from the callbacks that ran";

  // Not vacuous: every path of the accounting was taken.
  EXPECT_GT(fired, 0u);
  EXPECT_GT(cancelled, 0u);
  EXPECT_GT(back, 0u);
  EXPECT_GT(c.rescheduled.load(), 0u);
  EXPECT_GT(c.failed_stopped.load(), 0u);
  EXPECT_GE(scheduled, produced / 2) << "the stop came too early for the test to mean much";
  EXPECT_EQ(stats.executing, 0u) << "stop() returned with tasks still out on the executor";
}

TEST(EngineStress, ExactlyOnceAccountingWithStopRacingEverything) {
  exactly_once_with_stop_racing_everything(0, kDefaultTimers);
}

// Half the size: the same checks, with every callback run on a pool of two threads.
TEST(EngineStress, ExactlyOnceAccountingOnAThreadPoolWithStopRacingEverything) {
  exactly_once_with_stop_racing_everything(2, kDefaultTimers / 2);
}

}  // namespace
}  // namespace tickwheel::test
