// tickwheel::asio::timer allocates no more per wait than Asio's steady_timer: the same rounds
// (waits that expire; a wait cancelled; a wait moved by a new expiry, then cancelled) on the same
// io_context, operator new counted (counting_new.cpp, hence an executable of its own) after a
// warm-up that lets Asio's recycled handler memory, the engine's pool and the driver settle. The
// counts are compared with each other, never with a figure.
#include <gtest/gtest.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "counting_new.hpp"
#include "tickwheel/asio.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;
using boost::system::error_code;

constexpr int kRounds = 200;

class AsioTimerAlloc : public ::testing::Test {
 protected:
  AsioTimerAlloc() {
    EngineOptions o;
    o.shards = 1;
    o.threads = Threads::manual;
    o.tick = 100us;
    engine = std::make_unique<Engine>(o);
    driver = std::make_unique<asio::ShardDriver>(io, *engine, 0);
    driver->start();
  }
  ~AsioTimerAlloc() override {
    (void)engine->stop();
    io.run_for(1s);
  }
  void run_until(const int& done, int want) {
    const auto limit = std::chrono::steady_clock::now() + 10s;
    while (done < want && std::chrono::steady_clock::now() < limit) io.run_one_for(10ms);
    ASSERT_EQ(done, want) << "a wait did not complete";
  }
  // operator new calls over `rounds` rounds of `round`, after as many rounds of warm-up.
  std::uint64_t news_in(int rounds, const std::function<void()>& round) {
    for (int i = 0; i < rounds; ++i) round();
    const std::uint64_t before = news();
    for (int i = 0; i < rounds; ++i) round();
    return news() - before;
  }

  // round(theirs) and round(ours) over kRounds rounds each, after as many of warm-up: ours must
  // call operator new no more often. Both counts are recorded in the test's report.
  template <class Theirs, class Ours, class Round>
  void expect_no_more_news(Theirs& theirs, Ours& ours, Round round) {
    const std::uint64_t asio_news = news_in(kRounds, [&] { round(theirs); });
    const std::uint64_t our_news = news_in(kRounds, [&] { round(ours); });
    RecordProperty("steady_timer_news", std::to_string(asio_news));
    RecordProperty("tickwheel_timer_news", std::to_string(our_news));
    EXPECT_LE(our_news, asio_news) << "operator new calls: steady_timer " << asio_news << ", ours "
                                   << our_news;
  }

  boost::asio::io_context io;
  std::unique_ptr<Engine> engine;
  std::unique_ptr<asio::ShardDriver> driver;
};

// Four timers due together per round: what the driver's turn costs is shared, as in a loop with
// many timers; what each wait costs is not.
TEST_F(AsioTimerAlloc, WaitsThatExpireAllocateNoMoreThanSteadyTimers) {
  std::array<boost::asio::steady_timer, 4> theirs{
      boost::asio::steady_timer(io), boost::asio::steady_timer(io), boost::asio::steady_timer(io),
      boost::asio::steady_timer(io)};
  asio::timer ours[4] = {asio::timer(io), asio::timer(io), asio::timer(io), asio::timer(io)};
  int done = 0;
  auto round = [&](auto& timers) {
    const int want = done + 4;
    const auto expiry = std::chrono::steady_clock::now() + 100us;
    for (auto& t : timers) {
      t.expires_at(expiry);
      t.async_wait([&done](const error_code&) { ++done; });
    }
    run_until(done, want);
  };
  expect_no_more_news(theirs, ours, round);
}

TEST_F(AsioTimerAlloc, ACancelledWaitAllocatesNoMoreThanSteadyTimers) {
  boost::asio::steady_timer theirs(io);
  asio::timer ours(io);
  int done = 0;
  auto round = [&](auto& t) {
    const int want = done + 1;
    t.expires_after(1h);
    t.async_wait([&done](const error_code&) { ++done; });
    (void)t.cancel();
    run_until(done, want);
  };
  expect_no_more_news(theirs, ours, round);
}

// A connection's idle timeout pushed back by each message: the pending wait aborted by the new
// expiry, a new wait started.
TEST_F(AsioTimerAlloc, AWaitMovedByANewExpiryAllocatesNoMoreThanSteadyTimers) {
  boost::asio::steady_timer theirs(io);
  asio::timer ours(io);
  int done = 0;
  auto round = [&](auto& t) {
    const int want = done + 2;
    t.expires_after(1h);
    t.async_wait([&done](const error_code&) { ++done; });
    t.expires_after(2h);
    t.async_wait([&done](const error_code&) { ++done; });
    (void)t.cancel();
    run_until(done, want);
  };
  expect_no_more_news(theirs, ours, round);
}

}  // namespace
}  // namespace tickwheel::test
