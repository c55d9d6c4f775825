// tickwheel::asio::ShardDriver: a caller-driven shard driven by a Boost.Asio io_context, against a
// real io_context on a thread of its own. Each context sleeps until its driver's deadline or a
// wake-up, so a missing wake-up fails a bounded wait instead of passing late; the test's end stops
// the engine, which wakes the driver whatever happened. No timing figure is asserted.
#include "tickwheel/asio.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// Timers handed over by another thread run on the context's thread, each once, in deadline order;
// a callback's own schedule goes straight into the wheel and runs too; stop() from another thread
// ends the driver, and io.run() returns with nothing left to do.
TEST(AsioDriver, OtherThreadsTimersRunOnTheContextsThreadAndStopEndsTheRun) {
  Engine e(real_clock_manual());
  boost::asio::io_context io;
  asio::ShardDriver driver(io, e, 0);
  struct Seen {
    Engine* engine;
    std::thread::id io_thread;
    std::vector<int> order;  // the context's thread only
    std::atomic<int> ran{0};
  } seen{&e, {}, {}};
  std::atomic<bool> owned{false};
  driver.start();
  boost::asio::post(io, [&] {
    seen.io_thread = std::this_thread::get_id();
    owned.store(e.owned_shard() == std::optional<std::size_t>(0));
  });
  std::thread runner([&] { io.run(); });
  ASSERT_TRUE(eventually([&] { return owned.load(); })) << "the context's thread did not take the shard";
  ASSERT_TRUE(e.schedule_after_on(0, 1h, [] {}));  // keeps the context asleep between the others
  Seen* const s = &seen;
  for (int i = 3; i >= 1; --i) {
    ASSERT_TRUE(e.schedule_after_on(0, std::chrono::milliseconds(i), [s, i] {
      EXPECT_EQ(std::this_thread::get_id(), s->io_thread);
      s->order.push_back(i);
      if (i == 3) {
        // A callback's schedule on its own shard: straight into the wheel, run by a later turn.
        EXPECT_TRUE(s->engine->schedule_after(1ms, [s] {
          s->order.push_back(4);
          s->ran.fetch_add(1);
        }));
      }
      s->ran.fetch_add(1);
    }));
  }
  ASSERT_TRUE(eventually([&] { return seen.ran.load() == 4; })) << "a hand-off did not wake the context";
  EXPECT_EQ(e.stop().size(), 1u) << "the hour-long timer is handed back";
  runner.join();  // io.run() returned: the driver armed nothing more
  EXPECT_EQ(seen.order, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_GE(driver.turns(), 1u);
  EXPECT_EQ(driver.ran(), 4u);
}

// stop() on the driver's side ends its turns and lets the shard go, before the engine stops; the
// context then runs out of work.
TEST(AsioDriver, StopFromTheContextsSideLetsTheShardGo) {
  Engine e(real_clock_manual());
  boost::asio::io_context io;
  asio::ShardDriver driver(io, e, 0);
  driver.start();
  ASSERT_TRUE(e.schedule_after_on(0, 1h, [] {}));
  std::optional<std::size_t> owned_after{0};
  driver.stop();
  boost::asio::post(io, [&] { owned_after = e.owned_shard(); });
  io.run();
  EXPECT_FALSE(owned_after.has_value()) << "the shard is let go";
  EXPECT_FALSE(e.owned_shard().has_value());
  EXPECT_EQ(e.stop().size(), 1u);
}

TEST(AsioDriver, AnEngineWithWorkersOrAMissingShardIsRefused) {
  boost::asio::io_context io;
  EngineOptions workers;
  workers.shards = 1;
  Engine w(workers);
  EXPECT_THROW(asio::ShardDriver(io, w, 0), std::logic_error);
  Engine m(real_clock_manual());
  EXPECT_THROW(asio::ShardDriver(io, m, 1), std::out_of_range);
}

}  // namespace
}  // namespace tickwheel::test
