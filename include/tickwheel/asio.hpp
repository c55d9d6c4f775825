// tickwheel/asio.hpp — one shard of a caller-driven Engine driven by a Boost.Asio io_context
// (optional: include it only where Boost.Asio is; the library itself does not use it).
//
// ShardDriver writes the loop protocol of engine.hpp once for an io_context: the shard's
// wakeup_fd() watched by a posix::stream_descriptor, the next deadline timed by a steady_timer, and
// the due callbacks run as handlers of the context, on the thread that runs it:
//
//   boost::asio::io_context io;
//   tickwheel::asio::ShardDriver driver(io, engine, shard);
//   driver.start();   // from now on the thread in io.run() owns the shard
//   io.run();         // returns once the engine is stopped (or driver.stop()) and nothing else waits
//
// What it is for: an Asio program whose io_context runs on one thread, which then owns its shard,
// so that its schedules, cancels and reschedules (from handlers, or from the timers' callbacks) go
// straight into the wheel, and other threads' timers for the shard wake the context through its
// eventfd. Not for: an io_context run by several threads (a shard has one owner: give each thread
// an io_context and a shard), an engine with worker threads (a LoopExecutor's lane fd in a
// stream_descriptor is the way there), or EngineOptions::wake_loop (there is no eventfd to watch).
//
// Order and time. A turn of the driver polls the shard (the callbacks due run, inline in the
// driver's handler), then waits for the earlier of the next deadline and a wake-up; the context's
// other handlers run between turns, in the order Asio gives them. The wait is a steady_timer on the
// engine's clock distance (Engine::now(), CLOCK_MONOTONIC by default), so it is as fine as the
// context's timer service (a timerfd on Linux, nanoseconds).
//
// Stopping. Engine::stop() from another thread wakes the driver, whose next turn lets the shard go
// and arms nothing more; io.run() then returns once the context has no other work. stop() here does
// the same from the context's own side, for a program that ends the loop before the engine.
//
// Threads: the constructor, start() and stop() from any thread (start() and stop() post to the
// context); the driver's handlers on the thread that runs the context. Destroy the driver after the
// context has stopped running (no handler of it may be pending), before the Engine.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "tickwheel/engine.hpp"

namespace tickwheel::asio {

class ShardDriver {
 public:
  // Drives shard `shard` of `engine` from `io`. Throws as Engine::wakeup_fd() does, with nothing
  // changed: std::out_of_range for a shard >= shard_count(), std::logic_error for an engine with
  // worker threads or EngineOptions::wake_loop.
  ShardDriver(boost::asio::io_context& io, Engine& engine, std::size_t shard)
      : io_(io), engine_(engine), shard_(shard), wake_(io, engine.wakeup_fd(shard)), timer_(io) {}
  // Leaves the engine's eventfd open: it is the engine's.
  ~ShardDriver() { (void)wake_.release(); }
  ShardDriver(const ShardDriver&) = delete;
  ShardDriver& operator=(const ShardDriver&) = delete;

  // Posts the first turn: the thread that runs the context takes the shard (Engine::own_shard) and
  // polls it. If own_shard() throws (another thread owns or polls the shard, that thread owns
  // another, the engine stopped), the exception leaves io.run() as a handler's does.
  void start() {
    boost::asio::post(io_, [this] {
      engine_.own_shard(shard_);
      turn();
    });
  }
  // Posts the end: the wait is cancelled and the shard let go, if the driver still holds it.
  void stop() {
    boost::asio::post(io_, [this] {
      stopped_ = true;
      end_wait();
      if (engine_.owned_shard() == shard_) engine_.release_shard(shard_);
    });
  }
  // What the driver's turns did so far: callbacks run and turns taken. The context's thread only.
  std::uint64_t ran() const noexcept { return ran_; }
  std::uint64_t turns() const noexcept { return turns_; }

 private:
  // One turn: the due callbacks, then a wait armed until the next deadline or a wake-up. Once the
  // engine is stopped, a last poll lets the shard go and nothing is armed. The next turn is a
  // handler the context runs later, never a call from this one: no recursion, whatever the call
  // graph reads.
  void turn() {  // NOLINT(misc-no-recursion)
    if (stopped_) return;
    ++turns_;
    ran_ += engine_.poll(shard_);
    if (engine_.stopped()) {
      stopped_ = true;  // the poll after stop() began let the shard go
      return;
    }
    const std::optional<Nanos> until = engine_.next_deadline(shard_);
    if (!engine_.prepare_wait(shard_, until)) {
      // Work already waits: poll again, after the context's other handlers.
      boost::asio::post(io_, [this] { turn(); });  // NOLINT(misc-no-recursion)
      return;
    }
    waiting_ = true;
    const std::uint64_t wait = ++wait_;
    wake_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                     [this, wait](const boost::system::error_code&) { woken(wait); });
    if (until) {
      timer_.expires_after(std::chrono::duration_cast<boost::asio::steady_timer::duration>(
          std::max(*until - engine_.now(), Nanos(0))));
      timer_.async_wait([this, wait](const boost::system::error_code&) { woken(wait); });
    }
  }
  // The wait `wait` ended (a wake-up, the deadline, or a cancel): the first of its two handlers
  // ends it and takes the next turn; the other, and any of an earlier wait, finds it ended.
  void woken(std::uint64_t wait) {
    if (wait != wait_ || !waiting_) return;
    end_wait();
    turn();
  }
  void end_wait() {
    if (!waiting_) return;
    waiting_ = false;
    wake_.cancel();
    timer_.cancel();
    engine_.finish_wait(shard_);
  }

  boost::asio::io_context& io_;
  Engine& engine_;
  const std::size_t shard_;
  boost::asio::posix::stream_descriptor wake_;  // the shard's eventfd, released, not closed, at the end
  boost::asio::steady_timer timer_;
  bool waiting_ = false;     // a wait is armed (prepare_wait() said yes; finish_wait() not yet called)
  bool stopped_ = false;     // stop() ran, or the engine stopped: no more turns
  std::uint64_t wait_ = 0;   // the wait armed last: a handler of an earlier one is stale
  std::uint64_t ran_ = 0;    // callbacks run by the driver's polls
  std::uint64_t turns_ = 0;  // turns taken
};

}  // namespace tickwheel::asio
