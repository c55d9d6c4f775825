// tests/support.hpp — helpers shared by the test files: a counting test type that catches a
// callable destroyed twice or never, tick arithmetic done the slow obvious way, a log of which
// timer ran when, the expected stats() counters of a Wheel, the seed plumbing of the randomized
// tiers, and the minor-fault count of the reserve tests.
#pragma once

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "tickwheel/wheel.hpp"

namespace tickwheel::test {

using namespace std::chrono_literals;

// Whether this build runs under ThreadSanitizer, whose shadow and synchronisation metadata take
// page faults of their own that a fault count cannot tell from the program's.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kThreadSanitizer = true;
#elif defined(__has_feature)
inline constexpr bool kThreadSanitizer = __has_feature(thread_sanitizer);
#else
inline constexpr bool kThreadSanitizer = false;
#endif

// Minor page faults of the calling thread so far (getrusage): a first touch of anonymous memory is
// one, and a reserve's purpose is to take them all before the hot path.
inline std::uint64_t minor_faults() {
  rusage usage{};
  EXPECT_EQ(::getrusage(RUSAGE_THREAD, &usage), 0);
  return static_cast<std::uint64_t>(usage.ru_minflt);
}

// The fewest minor faults of up to `tries` calls of `attempt`, which builds its own subject, runs
// the loop under test and returns the faults that loop took; it stops at the first call that took
// none. Why more than one: the kernel can take back a page of a range that was committed and fault
// it in again at the next access (khugepaged collapsing small pages into a huge one, compaction
// migrating a page). That befalls the process, not the code, and seldom enough that the next try
// takes none. Memory that the code failed to commit faults on every try, so a reserve that misses
// any is still caught.
template <class Attempt>
std::uint64_t fewest_minor_faults(Attempt attempt, int tries = 3) {
  std::uint64_t fewest = attempt();
  for (int i = 1; i < tries && fewest != 0; ++i) fewest = std::min(fewest, attempt());
  return fewest;
}

// Counts the live copies of a callable's capture. Every constructor adds one and the destructor
// takes one away, so `live` is the number of objects not yet destroyed: it must come back to
// exactly 0 (a negative value means something was destroyed twice). 8 bytes, so it fits in a
// callback beside two more words.
struct LiveCount {
  long live = 0;
  long constructed = 0;
};

class Counted {
 public:
  explicit Counted(LiveCount* c) noexcept : c_(c) { add(); }
  Counted(const Counted& o) noexcept : c_(o.c_) { add(); }
  Counted(Counted&& o) noexcept : c_(o.c_) { add(); }
  Counted& operator=(const Counted&) = delete;
  Counted& operator=(Counted&&) = delete;
  ~Counted() { --c_->live; }

 private:
  void add() noexcept {
    ++c_->live;
    ++c_->constructed;
  }
  LiveCount* c_;
};
static_assert(sizeof(Counted) == 8);

// The wheel's tick of a deadline: ceil(deadline / tick), computed without the wheel. Exact for
// every int64 deadline, negative ones included; the caller clamps to the horizon.
inline std::int64_t ceil_ticks(Nanos deadline, Nanos tick) {
  const std::int64_t d = deadline.count();
  const std::int64_t t = tick.count();
  std::int64_t q = d / t;  // truncates toward zero: already the ceiling for d <= 0
  if (d > 0 && d % t != 0) ++q;
  return q;
}
inline std::int64_t floor_ticks(Nanos now, Nanos tick) {
  const std::int64_t n = now.count();
  const std::int64_t t = tick.count();
  std::int64_t q = n / t;
  if (n < 0 && n % t != 0) --q;
  return q;
}
// Last tick a Nanos can hold at this tick size: horizon() in ticks.
inline std::int64_t max_ticks(Nanos tick) { return std::numeric_limits<std::int64_t>::max() / tick.count(); }

inline Nanos saturating_add(Nanos a, Nanos b) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a.count(), b.count(), &r)) {
    return b.count() > 0 ? Nanos::max() : Nanos::min();
  }
  return Nanos(r);
}

// Geometry, from the wheel's constants (never hard-coded, so the tests follow a change of
// geometry): level L has a granularity of level_unit(L) ticks and holds timers less than
// level_reach(L) ticks ahead.
constexpr std::int64_t level_unit(unsigned level) { return std::int64_t{1} << (Wheel::kLevelBits * level); }
constexpr std::int64_t level_reach(unsigned level) { return std::int64_t{Wheel::kSlots} * level_unit(level); }
static_assert(Wheel::kSlots == 2 * level_unit(1), "each level covers two revolutions of its granularity");

// Tick distances at and around every level boundary up to `top_level`: m * unit(L) + {-1, 0, +1}
// for m in {1, G-1, G, G+1, S-1, S, S+1} (G = units per next-level unit, S = slots per level).
inline std::vector<std::int64_t> boundary_ticks(unsigned top_level) {
  std::vector<std::int64_t> out;
  const std::int64_t g = level_unit(1);
  const std::int64_t s = Wheel::kSlots;
  for (unsigned level = 0; level <= top_level && level < Wheel::kLevels; ++level) {
    for (std::int64_t m : {std::int64_t{1}, g - 1, g, g + 1, s - 1, s, s + 1}) {
      for (std::int64_t d : {-1, 0, 1}) {
        const std::int64_t t = m * level_unit(level) + d;
        if (t >= 1) out.push_back(t);
      }
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// What the callbacks of a Wheel test record: which timer ran, and the wheel's now() when it did.
struct RunLog {
  Wheel* wheel;
  std::vector<std::pair<int, Nanos>> runs{};
  // The times timer `who` ran at, in order.
  std::vector<Nanos> of(int who) const {
    std::vector<Nanos> out;
    for (const auto& [w, at] : runs) {
      if (w == who) out.push_back(at);
    }
    return out;
  }
};

// A callable that logs its run as timer `who`. 16 bytes, so it fits a periodic timer too.
struct LogRun {
  RunLog* log;
  int who;
  void operator()() const { log->runs.emplace_back(who, log->wheel->now()); }
};
static_assert(sizeof(LogRun) <= 16);

// Advances one tick at a time up to `until`, so every tick on the way is a call of its own.
inline void tick_to(Wheel& w, Nanos until) {
  while (w.now() < until) w.advance(w.now() + w.tick());
}

// The stats() counters a test expects of a Wheel after its calls.
struct WheelCounts {
  std::uint64_t scheduled = 0;
  std::uint64_t fired = 0;
  std::uint64_t cancelled = 0;
  std::uint64_t rejected = 0;
  std::uint64_t rescheduled = 0;
};
inline void expect_counts(const Wheel& w, const WheelCounts& want) {
  const WheelStats s = w.stats();
  EXPECT_EQ(s.scheduled, want.scheduled);
  EXPECT_EQ(s.fired, want.fired);
  EXPECT_EQ(s.cancelled, want.cancelled);
  EXPECT_EQ(s.rejected, want.rejected);
  EXPECT_EQ(s.rescheduled, want.rescheduled);
}

// Seed plumbing of the randomized tiers: TICKWHEEL_SEED replays a run, otherwise a fresh seed.
inline std::uint64_t seed_from_env_or_random() {
  if (const char* s = std::getenv("TICKWHEEL_SEED"); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  std::random_device rd;
  return (std::uint64_t{rd()} << 32) ^ rd();
}

inline std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  if (const char* s = std::getenv(name); s != nullptr && *s != '\0') {
    return std::strtoull(s, nullptr, 0);
  }
  return fallback;
}

inline std::string replay_hint(std::uint64_t seed) {
  return "seed " + std::to_string(seed) + " (replay: TICKWHEEL_SEED=" + std::to_string(seed) +
         " ./tickwheel-tests --gtest_filter='<this test>')";
}

}  // namespace tickwheel::test
