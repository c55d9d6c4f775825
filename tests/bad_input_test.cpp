// Bad input: one test per row of the table in docs/bad-input.md, each checking the defined result
// of that input on the Wheel and on the Engine, as their headers state it: delays that are zero,
// negative or overflowing and deadlines in the past; option values out of range (the constructor
// throws std::invalid_argument naming the option and the value); shard counts of zero and above the
// core count; empty callables and throwing ones; cancels, reschedules and queries of handles that
// name no pending timer, and reschedules to past or overflowing deadlines; schedules after stop()
// and beyond max_pending; stop(), advance(), poll() and clear() where they are refused; a
// for_each_pending() visitor that changes the wheel; and time that goes back.
//
// Engine tests run caller-driven (Threads::manual, an injected clock) wherever the row allows, so
// that what a pass runs is decided by the test alone; the rows about worker threads use them, on
// the real clock, waiting (bounded) for events and never asserting a timing figure.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <limits>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// This file's names for the shared recording callable (engine_support.hpp): Hits counts runs and
// destructions per id, atomically, so worker-mode tests may share it; declared before the Wheel or
// Engine of each test, whose destructor destroys the callables never run.
using Hits = Tally;
using Hit = Probe;

// `make()` must throw std::invalid_argument whose message contains every one of `words`.
template <class Make>
void expect_invalid(Make make, std::initializer_list<std::string> words) {
  try {
    make();
    ADD_FAILURE() << "accepted; expected std::invalid_argument naming " << *words.begin();
  } catch (const std::invalid_argument& err) {
    const std::string what = err.what();
    for (const std::string& w : words)
      EXPECT_NE(what.find(w), std::string::npos) << "\"" << w << "\" not in: " << what;
  }
}

// ---------------------------------------------------------------------------------------------
// Delays and deadlines

// Zero delay: the deadline is now, rounded up to the tick. On a tick boundary that is the current
// tick, so the very next advance()/poll() runs it, even at the same now; between two boundaries it
// is the next tick, and it runs once the clock reaches that.
TEST(BadInput, ZeroDelayIsDueAtNowRoundedUpToTheTick) {
  Hits h(4);
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(5ms), 0u);
  ASSERT_TRUE(w.schedule_after(0ns, Hit(&h, 0)));
  EXPECT_EQ(w.advance(5ms), 1u) << "on a tick boundary: the next advance at the same now";
  EXPECT_EQ(w.advance(5500us), 0u);
  ASSERT_TRUE(w.schedule_after(0ns, Hit(&h, 1)));
  EXPECT_EQ(w.advance(5500us), 0u) << "mid-tick: rounded up to the next tick, not run early";
  EXPECT_EQ(w.advance(6ms), 1u);

  Engine e(manual());
  ASSERT_TRUE(e.schedule_after(0ns, Hit(&h, 2)));
  EXPECT_EQ(e.poll(0), 1u);
  const Nanos mid = advance_clock(500us);
  ASSERT_TRUE(e.schedule_after(0ns, Hit(&h, 3)));
  EXPECT_EQ(e.poll(0, mid), 0u);
  EXPECT_EQ(e.poll(0, advance_clock(500us)), 1u);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(h.ran[i].load(), 1) << i;
}

// A negative delay (down to Nanos::min(), no overflow) is a deadline in the past: due at once.
TEST(BadInput, NegativeDelayIsDueAtOnce) {
  Hits h(6);
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(5500us), 0u);
  ASSERT_TRUE(w.schedule_after(-1ns, Hit(&h, 0)));  // 5.4999 ms: rounded up to tick 6, not early
  ASSERT_TRUE(w.schedule_after(-3ms, Hit(&h, 1)));
  ASSERT_TRUE(w.schedule_after(Nanos::min(), Hit(&h, 2)));
  EXPECT_EQ(w.advance(5500us), 2u);
  EXPECT_EQ(w.advance(6ms), 1u);

  Engine e(manual());
  ASSERT_TRUE(e.schedule_after(-1ns, Hit(&h, 3)));
  ASSERT_TRUE(e.schedule_after(-1h, Hit(&h, 4)));
  ASSERT_TRUE(e.schedule_after(Nanos::min(), Hit(&h, 5)));
  EXPECT_EQ(e.poll(0), 3u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(h.ran[i].load(), 1) << i;
}

// Nanos::max() as a delay: now + delay saturates instead of overflowing, and the deadline is
// clamped to horizon(). The timer is pending, cancellable, and due only at the horizon; the
// Engine's stop() returns it.
TEST(BadInput, OverflowingDelaySaturatesToTheHorizon) {
  Hits h(6);
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(5ms), 0u);
  const TimerId a = w.schedule_after(Nanos::max(), Hit(&h, 0));
  const TimerId b = w.schedule_after(Nanos::max() - 1ns, Hit(&h, 1));
  const TimerId c = w.schedule_at(Nanos::max(), Hit(&h, 2));
  ASSERT_TRUE(a && b && c);
  ASSERT_TRUE(w.next_deadline().has_value());
  EXPECT_LE(*w.next_deadline(), w.horizon());
  EXPECT_EQ(w.advance(w.horizon() - w.tick()), 0u) << "ran before the horizon";
  EXPECT_TRUE(w.cancel(b));
  EXPECT_EQ(w.advance(Nanos::max()), 2u);
  EXPECT_EQ(h.ran[0].load() + h.ran[2].load(), 2);
  EXPECT_EQ(h.ran[1].load(), 0);

  Engine e(manual());
  std::vector<Timer> handles;
  handles.push_back(e.schedule_after(Nanos::max(), Hit(&h, 3)));
  handles.push_back(e.schedule_at(Nanos::max(), Hit(&h, 4)));
  handles.push_back(e.schedule_after_on(0, Nanos::max(), Hit(&h, 5)));
  for (const Timer& t : handles) ASSERT_TRUE(t);
  EXPECT_EQ(e.poll(0, advance_clock(std::chrono::hours(24 * 365 * 100))), 0u) << "ran a century in";
  EXPECT_EQ(e.stats().pending, 3u);
  EXPECT_EQ(e.stop().size(), 3u);
  for (std::size_t i = 3; i < 6; ++i) EXPECT_EQ(h.ran[i].load(), 0) << i;
}

// schedule_at() a deadline in the past (before now(), negative, the clock's minimum): due at once.
TEST(BadInput, DeadlineInThePastIsDueAtOnce) {
  Hits h(6);
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(10s), 0u);
  ASSERT_TRUE(w.schedule_at(1s, Hit(&h, 0)));
  ASSERT_TRUE(w.schedule_at(Nanos(-5), Hit(&h, 1)));
  ASSERT_TRUE(w.schedule_at(Nanos::min(), Hit(&h, 2)));
  EXPECT_EQ(w.advance(10s), 3u);

  Engine e(manual());
  const Nanos now = fake_now();
  ASSERT_TRUE(e.schedule_at(now - 1s, Hit(&h, 3)));
  ASSERT_TRUE(e.schedule_at(Nanos(-5), Hit(&h, 4)));
  ASSERT_TRUE(e.schedule_at(Nanos::min(), Hit(&h, 5)));
  EXPECT_EQ(e.poll(0, now), 3u);
  for (std::size_t i = 0; i < 6; ++i) EXPECT_EQ(h.ran[i].load(), 1) << i;
}

// ---------------------------------------------------------------------------------------------
// Options

// A tick outside [1 us, 1 h]: std::invalid_argument naming the tick and its value, from both
// constructors. The bounds themselves are accepted.
TEST(BadInput, TickOutOfRangeIsRejectedNamingTheValue) {
  const std::vector<std::pair<Nanos, std::string>> bad = {
      {0ns, "got 0ns"},
      {-1ms, "got -1000000ns"},
      {999ns, "got 999ns"},
      {1h + 1ns, "got 3600000000001ns"},
      {Nanos::max(), "got " + std::to_string(Nanos::max().count()) + "ns"}};
  for (const auto& entry : bad) {
    // Not a structured binding: clang before 16 cannot capture one in a lambda.
    const Nanos tick = entry.first;
    const std::string& value = entry.second;
    expect_invalid([&] { Wheel w({.tick = tick}); }, {"tick", value});
    expect_invalid(
        [&] {
          EngineOptions o = manual();
          o.tick = tick;
          Engine e(o);
        },
        {"tick", value});
  }
  for (Nanos tick : {Nanos(1us), Nanos(1h)}) {
    Wheel w({.tick = tick});
    EXPECT_EQ(w.tick(), tick);
    EngineOptions o = manual();
    o.tick = tick;
    Engine e(o);
    EXPECT_EQ(e.tick(), tick);
  }
}

TEST(BadInput, WheelNegativeStartIsRejectedNamingTheValue) {
  expect_invalid([] { Wheel w({.start = -1ns}); }, {"start", "got -1ns"});
  Wheel w({.start = 0ns});
  EXPECT_EQ(w.now(), 0ns);
}

// The pool indexes nodes with 32 bits: a max_pending above 2^32 - 1 can never be honoured.
TEST(BadInput, WheelMaxPendingBeyondThePoolIsRejectedNamingTheValue) {
  expect_invalid([] { Wheel w({.max_pending = std::size_t{1} << 32}); }, {"max_pending", "got 4294967296"});
  Wheel w({.max_pending = (std::size_t{1} << 32) - 1});
  EXPECT_EQ(w.pending_count(), 0u);
}

// A reserve is node memory for that many timers, in the same 32-bit-indexed pool: above 2^32 - 1 it
// can never be honoured.
TEST(BadInput, ReserveBeyondThePoolIsRejectedNamingTheValue) {
  expect_invalid([] { Wheel w({.reserve = std::size_t{1} << 32}); }, {"reserve", "got 4294967296"});
  expect_invalid(
      [] {
        EngineOptions o = manual();
        o.reserve_per_shard = std::size_t{1} << 32;
        Engine e(o);
      },
      {"reserve_per_shard", "got 4294967296"});
}

// A reserve above max_pending would hold memory no timer may ever use: a mistake, said at once. Equal
// is legal.
TEST(BadInput, ReserveAboveMaxPendingIsRejectedNamingTheValue) {
  expect_invalid([] { Wheel w({.max_pending = 100, .reserve = 101}); },
                 {"reserve", "max_pending (100)", "got 101"});
  Wheel w({.max_pending = 100, .reserve = 100});
  EXPECT_GE(w.stats().pool_capacity, 100u);
  expect_invalid(
      [] {
        EngineOptions o = manual();
        o.max_pending_per_shard = 100;
        o.reserve_per_shard = 101;
        Engine e(o);
      },
      {"reserve_per_shard", "max_pending_per_shard (100)", "got 101"});
  EngineOptions o = manual();
  o.max_pending_per_shard = 100;
  o.reserve_per_shard = 100;
  Engine e(o);
  e.start();
  EXPECT_EQ(e.poll(0), 0u);
}

// lock_memory locks the reserve; without one there is nothing to lock, and silently locking
// nothing would hide the mistake.
TEST(BadInput, LockMemoryWithoutAReserveIsRejected) {
  expect_invalid([] { Wheel w({.lock_memory = true}); }, {"lock_memory", "reserve", "got 0"});
  expect_invalid(
      [] {
        EngineOptions o = manual();
        o.lock_memory = true;
        Engine e(o);
      },
      {"lock_memory", "reserve_per_shard", "got 0"});
}

// While it lives, mlock is refused to this thread (and to threads it creates): CAP_IPC_LOCK is
// dropped from the thread's effective capabilities (kept in its permitted set, so it can be raised
// again) and the process's soft RLIMIT_MEMLOCK is 0. Both are put back on destruction.
class MemlockRefused {
 public:
  MemlockRefused() {
    EXPECT_EQ(::getrlimit(RLIMIT_MEMLOCK, &saved_limit_), 0);
    rlimit none = saved_limit_;
    none.rlim_cur = 0;
    EXPECT_EQ(::setrlimit(RLIMIT_MEMLOCK, &none), 0);
    EXPECT_EQ(::syscall(SYS_capget, &header_, caps_.data()), 0);
    saved_effective_ = caps_[0].effective;
    caps_[0].effective &= ~(1U << CAP_IPC_LOCK);
    EXPECT_EQ(::syscall(SYS_capset, &header_, caps_.data()), 0);
  }
  ~MemlockRefused() {
    caps_[0].effective = saved_effective_;
    EXPECT_EQ(::syscall(SYS_capset, &header_, caps_.data()), 0);
    EXPECT_EQ(::setrlimit(RLIMIT_MEMLOCK, &saved_limit_), 0);
  }
  MemlockRefused(const MemlockRefused&) = delete;
  MemlockRefused& operator=(const MemlockRefused&) = delete;

 private:
  static_assert(CAP_IPC_LOCK < 32, "CAP_IPC_LOCK is in the first capability word");
  rlimit saved_limit_{};
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  std::array<__user_cap_data_struct, _LINUX_CAPABILITY_U32S_3> caps_{};
  std::uint32_t saved_effective_ = 0;
};

// lock_memory where mlock is not permitted. The Wheel's constructor throws std::system_error naming
// the bytes and the limit; the Engine's shards lock on their own threads at start, where nothing can
// throw to the caller, so each runs with its reserve touched but not locked and the log hook says so,
// once per engine. Where it is permitted, the same options work (the control).
TEST(BadInput, RefusedMemoryLockThrowsOnTheWheelAndIsReportedByTheEngine) {
  {
    const MemlockRefused refused;
    try {
      Wheel w({.reserve = 1000, .lock_memory = true});
      ADD_FAILURE() << "lock_memory was refused, yet the Wheel was built";
    } catch (const std::system_error& err) {
      const std::string what = err.what();
      for (const char* word :
           {"reserve of 1000 timers", "64000 bytes", "mlock refused", "RLIMIT_MEMLOCK is 0 bytes"})
        EXPECT_NE(what.find(word), std::string::npos) << "\"" << word << "\" not in: " << what;
    }
    for (const Threads threads : {Threads::manual, Threads::workers}) {
      auto sink = std::make_shared<LogSink>();
      Hits h(1);
      EngineOptions o = threads == Threads::manual ? manual(2) : workers(2);
      o.reserve_per_shard = 1000;
      o.lock_memory = true;
      o.log = log_into(sink);
      Engine e(o);
      e.start();  // the shards reserve (caller-driven: here; else on their workers, before ready)
      const std::vector<std::string> said = sink->containing("not locked: mlock refused");
      ASSERT_EQ(said.size(), 1u) << "expected one notice for the two shards";
      EXPECT_NE(said[0].find("RLIMIT_MEMLOCK is 0 bytes"), std::string::npos) << said[0];
      ASSERT_TRUE(e.schedule_after_on(1, 0ns, Hit(&h, 0)));  // and the engine works
      if (threads == Threads::manual) {
        EXPECT_EQ(e.poll(1), 1u);
      }
      ASSERT_TRUE(eventually([&] { return h.runs.load(std::memory_order_acquire) == 1; }));
    }
  }
  // One page for the Wheel; 64 KiB for the shard (its 1 Ki-node hand-out reserve too): within the
  // usual 8 MiB RLIMIT_MEMLOCK even without CAP_IPC_LOCK.
  Wheel w({.reserve = 64, .lock_memory = true});
  EXPECT_GE(w.stats().pool_capacity, 64u);
  auto sink = std::make_shared<LogSink>();
  EngineOptions o = manual();
  o.reserve_per_shard = 64;
  o.lock_memory = true;
  o.log = log_into(sink);
  Engine e(o);
  e.start();
  EXPECT_TRUE(sink->containing("mlock").empty());
}

// The physical cores this process may run on, counted without hwloc: distinct (package, core)
// pairs of the CPUs in its affinity mask, from sysfs. (hwloc counts the cores of the cgroup's
// allowed CPUs, which is the same set unless the test runs under a narrower taskset.)
std::size_t physical_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (::sched_getaffinity(0, sizeof mask, &mask) != 0) return 0;
  std::set<std::pair<int, int>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    const std::string dir = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    int package = -1, core = cpu;
    std::ifstream(dir + "physical_package_id") >> package;
    std::ifstream(dir + "core_id") >> core;
    cores.emplace(package, core);
  }
  return cores.size();
}

TEST(BadInput, ZeroShardsMeansOnePerPhysicalCore) {
  const std::size_t cores = physical_cores();
  ASSERT_GE(cores, 1u);
  Hits h(cores);
  Engine e(workers(0));
  ASSERT_EQ(e.shard_count(), cores);
  EXPECT_EQ(e.stats().shards.size(), cores);
  for (std::size_t s = 0; s < cores; ++s) ASSERT_TRUE(e.schedule_after_on(s, 0ns, Hit(&h, s)));
  ASSERT_TRUE(eventually([&] { return h.runs.load(std::memory_order_acquire) == cores; }));
}

// More shards than physical cores is allowed (workers share cores). With pinning on and no cpus
// list, the constructor says so once through the log hook, naming both numbers; unpinned, or with
// no more shards than cores, it says nothing. Every shard runs its timers.
TEST(BadInput, MoreShardsThanCoresIsAllowedWithOneNotice) {
  const std::size_t cores = Engine(workers(0)).shard_count();
  const std::string notice =
      std::to_string(cores + 1) + " shards on " + std::to_string(cores) + " physical cores";
  auto sink = std::make_shared<LogSink>();
  {
    Hits h(cores + 1);
    EngineOptions o = workers(cores + 1);
    o.pin_workers = true;
    o.log = log_into(sink);
    Engine e(o);
    EXPECT_EQ(e.shard_count(), cores + 1);
    EXPECT_EQ(sink->containing("shards on").size(), 1u);
    ASSERT_EQ(sink->containing(notice).size(), 1u) << "expected a notice containing: " << notice;
    for (std::size_t s = 0; s <= cores; ++s) ASSERT_TRUE(e.schedule_after_on(s, 0ns, Hit(&h, s)));
    ASSERT_TRUE(eventually([&] { return h.runs.load(std::memory_order_acquire) == cores + 1; }));
    for (std::size_t s = 0; s <= cores; ++s) EXPECT_EQ(h.ran[s].load(), 1) << "shard " << s;
  }
  EXPECT_EQ(sink->containing("shards on").size(), 1u) << "said more than once";

  auto quiet = std::make_shared<LogSink>();
  EngineOptions unpinned = workers(cores + 1);
  unpinned.log = log_into(quiet);
  Engine a(unpinned);
  EngineOptions enough = workers(cores);
  enough.pin_workers = true;
  enough.log = log_into(quiet);
  Engine b(enough);
  EXPECT_TRUE(quiet->containing("shards on").empty());
}

TEST(BadInput, TooManyShardsIsRejectedNamingTheValue) {
  expect_invalid([] { Engine e(workers(4097)); }, {"shards", "at most 4096", "got 4097"});
  expect_invalid([] { Engine e(workers(std::numeric_limits<std::size_t>::max())); },
                 {"shards", std::to_string(std::numeric_limits<std::size_t>::max())});
}

// transfer_cap 0 would never move a hand-off into a wheel: rejected. 1 is legal: one hand-off per
// pass.
TEST(BadInput, ZeroTransferCapIsRejectedNamingTheValue) {
  expect_invalid(
      [] {
        EngineOptions o = manual();
        o.transfer_cap = 0;
        Engine e(o);
      },
      {"transfer_cap", "got 0"});
  Hits h(3);
  EngineOptions o = manual();
  o.transfer_cap = 1;
  Engine e(o);
  for (std::size_t i = 0; i < 3; ++i) ASSERT_TRUE(e.schedule_after(0ns, Hit(&h, i)));
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_EQ(e.poll(0), 0u);
  EXPECT_EQ(e.stats().transfer_cap_hits, 2u);
}

TEST(BadInput, NegativeHybridSpinIsRejectedNamingTheValue) {
  expect_invalid(
      [] {
        EngineOptions o = workers(1);
        o.wait = WaitStrategy::hybrid;
        o.hybrid_spin = -1ns;
        Engine e(o);
      },
      {"hybrid_spin", "got -1ns"});
}

// A spin past the end of the clock saturates instead of overflowing (UBSan checks the sum): the
// worker spins until there is work, as WaitStrategy::spin does, and still runs and stops.
TEST(BadInput, AHybridSpinUpToNanosMaxSaturates) {
  Hits h(1);
  EngineOptions o = workers(1);
  o.wait = WaitStrategy::hybrid;
  o.hybrid_spin = Nanos::max();
  Engine e(o);
  ASSERT_TRUE(e.schedule_after(1ms, Hit(&h, 0)));
  EXPECT_TRUE(eventually([&] { return h.runs.load() == 1; }));
  EXPECT_TRUE(e.stop().empty());
}

// The clock's first reading becomes each shard's start: a negative one is refused in the Engine's
// own terms, naming the option and the value, not the Wheel's `start`.
Nanos negative_clock() noexcept { return Nanos(-5); }
TEST(BadInput, ANegativeClockIsRejectedNamingTheClock) {
  expect_invalid(
      [] {
        EngineOptions o = manual();
        o.clock = &negative_clock;
        Engine e(o);
      },
      {"EngineOptions::clock", "-5ns", "must not be negative"});
}

// A clock of one's own with worker threads: a sleeping worker cannot time its sleep on it, so it
// sleeps until woken, and Engine::clock_moved() is what wakes it. Driven here by the test: the
// first move makes one timer due and not the other, so the worker must run exactly the first; the
// second move makes the other due. (A move that makes nothing due need not wake the worker at all:
// a signal that comes before it prepares its sleep is absorbed, and it sleeps on, rightly.)
TEST(BadInput, AnOwnClockWithWorkerThreadsSleepsUntilClockMoved) {
  Hits h(2);
  EngineOptions o = workers(1);
  o.clock = &fake_now;
  Engine e(o);
  ASSERT_TRUE(e.schedule_after(4ms, Hit(&h, 0)));
  ASSERT_TRUE(e.schedule_after(5ms, Hit(&h, 1)));
  advance_clock(4ms);
  e.clock_moved();
  ASSERT_TRUE(h.wait_runs(1));
  ASSERT_EQ(h.ran[0].load(), 1);
  EXPECT_EQ(h.ran[1].load(), 0) << "a timer ran before the engine's clock reached it";
  advance_clock(1ms);
  e.clock_moved();
  EXPECT_TRUE(h.wait_runs(2));
  EXPECT_EQ(h.ran[1].load(), 1);
  EXPECT_TRUE(e.stop().empty());
}

// ---------------------------------------------------------------------------------------------
// Callables

// An empty std::function by value is 32 bytes with this standard library, so the size check
// refuses it at compile time (compile_fail.oversized_callable checks that refusal). Wrapped by
// std::ref it compiles, and running it throws std::bad_function_call: the Wheel lets that leave
// advance() (the timer counts as fired); the Engine catches it and counts a callback error.
static_assert(sizeof(std::function<void()>) > 24, "an empty std::function by value must not fit a node");

TEST(BadInput, EmptyStdFunctionThrowsBadFunctionCallWhenItRuns) {
  std::function<void()> empty;
  Wheel w({.tick = 1ms});
  const TimerId id = w.schedule_after(1ms, std::ref(empty));
  ASSERT_TRUE(id);
  EXPECT_THROW(w.advance(1ms), std::bad_function_call);
  EXPECT_EQ(w.stats().fired, 1u);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.cancel(id));

  Engine e(manual());
  ASSERT_TRUE(e.schedule_after(0ns, std::ref(empty)));
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_EQ(e.stats().callback_errors, 1u);
  EXPECT_EQ(e.stats().fired, 1u);
}

// A null function pointer: refused at the schedule with Status::null_callback, nothing linked and
// nothing counted as rejected, for one-shot and periodic timers, on the Wheel and the Engine.
TEST(BadInput, NullFunctionPointerIsRefused) {
  void (*none)() = nullptr;
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.schedule_after(1ms, none).status(), Status::null_callback);
  EXPECT_EQ(w.schedule_every(1ms, none).status(), Status::null_callback);
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(w.stats().scheduled + w.stats().rejected, 0u);
  EXPECT_EQ(w.advance(10ms), 0u);

  Engine e(manual());
  EXPECT_EQ(e.schedule_after(0ns, none).status(), Status::null_callback);
  EXPECT_EQ(e.schedule_every(1ms, none).status(), Status::null_callback);
  EXPECT_EQ(e.poll(0, fake_now() + 10ms), 0u);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.scheduled + s.rejected, 0u);
  EXPECT_EQ(to_string(Status::null_callback), "null_callback");
}

// A periodic timer's period: <= 0, past 2^60 - 1 ns, or (fixed rate) no whole number of ticks.
TEST(BadInput, BadPeriodIsRefused) {
  auto fn = [] {};
  PeriodicOptions delay;
  delay.cadence = Cadence::fixed_delay;
  Wheel w({.tick = 1ms});
  Engine e(manual());
  for (Nanos p : {Nanos(0), Nanos(-1), Nanos(1500us), Nanos::max()}) {
    EXPECT_EQ(w.schedule_every(p, fn).status(), Status::bad_period) << p.count();
    EXPECT_EQ(e.schedule_every(p, fn).status(), Status::bad_period) << p.count();
  }
  EXPECT_TRUE(w.schedule_every(1500us, fn, delay)) << "fixed delay needs no whole ticks";
  EXPECT_TRUE(e.schedule_every(1500us, fn, delay));
  EXPECT_EQ(e.stats().rejected, 0u);
}

// A callback that throws: the Wheel's advance() lets the exception out (the timer counts as
// fired; the rest of the pass runs in the next call). The Engine catches it at the pass, counts it
// in stats().callback_errors, gives one notice through the log hook per engine, and goes on.
TEST(BadInput, ThrowingCallback) {
  Hits h(4);
  Wheel w({.tick = 1ms});
  ASSERT_TRUE(w.schedule_after(1ms, [] { throw std::runtime_error("bad callback"); }));
  ASSERT_TRUE(w.schedule_after(2ms, Hit(&h, 0)));
  EXPECT_THROW(w.advance(2ms), std::runtime_error);
  EXPECT_EQ(w.advance(2ms), 1u);
  EXPECT_EQ(w.stats().fired, 2u);

  auto sink = std::make_shared<LogSink>();
  EngineOptions o = manual();
  o.log = log_into(sink);
  Engine e(o);
  ASSERT_TRUE(e.schedule_after(0ns, [] { throw std::runtime_error("bad callback"); }));
  ASSERT_TRUE(e.schedule_after(0ns, Hit(&h, 1)));
  ASSERT_TRUE(e.schedule_after(0ns, [] { throw 7; }));
  ASSERT_TRUE(e.schedule_after(1ms, Hit(&h, 2)));
  EXPECT_EQ(e.poll(0, advance_clock(1ms)), 4u);
  EXPECT_EQ(e.stats().callback_errors, 2u);
  EXPECT_EQ(sink->containing("callback_errors").size(), 1u) << "one notice per engine";
  EXPECT_EQ(sink->lines.size(), 1u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(h.ran[i].load(), 1) << i;
}

// ---------------------------------------------------------------------------------------------
// Handles

// cancel() of an id or handle that names no pending timer returns false and touches nothing: a
// default one, a failed schedule's, a fired timer's, a cancelled one's (the second cancel), a
// stale one whose node now holds another timer, and (Wheel) an id forged from a raw integer.
// The ids of a wheel (tick 1 ms, max_pending 3) that name no pending timer, each for its own
// reason, with the two timers left pending: `kept`, and `reused`, which holds the fired timer's node.
struct DeadIds {
  TimerId kept, fired, cancelled, failed, reused;
  // Ids the wheel never handed out: a lifetime of reused's node two ahead, an index no node had.
  std::vector<TimerId> forged() const {
    return {TimerId::from_raw(reused.raw() + (std::uint64_t{8} << 32)),
            TimerId::from_raw((std::uint64_t{1} << 32) | 0xfffffff0u), TimerId::from_raw(~std::uint64_t{0})};
  }
};

DeadIds dead_ids(Wheel& w, Hits& h) {
  DeadIds d;
  d.kept = w.schedule_after(1h, Hit(&h, 0));
  d.fired = w.schedule_after(1ms, Hit(&h, 1));
  d.cancelled = w.schedule_after(1h, Hit(&h, 2));
  d.failed = w.schedule_after(1h, Hit(&h, 3));
  EXPECT_TRUE(d.kept && !d.failed);
  EXPECT_TRUE(w.cancel(d.cancelled));
  EXPECT_EQ(w.advance(1ms), 1u);
  d.reused = w.schedule_after(1h, Hit(&h, 4));  // takes the fired timer's node
  EXPECT_TRUE(d.reused);
  EXPECT_EQ(d.reused.raw() & 0xffffffffu, d.fired.raw() & 0xffffffffu) << "the test meant a reused node";
  return d;
}

TEST(BadInput, CancelOfDefaultFailedStaleOrForgedHandlesIsFalse) {
  Hits h(8);
  Wheel w({.tick = 1ms, .max_pending = 3});
  const DeadIds d = dead_ids(w, h);
  const std::size_t pending = w.pending_count();
  for (const TimerId id : {TimerId{}, d.failed, d.fired, d.cancelled}) EXPECT_FALSE(w.cancel(id));
  for (const TimerId id : d.forged()) EXPECT_FALSE(w.cancel(id));
  EXPECT_EQ(w.pending_count(), pending);
  EXPECT_EQ(w.stats().cancelled, 1u);
  EXPECT_TRUE(w.cancel(d.reused)) << "the node's current timer was touched";

  Engine e(manual());
  Timer none;
  Timer no_shard = e.schedule_after_on(5, 0ns, Hit(&h, 5));
  Timer done = e.schedule_after(0ns, Hit(&h, 6));
  Timer later = e.schedule_after(1h, Hit(&h, 7));
  ASSERT_TRUE(done && later);
  ASSERT_FALSE(no_shard);
  EXPECT_EQ(e.poll(0), 1u);
  Timer twice = later;
  EXPECT_TRUE(twice.cancel());
  EXPECT_FALSE(none.cancel());
  EXPECT_FALSE(no_shard.cancel());
  EXPECT_FALSE(done.cancel());
  EXPECT_FALSE(later.cancel()) << "second cancel";
  EXPECT_FALSE(twice.cancel());
  EXPECT_EQ(e.poll(0), 0u);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.cancelled, 1u);
  EXPECT_EQ(s.fired, 1u);
  EXPECT_EQ(s.pending, 0u);
  EXPECT_EQ(h.ran[7].load(), 0);
}

// prefetch() is a hint whatever the id: for a default, failed, fired, cancelled or forged id, for a
// live one, and on a wheel that never handed out a node, it changes nothing the wheel does or
// reports, and the live timers still cancel and fire as before.
TEST(BadInput, PrefetchOfAnyIdChangesNothing) {
  Wheel empty({.tick = 1ms});
  for (const TimerId id : {TimerId{}, TimerId::from_raw(~std::uint64_t{0}), TimerId::from_raw(1)}) {
    empty.prefetch(id);
  }
  EXPECT_EQ(empty.pending_count(), 0u);
  EXPECT_EQ(empty.stats().pool_nodes, 0u);

  Hits h(8);
  Wheel w({.tick = 1ms, .max_pending = 3});
  const DeadIds d = dead_ids(w, h);
  const WheelStats before = w.stats();
  std::vector<TimerId> ids{TimerId{}, d.failed, d.fired, d.cancelled, d.kept, d.reused};
  for (const TimerId id : d.forged()) ids.push_back(id);
  for (const TimerId id : ids) w.prefetch(id);
  const WheelStats after = w.stats();
  EXPECT_EQ(w.pending_count(), 2u);
  EXPECT_EQ(after.scheduled, before.scheduled);
  EXPECT_EQ(after.cancelled, before.cancelled);
  EXPECT_EQ(after.fired, before.fired);
  EXPECT_EQ(after.pool_nodes, before.pool_nodes);
  EXPECT_FALSE(w.cancel(d.cancelled));
  EXPECT_TRUE(w.cancel(d.kept));
  EXPECT_EQ(w.advance(1h + 1ms), 1u) << "the reused node's timer fires";
  EXPECT_EQ(h.ran[4].load(), 1);
  EXPECT_EQ(h.ran[0].load() + h.ran[2].load() + h.ran[3].load(), 0);
}

// ---------------------------------------------------------------------------------------------
// The Engine's lifecycle

// After stop(): every schedule fails with Status::stopped (schedule_after_on a missing shard still says
// no_such_shard: the shard is checked first), the handle tests false, names shard 0 and cancels
// nothing, the callable is destroyed at once, and the refusal counts in stats().rejected. A second
// stop() returns nothing; poll() runs nothing.
TEST(BadInput, ScheduleAfterStopFailsWithStopped) {
  Hits h(5);
  Engine e(manual(2));
  EXPECT_TRUE(e.stop().empty());
  std::vector<Timer> refused;
  refused.push_back(e.schedule_after(0ns, Hit(&h, 0)));
  refused.push_back(e.schedule_at(fake_now(), Hit(&h, 1)));
  refused.push_back(e.schedule_after_on(1, 1ms, Hit(&h, 2)));
  refused.push_back(e.schedule_after_on(Engine::kAnyShard, 1ms, Hit(&h, 3)));
  for (Timer& t : refused) {
    EXPECT_FALSE(t);
    EXPECT_EQ(t.status(), Status::stopped);
    EXPECT_EQ(t.shard(), 0u);
    EXPECT_FALSE(t.cancel());
  }
  EXPECT_EQ(e.schedule_after_on(2, 0ns, Hit(&h, 4)).status(), Status::no_such_shard);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h.destroyed[i].load(), 1) << "callable " << i;
  EXPECT_EQ(e.stats().rejected, 4u);
  EXPECT_TRUE(e.stop().empty());
  EXPECT_EQ(e.poll(0, advance_clock(1s)), 0u);
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(h.ran[i].load(), 0) << i;

  Engine threaded(workers(1));
  ASSERT_TRUE(threaded.schedule_after(1h, [] {}));
  EXPECT_EQ(threaded.stop().size(), 1u);
  EXPECT_EQ(threaded.schedule_after(0ns, [] {}).status(), Status::stopped);
  EXPECT_EQ(threaded.stats().rejected, 1u);
}

// stop() from inside one of the engine's callbacks would join the thread it runs on: refused with
// std::logic_error saying so; the engine goes on.
TEST(BadInput, StopFromACallbackThrowsLogicError) {
  Hits h(1);
  Engine e(manual());
  std::string what;
  ASSERT_TRUE(e.schedule_after(0ns, [e = &e, what = &what] {
    try {
      (void)e->stop();
    } catch (const std::logic_error& err) {
      *what = err.what();
    }
  }));
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_NE(what.find("stop() called from inside one of its timer callbacks"), std::string::npos) << what;
  ASSERT_TRUE(e.schedule_after(0ns, Hit(&h, 0)));
  EXPECT_EQ(e.poll(0), 1u) << "the engine stopped after a refused stop()";
  EXPECT_EQ(e.stats().callback_errors, 0u);
}

// Re-entry from a callback: Wheel::advance() returns 0 and does nothing; Engine::poll() of the
// shard being polled throws std::logic_error (out of the callback, where it can be caught).
TEST(BadInput, AdvanceOrPollFromInsideACallbackIsRefused) {
  Hits h(2);
  Wheel w({.tick = 1ms});
  std::size_t inner = 99;
  ASSERT_TRUE(w.schedule_after(1ms, [w = &w, inner = &inner] { *inner = w->advance(1h); }));
  ASSERT_TRUE(w.schedule_after(2ms, Hit(&h, 0)));
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_EQ(inner, 0u);
  EXPECT_EQ(w.now(), 1ms) << "the inner advance() moved time";
  EXPECT_EQ(h.ran[0].load(), 0) << "the inner advance() ran a timer";

  Engine e(manual());
  bool refused = false;
  ASSERT_TRUE(e.schedule_after(0ns, [e = &e, refused = &refused] {
    try {
      (void)e->poll(0);
    } catch (const std::logic_error&) {
      *refused = true;
    }
  }));
  ASSERT_TRUE(e.schedule_after(1ms, Hit(&h, 1)));
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_TRUE(refused);
  EXPECT_EQ(e.poll(0, advance_clock(1ms)), 1u) << "the refused poll left the shard marked as polled";
}

// ---------------------------------------------------------------------------------------------
// Limits

// Schedules beyond max_pending fail with Status::max_pending_reached, change nothing (the callable
// is destroyed) and count in stats().rejected. The Wheel and the Engine both free a place at once
// when a timer is claimed to run or its cancel wins (the Engine with no pass of the shard between).
TEST(BadInput, MaxPendingReachedRejectsAndCounts) {
  constexpr std::size_t kLimit = 10;
  Hits h(2 * kLimit + 6);
  Wheel w({.tick = 1ms, .max_pending = kLimit});
  std::vector<TimerId> ids;
  for (std::size_t i = 0; i < kLimit; ++i) ids.push_back(w.schedule_after(1h, Hit(&h, i)));
  const TimerId over = w.schedule_after(0ns, Hit(&h, kLimit));
  EXPECT_FALSE(over);
  EXPECT_EQ(over.status(), Status::max_pending_reached);
  EXPECT_EQ(h.destroyed[kLimit].load(), 1);
  EXPECT_EQ(w.stats().rejected, 1u);
  EXPECT_EQ(w.pending_count(), kLimit);
  EXPECT_TRUE(w.cancel(ids[0]));
  EXPECT_TRUE(w.schedule_after(1h, Hit(&h, kLimit + 1)));

  constexpr std::size_t kBase = kLimit + 2;
  EngineOptions o = manual();
  o.max_pending_per_shard = kLimit;
  Engine e(o);
  for (std::size_t i = 0; i < kLimit; ++i)
    ASSERT_TRUE(e.schedule_after(i == 0 ? 0ns : Nanos(1h), Hit(&h, kBase + i)));
  const Timer refused = e.schedule_after(1h, Hit(&h, kBase + kLimit));
  EXPECT_FALSE(refused);
  EXPECT_EQ(refused.status(), Status::max_pending_reached);
  EXPECT_EQ(h.destroyed[kBase + kLimit].load(), 1);
  EXPECT_EQ(e.stats().rejected, 1u);
  EXPECT_EQ(e.stats().shards[0].rejected, 1u);
  EXPECT_EQ(e.poll(0), 1u);  // the first timer fires: its place is free again
  Timer last = e.schedule_after(1h, Hit(&h, kBase + kLimit + 1));
  EXPECT_TRUE(last);
  EXPECT_EQ(e.schedule_after(1h, Hit(&h, kBase + kLimit + 2)).status(), Status::max_pending_reached);
  EXPECT_TRUE(last.cancel());  // no poll between: the place is free at once
  EXPECT_TRUE(e.schedule_after(1h, Hit(&h, kBase + kLimit + 3)));
  EXPECT_EQ(e.stop().size(), kLimit);
}

// schedule_after_on() a shard that does not exist: Status::no_such_shard, the callable destroyed at once,
// nothing counted (no shard to count it in). Engine::kAnyShard is not such a shard.
TEST(BadInput, ScheduleOnAMissingShardFailsWithNoSuchShard) {
  Hits h(4);
  Engine e(manual(2));
  for (std::size_t shard : {std::size_t{2}, std::size_t{1000}, Engine::kAnyShard - 1}) {
    const Timer t = e.schedule_after_on(shard, 0ns, Hit(&h, 0));
    EXPECT_FALSE(t);
    EXPECT_EQ(t.status(), Status::no_such_shard) << shard;
  }
  EXPECT_EQ(h.destroyed[0].load(), 3);
  const EngineStats s = e.stats();
  EXPECT_EQ(s.rejected, 0u);
  EXPECT_EQ(s.scheduled + s.queue_depth, 0u);
  const Timer any = e.schedule_after_on(Engine::kAnyShard, 0ns, Hit(&h, 1));
  ASSERT_TRUE(any);
  EXPECT_LT(any.shard(), 2u);
  EXPECT_EQ(e.poll(any.shard()), 1u);
}

// poll() and next_deadline() with worker threads: std::logic_error; of a shard that does not
// exist: std::out_of_range naming it.
TEST(BadInput, PollMisuseIsRefused) {
  Engine threaded(workers(1));
  EXPECT_THROW((void)threaded.poll(0), std::logic_error);
  EXPECT_THROW((void)threaded.poll(0, 1s, 1), std::logic_error);
  EXPECT_THROW((void)threaded.next_deadline(0), std::logic_error);

  Engine e(manual(2));
  try {
    (void)e.poll(2);
    ADD_FAILURE() << "poll(2) of 2 shards accepted";
  } catch (const std::out_of_range& err) {
    EXPECT_NE(std::string(err.what()).find("shard 2 of 2"), std::string::npos) << err.what();
  }
  EXPECT_THROW((void)e.poll(Engine::kAnyShard), std::out_of_range);
  EXPECT_THROW((void)e.next_deadline(7), std::out_of_range);
  EXPECT_EQ(e.poll(1), 0u);
}

// Time never goes back: an earlier now is taken as the current one. Nothing runs early, and time
// is not moved back (Wheel::now() stays).
TEST(BadInput, TimeGoingBackIsTreatedAsNow) {
  Hits h(2);
  Wheel w({.tick = 1ms});
  EXPECT_EQ(w.advance(10ms), 0u);
  ASSERT_TRUE(w.schedule_after(5ms, Hit(&h, 0)));
  EXPECT_EQ(w.advance(1ms), 0u);
  EXPECT_EQ(w.advance(-1h), 0u);
  EXPECT_EQ(w.now(), 10ms);
  EXPECT_EQ(w.advance(15ms), 1u);

  Engine e(manual());
  const Nanos now = fake_now();
  ASSERT_TRUE(e.schedule_after(5ms, Hit(&h, 1)));
  EXPECT_EQ(e.poll(0, now), 0u);
  EXPECT_EQ(e.poll(0, now - 1h), 0u);
  EXPECT_EQ(e.poll(0, Nanos(0)), 0u);
  EXPECT_EQ(e.poll(0, now + 5ms), 1u);
}

// ---------------------------------------------------------------------------------------------
// Reschedule, the queries, clear() and for_each_pending() (the Wheel's; the Engine has none yet)

// reschedule() and the queries of an id that names no pending timer: false or nullopt, nothing
// touched, whatever the reason (default, failed, fired, cancelled, cleared, node reused, forged).
TEST(BadInput, RescheduleAndQueriesOfHandlesThatNameNoPendingTimer) {
  Hits h(8);
  Wheel w({.tick = 1ms, .max_pending = 3});
  const DeadIds d = dead_ids(w, h);
  EXPECT_EQ(w.clear(), 2u);                                  // kept and reused: cleared
  const TimerId current = w.schedule_after(2h, Hit(&h, 5));  // takes a recycled node
  ASSERT_TRUE(current);
  const WheelStats before = w.stats();
  std::vector<TimerId> ids{TimerId{}, d.failed, d.fired, d.cancelled, d.kept, d.reused};
  for (const TimerId id : d.forged()) ids.push_back(id);
  for (const TimerId id : ids) {
    EXPECT_FALSE(w.reschedule(id, 5ms)) << id.raw();
    EXPECT_FALSE(w.reschedule_after(id, 5ms)) << id.raw();
    EXPECT_FALSE(w.is_pending(id)) << id.raw();
    EXPECT_EQ(w.deadline(id), std::nullopt) << id.raw();
    EXPECT_EQ(w.remaining(id), std::nullopt) << id.raw();
  }
  EXPECT_EQ(w.stats().rescheduled, before.rescheduled);
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.deadline(current), 2h + 1ms) << "the node's current timer was touched";
  EXPECT_EQ(h.ran[0].load() + h.ran[4].load(), 0) << "clear() ran a callback";
  EXPECT_EQ(h.destroyed[0].load() + h.destroyed[4].load(), 2) << "clear() did not destroy each callable once";
}

// The Engine's side of the row above: Timer::reschedule() and the queries of a handle that names no
// pending timer (default, failed, fired, cancelled, cleared, node reused, or a forged raw value):
// false or nullopt, nothing touched, on the shard's thread and from another thread.
TEST(BadInput, EngineRescheduleAndQueriesOfHandlesThatNameNoPendingTimer) {
  Tally t(6);
  Engine e(manual(1));
  e.own_shard(0);
  Timer fired = e.schedule_after(1ms, Probe(&t, 0));
  Timer cancelled = e.schedule_after(1ms, Probe(&t, 1));
  Timer cleared = e.schedule_after(1h, Probe(&t, 2));
  Timer failed = e.schedule_after_on(3, 1ms, Probe(&t, 3));
  ASSERT_TRUE(cancelled.cancel());
  advance_clock(1ms);
  ASSERT_EQ(e.poll(0), 1u);
  ASSERT_EQ(e.clear(0), 1u);
  Timer current = e.schedule_after(2h, Probe(&t, 4));  // takes a recycled node
  ASSERT_TRUE(current);
  const std::optional<Nanos> current_deadline = current.deadline();
  std::vector<Timer> dead{Timer{},
                          failed,
                          fired,
                          cancelled,
                          cleared,
                          e.timer_from_raw(fired.raw()),
                          e.timer_from_raw(0x1234'5679'0000'0007U),
                          e.timer_from_raw(~std::uint64_t{0})};
  const auto check = [&] {
    for (Timer& d : dead) {
      EXPECT_FALSE(d.reschedule_after(5ms)) << d.raw();
      EXPECT_FALSE(d.reschedule(fake_now())) << d.raw();
      EXPECT_FALSE(d.is_pending()) << d.raw();
      EXPECT_EQ(d.deadline(), std::nullopt) << d.raw();
      EXPECT_EQ(d.remaining(), std::nullopt) << d.raw();
    }
  };
  check();
  std::thread([&] { check(); }).join();
  EXPECT_EQ(current.deadline(), current_deadline) << "the node's current timer was touched";
  EXPECT_EQ(e.stats().pending, 1u);
  EXPECT_EQ(t.ran[1].load() + t.ran[2].load(), 0);
  EXPECT_EQ(t.destroyed[1].load() + t.destroyed[2].load(), 2);
  EXPECT_TRUE(current.cancel());
  e.release_shard(0);
}

// Engine::post_clear() of a shard that does not exist throws std::out_of_range naming it, before
// and after stop(); once stop() has begun, post_clear() and post_clear_all() of a good shard are
// refused (false, nothing posted: stop() hands the timers back).
TEST(BadInput, PostClearOfAMissingShardOrAfterStopIsRefused) {
  Tally t(2);
  Engine manual_engine(manual(2));
  Engine worker_engine(workers(1));
  for (Engine* e : {&manual_engine, &worker_engine}) {
    try {
      (void)e->post_clear(e->shard_count());
      ADD_FAILURE() << "post_clear() of a missing shard did not throw";
    } catch (const std::out_of_range& error) {
      EXPECT_NE(std::string(error.what()).find("shard " + std::to_string(e->shard_count()) + " of"),
                std::string::npos)
          << error.what();
    }
  }
  Timer a = manual_engine.schedule_after_on(1, 1h, Probe(&t, 0));
  Timer b = worker_engine.schedule_after_on(0, 1h, Probe(&t, 1));
  std::vector<Timer> back = manual_engine.stop();
  std::vector<Timer> back_w = worker_engine.stop();
  ASSERT_EQ(back.size() + back_w.size(), 2u);
  for (Engine* e : {&manual_engine, &worker_engine}) {
    EXPECT_FALSE(e->post_clear(0));
    EXPECT_FALSE(e->post_clear_all());
    EXPECT_THROW((void)e->post_clear(7), std::out_of_range);
  }
  EXPECT_TRUE(a.is_pending() && b.is_pending()) << "a refused clear cancelled something";
  EXPECT_TRUE(a.cancel() && b.cancel());
}

// A deadline in the past, negative, or past the horizon (an overflowing delay included) is taken
// as schedule_at() takes it: due in the next advance(), or clamped to horizon().
TEST(BadInput, RescheduleToAPastOrOverflowingDeadlineIsAsASchedule) {
  Hits h(3);
  Wheel w({.tick = 1ms, .start = 10ms});
  const TimerId past = w.schedule_after(1h, Hit(&h, 0));
  const TimerId negative = w.schedule_after(1h, Hit(&h, 1));
  const TimerId far = w.schedule_after(1ms, Hit(&h, 2));
  EXPECT_TRUE(w.reschedule(past, 3ms));
  EXPECT_TRUE(w.reschedule(negative, Nanos::min()));
  EXPECT_TRUE(w.reschedule_after(far, Nanos::max()));
  EXPECT_EQ(w.deadline(negative), 0ns);
  EXPECT_EQ(w.deadline(far), w.horizon());
  EXPECT_EQ(w.advance(10ms), 2u) << "the past and negative ones, at the same now";
  EXPECT_EQ(w.advance(1000h), 0u);
  EXPECT_TRUE(w.reschedule(far, Nanos::max()));
  EXPECT_EQ(w.deadline(far), w.horizon());
}

// A callback rescheduling its own timer gets false: a one-shot timer is firing (schedule a new one
// instead); a periodic one's next run is linked when its callback returns, on its own schedule.
TEST(BadInput, ACallbackReschedulingItsOwnTimerGetsFalse) {
  struct Self {
    Wheel* w;
    TimerId id;
    int runs = 0;
    int refused = 0;
  };
  Wheel w({.tick = 1ms});
  Self once{&w, {}};
  Self every{&w, {}};
  once.id = w.schedule_after(1ms, [s = &once] {
    ++s->runs;
    s->refused += s->w->reschedule_after(s->id, 1ms) ? 0 : 1;
  });
  every.id = w.schedule_every(2ms, [s = &every] {
    ++s->runs;
    s->refused += s->w->reschedule_after(s->id, 1ms) ? 0 : 1;
  });
  for (Nanos t = 1ms; t <= 6ms; t += 1ms) w.advance(t);
  EXPECT_EQ(once.runs, 1);
  EXPECT_EQ(once.refused, 1);
  EXPECT_EQ(every.runs, 3) << "at 2, 4 and 6 ms: its schedule did not move";
  EXPECT_EQ(every.refused, 3);
}

// clear() from a callback is refused: it returns 0 and changes nothing.
TEST(BadInput, ClearFromInsideACallbackIsRefused) {
  Hits h(2);
  Wheel w({.tick = 1ms});
  std::size_t inner = 99;
  ASSERT_TRUE(w.schedule_after(1ms, [w = &w, inner = &inner] { *inner = w->clear(); }));
  ASSERT_TRUE(w.schedule_after(2ms, Hit(&h, 0)));
  EXPECT_EQ(w.advance(1ms), 1u);
  EXPECT_EQ(inner, 0u);
  EXPECT_EQ(w.pending_count(), 1u);
  EXPECT_EQ(w.advance(2ms), 1u);
  EXPECT_EQ(h.ran[0].load(), 1);
}

#ifndef NDEBUG
// A for_each_pending() visitor that changes the wheel fails an assertion in builds with assertions
// (the sanitizer builds of tools/run.sh check); its effect is undefined without them.
TEST(BadInput, AVisitorThatChangesTheWheelFailsAnAssertion) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto visit_and = [](auto change) {
    Wheel w({.tick = 1ms});
    const TimerId id = w.schedule_after(1ms, [] {});
    w.for_each_pending([&](TimerId, Nanos) { change(w, id); });
  };
  const char* message = "a visitor must not change the wheel";
  EXPECT_DEATH(visit_and([](Wheel& w, TimerId) { (void)w.schedule_after(1ms, [] {}); }), message);
  EXPECT_DEATH(visit_and([](Wheel& w, TimerId id) { w.cancel(id); }), message);
  EXPECT_DEATH(visit_and([](Wheel& w, TimerId id) { w.reschedule(id, 5ms); }), message);
  EXPECT_DEATH(visit_and([](Wheel& w, TimerId) { w.clear(); }), message);
  EXPECT_DEATH(visit_and([](Wheel& w, TimerId) { w.advance(5ms); }), message);
}
#endif

}  // namespace
}  // namespace tickwheel::test
