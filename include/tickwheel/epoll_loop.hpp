// tickwheel/epoll_loop.hpp — one shard of a caller-driven Engine inside an epoll loop (Linux).
//
// EpollLoop writes the loop protocol of engine.hpp once (own_shard(), then per turn
// next_deadline(), prepare_wait(), a wait in epoll, finish_wait(), poll()), so that embedding the
// Engine in an epoll loop takes a constructor and one call per turn:
//
//   tickwheel::EpollLoop loop(engine, shard);      // on the loop's thread
//   ... epoll_ctl(loop.fd(), EPOLL_CTL_ADD, your_fd, &ev) ...
//   while (!engine.stopped())
//     loop.run_once([&](const epoll_event& ev) { handle(ev); });  // your I/O, then the due timers
//
// Order within a turn. run_once(on_event) waits, calls on_event for each of your ready events,
// then runs the callbacks due: the turn's I/O comes before the timeouts that fell due in it, as in
// Netty's loop, so an answer read in its timeout's tick is answered, not timed out. run_once()
// without a handler runs the due callbacks first and returns the events for you to handle after
// them: the timeouts of the turn win over its I/O.
//
// Time in a handler. A schedule_after() in on_event counts from the loop's time, read once when
// the wait ended (see Engine::schedule_after): behind the clock by the handlers that ran before it
// in the same turn. Where a batch of events is long and the delay short, count from the moment of
// the call instead: schedule_at(engine.now() + delay, fn).
//
// Stopping. stop() may be called from any thread that owns no shard of the engine, while the
// loops are alive: it wakes each loop, waits until each has let its shard go (its run_once() does
// once stop() has begun), and hands back what never ran. Each loop leaves when Engine::stopped()
// says so and destroys its EpollLoop on its own thread, before the Engine is destroyed.
//
// What it is for: a loop thread that owns its shard, so that its schedules, cancels and
// reschedules go straight into the wheel, and that sleeps in epoll until its next deadline, timed
// in nanoseconds (epoll_pwait2, timer slack 1 ns), woken early by another thread's earlier
// hand-off.
// Not for: a loop that waits on something else (io_uring, a condition variable: use the calls
// themselves with EngineOptions::wake_loop), an engine with worker threads (a LoopExecutor is the
// loop's side there), or several shards on one thread (a thread owns one).
//
// Threads: every call on the thread that constructed it (the shard's owner), but fd() and shard(),
// anywhere. Destroy it on that thread, before the Engine.
#pragma once

#include <sys/epoll.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tickwheel/engine.hpp"

namespace tickwheel {

// What one turn of run_once() did, for a loop's own metrics. The times are CLOCK_MONOTONIC, read
// three times a turn (before the wait, after it, after the callbacks).
struct EpollTurn {
  std::size_t events = 0;  // your ready events (never the shard's wake-up fd)
  std::size_t ran = 0;     // callbacks the turn's poll ran (Engine::poll's count)
  bool slept = false;      // the turn waited with a timeout other than zero
  Nanos waited{0};         // in the epoll wait
  Nanos handled{0};        // in on_event (zero for run_once() without a handler) and the callbacks
};

struct EpollLoopOptions {
  // The epoll set to wait in: -1 (the default) makes one (close-on-exec) that the loop closes; or
  // yours, left open, the loop's registration of the wake-up fd removed from it on destruction.
  int epoll_fd = -1;
  // The most events one run_once() returns, 1 .. 65536 (the rest come back in the next turn).
  std::size_t max_events = 256;
};

class EpollLoop {
 public:
  // The epoll data under which the shard's wakeup_fd() sits in the set. run_once() never returns
  // its events, so no fd of yours may use this value.
  static constexpr std::uint64_t kWakeData = ~std::uint64_t{0};

  // Makes the calling thread the owner of `shard` (Engine::own_shard), adds the shard's
  // wakeup_fd() to the epoll set, and sets the thread's timer slack to 1 ns (the default adds
  // 50 us to every timed sleep; the old value comes back on destruction). Allocates the event
  // buffer (max_events). Throws, with nothing owned or changed: std::out_of_range for
  // shard >= shard_count(); std::logic_error for an engine with worker threads or
  // EngineOptions::wake_loop, or as own_shard() does (a shard owned or polled by another thread,
  // this thread owning another, the engine stopped); std::invalid_argument naming a bad
  // max_events; std::system_error when epoll refuses (a bad epoll_fd; the wake-up fd already in
  // it).
  EpollLoop(Engine& engine, std::size_t shard, EpollLoopOptions opts = {});
  // Lets go of the shard if this thread still owns it (stop() ends the ownership itself), takes
  // the wake-up fd out of the set, closes the set if it made it, restores the timer slack.
  ~EpollLoop();
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  // One turn: waits in epoll until one of your fds is ready, the shard's next deadline comes
  // (timed from Engine::now()) or another thread wakes the shard (an earlier hand-off,
  // post_clear(), stop(), clock_moved()); calls on_event(const epoll_event&) for each of your ready
  // events (never the wake-up fd's), in the order epoll gave them; then runs the due callbacks here
  // (poll(shard, limit)), so that what woke it has run by the return. It does not sleep while
  // hand-offs, or callbacks left over by `limit`, wait. Returns what the turn did. If on_event
  // throws, the exception propagates with the turn's events after it unhandled and its callbacks
  // left to the next turn. Once stop() has begun it runs nothing and never sleeps: leave the loop
  // when Engine::stopped() says so. Cost: the protocol's calls, one epoll_pwait2 (epoll_wait,
  // rounded up to milliseconds, on kernels without it) and three clock reads; no allocation.
  // Throws std::logic_error, having done nothing, on a thread other than the owner's (before
  // stop()) and from a callback of the shard or from on_event; std::system_error if epoll fails;
  // else as Engine::poll(). EINTR ends the turn with no event.
  template <class OnEvent>
  requires std::invocable<OnEvent&, const epoll_event&> EpollTurn
  run_once(OnEvent&& on_event, std::size_t limit = Engine::kNoLimit) {
    const Running running(*this);
    for (const epoll_event& ev : wait_turn()) {
      on_event(ev);
    }
    poll_turn(limit);
    return turn_;
  }
  // The same turn with the due callbacks run before your events, which it returns: a view valid
  // until the next call; empty on EINTR. What the turn did is last_turn().
  std::span<const epoll_event> run_once(std::size_t limit = Engine::kNoLimit);
  // What the last run_once() did.
  const EpollTurn& last_turn() const noexcept { return turn_; }

  int fd() const noexcept { return epoll_fd_; }  // the epoll set: add your fds here
  std::size_t shard() const noexcept { return shard_; }

 private:
  // Marks a turn under way for its scope: run_once() refuses a nested call, and refuses a thread
  // that does not own the shard (before stop()).
  class Running {
   public:
    explicit Running(EpollLoop& loop);
    ~Running() { loop_.running_ = false; }
    Running(const Running&) = delete;
    Running& operator=(const Running&) = delete;

   private:
    EpollLoop& loop_;
  };
  // The turn's wait (next_deadline, prepare_wait, the epoll wait, finish_wait): your ready events,
  // the wake-up fd's taken out; empty on EINTR.
  std::span<const epoll_event> wait_turn();
  void poll_turn(std::size_t limit);  // the turn's poll, and its counts
  // epoll_pwait2 for at most `left` (nullopt: no timeout); -1 with errno as epoll sets it.
  int wait(std::optional<Nanos> left);

  Engine& engine_;
  const std::size_t shard_;
  const int wake_fd_;
  std::vector<epoll_event> events_;  // before the set: a bad max_events throws before it is made
  int epoll_fd_ = -1;
  bool own_epoll_ = false;
  bool nanosecond_waits_ = true;  // false once epoll_pwait2 said ENOSYS
  bool running_ = false;          // inside run_once(): a nested call is refused
  bool owner_ = false;            // the turn under way is the owner's (false once stop() let go)
  EpollTurn turn_;                // the turn under way, or the last one
  Nanos woke_{0};                 // CLOCK_MONOTONIC when the turn's wait ended
  long old_slack_ = -1;           // the thread's timer slack before, restored on destruction
};

}  // namespace tickwheel
