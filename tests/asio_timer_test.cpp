// tickwheel::asio::timer against Asio's own rules for basic_waitable_timer, on a real io_context run
// by the test's thread (which the driver makes the shard's owner) and the engine's real clock on a
// 100 us tick. Every wait is bounded, so a wait that never completes fails instead of hanging; no
// timing figure is asserted beyond "not before the expiry".
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "tickwheel/asio.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;
using boost::system::error_code;
namespace error = boost::asio::error;

EngineOptions fine_tick() {
  EngineOptions o;
  o.shards = 1;
  o.threads = Threads::manual;
  o.tick = 100us;
  return o;
}

// What one wait's handler saw: its error code, the clock when it ran, and the thread.
struct Outcome {
  std::optional<error_code> ec;
  std::chrono::steady_clock::time_point at;
  std::thread::id on;
};
auto record(Outcome& out) {
  return [&out](const error_code& ec) {
    out.ec = ec;
    out.at = std::chrono::steady_clock::now();
    out.on = std::this_thread::get_id();
  };
}

class AsioTimer : public ::testing::Test {
 protected:
  AsioTimer() { driver.start(); }
  ~AsioTimer() override {
    (void)engine.stop();
    io.run_for(1s);  // the driver's last turn, and the completions the timers posted
  }
  // Runs the context on this thread until done() or 10 s have passed; returns done().
  bool run_until(const std::function<bool()>& done) {
    const auto limit = std::chrono::steady_clock::now() + 10s;
    while (!done() && std::chrono::steady_clock::now() < limit) io.run_one_for(10ms);
    return done();
  }
  bool run_until(const Outcome& o) {
    return run_until([&o] { return o.ec.has_value(); });
  }

  Engine engine{fine_tick()};
  boost::asio::io_context io;
  asio::ShardDriver driver{io, engine, 0};
};

TEST_F(AsioTimer, AWaitCompletesWithSuccessOnTheContextsThreadNotBeforeItsExpiry) {
  asio::timer t(io);
  EXPECT_EQ(t.expires_after(3ms), 0u);
  Outcome o;
  t.async_wait(record(o));
  EXPECT_FALSE(o.ec) << "completed inside async_wait()";
  ASSERT_TRUE(run_until(o));
  EXPECT_EQ(*o.ec, error_code());
  EXPECT_GE(o.at, t.expiry()) << "completed before its expiry";
  EXPECT_EQ(o.on, std::this_thread::get_id());
}

TEST_F(AsioTimer, AnExpiryInThePastCompletesAtOnceWithSuccessButNeverInline) {
  asio::timer fresh(io);  // expired until an expiry is set, as steady_timer's epoch
  asio::timer past(io, std::chrono::steady_clock::now() - 1s);
  Outcome a;
  Outcome b;
  fresh.async_wait(record(a));
  past.async_wait(record(b));
  EXPECT_FALSE(a.ec || b.ec) << "completed inside async_wait()";
  ASSERT_TRUE(run_until([&] { return a.ec && b.ec; }));
  EXPECT_EQ(*a.ec, error_code());
  EXPECT_EQ(*b.ec, error_code());
}

TEST_F(AsioTimer, CancelAbortsEveryPendingWaitCountsThemAndSparesALaterWait) {
  asio::timer t(io, 1h);
  EXPECT_EQ(t.cancel(), 0u) << "cancel() with no pending wait";
  Outcome first;
  Outcome second;
  t.async_wait(record(first));
  t.async_wait(record(second));  // a second wait pending at once: the allocated path
  EXPECT_EQ(t.cancel(), 2u);
  EXPECT_FALSE(first.ec || second.ec) << "a cancelled wait completed inside cancel()";
  EXPECT_EQ(t.cancel(), 0u);
  Outcome later;
  t.expires_after(1ms);
  t.async_wait(record(later));
  ASSERT_TRUE(run_until([&] { return first.ec && second.ec && later.ec; }));
  EXPECT_EQ(*first.ec, error::operation_aborted);
  EXPECT_EQ(*second.ec, error::operation_aborted);
  EXPECT_EQ(*later.ec, error_code()) << "a wait started after cancel() was aborted";
}

TEST_F(AsioTimer, CancelOneAbortsTheOldestWaitOnly) {
  asio::timer t(io, 2ms);
  EXPECT_EQ(t.cancel_one(), 0u);
  Outcome o[3];
  for (Outcome& each : o) t.async_wait(record(each));
  EXPECT_EQ(t.cancel_one(), 1u);
  ASSERT_TRUE(run_until([&] { return o[0].ec && o[1].ec && o[2].ec; }));
  EXPECT_EQ(*o[0].ec, error::operation_aborted);
  EXPECT_EQ(*o[1].ec, error_code());
  EXPECT_EQ(*o[2].ec, error_code());
}

TEST_F(AsioTimer, ANewExpiryAbortsThePendingWaitsAndTheNextWaitIsForIt) {
  asio::timer t(io, 1h);
  Outcome old_wait;
  t.async_wait(record(old_wait));
  EXPECT_EQ(t.expires_after(2ms), 1u);
  Outcome new_wait;
  t.async_wait(record(new_wait));
  ASSERT_TRUE(run_until([&] { return old_wait.ec && new_wait.ec; }));
  EXPECT_EQ(*old_wait.ec, error::operation_aborted);
  EXPECT_EQ(*new_wait.ec, error_code());
  EXPECT_GE(new_wait.at, t.expiry());
  const auto moved_to = std::chrono::steady_clock::now() + 1h;
  EXPECT_EQ(t.expires_at(moved_to), 0u);
  EXPECT_EQ(t.expiry(), moved_to);
}

// The idiom of a steady_timer user: the handler sets the next expiry and waits again.
TEST_F(AsioTimer, AHandlerReArmsItsTimerAsSteadyTimerUsersDo) {
  asio::timer t(io);
  int rounds = 0;
  bool early = false;
  std::function<void(const error_code&)> again = [&](const error_code& ec) {
    if (ec) return;
    early = early || std::chrono::steady_clock::now() < t.expiry();
    if (++rounds == 5) return;
    t.expires_after(1ms);
    t.async_wait(again);
  };
  t.expires_after(1ms);
  t.async_wait(again);
  ASSERT_TRUE(run_until([&] { return rounds == 5; }));
  EXPECT_FALSE(early) << "a round completed before its expiry";
}

TEST_F(AsioTimer, DestroyingTheTimerAbortsItsWaits) {
  auto t = std::make_unique<asio::timer>(io, 1h);
  Outcome o;
  t->async_wait(record(o));
  t.reset();
  EXPECT_FALSE(o.ec) << "completed inside the destructor";
  ASSERT_TRUE(run_until(o));
  EXPECT_EQ(*o.ec, error::operation_aborted);
}

// A timer waited on from a handler that is not the driver's, while the driver sleeps towards a
// later deadline: the engine wakes the driver (the owner's own earlier timer), and the wait ends in
// time, not at the far deadline.
TEST_F(AsioTimer, AnEarlierWaitFromAnotherHandlerEndsTheDriversLongerSleep) {
  Outcome far_outcome;
  asio::timer far(io, 1h);
  far.async_wait(record(far_outcome));
  io.run_for(20ms);  // the driver now sleeps until the hour's deadline
  asio::timer near(io);
  Outcome o;
  boost::asio::post(io, [&] {
    near.expires_after(2ms);
    near.async_wait(record(o));
  });
  ASSERT_TRUE(run_until(o)) << "the driver slept past an earlier wait";
  EXPECT_EQ(*o.ec, error_code());
  EXPECT_FALSE(far_outcome.ec);
  EXPECT_EQ(far.cancel(), 1u);  // its handler runs here, while far_outcome lives
  ASSERT_TRUE(run_until(far_outcome));
}

TEST_F(AsioTimer, AHandlersOwnExecutorRunsItsCompletion) {
  auto strand = boost::asio::make_strand(io);
  asio::timer t(io, 1ms);
  bool in_strand = false;
  bool done = false;
  t.async_wait(boost::asio::bind_executor(strand, [&](const error_code&) {
    in_strand = strand.running_in_this_thread();
    done = true;
  }));
  ASSERT_TRUE(run_until([&] { return done; }));
  EXPECT_TRUE(in_strand);
}

TEST_F(AsioTimer, ACompletionTokenOtherThanAHandler) {
  asio::timer t(io, 1ms);
  std::future<void> f = t.async_wait(boost::asio::use_future);
  ASSERT_TRUE(run_until([&] { return f.wait_for(0s) == std::future_status::ready; }));
  EXPECT_NO_THROW(f.get());
}

TEST_F(AsioTimer, AWaitTheEngineRefusesCompletesWithItsReason) {
  asio::timer t(io, 1h);
  io.poll();  // the driver's first turn: this thread owns the shard
  (void)engine.stop();
  Outcome o;
  t.async_wait(record(o));
  EXPECT_FALSE(o.ec);
  ASSERT_TRUE(run_until(o));
  EXPECT_EQ(*o.ec, error::shut_down);
}

TEST(AsioTimerSetUp, AContextWithoutADriverOrWithTwoIsRefused) {
  Engine engine(fine_tick());
  boost::asio::io_context io;
  EXPECT_THROW(asio::timer t(io), std::logic_error) << "a timer on a context no driver drives";
  asio::ShardDriver driver(io, engine, 0);
  EXPECT_THROW(asio::ShardDriver second(io, engine, 0), std::logic_error);
  EXPECT_NO_THROW(asio::timer t(io));
  asio::timer by_driver(driver);
  EXPECT_EQ(by_driver.get_executor(), io.get_executor());
}

}  // namespace
}  // namespace tickwheel::test
