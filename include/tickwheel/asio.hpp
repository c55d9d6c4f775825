// tickwheel/asio.hpp — a caller-driven Engine's shard in a Boost.Asio io_context, and a timer with
// steady_timer's interface on it (optional: include it only where Boost.Asio is; the library
// itself does not use it).
//
//   boost::asio::io_context io;
//   tickwheel::asio::ShardDriver driver(io, engine, shard);
//   driver.start();                  // from now on the thread in io.run() owns the shard
//   tickwheel::asio::timer t(io);    // where the program had boost::asio::steady_timer t(io)
//   t.expires_after(5ms);
//   t.async_wait([](const boost::system::error_code& ec) { /* !ec: expired */ });
//   io.run();                        // returns once the engine is stopped (or driver.stop())
//
// What it is for: an Asio program whose io_context runs on one thread, which then owns its shard,
// so that its timers (these, or the Engine's own schedules from handlers and callbacks) go straight
// into the wheel, and other threads' timers for the shard wake the context through its eventfd.
// Not for: an io_context run by several threads (a shard has one owner: give each thread an
// io_context and a shard), an engine with worker threads (a LoopExecutor's lane fd in a
// stream_descriptor is the way there), or EngineOptions::wake_loop (there is no eventfd to watch).
#pragma once

#include <boost/asio/async_result.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "tickwheel/detail/asio_wait.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::asio {

class timer;

// ShardDriver writes the loop protocol of engine.hpp once for an io_context: the shard's
// wakeup_fd() watched by a posix::stream_descriptor, the next deadline timed by a steady_timer, and
// the due callbacks run inside the driver's handler, on the thread that runs the context.
//
// Order and time. A turn of the driver polls the shard (the callbacks due run), runs the handlers
// of the timers' waits that completed, then announces its wait until the next deadline; the
// context's other handlers run between turns, in the order Asio gives them. A timer scheduled or
// moved by one of them to before the announced wait ends it (Engine::prepare_wait). The wait is a
// steady_timer on the engine's clock distance (Engine::now(), CLOCK_MONOTONIC by default), as fine
// as the context's timer service (a timerfd on Linux, nanoseconds); it is re-armed only when the
// next deadline moves, and the eventfd's wait stays armed across turns.
//
// Stopping. Engine::stop() from another thread wakes the driver, whose next turn lets the shard go
// and arms nothing more; io.run() then returns once the context has no other work. stop() here does
// the same from the context's own side, for a program that ends the loop before the engine.
//
// Threads: the constructor, start() and stop() from any thread (start() and stop() post to the
// context); the driver's handlers on the thread that runs the context. Destroy the driver after its
// timers and after the context has stopped running (no handler of it may be pending), before the
// Engine.
class ShardDriver {
 public:
  // Drives shard `shard` of `engine` from `io`. Throws as Engine::wakeup_fd() does, with nothing
  // changed: std::out_of_range for a shard >= shard_count(), std::logic_error for an engine with
  // worker threads or EngineOptions::wake_loop; std::logic_error too if `io` has a driver already
  // (a context drives one shard).
  ShardDriver(boost::asio::io_context& io, Engine& engine, std::size_t shard)
      : io_(undriven(io)), engine_(engine), shard_(shard), wake_(io, engine.wakeup_fd(shard)), timer_(io) {
    boost::asio::use_service<detail::DriverSlot>(io).driver = this;
  }
  // Leaves the engine's eventfd open: it is the engine's.
  ~ShardDriver() {
    boost::asio::use_service<detail::DriverSlot>(io_).driver = nullptr;
    (void)wake_.release();
  }
  ShardDriver(const ShardDriver&) = delete;
  ShardDriver& operator=(const ShardDriver&) = delete;
  ShardDriver(ShardDriver&&) = delete;
  ShardDriver& operator=(ShardDriver&&) = delete;

  // Posts the first turn: the thread that runs the context takes the shard (Engine::own_shard) and
  // polls it. If own_shard() throws (another thread owns or polls the shard, that thread owns
  // another, the engine stopped), the exception leaves io.run() as a handler's does.
  void start() {
    boost::asio::post(io_, [this] {
      engine_.own_shard(shard_);
      turn();
    });
  }
  // Posts the end: the waits are cancelled and the shard let go, if the driver still holds it.
  void stop() {
    boost::asio::post(io_, [this] {
      stopped_ = true;
      end_waits();
      if (engine_.owned_shard() == shard_) engine_.release_shard(shard_);
    });
  }
  // What the driver's turns did so far: callbacks run and turns taken. The context's thread only.
  std::uint64_t ran() const noexcept { return ran_; }
  std::uint64_t turns() const noexcept { return turns_; }
  // What it drives. Any thread.
  boost::asio::io_context& context() const noexcept { return io_; }
  Engine& engine() const noexcept { return engine_; }
  std::size_t shard() const noexcept { return shard_; }

 private:
  friend class timer;

  static boost::asio::io_context& undriven(boost::asio::io_context& io) {
    if (boost::asio::use_service<detail::DriverSlot>(io).driver != nullptr) {
      throw std::logic_error("tickwheel::asio::ShardDriver: this io_context has a driver already");
    }
    return io;
  }

  // One turn: the due callbacks, the handlers of the waits completed so far (the ones it fired
  // among them, in the order they completed), then the wait armed until the next deadline or a
  // wake-up. Once the engine is stopped, a last poll lets the shard go and nothing is armed. The
  // next turn is a handler the context runs later, never a call from this one: no recursion,
  // whatever the call graph reads.
  void turn() {  // NOLINT(misc-no-recursion)
    if (stopped_) return;
    ++turns_;
    polling_ = true;
    now_ = engine_.now();
    ran_ += engine_.poll(shard_, now_);
    polling_ = false;
    try {
      run_completed();
    } catch (...) {
      settle();
      throw;
    }
    settle();
  }
  // The end of a turn: the wait armed, or, once the engine is stopped, nothing more.
  void settle() {  // NOLINT(misc-no-recursion)
    if (engine_.stopped()) {
      stopped_ = true;
      end_waits();
      // A poll after stop() began let the shard go; one that ended just before, not: stop() then
      // waits for this thread to let go, and no turn is left to do it.
      if (engine_.owned_shard() == shard_) engine_.release_shard(shard_);
    } else {
      arm();
    }
  }
  void arm() {  // NOLINT(misc-no-recursion)
    const std::optional<Nanos> until = engine_.next_deadline(shard_);
    if (!engine_.prepare_wait(shard_, until)) {
      // Work already waits: poll again, after the context's other handlers.
      boost::asio::post(io_, [this] { turn(); });  // NOLINT(misc-no-recursion)
      return;
    }
    waiting_ = true;
    if (!fd_armed_) {
      fd_armed_ = true;
      wake_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                       [this](const boost::system::error_code& ec) {  // NOLINT(misc-no-recursion)
                         fd_armed_ = false;
                         if (ec != boost::asio::error::operation_aborted) woken();
                       });
    }
    if (until && until != timer_until_) {
      // A new expiry aborts the steady_timer's wait in progress; its handler then finds its
      // sequence number old.
      timer_until_ = until;
      const std::uint64_t seq = ++timer_seq_;
      timer_.expires_after(std::chrono::duration_cast<boost::asio::steady_timer::duration>(
          std::max(*until - engine_.now(), Nanos(0))));
      timer_.async_wait([this, seq](const boost::system::error_code& ec) {  // NOLINT(misc-no-recursion)
        if (seq != timer_seq_ || ec == boost::asio::error::operation_aborted) return;
        timer_until_.reset();
        woken();
      });
    }
  }
  // The wait ended (a wake-up or the deadline): the turn that follows polls.
  void woken() {  // NOLINT(misc-no-recursion)
    if (!waiting_) return;
    waiting_ = false;
    engine_.finish_wait(shard_);
    turn();
  }
  void end_waits() {
    if (waiting_) {
      waiting_ = false;
      engine_.finish_wait(shard_);
    }
    ++timer_seq_;
    timer_until_.reset();
    wake_.cancel();
    timer_.cancel();
  }

  // ---- The timers' completed waits ----
  // A wait of a timer completed (its result set): its handler runs after the turn's poll if one is under
  // way, else from a handler posted for it (never inside the timer's call that completed it).
  void completed(detail::WaitOp* op) {  // NOLINT(misc-no-recursion)
    completed_.push(op);
    if (!polling_) post_run();
  }
  // Posts the handler that runs the completed waits, unless one is posted.
  void post_run() {  // NOLINT(misc-no-recursion)
    if (run_posted_) return;
    run_posted_ = true;
    boost::asio::post(io_, Runner{this});
  }
  // That handler. Its memory is the driver's own (one is posted at a time): no heap allocation.
  struct Runner {
    ShardDriver* driver;
    using allocator_type = detail::OneBlockAllocator<void>;
    allocator_type get_allocator() const noexcept { return allocator_type(driver->runner_memory_); }
    void operator()() const {  // NOLINT(misc-no-recursion)
      driver->run_posted_ = false;
      driver->run_completed();
    }
  };
  // Runs the handlers of the waits completed so far, oldest first (those they complete in turn run
  // from the next post). A handler that throws leaves the rest for that post, and the exception
  // leaves io.run() as a handler's does.
  void run_completed() {  // NOLINT(misc-no-recursion)
    running_.prepend(completed_);
    while (!running_.empty()) {
      detail::WaitOp* op = running_.pop();
      try {
        op->run(io_.get_executor(), detail::WaitOp::Via::dispatch);
      } catch (...) {
        completed_.prepend(running_);
        if (!completed_.empty()) post_run();
        throw;
      }
    }
  }
  // A timer going away: its completed waits not run yet are posted, so they still run.
  void forget(const void* owner) {
    auto repost = [this](detail::WaitOp* op) { op->run(io_.get_executor(), detail::WaitOp::Via::post); };
    running_.remove_owned_by(owner, repost);
    completed_.remove_owned_by(owner, repost);
  }

  boost::asio::io_context& io_;
  Engine& engine_;
  const std::size_t shard_;
  boost::asio::posix::stream_descriptor wake_;  // the shard's eventfd, released, not closed, at the end
  boost::asio::steady_timer timer_;
  std::optional<Nanos> timer_until_;  // the deadline timer_ waits for, if it waits
  std::uint64_t timer_seq_ = 0;       // timer_'s wait in progress: a handler of an earlier one is stale
  bool fd_armed_ = false;             // wake_ has a wait in progress
  bool waiting_ = false;     // a wait is announced (prepare_wait() said yes; finish_wait() not yet called)
  bool stopped_ = false;     // stop() ran, or the engine stopped: no more turns
  bool polling_ = false;     // inside the turn's poll: completed waits run when it returns
  bool run_posted_ = false;  // a handler that runs the completed waits is posted
  Nanos now_{0};             // the time of the last turn's poll (timers compare expiries with it)
  detail::OneBlock runner_memory_;  // the posted Runner's
  detail::WaitList completed_;      // completed waits whose handlers are to run
  detail::WaitList running_;        // those run_completed() took, not run yet
  std::uint64_t ran_ = 0;           // callbacks run by the driver's polls
  std::uint64_t turns_ = 0;         // turns taken
};

// timer: steady_timer's interface on the engine: a waitable timer whose expiry lives in the
// shard's wheel (O(1) to set, move and cancel) instead of the context's heap. A program swaps the
// type and keeps its calls.
//
// As basic_waitable_timer: expires_at() / expires_after() cancel the pending waits and return how
// many; cancel() completes every pending wait with error::operation_aborted and returns how many (0
// with none: a wait started after it is not aborted); a wait on an expiry already past completes
// with success at once (at the driver's next turn); destroying the timer aborts its waits. A
// handler runs on its associated executor (the context's by default), never inside the call that
// completed its wait, async_wait() included: the driver runs the completed waits' handlers after
// its poll, or from a handler it posts.
//
// Differences from steady_timer:
//   - a wait ends once the expiry's tick has ended (EngineOptions::tick), never before the expiry:
//     up to a tick after it, where steady_timer's timerfd ends it at the expiry;
//   - time points are steady_clock's, whose epoch is the engine's default clock (CLOCK_MONOTONIC);
//     with EngineOptions::clock, expiries are on the engine's clock, labelled steady_clock;
//   - no wait(): the thread that would block is the one that runs the driver;
//   - not movable (the engine's callback holds its address): hold it by pointer to move it;
//   - a wait the engine refuses (stopped, max_pending_reached, out_of_memory) completes at once
//     with error::shut_down, error::no_buffer_space or error::no_memory; waits pending when the
//     engine stops complete only by cancel() or the timer's destruction.
//
// Cost: a timer holds two waits in place (handlers of up to kInlineHandlerBytes bytes: a pending
// wait, and one completed whose handler has not run yet), so that a wait, its cancel and a new
// wait at once (an idle timeout pushed back) allocate nothing; a larger handler, or a third wait
// at once, is allocated by the handler's associated allocator. The engine's timer is scheduled by
// the first wait of an expiry and moved, not replaced, by a new expiry.
//
// Threads: as Asio's I/O objects: every call on the context's thread, or before the context runs
// (the schedule is then a hand-off to the shard). Destroy it before its driver.
class timer {
 public:
  using clock_type = std::chrono::steady_clock;
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;
  using executor_type = boost::asio::io_context::executor_type;
  static constexpr std::size_t kInlineHandlerBytes = 40;

  // On the context's ShardDriver (std::logic_error if it has none), expired: a wait completes at
  // once until an expiry is set.
  explicit timer(boost::asio::io_context& io) : timer(driver_of(io)) {}
  timer(boost::asio::io_context& io, const time_point& expiry) : timer(io) { expiry_ = to_engine(expiry); }
  timer(boost::asio::io_context& io, const duration& expiry) : timer(io) { (void)expires_after(expiry); }
  explicit timer(ShardDriver& driver)
      : driver_(&driver), engine_(&driver.engine()), executor_(driver.context().get_executor()) {}
  ~timer() {
    (void)cancel();
    driver_->forget(this);
  }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  timer(timer&&) = delete;
  timer& operator=(timer&&) = delete;

  executor_type get_executor() const noexcept { return executor_; }
  time_point expiry() const noexcept { return time_point(std::chrono::duration_cast<duration>(expiry_)); }

  // Sets the expiry; the pending waits complete with operation_aborted. Returns how many.
  std::size_t expires_at(const time_point& expiry) {
    const std::size_t aborted = complete_all(boost::asio::error::operation_aborted);
    expiry_ = to_engine(expiry);
    if (armed_ && !armed_.reschedule(expiry_)) armed_ = Timer();
    return aborted;
  }
  // expires_at(now + d), now read from the engine's clock.
  std::size_t expires_after(const duration& d) {
    return expires_at(time_point(std::chrono::duration_cast<duration>(engine_->now())) + d);
  }

  // Completes every pending wait with operation_aborted; returns how many.
  std::size_t cancel() {
    if (armed_) {
      (void)armed_.cancel();
      armed_ = Timer();
    }
    return complete_all(boost::asio::error::operation_aborted);
  }
  // Completes the oldest pending wait with operation_aborted; returns 1, or 0 with none.
  std::size_t cancel_one() {
    if (pending_.empty()) return 0;
    complete(pending_.pop(), boost::asio::error::operation_aborted);
    if (pending_.empty()) (void)cancel();
    return 1;
  }

  // Starts a wait for the expiry; the handler gets a boost::system::error_code: success once the
  // expiry's tick has ended, operation_aborted if cancelled or moved first. Any completion token
  // Asio's async_initiate takes (a handler; use_future, which the tests use; others alike).
  template <class Token>
  auto async_wait(Token&& token) {
    return boost::asio::async_initiate<Token, void(boost::system::error_code)>(
        [this](auto&& handler) { start_wait(std::forward<decltype(handler)>(handler)); }, token);
  }

 private:
  // Room for one op: its header and a handler of kInlineHandlerBytes.
  static constexpr std::size_t kSlotBytes = sizeof(detail::WaitOp) + kInlineHandlerBytes;

  // Whether an op of this type fits a slot: a constant per handler type, which is the point.
  template <class Op>
  static constexpr bool fits_in_slot() noexcept {
    // NOLINTNEXTLINE(misc-redundant-expression)
    return sizeof(Op) <= kSlotBytes && alignof(Op) <= alignof(std::max_align_t);
  }
  static ShardDriver& driver_of(boost::asio::io_context& io) {
    ShardDriver* driver = boost::asio::use_service<detail::DriverSlot>(io).driver;
    if (driver == nullptr) {
      throw std::logic_error(
          "tickwheel::asio::timer: no ShardDriver drives this io_context (construct one first)");
    }
    return *driver;
  }
  static Nanos to_engine(const time_point& t) noexcept {
    return std::chrono::duration_cast<Nanos>(t.time_since_epoch());
  }

  template <class Handler>
  void start_wait(Handler&& handler) {
    using Op = detail::WaitHandler<std::decay_t<Handler>, executor_type>;
    void* slot = nullptr;
    bool* busy = nullptr;
    if constexpr (fits_in_slot<Op>()) {
      for (std::size_t i = 0; i < slots_.size() && slot == nullptr; ++i) {
        if (!slot_busy_[i]) {
          slot = slots_[i].data();
          busy = &slot_busy_[i];
        }
      }
    }
    detail::WaitOp* op = Op::make(std::forward<Handler>(handler), this, slot, busy);
    // Past at the driver's last turn: completes without the engine. Past since: the engine's timer
    // is due, and its schedule ends the driver's wait (no clock read here either way).
    if (expiry_ <= driver_->now_) {
      complete(op, boost::system::error_code());
      return;
    }
    if (!armed_) {
      armed_ = engine_->schedule_at_on(driver_->shard(), expiry_, [this] { fire(); });
      if (!armed_) {
        complete(op, refused(armed_.status()));
        return;
      }
    }
    pending_.push(op);
  }
  // The engine's callback, inside the driver's poll: the expiry's tick ended.
  void fire() {
    armed_ = Timer();
    (void)complete_all(boost::system::error_code());
  }
  std::size_t complete_all(const boost::system::error_code& ec) {
    std::size_t n = 0;
    while (!pending_.empty()) {
      complete(pending_.pop(), ec);
      ++n;
    }
    return n;
  }
  void complete(detail::WaitOp* op, const boost::system::error_code& ec) {
    op->set_result(ec);
    driver_->completed(op);
  }
  static boost::system::error_code refused(Status why) noexcept {
    switch (why) {
      case Status::stopped: return boost::asio::error::shut_down;
      case Status::max_pending_reached: return boost::asio::error::no_buffer_space;
      default: return boost::asio::error::no_memory;
    }
  }

  ShardDriver* driver_;
  Engine* engine_;
  executor_type executor_;
  Nanos expiry_{0};           // the engine's clock
  Timer armed_;               // the engine's timer for expiry_, while it may still fire
  detail::WaitList pending_;  // the pending waits, oldest first
  std::array<bool, 2> slot_busy_{};
  alignas(std::max_align_t) std::array<std::array<std::byte, kSlotBytes>, 2> slots_{};
};

}  // namespace tickwheel::asio
