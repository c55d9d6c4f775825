// tickwheel/repeated_timer.hpp — a named, thread-safe repeating timer on an Engine, in the style of
// SOFAJRaft's RepeatedTimer: start, stop, restart, reset to a new timeout, run once now, destroy,
// with an optional hook that adjusts each delay (a Raft election timeout randomised per period).
//
// Reasons you might want this
//   - Control from any thread, including from inside its own callback, without deadlock: every
//     call is a short critical section on one mutex, and neither the callback, nor the adjust
//     hook, nor an Engine call ever runs under that mutex.
//   - A period is one one-shot Engine timer: each run arms the next one after on_trigger returns,
//     `adjust(timeout)` from then, so a run that is late or slow pushes the next one back instead
//     of letting runs pile up (fixed delay, counted from the end of each run).
//   - Runs never overlap, whatever the engine's threads or executor (see "Runs" below).
//   - The destructor is a full barrier: once it returns, no callback of this object runs, none is
//     running (unless the destructor was called from inside one: see ~RepeatedTimer), and an
//     Engine timer of it that still fires finds only the shared state, never on_trigger or adjust.
//
// Reasons not to use it
//   - It costs a mutex and a std::function call per run, and a heap block per object: it is for
//     protocol timers (elections, heartbeats, snapshots), not for a timer per request. For those,
//     schedule on the Engine directly (schedule_after, or schedule_every, which re-arms on the
//     worker without any lock).
//   - Fixed delay only: the period drifts by the run time and the lateness of each run.
//
// Runs. Every run of on_trigger happens on an Engine callback thread (a worker, the thread in
// Engine::poll, or an executor's thread), never on the thread calling a member below. Runs never
// overlap: a run that comes due while another is still in on_trigger (possible with several
// shards or an executor with several threads) waits, without blocking any thread, and is armed at
// zero delay when that run returns. Whatever one run did is visible to the next (the mutex), and
// whatever a thread did before start(), restart(), reset() or run_once_now() is visible to the runs
// that call arms. A run that throws is caught by the Engine (counted in
// EngineStats::callback_errors, passed to EngineOptions::on_callback_error) and the timer goes on
// as if it had returned.
//
// Superseding. Each of start() (when it arms), restart(), reset() while running, run_once_now(),
// stop() and destroy() supersedes the run that was armed and has not started: its Engine timer is
// cancelled, and if it fires anyway (the cancel lost a race) it does nothing. An epoch number in
// each Engine timer's callable tells current from superseded. A run already in on_trigger is never
// interrupted: it finishes, and re-arms only if nothing superseded it meanwhile.
//
// Errors. A schedule the Engine refuses (Status::stopped, max_pending_reached, out_of_memory) is
// never silent: last_error() records it and the timer stops running (running() turns false).
//
// Lifetime: the Engine must outlive every RepeatedTimer on it (the destructor cancels on it).
//
// Example, a Raft follower's election timer:
//
//   tickwheel::RepeatedTimer election(engine, "election", 1000ms, [&] { node.become_candidate(); },
//                                     [](tickwheel::Nanos t) { return t + random_between(0ms, t); });
//   election.start();
//   ...
//   election.reset(1000ms);   // a heartbeat came: the next election is a fresh timeout away
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "tickwheel/engine.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel {
namespace detail {
class RepeatedTimerState;
}  // namespace detail

class RepeatedTimer {
 public:
  // A stopped timer: nothing runs until start() or run_once_now(). `on_trigger` is each run;
  // `adjust`, if given, is called with the configured timeout before each regular arm (start(),
  // restart(), reset() while running, and the re-arm after each run; never for run_once_now()) and
  // returns the delay to use; a result <= 0 means zero delay (the run comes at the engine's next
  // tick). adjust may be called from several threads at once (those calling start(), restart() or
  // reset(), and the one finishing a run) and while on_trigger runs elsewhere: keep it thread-safe
  // and short. If adjust throws, the arm is abandoned, the timer stops running, and the exception
  // goes to the caller of that member (or, when re-arming after a run, to the Engine, as a throwing
  // run's would). Allocates the shared state (one heap block). Any thread. Throws
  // std::invalid_argument, naming the timer and the bad value, for timeout <= 0 or an empty
  // on_trigger.
  RepeatedTimer(Engine& engine, std::string name, Nanos timeout, std::function<void()> on_trigger,
                std::function<Nanos(Nanos)> adjust = {});
  // Destroys the timer (as destroy()) and cancels its armed Engine timer; then, unless called from
  // inside this timer's own on_trigger or adjust, waits until no run of this timer is in progress
  // on any thread, destroys on_trigger and adjust, and returns: from then on nothing of this
  // object runs (an Engine timer of it that was already claimed finds it destroyed and returns
  // without touching on_trigger, adjust or the engine). Waiting for a run on another thread blocks
  // this thread as long as that run takes: do not destroy the timer while holding a lock that
  // on_trigger takes.
  //   Called from inside its own on_trigger (or adjust), directly or through an owner's destructor,
  // it does not wait (the run in progress is its own caller) and does not deadlock: no new run
  // starts after it returns, the run in progress finishes (it must not touch the timer again), and
  // on_trigger and adjust, with what they capture, are destroyed when that run returns, on its
  // thread, after on_trigger has returned.
  ~RepeatedTimer();
  RepeatedTimer(const RepeatedTimer&) = delete;
  RepeatedTimer& operator=(const RepeatedTimer&) = delete;

  // Starts the timer: the first run comes adjust(timeout()) from now and each later one
  // adjust(timeout()) after the previous run returned. If a run_once_now() run is pending, that
  // run is kept and the cycle goes on from its end instead. Returns whether the timer is running
  // when this returns: true if it was already (a no-op then), false if it is destroyed (refused)
  // or the Engine refused the schedule (last_error() says why). Any thread, callbacks included.
  // Cost: a lock, adjust, one Engine schedule.
  bool start();
  // Stops the timer: the armed run (a run_once_now() one included) is cancelled and none begins
  // after this returns. A run already begun (on another thread, where it may still be entering
  // on_trigger, or this is its own callback) is not waited for: it finishes and does not re-arm.
  // A no-op if stopped or destroyed. Any thread, callbacks included. Cost: a lock, one cancel.
  void stop();
  // stop() then start(), atomically: the next run comes adjust(timeout()) from now (a pending
  // run_once_now() run is dropped). Returns as start(), false if destroyed. Any thread, callbacks
  // included. Cost: a lock, adjust, one Engine cancel and one schedule.
  bool restart();
  // Sets the timeout. While running, it takes effect from now: the armed run is superseded and the
  // next one comes adjust(timeout) from now (shorter or longer than the remaining wait). While
  // stopped it only stores the timeout (a pending run_once_now() run stays). Returns false if the
  // timer is destroyed (refused: the timeout is not stored) or the Engine refused the schedule (the
  // timeout is stored and the timer stops, see last_error()); true otherwise. Any thread, callbacks
  // included. Throws std::invalid_argument, naming the timer and the value, for timeout <= 0, with
  // nothing changed. Cost: a lock; while running, adjust, a cancel and a schedule.
  bool reset(Nanos timeout);
  // Asks for one run as soon as possible, on the Engine (never on the calling thread): an Engine
  // timer at zero delay that supersedes the armed run. Running, the regular cycle then goes on
  // from the end of that run: the next regular run comes adjust(timeout()) after it returned.
  // Stopped, the run happens once and the timer stays stopped. Calls made before the run starts
  // coalesce into that one run. Called while a run is in on_trigger (from another thread or from
  // inside it), the run it asks for starts only after that one returns. Returns false if the timer
  // is destroyed (refused) or the Engine refused the schedule (last_error()), true otherwise. Any
  // thread, callbacks included. Cost: a lock, one Engine cancel and one schedule.
  bool run_once_now();
  // Stops the timer for good: as stop(), and every later start(), restart(), reset() or
  // run_once_now() is refused and returns false. Does not wait for a run in progress (the
  // destructor does). Idempotent. Any thread, callbacks included. Cost: a lock, one cancel.
  void destroy();

  // Whether the timer is started: true from a successful start() or restart() until stop(),
  // destroy(), a schedule the Engine refused, or an adjust that threw. It says what the timer
  // intends: after Engine::stop() it may stay true until the next arm fails. Any thread; a lock.
  bool running() const;
  const std::string& name() const noexcept { return name_; }
  // The configured timeout (before adjust). Any thread; a lock.
  Nanos timeout() const;
  // The Status of the most recent schedule the Engine refused, Status::ok if none ever was. Any
  // thread; a lock.
  Status last_error() const;

 private:
  std::string name_;
  std::shared_ptr<detail::RepeatedTimerState> state_;  // shared with the armed Engine timers
};

}  // namespace tickwheel
