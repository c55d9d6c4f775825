// engine/exec/repeated_timer.cpp — RepeatedTimer: the state shared with its Engine timers, and the
// transitions.
//
// Design. The object the user holds owns a shared_ptr to a RepeatedTimerState; every Engine timer
// it arms carries another (and the epoch of the run it stands for), so a timer that fires after a
// stop, a reset or the destructor finds live state to check, and does nothing. That is what keeps
// the destructor from having to wait for superseded Engine timers, which may be queued behind the
// very thread that runs it (an executor thread, the polling thread).
//
// Lock discipline. One mutex guards the state. Nothing that can block or call user code runs under
// it: on_trigger and adjust run with it released, and so do Engine schedules and cancels (while
// Engine::stop() joins its workers it holds its own lifecycle mutex, which a schedule or a cancel
// on a stopped engine takes: holding our mutex across one could wait on a worker that waits on
// our mutex). So arming is optimistic: decide and reserve the epoch under the lock, schedule
// without it, and on re-locking keep the handle only if nothing superseded the run meanwhile.
#include "tickwheel/repeated_timer.hpp"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include "tickwheel/detail/arith.hpp"

namespace tickwheel {
namespace detail {

class RepeatedTimerState : public std::enable_shared_from_this<RepeatedTimerState> {
 public:
  RepeatedTimerState(Engine& engine, Nanos timeout, std::function<void()> on_trigger,
                     std::function<Nanos(Nanos)> adjust)
      : engine_(&engine), on_trigger_(std::move(on_trigger)), adjust_(std::move(adjust)), timeout_(timeout) {}

  bool start();
  void stop();
  bool restart();
  bool reset(Nanos timeout);
  bool run_once_now();
  void destroy();
  void destroy_and_wait();

  bool running() const {
    std::lock_guard lock(mu_);
    return running_;
  }
  Nanos timeout() const {
    std::lock_guard lock(mu_);
    return timeout_;
  }
  Status last_error() const {
    std::lock_guard lock(mu_);
    return last_error_;
  }

  // The callable of each Engine timer: 24 bytes, the most the engine stores inline.
  struct Fire {
    std::shared_ptr<RepeatedTimerState> state;
    std::uint64_t epoch;
    void operator()() const { state->fire(epoch); }
  };

 private:
  // The fire() calls under way on one thread, innermost first, so that the destructor can tell
  // whether it runs inside one of this timer's own (it then must not wait for it).
  struct Frame {
    const RepeatedTimerState* state;
    Frame* outer;
  };
  static thread_local Frame* t_frames;

  void fire(std::uint64_t epoch);
  // Under mu_: a new epoch, so that the armed run and any owed one are superseded. Returns the
  // armed Engine timer, for the caller to cancel once it has released the lock.
  Timer supersede() noexcept {
    ++epoch_;
    pending_ = false;
    owed_ = false;
    return std::exchange(armed_, Timer());
  }
  // `lock` holds mu_. Supersedes whatever is armed and reserves the next run under a new epoch of
  // its own (so one epoch names one Engine timer: a handle is kept iff its epoch is still the
  // current one); then, with the lock released, cancels the superseded timer, computes the delay
  // (adjust(base) if `adjusted`, else base) and schedules. Returns with the lock held; false iff the
  // Engine refused (recorded; the timer stops if that run was still the current one). Throws what
  // adjust throws, after stopping the timer likewise.
  bool arm(std::unique_lock<std::mutex>& lock, Nanos base, bool adjusted);
  // Under mu_: the run of `epoch` cannot happen (the Engine refused it, or adjust threw).
  void abandon(std::uint64_t epoch) noexcept {
    if (epoch_ != epoch || !pending_) return;  // superseded meanwhile: someone else decides
    pending_ = false;
    owed_ = false;
    running_ = false;
  }
  int frames_on_this_thread() const noexcept {
    int n = 0;
    for (const Frame* f = t_frames; f != nullptr; f = f->outer) n += f->state == this ? 1 : 0;
    return n;
  }

  Engine* const engine_;
  // Written at construction, then only once no fire() is under way (the destructor, or the last
  // fire() of an orphaned timer): read by fire() outside the lock.
  std::function<void()> on_trigger_;
  std::function<Nanos(Nanos)> adjust_;

  mutable std::mutex mu_;
  std::condition_variable idle_;  // signalled when active_ falls; the destructor waits on it
  // Everything below: under mu_.
  Nanos timeout_;
  bool running_ = false;
  bool destroyed_ = false;
  bool orphaned_ = false;    // destroyed from inside its own fire(): the last fire() frees the callables
  std::uint64_t epoch_ = 0;  // the current run request; an Engine timer of another epoch is stale
  bool pending_ = false;     // the run of epoch_ is armed (or owed) and has not started
  bool owed_ = false;        // ... and it fired while another run was in user code: re-arm at 0
  Timer armed_;              // the Engine timer of epoch_'s run, for cancelling; may have fired
  bool in_user_ = false;     // a run is in on_trigger: the no-overlap guard
  int active_ = 0;           // fire() calls past the epoch check and not yet returned
  Status last_error_ = Status::ok;
};

thread_local RepeatedTimerState::Frame* RepeatedTimerState::t_frames = nullptr;

static_assert(sizeof(RepeatedTimerState::Fire) <= 24, "must fit the Engine's inline callable storage");

bool RepeatedTimerState::arm(std::unique_lock<std::mutex>& lock, Nanos base, bool adjusted) {
  Timer stale = supersede();
  const std::uint64_t epoch = epoch_;
  pending_ = true;
  lock.unlock();
  stale.cancel();  // if it lost the race and fires, its epoch is stale: it does nothing
  Nanos delay = base;
  if (adjusted && adjust_) {
    try {
      delay = adjust_(base);
    } catch (...) {
      lock.lock();
      abandon(epoch);
      throw;
    }
  }
  // From the clock read here, not schedule_after()'s loop time: on the shard's own thread (the
  // re-arm after a run) that is the pass's start, and the contract counts from the run's end.
  const Nanos deadline = detail::saturating_add(engine_->now(), std::max(delay, Nanos(0)));
  Timer t = engine_->schedule_at(deadline, Fire{shared_from_this(), epoch});
  lock.lock();
  if (!t) {
    last_error_ = t.status();
    abandon(epoch);
    return false;
  }
  if (epoch_ == epoch) {
    // Still current: keep the handle for the next supersede to cancel. (Spent if the timer fired
    // into a run in progress and is owed: its cancel then just returns false.) If its run has
    // already started, there is nothing left to cancel.
    if (pending_) armed_ = t;
    return true;
  }
  // Superseded while we scheduled: it would do nothing when it fires; give its place back now.
  lock.unlock();
  t.cancel();
  lock.lock();
  return true;
}

void RepeatedTimerState::fire(std::uint64_t epoch) {
  std::unique_lock lock(mu_);
  if (epoch != epoch_ || !pending_) return;  // superseded
  if (in_user_) {
    owed_ = true;  // the run in on_trigger re-arms this one when it returns
    return;
  }
  pending_ = false;
  owed_ = false;
  armed_ = Timer();
  in_user_ = true;
  ++active_;
  Frame frame{this, t_frames};
  t_frames = &frame;
  lock.unlock();

  std::exception_ptr error;
  try {
    on_trigger_();
  } catch (...) {
    error = std::current_exception();
  }

  lock.lock();
  in_user_ = false;
  if (owed_) {
    // The current run came due while this one was in on_trigger (a supersede clears owed_): it
    // runs next, at once, re-armed under a new epoch since its own Engine timer is spent.
    arm(lock, Nanos(0), /*adjusted=*/false);
  } else if (epoch == epoch_ && running_) {
    // Nothing superseded this run (every transition changes the epoch): arm the next regular one.
    try {
      arm(lock, timeout_, /*adjusted=*/true);
    } catch (...) {
      if (!error) error = std::current_exception();
    }
  }
  t_frames = frame.outer;
  std::function<void()> on_trigger;
  std::function<Nanos(Nanos)> adjust;
  if (--active_ == 0 && orphaned_) {
    // The destructor ran inside this run and left the callables to us: destroy them here, after
    // on_trigger has returned, outside the lock.
    on_trigger = std::exchange(on_trigger_, nullptr);
    adjust = std::exchange(adjust_, nullptr);
  }
  lock.unlock();
  // After the unlock: the state outlives this call (this Engine timer's callable holds it), and a
  // waiting destructor re-checks active_ under the lock.
  idle_.notify_all();
  if (error) std::rethrow_exception(error);
}

bool RepeatedTimerState::start() {
  std::unique_lock lock(mu_);
  if (destroyed_) return false;
  if (running_) return true;
  running_ = true;
  if (pending_) return true;  // a run_once_now() run is armed: the cycle goes on from its end
  return arm(lock, timeout_, /*adjusted=*/true) && running_;
}

void RepeatedTimerState::stop() {
  std::unique_lock lock(mu_);
  running_ = false;
  Timer stale = supersede();
  lock.unlock();
  stale.cancel();
}

bool RepeatedTimerState::restart() {
  std::unique_lock lock(mu_);
  if (destroyed_) return false;
  running_ = true;
  return arm(lock, timeout_, /*adjusted=*/true) && running_;
}

bool RepeatedTimerState::reset(Nanos timeout) {
  std::unique_lock lock(mu_);
  if (destroyed_) return false;
  timeout_ = timeout;
  if (!running_) return true;
  return arm(lock, timeout, /*adjusted=*/true);
}

bool RepeatedTimerState::run_once_now() {
  std::unique_lock lock(mu_);
  if (destroyed_) return false;
  return arm(lock, Nanos(0), /*adjusted=*/false);
}

void RepeatedTimerState::destroy() {
  std::unique_lock lock(mu_);
  if (destroyed_) return;
  destroyed_ = true;
  running_ = false;
  Timer stale = supersede();
  lock.unlock();
  stale.cancel();
}

void RepeatedTimerState::destroy_and_wait() {
  destroy();
  std::unique_lock lock(mu_);
  if (frames_on_this_thread() > 0) {
    // Inside its own on_trigger or adjust: waiting would wait for ourselves. The last fire() frame
    // to return destroys the callables.
    orphaned_ = true;
    return;
  }
  idle_.wait(lock, [this] { return active_ == 0; });
  std::function<void()> on_trigger = std::exchange(on_trigger_, nullptr);
  std::function<Nanos(Nanos)> adjust = std::exchange(adjust_, nullptr);
  lock.unlock();
}

}  // namespace detail

namespace {

std::string describe(const std::string& name) { return "tickwheel::RepeatedTimer \"" + name + "\": "; }

void check_timeout(const std::string& name, Nanos timeout) {
  if (timeout <= Nanos(0)) {
    throw std::invalid_argument(describe(name) + "timeout must be > 0 ns, got " +
                                std::to_string(timeout.count()) + " ns");
  }
}

}  // namespace

RepeatedTimer::RepeatedTimer(Engine& engine, std::string name, Nanos timeout,
                             std::function<void()> on_trigger, std::function<Nanos(Nanos)> adjust)
    : name_(std::move(name)) {
  check_timeout(name_, timeout);
  if (!on_trigger) throw std::invalid_argument(describe(name_) + "on_trigger is empty");
  state_ =
      std::make_shared<detail::RepeatedTimerState>(engine, timeout, std::move(on_trigger), std::move(adjust));
}

RepeatedTimer::~RepeatedTimer() { state_->destroy_and_wait(); }

bool RepeatedTimer::start() { return state_->start(); }
void RepeatedTimer::stop() { state_->stop(); }
bool RepeatedTimer::restart() { return state_->restart(); }
bool RepeatedTimer::reset(Nanos timeout) {
  check_timeout(name_, timeout);
  return state_->reset(timeout);
}
bool RepeatedTimer::run_once_now() { return state_->run_once_now(); }
void RepeatedTimer::destroy() { state_->destroy(); }
bool RepeatedTimer::running() const { return state_->running(); }
Nanos RepeatedTimer::timeout() const { return state_->timeout(); }
Status RepeatedTimer::last_error() const { return state_->last_error(); }

}  // namespace tickwheel
