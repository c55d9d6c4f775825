// The Engine at its limits: memory running out (a worker thread that cannot be created, stop() and
// the destructor with no memory to spare), the pending limit counted exactly (a place is free the
// moment its timer is claimed to run or its cancel wins; Timer::pending() in every state), and
// shutdown seen from a caller-driven loop and from a cancel racing stop(). EngineOutOfMemory.*,
// EnginePendingLimit.* and EngineShutdown.* take them in that order.
//
// Memory exhaustion is real, not simulated: each such test forks, lowers RLIMIT_AS in the child
// just above what the child has mapped, and reports through its exit status, so the test runner
// itself is never starved. Those tests are skipped under AddressSanitizer and ThreadSanitizer,
// whose runtimes treat a failed mapping as fatal by design. Worker-mode tests wait, bounded, for
// events; caller-driven ones run on the injected clock. No timing figure is asserted.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <new>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// ---- A child process with little address space ----

// The address space this process has mapped now (VmSize), in bytes.
std::size_t mapped_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  statm >> pages;
  return pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
}

// Lets the process map at most `bytes` of address space in all (mmap, thread stacks, malloc).
bool limit_address_space(std::size_t bytes) {
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) != 0) return false;
  r.rlim_cur = bytes;
  return ::setrlimit(RLIMIT_AS, &r) == 0;
}
bool lift_address_space_limit() {
  rlimit r{};
  if (::getrlimit(RLIMIT_AS, &r) != 0) return false;
  r.rlim_cur = r.rlim_max;
  return ::setrlimit(RLIMIT_AS, &r) == 0;
}

std::size_t thread_count() {
  std::size_t n = 0;
  if (DIR* d = ::opendir("/proc/self/task")) {
    while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.' ? 1 : 0;
    ::closedir(d);
  }
  return n;
}

// Runs body() in a forked child; returns its exit status, or 128 + the signal that killed it (a
// std::terminate is SIGABRT: 134). An exception that leaves body() is status 97.
int in_child(const std::function<int()>& body) {
  (void)std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    int rc = 97;
    try {
      rc = body();
    } catch (...) {
    }
    (void)std::fflush(nullptr);
    ::_exit(rc);
  }
  int status = 0;
  if (pid < 0 || ::waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Why the memory-exhaustion tests skip themselves under a sanitizer.
constexpr std::string_view kSanitizerSkip =
    "a sanitizer runtime aborts on a failed mapping; this test runs in the plain builds";

// Counts destructions of the callables, to check that none is lost when memory runs out.
struct Destroys {
  std::atomic<long>* count;
  explicit Destroys(std::atomic<long>* c) noexcept : count(c) {}
  Destroys(Destroys&& o) noexcept : count(std::exchange(o.count, nullptr)) {}
  Destroys(const Destroys&) = delete;
  Destroys& operator=(const Destroys&) = delete;
  Destroys& operator=(Destroys&&) = delete;
  ~Destroys() {
    if (count != nullptr) count->fetch_add(1, std::memory_order_relaxed);
  }
  void operator()() const noexcept {}
};

EngineOptions quiet_workers(std::size_t shards) {
  EngineOptions o = workers(shards);
  o.log = [](std::string_view) {};
  return o;
}

// ---- 1. Memory exhaustion never aborts the process ----

// Child exit codes of the test below.
constexpr int kStartedUnderTheLimit = 10;
// 20 + k: the schedule failed with k workers running. k < kShards: a worker could not be created;
// k == kShards: every worker started and a later step of the same schedule (the thread's producer
// state, a node) ran out of memory instead.
constexpr int kFailedWithNone = 20;

TEST(EngineOutOfMemory, AWorkerThatCannotBeCreatedFailsTheScheduleAndALaterStartCreatesOnlyTheMissing) {
  if (kSanitized) GTEST_SKIP() << kSanitizerSkip;
  constexpr std::size_t kShards = 4;
  // The room left above what the child has mapped, swept from none to plenty, so that some tries
  // fail on the first worker, some part way through, and the last ones start them all.
  std::set<int> outcomes;
  for (std::size_t extra_mib = 0; extra_mib <= 160; extra_mib += 2) {
    const int rc = in_child([extra_mib] {
      auto e = std::make_unique<Engine>(quiet_workers(kShards));
      std::atomic<int> ran{0};
      const std::size_t base_threads = thread_count();
      if (!limit_address_space(mapped_bytes() + (extra_mib << 20))) return 1;
      Timer first = e->schedule_after(0ns, [&ran] { ran.fetch_add(1); });
      if (first) {
        if (!lift_address_space_limit()) return 1;
        return eventually([&] { return ran.load() == 1; }) ? kStartedUnderTheLimit : 2;
      }
      if (first.status() != Status::out_of_memory) return 3;
      const std::size_t survivors = thread_count() - base_threads;
      if (survivors > kShards) return 4;
      if (!lift_address_space_limit()) return 1;
      Timer second = e->schedule_after(0ns, [&ran] { ran.fetch_add(1); });
      if (!second) return 5;
      if (!eventually([&] { return ran.load() == 1; })) return 6;
      // Exactly one worker per shard: none created twice, none missing.
      if (thread_count() - base_threads != kShards) return 7;
      if (e->stop().size() != 0) return 8;
      return kFailedWithNone + static_cast<int>(survivors);
    });
    ASSERT_TRUE(rc == kStartedUnderTheLimit ||
                (rc >= kFailedWithNone && rc <= kFailedWithNone + static_cast<int>(kShards)))
        << "with " << extra_mib << " MiB of room the child ended with status " << rc
        << " (134: std::terminate; 1-8: see the test)";
    outcomes.insert(rc);
  }
  EXPECT_EQ(outcomes.count(kFailedWithNone), 1u) << "no try failed on the first worker";
  EXPECT_EQ(outcomes.count(kStartedUnderTheLimit), 1u) << "no try had room for every worker";
  bool partial = false;
  for (int k = 1; k < static_cast<int>(kShards); ++k) partial |= outcomes.count(kFailedWithNone + k) != 0;
  EXPECT_TRUE(partial) << "no try started some workers but not all; the sweep's step is too coarse";
}

TEST(EngineOutOfMemory, StopOutOfMemoryThrowsLosesNothingAndTheNextStopHandsTheTimersBack) {
  if (kSanitized) GTEST_SKIP() << kSanitizerSkip;
  const int rc = in_child([] {
    constexpr long kN = 2'000'000;  // the returned list needs 48 MB
    std::atomic<long> destroyed{0};
    auto e = std::make_unique<Engine>(manual());
    for (long i = 0; i < kN; ++i) {
      if (!e->schedule_after(1h, Destroys(&destroyed))) return 1;
    }
    if (!limit_address_space(mapped_bytes() + (std::size_t{1} << 20))) return 2;
    try {
      (void)e->stop();
      return 3;  // the list fitted after all: the test proves nothing
    } catch (const std::bad_alloc&) {
    }
    if (e->schedule_after(1h, Destroys(&destroyed)).status() != Status::stopped) return 4;
    if (destroyed.load() != 1) return 5;  // only the refused callable
    long seen = 0;
    const std::size_t handed = e->stop([&seen](Timer t) noexcept { seen += t ? 1 : 0; });
    if (static_cast<long>(handed) != kN || seen != kN) return 6;
    if (!e->stop().empty()) return 7;  // handed back once
    e.reset();                         // under the limit still: the destructor needs no memory
    return destroyed.load() == kN + 1 ? 0 : 8;
  });
  EXPECT_EQ(rc, 0) << "134: std::terminate; 3: stop() did not run out of memory; see the test for the rest";
}

TEST(EngineOutOfMemory, TheDestructorNeedsNoMemoryWithWorkersAndTimersPending) {
  if (kSanitized) GTEST_SKIP() << kSanitizerSkip;
  const int rc = in_child([] {
    constexpr long kN = 300'000;
    std::atomic<long> destroyed{0};
    auto e = std::make_unique<Engine>(quiet_workers(2));
    for (long i = 0; i < kN; ++i) {
      if (!e->schedule_after_on(static_cast<std::size_t>(i) % 2, 1h, Destroys(&destroyed))) return 1;
    }
    if (!limit_address_space(mapped_bytes())) return 2;  // no room at all
    e.reset();
    return destroyed.load() == kN ? 0 : 3;
  });
  EXPECT_EQ(rc, 0) << "134: std::terminate (an allocation in the destructor); see the test for the rest";
}

// ---- 2. max_pending_per_shard counts what is pending ----

// A timer whose callback schedules its successor, `left` more times.
struct ChainState {
  Engine* engine;
  std::atomic<int> links{0};
  std::atomic<int> refused{0};
};
struct Chain {
  ChainState* state;
  int left;
  void operator()() const noexcept {
    state->links.fetch_add(1);
    if (left == 0) return;
    if (!state->engine->schedule_after(1ms, Chain{state, left - 1})) state->refused.fetch_add(1);
  }
};
static_assert(sizeof(Chain) <= 24);

TEST(EnginePendingLimit, AChainUnderALimitOfOneGoesOnCallerDriven) {
  constexpr int kLinks = 50;
  EngineOptions o = manual();
  o.max_pending_per_shard = 1;
  Engine e(o);
  ChainState c{&e};
  ASSERT_TRUE(e.schedule_after(1ms, Chain{&c, kLinks - 1}));
  for (int i = 0; i < 2 * kLinks && c.links.load() < kLinks; ++i) {
    advance_clock(1ms);
    (void)e.poll(0);
    EXPECT_EQ(c.refused.load(), 0) << "link " << c.links.load() << "'s successor was refused";
  }
  EXPECT_EQ(c.links.load(), kLinks);
  EXPECT_EQ(e.stats().pending, 0u);
}

TEST(EnginePendingLimit, AChainUnderALimitOfOneGoesOnWithAWorker) {
  constexpr int kLinks = 50;
  EngineOptions o = quiet_workers(1);
  o.max_pending_per_shard = 1;
  Engine e(o);
  ChainState c{&e};
  ASSERT_TRUE(e.schedule_after(1ms, Chain{&c, kLinks - 1}));
  EXPECT_TRUE(eventually([&] { return c.links.load() >= kLinks || c.refused.load() != 0; }));
  EXPECT_EQ(c.refused.load(), 0) << "the chain stopped after " << c.links.load() << " links";
  EXPECT_EQ(c.links.load(), kLinks);
}

// The worker sleeps until the first 30 s deadline: only the cancels' own accounting can free the
// places, and it must, at once.
TEST(EnginePendingLimit, AWinningCancelFreesItsPlaceAtOnceWhileTheWorkerSleeps) {
  constexpr std::size_t kLimit = 1000;
  EngineOptions o = quiet_workers(1);
  o.max_pending_per_shard = kLimit;
  Engine e(o);
  for (int round = 0; round < 3; ++round) {
    std::vector<Timer> timers;
    for (std::size_t i = 0; i < kLimit; ++i) {
      timers.push_back(e.schedule_after(30s, [] {}));
      ASSERT_TRUE(timers.back()) << "round " << round << ", timer " << i << ": "
                                 << static_cast<int>(timers.back().status());
    }
    EXPECT_EQ(e.schedule_after(30s, [] {}).status(), Status::max_pending_reached) << "round " << round;
    EXPECT_EQ(e.stats().pending, kLimit);
    for (Timer& t : timers) ASSERT_TRUE(t.cancel());
    EXPECT_EQ(e.stats().pending, 0u) << "round " << round;
  }
  EXPECT_EQ(e.stats().rejected, 3u);
  EXPECT_TRUE(e.stop().empty());
}

// The limit is exact when no other thread is scheduling: the (limit + 1)th schedule is the first
// refused, and each end (a fire claimed, a cancel won) lets exactly one more in.
TEST(EnginePendingLimit, WithNoScheduleInFlightTheLimitIsExact) {
  constexpr std::size_t kLimit = 5;
  EngineOptions o = manual();
  o.max_pending_per_shard = kLimit;
  Engine e(o);
  std::vector<Timer> far;
  ASSERT_TRUE(e.schedule_after(1ms, [] {}));
  for (std::size_t i = 1; i < kLimit; ++i) far.push_back(e.schedule_after(1h, [] {}));
  for (const Timer& t : far) ASSERT_TRUE(t);
  EXPECT_EQ(e.schedule_after(1h, [] {}).status(), Status::max_pending_reached);
  ASSERT_TRUE(far[0].cancel());
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  EXPECT_EQ(e.schedule_after(1h, [] {}).status(), Status::max_pending_reached);
  advance_clock(1ms);
  EXPECT_EQ(e.poll(0), 1u);
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  EXPECT_EQ(e.schedule_after(1h, [] {}).status(), Status::max_pending_reached);
  EXPECT_EQ(e.stats().pending, kLimit);
  EXPECT_EQ(e.stop().size(), kLimit);
}

// stats().pending: scheduled, not yet claimed to run nor cancelled; exact the moment each happens,
// whatever the worker is doing (here: held inside a callback, so it can neither pass nor publish).
TEST(EnginePendingLimit, PendingCountsWhatIsScheduledAndNotYetClaimedNorCancelled) {
  HoldGate gate;
  Engine e(quiet_workers(1));
  ReleaseOnExit guard{gate};
  ASSERT_TRUE(e.schedule_after(0ns, [g = &gate] { g->pass(); }));
  ASSERT_TRUE(gate.wait_entered());
  EXPECT_EQ(e.stats().pending, 0u) << "a callback running counts as pending";

  std::vector<Timer> timers;
  for (int i = 0; i < 100; ++i) timers.push_back(e.schedule_after(1h, [] {}));
  EXPECT_EQ(e.stats().pending, 100u) << "hand-offs still in the queue must count";
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(timers[static_cast<std::size_t>(i)].cancel());
  EXPECT_EQ(e.stats().pending, 60u) << "a cancel that won must stop counting at once";
  Timer periodic = e.schedule_every(1h, [] {});
  ASSERT_TRUE(periodic);
  EXPECT_EQ(e.stats().pending, 61u);
  EXPECT_EQ(e.stats().shards[0].pending, 61u);

  gate.release();
  ASSERT_TRUE(eventually([&] { return e.stats().queue_depth == 0 && e.stats().scheduled == 102; }));
  EXPECT_EQ(e.stats().pending, 61u);
  ASSERT_TRUE(periodic.cancel());
  EXPECT_EQ(e.stats().pending, 60u);
  EXPECT_EQ(e.stop().size(), 60u);
  EXPECT_EQ(e.stats().pending, 60u) << "the timers stop() returned are pending until cancelled";
}

// Timer::pending() in every state: in transit, in the wheel, fired (from inside its own callback
// too), cancelled, a periodic timer between and during its runs, failed, default, stale.
TEST(EnginePendingLimit, PendingTellsEveryStateOfAHandle) {
  Engine e(manual());
  EXPECT_FALSE(Timer().is_pending());
  Timer in_transit = e.schedule_after(1ms, [] {});
  EXPECT_TRUE(in_transit.is_pending()) << "a hand-off not yet taken by its shard";
  EXPECT_EQ(e.poll(0), 0u);
  EXPECT_TRUE(in_transit.is_pending()) << "linked in the wheel";
  struct Self {
    Timer* self;
    int* seen;
    void operator()() const noexcept { *seen = self->is_pending() ? 1 : 0; }
  };
  Timer one_shot;
  int seen_one_shot = -1;
  one_shot = e.schedule_after(1ms, Self{&one_shot, &seen_one_shot});
  Timer periodic;
  int seen_periodic = -1;
  periodic = e.schedule_every(1ms, Self{&periodic, &seen_periodic});
  advance_clock(1ms);
  EXPECT_EQ(e.poll(0), 3u);
  EXPECT_EQ(seen_one_shot, 0) << "a one-shot asking about itself from its callback";
  EXPECT_EQ(seen_periodic, 1) << "a periodic timer asking from its callback";
  EXPECT_FALSE(in_transit.is_pending()) << "fired";
  EXPECT_FALSE(one_shot.is_pending());
  EXPECT_TRUE(periodic.is_pending()) << "a periodic timer between runs";
  ASSERT_TRUE(periodic.cancel());
  EXPECT_FALSE(periodic.is_pending()) << "cancelled";
  Timer cancelled = e.schedule_after(1h, [] {});
  ASSERT_TRUE(cancelled.cancel());
  EXPECT_FALSE(cancelled.is_pending());
  (void)e.poll(0);  // recycles the nodes: a new timer may take one
  Timer reuse = e.schedule_after(1h, [] {});
  EXPECT_TRUE(reuse.is_pending());
  EXPECT_FALSE(in_transit.is_pending()) << "a stale handle whose node may hold another timer";
  EXPECT_EQ(e.stop().size(), 1u);
  EXPECT_FALSE(e.schedule_after(1h, [] {}).is_pending()) << "a failed schedule";
}

// ---- 3. Shutdown ----

TEST(EngineShutdown, AfterStopNextDeadlineIsNulloptAndPollRunsNothing) {
  Engine e(manual(2));
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, [] {}));
  ASSERT_TRUE(e.schedule_after_on(1, 1h, [] {}));
  ASSERT_TRUE(e.next_deadline(0).has_value());
  EXPECT_EQ(e.stop().size(), 2u);
  EXPECT_EQ(e.next_deadline(0), std::nullopt) << "a loop sleeping until it would spin forever";
  EXPECT_EQ(e.next_deadline(1), std::nullopt);
  EXPECT_EQ(e.poll(0), 0u);
  EXPECT_THROW((void)e.next_deadline(2), std::out_of_range);
}

// The documented rule for a cancel racing stop(), made deterministic: the visitor of stop(visit)
// runs on the stopping thread while it hands timers back, and cancels both timers through the
// handles their schedules returned. The one being handed back is already in the result: that
// cancel wins, and the returned handle's own cancel() is then refused. The other is not reached
// yet: its cancel wins and stop() never hands it back. Each timer ended one way, and
// fired + cancels won == scheduled.
TEST(EngineShutdown, ACancelRacingStopEitherWinsOrTheTimerIsHandedBackNeverBoth) {
  Engine e(manual());
  Timer a = e.schedule_after(1h, [] {});
  Timer b = e.schedule_after(1h, [] {});
  ASSERT_TRUE(a && b);
  std::array<Timer, 2> got{};
  std::size_t n = 0;
  int won = 0;
  const std::size_t handed = e.stop([&](Timer t) noexcept {
    if (n == 0) won = (a.cancel() ? 1 : 0) + (b.cancel() ? 1 : 0);
    got.at(n++) = t;
  });
  EXPECT_EQ(handed, 1u);
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(won, 2);
  EXPECT_FALSE(got[0].cancel()) << "a timer a racing cancel took must refuse the returned handle";
  EXPECT_TRUE(got[0].cancelled());
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineShutdown, StopFromItsOwnVisitorIsRefused) {
  Engine e(manual());
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  bool refused = false;
  EXPECT_EQ(e.stop([&](Timer) noexcept {
    try {
      (void)e.stop();
    } catch (const std::logic_error&) {
      refused = true;
    }
  }),
            1u);
  EXPECT_TRUE(refused);
}

}  // namespace
}  // namespace tickwheel::test
