// The Wheel's cascade, with counters only: cascading is paced, never bursty. Timers further out
// than level 0 are moved down the levels as time passes; the wheel promises to move the next upper
// slot a share per pass, in proportion to the time passed, so the work of one advance() call
// (stats().max_pass_work = fires + moves in one call) stays near the mean work per pass. These
// tests check that with counters, never with time, and check that nothing is lost, early or late
// when time jumps across many upper slots at once.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "support.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

// What the callbacks observed. A callback captures a pointer to this and its own deadline.
struct Observed {
  Nanos tick{1ms};
  Nanos pass_now{0};   // the now passed to the advance() call that is running
  Nanos prev_now{-1};  // the now of the call before it
  std::uint64_t fired = 0;
  std::uint64_t early = 0;  // ran in a call whose now was before the rounded deadline
  std::uint64_t late = 0;   // a previous call (with no limit) had already reached its rounded deadline
  Nanos first_bad{0};
};

auto observer(Observed& o, Nanos deadline) {
  return [&o, deadline] {
    ++o.fired;
    const Nanos rounded = ceil_ticks(deadline, o.tick) * o.tick;
    if (o.pass_now < rounded) {
      if (o.early++ == 0) o.first_bad = deadline;
    }
    if (o.prev_now >= rounded) {
      if (o.late++ == 0) o.first_bad = deadline;
    }
  };
}

void advance_to(Wheel& w, Observed& o, Nanos now) {
  o.prev_now = o.pass_now;
  o.pass_now = now;
  w.advance(now);
}

struct PacedResult {
  WheelStats stats;
  std::uint64_t calls = 0;
};

// n timers with deadlines uniform over [1 tick, span], then advance() every `step` ticks to the end.
PacedResult run_paced(std::uint64_t n, Nanos tick, Nanos span, std::int64_t step, Observed& o) {
  o.tick = tick;
  Wheel w({.tick = tick});
  std::mt19937_64 rng(12345);
  std::uniform_int_distribution<std::int64_t> dist(tick.count(), span.count());
  for (std::uint64_t i = 0; i < n; ++i) {
    const Nanos deadline(dist(rng));
    EXPECT_TRUE(w.schedule_at(deadline, observer(o, deadline)));
  }
  PacedResult r;
  const std::int64_t end_tick = ceil_ticks(span, tick);
  for (std::int64_t t = step;; t += step) {
    const std::int64_t target = std::min(t, end_tick);
    advance_to(w, o, target * tick);
    ++r.calls;
    if (target == end_tick) break;
  }
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_FALSE(w.next_deadline().has_value());
  r.stats = w.stats();
  return r;
}

// The expected work of one pass, worked out from the geometry rather than measured:
//   fires per tick  = n / span_ticks                  (deadlines are uniform)
//   moves per tick <= top * n / span_ticks            (a timer moves down at most once per level it
//                                                      starts above level 0; top = highest level
//                                                      a timer of the span starts in)
// A naive hierarchical wheel moves a whole upper slot when its time comes. With the 64x / 128-slot
// geometry the wheel was first designed with, 200k timers over 60 s at 1 ms sit in level 2, whose
// slots cover 4096 ticks: ~13,600 nodes (200k * 4096 / 60000) would move in one pass. With the
// current constants the same figure is n * unit(top) / span_ticks (~850 for 256x levels: a level-1
// slot of 256 ticks). The bound below (8x the expected mean plus 64, ~120-150 per tick) is generous
// for pacing and well below that burst; the test also checks that it is, so it keeps its teeth if
// the geometry changes again.
void check_paced(std::uint64_t n, Nanos tick, Nanos span, std::int64_t step) {
  Observed o;
  const PacedResult r = run_paced(n, tick, span, step, o);
  const WheelStats& s = r.stats;
  EXPECT_EQ(o.fired, n) << "timers lost";
  EXPECT_EQ(s.fired, n);
  EXPECT_EQ(o.early, 0u) << "e.g. deadline " << o.first_bad.count() << "ns";
  EXPECT_EQ(o.late, 0u) << "e.g. deadline " << o.first_bad.count() << "ns";
  EXPECT_GT(s.passes, 0u);
  EXPECT_LE(s.passes, r.calls) << "only calls that went past the inline case count";

  const double span_ticks = static_cast<double>(ceil_ticks(span, tick));
  // Highest level a timer can start in: the lowest L with level_reach(L) > span_ticks.
  unsigned top = 0;
  while (static_cast<double>(level_reach(top)) <= span_ticks) ++top;
  ASSERT_GE(top, 1u) << "the workload is meant to cascade";
  EXPECT_LE(s.moved, static_cast<std::uint64_t>(top) * n) << "a timer moved more than once per level";
  EXPECT_GT(s.moved, 0u) << "the workload is meant to cascade";
  const double expected_mean = static_cast<double>(step) * static_cast<double>(n) * (1.0 + top) / span_ticks;
  const double bound = 8.0 * expected_mean + 64.0;
  const double naive_burst = static_cast<double>(n) * static_cast<double>(level_unit(top)) / span_ticks;
  const double measured_mean = static_cast<double>(s.fired + s.moved) / static_cast<double>(r.calls);
  ::testing::Test::RecordProperty("max_pass_work", std::to_string(s.max_pass_work));
  ::testing::Test::RecordProperty("mean_pass_work", std::to_string(measured_mean));
  ::testing::Test::RecordProperty("bound", std::to_string(bound));
  ::testing::Test::RecordProperty("naive_burst", std::to_string(naive_burst));
  EXPECT_GT(naive_burst, bound) << "the workload no longer tells paced from naive cascading";
  EXPECT_LE(measured_mean, expected_mean) << "more moves than the geometry allows";
  EXPECT_LE(static_cast<double>(s.max_pass_work), bound)
      << "cascade burst: max_pass_work " << s.max_pass_work << " vs mean " << measured_mean
      << " (expected mean <= " << expected_mean << ", a naive wheel ~" << naive_burst << "), moved "
      << s.moved << " moved_ahead " << s.moved_ahead;
  EXPECT_LE(static_cast<double>(s.max_pass_work), 8.0 * measured_mean + 64.0);
}

TEST(WheelCascade, PacedWhenAdvancedEveryTick) { check_paced(200'000, 1ms, 60s, 1); }

TEST(WheelCascade, PacedWhenAdvancedEverySevenTicks) { check_paced(200'000, 1ms, 60s, 7); }

TEST(WheelCascade, PacedAtOneMicrosecondTickOverMoreLevels) {
  // 50k timers over 2 minutes at a 1 us tick (1.2e8 ticks): more levels cascade than at 1 ms.
  // Advanced every 997 ticks: ~120k calls.
  check_paced(50'000, 1us, 120s, 997);
}

// Jumps across many upper slots at once, mixed with small steps that stop inside slots, so moves
// ahead of time are interrupted by jumps. Nothing may be lost, early or late.
TEST(WheelCascade, JumpsAcrossManyUpperSlotsLoseNothing) {
  const Nanos tick = 1ms;
  Observed o;
  o.tick = tick;
  Wheel w({.tick = tick});
  std::mt19937_64 rng(777);
  const std::int64_t span_ticks = 40LL * 3600 * 1000;  // 40 hours: 1.44e8 ticks, three levels or more
  std::uint64_t n = 0;
  auto schedule_some = [&](std::uint64_t count, std::int64_t from_tick) {
    for (std::uint64_t i = 0; i < count; ++i) {
      // Deadlines at every scale: uniform over the span, and clustered at slot boundaries.
      std::int64_t t = 0;
      switch (rng() % 3) {
        case 0:
          t = from_tick + 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(span_ticks));
          break;
        case 1: {
          const unsigned level = static_cast<unsigned>(rng() % 4);
          const std::int64_t unit = std::int64_t{1} << (Wheel::kLevelBits * level);
          t = ((from_tick / unit) + 1 + static_cast<std::int64_t>(rng() % 130)) * unit +
              static_cast<std::int64_t>(rng() % 3) - 1;
          break;
        }
        case 2: t = from_tick + 1 + static_cast<std::int64_t>(rng() % 200); break;
      }
      t = std::max(t, from_tick + 1);  // strictly in the future, so "late" is well defined
      const Nanos deadline = Nanos(t * tick.count()) - Nanos(static_cast<std::int64_t>(rng() % 1000000));
      ASSERT_TRUE(w.schedule_at(deadline, observer(o, deadline)));
      ++n;
    }
  };
  schedule_some(100'000, 0);
  // Steps at and around every level boundary, plus a few odd sizes.
  std::vector<std::int64_t> steps = boundary_ticks(3);
  steps.erase(std::remove_if(steps.begin(), steps.end(), [&](std::int64_t t) { return t > span_ticks / 4; }),
              steps.end());
  for (std::int64_t t : {2, 3, 7, 100000, 1000000, 50'000'000}) steps.push_back(t);
  std::int64_t now_tick = 0;
  int round = 0;
  while (now_tick < 2 * span_ticks) {
    const std::int64_t step = steps[rng() % steps.size()];
    now_tick += step;
    advance_to(w, o, Nanos(now_tick * tick.count()));
    if (++round % 50 == 0) schedule_some(2000, now_tick);
    ASSERT_EQ(o.early, 0u) << "deadline " << o.first_bad.count();
    ASSERT_EQ(o.late, 0u) << "deadline " << o.first_bad.count();
    ASSERT_EQ(o.fired + w.pending_count(), n);
  }
  advance_to(w, o, Nanos::max());
  EXPECT_EQ(w.pending_count(), 0u);
  EXPECT_EQ(o.fired, n);
  EXPECT_EQ(w.stats().fired, n);
  EXPECT_EQ(o.early, 0u);
  EXPECT_EQ(o.late, 0u);
}

// One jump over everything: every level's slots are crossed in one call.
TEST(WheelCascade, OneJumpOverEveryLevelFiresEverythingInTickOrder) {
  const Nanos tick = 1us;
  Wheel w({.tick = tick});
  std::mt19937_64 rng(4242);
  struct Order {
    std::int64_t last = 0;
    std::uint64_t out_of_order = 0;
    std::uint64_t fired = 0;
  } ord;
  std::uint64_t n = 0;
  for (unsigned level = 0; level < Wheel::kLevels; ++level) {
    const std::uint64_t reach =
        std::min<std::uint64_t>(std::uint64_t{Wheel::kSlots} << (Wheel::kLevelBits * level),
                                static_cast<std::uint64_t>(max_ticks(tick)));
    for (int i = 0; i < 2000; ++i) {
      const std::int64_t t = static_cast<std::int64_t>(1 + rng() % reach);
      ASSERT_TRUE(w.schedule_at(Nanos(t * tick.count()), [&ord, t] {
        if (t < ord.last) ++ord.out_of_order;
        ord.last = t;
        ++ord.fired;
      }));
      ++n;
    }
  }
  EXPECT_EQ(w.advance(Nanos::max()), n);
  EXPECT_EQ(ord.fired, n);
  EXPECT_EQ(ord.out_of_order, 0u);
  EXPECT_EQ(w.pending_count(), 0u);
}

}  // namespace
}  // namespace tickwheel::test
