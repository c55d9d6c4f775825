// A caller-driven Engine inside the user's event loop (a gateway's, for example). A loop asleep
// until its next deadline is woken by a producer's earlier hand-off (the shard's eventfd, or
// EngineOptions::wake_loop), and only then; a thread that owns the shard it polls schedules and
// cancels straight into the wheel, counts its relative deadlines from the loop's time, and can ask
// which shard it owns and whether the engine has stopped; fired work is routed back to the loop
// that owns its shard (LoopExecutor), and stop() on that loop does not wait for itself.
//
// The protocol tests run on the injected clock and one thread, with wake_loop counting the
// wake-ups, so what wakes and what does not is decided by the test alone. The epoll tests run a
// real loop on a thread, waiting (bounded) for events: an hour-long sleep that a wake-up must cut
// short, so a missing wake-up fails the bounded wait instead of passing late. No timing figure is
// asserted.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/executor.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

// ---- The wake-up protocol, single-threaded ----

struct WakeCount {
  std::atomic<int> calls{0};
  std::atomic<std::size_t> last_shard{99};
};

EngineOptions counted(WakeCount& w, std::size_t shards = 1) {
  EngineOptions o = manual(shards);
  o.wake_loop = [&w](std::size_t shard) {
    w.last_shard.store(shard);
    w.calls.fetch_add(1);
  };
  return o;
}

TEST(EngineLoop, AnEarlierHandOffWakesAWaitingLoopAndNothingElseDoes) {
  WakeCount w;
  Engine e(counted(w, 2));
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(e.schedule_after_on(1, 10ms, [] {}));
  EXPECT_EQ(w.calls.load(), 0) << "a loop that announced no wait was woken";
  EXPECT_FALSE(e.prepare_wait(1, fake_now() + 10ms)) << "hand-offs wait: the loop must poll, not wait";
  EXPECT_EQ(e.poll(1), 0u);  // takes them in

  ASSERT_TRUE(e.prepare_wait(1, fake_now() + 10ms));
  ASSERT_TRUE(e.schedule_after_on(1, 1h, [] {}));
  EXPECT_EQ(w.calls.load(), 0) << "a hand-off due after the loop's wait woke it";
  Timer later = e.schedule_after_on(1, 20ms, [] {});
  EXPECT_EQ(w.calls.load(), 0);
  ASSERT_TRUE(later.cancel());
  EXPECT_EQ(w.calls.load(), 0) << "a cancel woke the loop";
  ASSERT_TRUE(e.schedule_after_on(1, 1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "a hand-off due before the loop's wait did not wake it";
  EXPECT_EQ(w.last_shard.load(), 1u);
  ASSERT_TRUE(e.schedule_after_on(0, 1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "a hand-off to another shard woke this one's loop";
  e.finish_wait(1);
  ASSERT_TRUE(e.schedule_after_on(1, 1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "a loop that finished its wait was woken";
  EXPECT_EQ(e.stop().size(), 104u);
}

// A timer fires once its tick has ended: one due within the tick the loop wakes at anyway (an
// answer due now, the usual cross-thread hand-off of a gateway) must not cost a wake-up.
TEST(EngineLoop, AHandOffDueWithinTheTickTheLoopWakesForDoesNotWakeIt) {
  WakeCount w;
  Engine e(counted(w));
  advance_clock(300us);  // inside a tick
  const Nanos tick_end = std::chrono::ceil<std::chrono::milliseconds>(fake_now());
  ASSERT_TRUE(e.prepare_wait(0, tick_end));
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, [] {}));
  ASSERT_TRUE(e.schedule_after_on(0, tick_end - fake_now(), [] {}));
  EXPECT_EQ(w.calls.load(), 0) << "a hand-off due by the end of the tick the loop wakes at woke it";
  ASSERT_TRUE(e.schedule_after_on(0, tick_end - fake_now() + 1ns, [] {}));
  EXPECT_EQ(w.calls.load(), 0) << "a hand-off due in a later tick woke the loop";
  ASSERT_TRUE(e.schedule_after_on(0, -1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "a hand-off of an ended tick did not wake the loop";
  e.finish_wait(0);
  advance_clock(tick_end - fake_now());
  EXPECT_EQ(e.poll(0), 3u) << "the three hand-offs due by the tick's end run at its end";
  EXPECT_EQ(e.stop().size(), 1u);
}

// Of the hand-offs that would wake one sleep, only the first signals (the loop, once awake, takes
// them all); the next sleep is woken again, and stop() signals whatever came before it.
TEST(EngineLoop, OneSleepIsSignalledOnceHoweverManyHandOffsWouldWakeIt) {
  WakeCount w;
  Engine e(counted(w));
  ASSERT_TRUE(e.prepare_wait(0, fake_now() + 10ms));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.schedule_after_on(0, 1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "three hand-offs due before one wait's end must signal it once";
  e.finish_wait(0);
  EXPECT_FALSE(e.prepare_wait(0, fake_now() + 10ms)) << "the three hand-offs wait: poll, not wait";
  EXPECT_EQ(e.poll(0), 0u);  // takes them in

  ASSERT_TRUE(e.prepare_wait(0, fake_now() + 10ms));
  ASSERT_TRUE(e.schedule_after_on(0, 1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 2) << "the next sleep was not woken";
  EXPECT_EQ(e.stop().size(), 4u);
  EXPECT_EQ(w.calls.load(), 3) << "stop() must signal a sleep already signalled";
  e.finish_wait(0);
}

TEST(EngineLoop, CancelsPiledUpUnderAFarWaitNudgeTheLoopOncePer4096Posts) {
  WakeCount w;
  Engine e(counted(w));
  ASSERT_TRUE(e.prepare_wait(0, fake_now() + 1h));
  for (int i = 0; i < 2048; ++i) {  // 2048 hand-offs and 2048 cancels: 4096 posts
    Timer t = e.schedule_after(2h, [] {});
    ASSERT_TRUE(t.cancel());
  }
  EXPECT_EQ(w.calls.load(), 1) << "4096 posts to a shard whose loop waits must nudge it once";
  e.finish_wait(0);
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineLoop, StopWakesAWaitingLoopAndNothingIsWaitedForAfterIt) {
  WakeCount w;
  Engine e(counted(w));
  ASSERT_TRUE(e.prepare_wait(0, std::nullopt));
  EXPECT_TRUE(e.stop().empty());
  EXPECT_GE(w.calls.load(), 1) << "stop() did not wake the waiting loop";
  e.finish_wait(0);
  EXPECT_FALSE(e.prepare_wait(0, std::nullopt)) << "after stop() there is nothing to wait for";
}

TEST(EngineLoop, WakeupFdIsForCallerDrivenEnginesWithoutWakeLoop) {
  WakeCount w;
  Engine with_callback(counted(w));
  EXPECT_THROW((void)with_callback.wakeup_fd(0), std::logic_error);
  Engine plain(manual(2));
  EXPECT_GE(plain.wakeup_fd(1), 0);
  EXPECT_NE(plain.wakeup_fd(0), plain.wakeup_fd(1));
  EXPECT_THROW((void)plain.wakeup_fd(2), std::out_of_range);
  Engine threaded(workers(1));
  EXPECT_THROW((void)threaded.wakeup_fd(0), std::logic_error);
  EXPECT_THROW((void)threaded.prepare_wait(0, std::nullopt), std::logic_error);
  EXPECT_THROW(threaded.own_shard(0), std::logic_error);
}

// ---- A real epoll loop ----

// A caller-driven loop on its own thread: poll, then wait in epoll on the shard's wakeup_fd() (and
// the LoopExecutor's fd, if any) until the next deadline, capped at a minute.
class EpollLoop {
 public:
  EpollLoop(Engine& e, std::size_t shard, bool own, LoopExecutor* tasks = nullptr)
      : e_(e), shard_(shard), own_(own), tasks_(tasks) {
    thread_ = std::thread([this] { run(); });
  }
  ~EpollLoop() { finish(); }
  EpollLoop(const EpollLoop&) = delete;
  EpollLoop& operator=(const EpollLoop&) = delete;

  void finish() {
    done_.store(true);
    if (thread_.joinable()) {
      wake_.store(true);
      const std::uint64_t one = 1;
      (void)::write(e_.wakeup_fd(shard_), &one, sizeof one);  // out of its epoll_wait
      thread_.join();
    }
  }
  bool wait_asleep(int times = 1) {
    return eventually([&] { return waits_.load() >= times; });
  }
  std::thread::id id() const { return id_.load(); }
  std::atomic<int> errors{0};

  // Runs fn on the loop's thread, between two turns, and waits for it.
  template <class Fn>
  void on_loop(Fn fn) {
    std::atomic<bool> ran{false};
    std::function<void()> job = [&] {
      fn();
      ran.store(true);
    };
    job_.store(&job);
    e_.schedule_after_on(shard_, 0ns, [] {
      }).cancel();  // a hand-off wakes the loop; cancelled, it runs nothing
    ASSERT_TRUE(eventually([&] { return ran.load(); }));
  }

 private:
  void run() {
    id_.store(std::this_thread::get_id());
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    add(ep, e_.wakeup_fd(shard_));
    if (tasks_ != nullptr) add(ep, tasks_->fd(shard_));
    if (own_) e_.own_shard(shard_);
    while (!done_.load()) {
      if (std::function<void()>* job = job_.exchange(nullptr)) (*job)();
      try {
        (void)e_.poll(shard_);
      } catch (const std::exception&) {
        errors.fetch_add(1);
      }
      if (tasks_ != nullptr) (void)tasks_->drain(shard_);
      const std::optional<Nanos> until = e_.next_deadline(shard_);
      if (e_.prepare_wait(shard_, until)) {
        waits_.fetch_add(1);
        std::array<epoll_event, 2> events{};
        (void)::epoll_wait(ep, events.data(), static_cast<int>(events.size()), timeout_ms(until));
        e_.finish_wait(shard_);
      } else if (done_.load() || wake_.load()) {
        break;
      }
    }
    ::close(ep);
  }
  static void add(int ep, int fd) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    (void)::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
  }
  static int timeout_ms(const std::optional<Nanos>& until) {
    if (!until) return 60'000;
    const auto left =
        *until - std::chrono::duration_cast<Nanos>(std::chrono::steady_clock::now().time_since_epoch());
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(std::max(left, Nanos(0))).count();
    return static_cast<int>(std::min<long long>(ms, 60'000));
  }

  Engine& e_;
  const std::size_t shard_;
  const bool own_;
  LoopExecutor* const tasks_;
  std::atomic<bool> done_{false}, wake_{false};
  std::atomic<int> waits_{0};
  std::atomic<std::thread::id> id_{};
  std::atomic<std::function<void()>*> job_{nullptr};
  std::thread thread_;
};

TEST(EngineLoop, AnEpollLoopAsleepForAnHourWakesForATwoMillisecondTimer) {
  Engine e(real_clock_manual());
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  EpollLoop loop(e, 0, /*own=*/false);
  ASSERT_TRUE(loop.wait_asleep());
  std::atomic<int> ran{0};
  std::this_thread::sleep_for(1ms);  // the loop is in epoll_wait, an hour from its deadline
  ASSERT_TRUE(e.schedule_after(2ms, [&ran] { ran.fetch_add(1); }));
  EXPECT_TRUE(eventually([&] { return ran.load() == 1; }, 30s)) << "the loop slept through an earlier timer";
  loop.finish();
  EXPECT_EQ(e.stop().size(), 1u);
}

// finish_wait() reads the wake-up fd only when a signal came since its last read: the fd must
// still be clear after every wait that a producer woke, and stay clear across waits nobody woke.
TEST(EngineLoop, FinishWaitClearsTheWakeupFdAfterEveryWakeAndReadsNothingElse) {
  Engine e(real_clock_manual());
  const int fd = e.wakeup_fd(0);
  const auto readable = [fd] {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, 0) == 1;
  };
  for (int round = 0; round < 50; ++round) {
    const bool woken = round % 3 != 0;
    ASSERT_TRUE(e.prepare_wait(0, std::nullopt));
    if (woken) {
      std::thread([&e] { ASSERT_TRUE(e.schedule_after(0ns, [] {})); }).join();
      ASSERT_TRUE(readable()) << "round " << round << ": a hand-off did not wake the waiting loop";
    }
    e.finish_wait(0);
    EXPECT_FALSE(readable()) << "round " << round << ": finish_wait() left the fd readable";
    (void)e.poll(0);  // takes the hand-off in, so that the next prepare_wait() finds nothing waiting
  }
}

// ---- Shard ownership ----

TEST(EngineLoop, AnOwnerSchedulesAndCancelsStraightIntoItsWheel) {
  Engine e(manual(2));
  std::thread::id ran_on;
  std::thread owner([&] {
    e.own_shard(1);
    Timer t = e.schedule_after(5ms, [] {});
    EXPECT_EQ(t.shard(), 1u) << "an owner's schedule without a shard goes to its shard";
    // Exact at once: no hand-off waits to make it say "now".
    EXPECT_EQ(e.next_deadline(1), std::optional<Nanos>(fake_now() + 5ms));
    EXPECT_EQ(e.stats().shards[1].queue_depth, 0u);
    EXPECT_TRUE(t.cancel());
    EXPECT_EQ(e.next_deadline(1), std::nullopt) << "the owner's cancel did not unlink at once";
    EXPECT_EQ(e.stats().shards[1].pending, 0u);
    Timer u = e.schedule_after(1ms, [&ran_on] { ran_on = std::this_thread::get_id(); });
    ASSERT_TRUE(u);
    advance_clock(1ms);
    EXPECT_EQ(e.poll(1), 1u);
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    EXPECT_THROW(e.own_shard(0), std::logic_error) << "a thread owns one shard at a time";
    e.release_shard(1);
  });
  owner.join();
  EXPECT_NO_THROW((void)e.poll(1)) << "a released shard can be polled by another thread";
  EXPECT_TRUE(e.stop().empty());
}

// The owner cancels a timer still in transit (handed over by another thread, not taken in yet): it
// is not linked, so the cancel leaves it for the shard's next pass, which recycles it unrun.
TEST(EngineLoop, TheOwnersCancelOfAHandOffNotTakenInYet) {
  Tally t(2);
  OwnedEngine o;
  Timer there;
  std::thread([&] { there = o.engine.schedule_after_on(0, 1ms, Probe(&t, 0)); }).join();
  Timer here = o.engine.schedule_after(1ms, Probe(&t, 1));
  EXPECT_TRUE(there.cancel());
  EXPECT_TRUE(here.cancel());
  EXPECT_EQ(o.engine.stats().pending, 0u);
  advance_clock(2ms);
  EXPECT_EQ(o.engine.poll(0), 0u);
  EXPECT_EQ(t.ran[0].load() + t.ran[1].load(), 0);
  EXPECT_EQ(t.destroyed[0].load(), 1);
  EXPECT_EQ(t.destroyed[1].load(), 1);
  EXPECT_EQ(o.engine.stats().cancelled, 2u);
}

// A loop that runs other handlers while its wait is announced (an io_context's thread) schedules
// and moves timers from them: one earlier than its plan must end the wait, as another thread's
// would, and nothing else may signal it. Callbacks of a pass and a loop that is not waiting never
// signal.
TEST(EngineLoop, TheOwnersOwnEarlierTimerWakesItsAnnouncedWaitAndNothingElseDoes) {
  WakeCount w;
  Engine e(counted(w));
  e.own_shard(0);
  ASSERT_TRUE(e.prepare_wait(0, fake_now() + 10ms));
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  Timer moved = e.schedule_after(20ms, [] {});
  ASSERT_TRUE(moved);
  ASSERT_TRUE(moved.reschedule_after(30ms));
  EXPECT_EQ(w.calls.load(), 0) << "the owner's timer due after its own wait woke it";
  ASSERT_TRUE(moved.reschedule_after(2ms));
  EXPECT_EQ(w.calls.load(), 1) << "the owner's move to before its wait did not wake it";
  ASSERT_TRUE(e.schedule_after(1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 1) << "one sleep was signalled twice";
  e.finish_wait(0);

  ASSERT_TRUE(e.prepare_wait(0, fake_now() + 10ms));
  ASSERT_TRUE(e.schedule_after(1ms, [] {}));
  EXPECT_EQ(w.calls.load(), 2) << "the owner's schedule before its next wait did not wake it";
  e.finish_wait(0);
  ASSERT_TRUE(e.schedule_after(1ms, [] {}));
  advance_clock(2ms);
  int inner = 0;
  ASSERT_TRUE(e.schedule_after(0ns, [&e, &inner] { inner += e.schedule_after(0ns, [] {}) ? 1 : 0; }));
  EXPECT_GE(e.poll(0), 4u);
  EXPECT_EQ(inner, 1);
  EXPECT_EQ(w.calls.load(), 2) << "a schedule of a loop not waiting, or of a pass's callback, signalled";
  (void)e.stop();
}

// The owner's relative deadlines count from the shard's loop time (no clock read): the clock when
// it took ownership, then the `now` of each poll, or the clock when its loop returns from
// finish_wait(); another thread's count from the clock.
TEST(EngineLoop, TheOwnersRelativeDeadlinesCountFromTheLoopTime) {
  Tally t(1);
  OwnedEngine o;
  advance_clock(5ms);  // no poll, no wait: the loop's time is still that of own_shard()
  Timer a = o.engine.schedule_after(10ms, Probe(&t, 0));
  EXPECT_EQ(a.deadline(), o.start + 10ms);
  EXPECT_EQ(a.reschedule_after(20ms).outcome(), Moved::Outcome::moved);
  EXPECT_EQ(a.deadline(), o.start + 20ms);
  EXPECT_EQ(o.engine.poll(0), 0u);  // the loop's time: now start + 5ms
  EXPECT_EQ(o.engine.schedule_after(10ms, [] {}).deadline(), o.start + 15ms);
  advance_clock(3ms);
  if (o.engine.prepare_wait(0, o.engine.next_deadline(0))) o.engine.finish_wait(0);  // start + 8ms
  EXPECT_EQ(o.engine.schedule_after(10ms, [] {}).deadline(), o.start + 18ms);
  EXPECT_EQ(o.engine.schedule_at(fake_now() + 1ms, [] {}).deadline(), o.start + 9ms) << "exact";
  std::thread([&] {
    advance_clock(1ms);
    EXPECT_EQ(o.engine.schedule_after_on(0, 10ms, [] {}).deadline(), o.start + 19ms) << "the clock";
  }).join();
  EXPECT_EQ(o.engine.clear(0), 5u);
}

// A loop asks where it stands: which shard it owns, and whether the engine has stopped (which
// next_deadline()'s nullopt does not tell from "nothing pending").
TEST(EngineLoop, ALoopAsksWhichShardItOwnsAndWhetherTheEngineStopped) {
  Engine engine(manual(2));
  EXPECT_EQ(engine.owned_shard(), std::nullopt);
  EXPECT_FALSE(engine.stopped());
  engine.own_shard(1);
  EXPECT_EQ(engine.owned_shard(), std::optional<std::size_t>(1));
  Engine other(manual(1));
  EXPECT_EQ(other.owned_shard(), std::nullopt) << "another engine's shard is not this one's";
  engine.release_shard(1);
  EXPECT_EQ(engine.owned_shard(), std::nullopt);
  engine.own_shard(0);
  EXPECT_EQ(engine.next_deadline(0), std::nullopt) << "nothing pending";
  std::thread stopper([&] { (void)engine.stop(); });
  while (!engine.stopped()) std::this_thread::yield();  // stop() waits for the owner's next poll
  EXPECT_EQ(engine.next_deadline(0), std::nullopt) << "stopped: the same answer, told apart above";
  EXPECT_EQ(engine.poll(0), 0u);  // ownership ends here, as engine.hpp says
  stopper.join();
  EXPECT_EQ(engine.owned_shard(), std::nullopt) << "ownership ended at the poll after stop()";
  EXPECT_THROW(engine.release_shard(0), std::logic_error) << "which owned_shard() lets a loop avoid";
  EXPECT_TRUE(engine.stopped());
}

// The owner's schedule takes a recycled node straight from its wheel's pool, inline; each case the
// shortcut must not serve goes the checked way. A cancel first leaves a recycled node, so that the
// shortcut would be open to each schedule below were it not for the case under test.
TEST(EngineLoop, TheOwnersInlineScheduleStepsAsideForLimitsOtherShardsOtherEnginesAndStop) {
  EngineOptions limited = manual(2);
  limited.max_pending_per_shard = 1;
  Engine e(limited);
  Engine other(manual(1));
  std::thread owner([&] {
    e.own_shard(0);
    ASSERT_TRUE(e.schedule_after(1h, [] {}).cancel());
    Timer held = e.schedule_after(1h, [] {});
    ASSERT_TRUE(held);
    EXPECT_EQ(e.schedule_after(1h, [] {}).status(), Status::max_pending_reached)
        << "the limit is checked though a recycled node waits";
    ASSERT_TRUE(held.cancel());
    Timer elsewhere = e.schedule_after_on(1, 1h, [] {});
    EXPECT_EQ(elsewhere.shard(), 1u);
    EXPECT_EQ(e.stats().shards[1].queue_depth, 1u) << "another shard's timer is handed over, not linked here";
    Timer foreign = other.schedule_after(1h, [] {});
    ASSERT_TRUE(foreign);
    EXPECT_EQ(other.stats().shards[0].queue_depth, 1u) << "another engine's timer is handed over";
    e.release_shard(0);
  });
  owner.join();

  Engine f(manual(1));
  std::atomic<bool> owning{false};
  std::atomic<bool> refused{false};
  std::thread loop([&] {
    f.own_shard(0);
    ASSERT_TRUE(f.schedule_after(1h, [] {}).cancel());
    owning.store(true);
    while (!f.stopped()) std::this_thread::yield();
    refused.store(f.schedule_after(1h, [] {}).status() == Status::stopped);
    f.release_shard(0);
  });
  while (!owning.load()) std::this_thread::yield();
  EXPECT_TRUE(f.stop().empty());
  loop.join();
  EXPECT_TRUE(refused.load()) << "an owner's schedule after stop() began elsewhere is refused";
}

TEST(EngineLoop, OwnershipMisuseIsRefused) {
  Engine e(manual(2));
  std::atomic<bool> owned{false}, leave{false};
  std::thread owner([&] {
    e.own_shard(0);
    owned.store(true);
    while (!leave.load()) std::this_thread::sleep_for(100us);
  });
  ASSERT_TRUE(eventually([&] { return owned.load(); }));
  EXPECT_THROW((void)e.poll(0), std::logic_error) << "a shard another thread owns was polled";
  EXPECT_THROW(e.own_shard(0), std::logic_error) << "two owners";
  EXPECT_THROW(e.release_shard(0), std::logic_error) << "released by a thread that does not own it";
  EXPECT_NO_THROW((void)e.poll(1));
  Timer t = e.schedule_after_on(0, 1h, [] {});  // from another thread: the queue, as always
  EXPECT_TRUE(t);
  EXPECT_EQ(e.stats().shards[0].queue_depth, 1u);
  leave.store(true);
  owner.join();  // its exit lets go of the shard
  EXPECT_NO_THROW((void)e.poll(0));
  EXPECT_EQ(e.stop().size(), 1u);
}

TEST(EngineLoop, TheOwnerMayStopTheEngineAndDestroyIt) {
  // stop() on the owner's thread is not a stop() from inside a callback: refused, it would make an
  // Engine destroyed there end in std::terminate.
  {
    Engine e(manual(2));
    e.own_shard(0);
    ASSERT_TRUE(e.schedule_after(1h, [] {}));
    ASSERT_TRUE(e.schedule_after_on(1, 1h, [] {}));
    EXPECT_EQ(e.stop().size(), 2u) << "the owner's stop() returns every pending timer";
    EXPECT_THROW(e.release_shard(0), std::logic_error) << "stop() ended the ownership";
    EXPECT_THROW(e.own_shard(0), std::logic_error) << "no owner after stop()";
  }
  Engine f(manual(1));
  f.own_shard(0);  // this thread owns no shard any more
  ASSERT_TRUE(f.schedule_after(1h, [] {}));
  // f's destructor stops it on the thread that owns its shard: the test ends without terminate().
}

// Two loops, each owning its shard, both stop the engine. Loop 0's stop() waits, holding the
// engine's lifecycle lock, for shard 1's owner to let go; loop 1 then calls stop() instead of
// polling, so its stop() must not wait for that lock while it still owns shard 1, or neither
// returns. Loop 1 learns that loop 0's stop() has begun when its own schedule is refused (an
// owner's schedule and cancel go straight into its wheel, which loop 0's stop() does not touch
// until loop 1 lets go).
TEST(EngineLoop, TwoOwnersMayBothStopTheEngine) {
  struct State {
    Engine e{manual(2)};
    std::atomic<int> owners{0};
    std::array<std::size_t, 2> returned{99, 99};
    std::array<bool, 2> still_owned{true, true};
  };
  auto s = std::make_shared<State>();
  auto loop = [s](std::size_t shard) {
    s->e.own_shard(shard);
    ASSERT_TRUE(s->e.schedule_after(1h, [] {}));
    s->owners.fetch_add(1);
    ASSERT_TRUE(eventually([&] { return s->owners.load() == 2; }));
    if (shard == 1) {
      ASSERT_TRUE(eventually([&] {
        Timer probe = s->e.schedule_after(1h, [] {});
        if (!probe) return probe.status() == Status::stopped;  // loop 0's stop() has begun
        EXPECT_TRUE(probe.cancel());
        return false;
      }));
    }
    s->returned[shard] = s->e.stop().size();
    try {
      s->e.release_shard(shard);
    } catch (const std::logic_error&) {
      s->still_owned[shard] = false;
    }
  };
  ASSERT_TRUE(all_return({[loop] { loop(0); }, [loop] { loop(1); }}))
      << "a stop() waited for an owner that was itself in stop()";
  EXPECT_EQ(s->returned[0], 2u) << "the first stop() returns both loops' timers";
  EXPECT_EQ(s->returned[1], 0u) << "the second stop() returns nothing";
  EXPECT_FALSE(s->still_owned[0]) << "stop() ends the caller's ownership";
  EXPECT_FALSE(s->still_owned[1]) << "stop() ends the caller's ownership";
}

TEST(EngineLoop, StopFromTheOwnersWalkOfItsShardIsRefused) {
  Engine e(manual(1));
  e.own_shard(0);
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  bool refused = false;
  EXPECT_EQ(e.for_each_pending(0,
                               [&](Timer, Nanos) {
                                 try {
                                   (void)e.stop();
                                 } catch (const std::logic_error&) {
                                   refused = true;
                                 }
                               }),
            1u);
  EXPECT_TRUE(refused) << "stop() would drain the lists under the walk";
  EXPECT_EQ(e.stop().size(), 1u);
}

TEST(EngineLoop, TheOwnersPollOfItsShardFromInsideThatShardsPassIsRefused) {
  // The owner polls shard 0; a callback there polls shard 1; a callback there polls shard 0 again,
  // which would start a second pass inside the first.
  Engine e(manual(2));
  e.own_shard(0);
  int inner_refused = 0;
  int ran_on_1 = 0;
  ASSERT_TRUE(e.schedule_after_on(1, 0ns, [&] {
    ++ran_on_1;
    try {
      (void)e.poll(0);
    } catch (const std::logic_error&) {
      ++inner_refused;
    }
  }));
  ASSERT_TRUE(e.schedule_after(0ns, [&] { EXPECT_EQ(e.poll(1), 1u); }));
  advance_clock(1ms);
  EXPECT_EQ(e.poll(0), 1u);
  EXPECT_EQ(ran_on_1, 1);
  EXPECT_EQ(inner_refused, 1) << "a nested pass of the owned shard was started";
  EXPECT_NO_THROW((void)e.poll(0)) << "the refusal left the shard pollable";
  e.release_shard(0);
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineLoop, StopFromAnotherThreadWakesTheOwnersLoopAndWaitsForItToLetGo) {
  Engine e(real_clock_manual());
  EpollLoop loop(e, 0, /*own=*/true);
  ASSERT_TRUE(loop.wait_asleep());
  loop.on_loop([&] { ASSERT_TRUE(e.schedule_after(1h, [] {})); });
  ASSERT_TRUE(loop.wait_asleep(2));
  EXPECT_EQ(e.stop().size(), 1u) << "stop() must return the owner's timer once the owner let go";
  loop.finish();
  EXPECT_EQ(loop.errors.load(), 0);
}

TEST(EngineLoop, ScheduleAtOnTakesAShard) {
  Engine e(manual(2));
  const Nanos when = fake_now() + 3ms;
  Timer t = e.schedule_at_on(1, when, [] {});
  ASSERT_TRUE(t);
  EXPECT_EQ(t.shard(), 1u);
  EXPECT_EQ(e.schedule_at_on(2, when, [] {}).status(), Status::no_such_shard);
  EXPECT_EQ(e.stop().size(), 1u);
}

// ---- LoopExecutor ----

TEST(EngineLoop, ALoopExecutorRunsEachShardsCallbacksOnTheLoopThatOwnsIt) {
  constexpr int kPerShard = 200;
  auto tasks = std::make_shared<LoopExecutor>(2);
  Engine e(workers(2, tasks));
  struct Seen {
    std::array<std::atomic<int>, 2> ran{};
    std::atomic<int> wrong_thread{0};
    std::array<std::atomic<std::thread::id>, 2> loop_ids{};
  } seen;
  auto& ran = seen.ran;
  auto& wrong_thread = seen.wrong_thread;
  auto& loop_ids = seen.loop_ids;
  std::atomic<bool> done{false};
  std::vector<std::thread> loops;
  for (std::size_t lane = 0; lane < 2; ++lane) {
    loops.emplace_back([&, lane] {
      loop_ids[lane].store(std::this_thread::get_id());
      const int ep = ::epoll_create1(EPOLL_CLOEXEC);
      epoll_event ev{};
      ev.events = EPOLLIN;
      (void)::epoll_ctl(ep, EPOLL_CTL_ADD, tasks->fd(lane), &ev);
      while (!done.load()) {
        (void)tasks->drain(lane);
        (void)::epoll_wait(ep, &ev, 1, 10);
      }
      (void)tasks->drain(lane);
      ::close(ep);
    });
  }
  for (std::size_t shard = 0; shard < 2; ++shard) {
    for (int i = 0; i < kPerShard; ++i) {
      ASSERT_TRUE(e.schedule_after_on(shard, Nanos(i * 10'000), [s = &seen, shard] {
        if (std::this_thread::get_id() != s->loop_ids[shard].load()) s->wrong_thread.fetch_add(1);
        s->ran[shard].fetch_add(1);
      }));
    }
  }
  EXPECT_TRUE(eventually([&] { return ran[0].load() == kPerShard && ran[1].load() == kPerShard; }));
  EXPECT_EQ(wrong_thread.load(), 0) << "callbacks ran on another thread than their shard's loop";
  // A task counts as executing until its callback has returned and its node is queued back, a
  // moment after the callback's own count: waited for, not read at once.
  EXPECT_TRUE(eventually([&] { return e.stats().executing == 0; }));
  done.store(true);
  for (auto& t : loops) t.join();
  EXPECT_TRUE(e.stop().empty());
}

TEST(EngineLoop, StopOnTheLoopThatRunsTheTasksRunsThemInsteadOfWaitingForItself) {
  constexpr int kTimers = 100;
  auto tasks = std::make_shared<LoopExecutor>(1);
  Engine e(workers(1, tasks));
  std::atomic<int> ran{0}, elsewhere{0};
  std::vector<Timer> returned;
  std::thread loop([&] {
    EXPECT_EQ(tasks->drain(0), 0u);  // this thread is the lane's loop
    for (int i = 0; i < kTimers; ++i) {
      ASSERT_TRUE(e.schedule_after(0ns, [&, me = std::this_thread::get_id()] {
        if (std::this_thread::get_id() != me) elsewhere.fetch_add(1);
        ran.fetch_add(1);
      }));
    }
    ASSERT_TRUE(eventually([&] { return tasks->queued(0) == static_cast<std::size_t>(kTimers); }));
    returned = e.stop();  // must not wait for the tasks only this thread runs
  });
  loop.join();
  EXPECT_EQ(ran.load(), kTimers);
  EXPECT_EQ(elsewhere.load(), 0);
  EXPECT_TRUE(returned.empty());
}

// Two loops drain a two-lane LoopExecutor, each its own lane. Loop 0's stop() waits for every task
// handed out, lane 1's included, which only loop 1 runs; so loop 1's stop(), finding it waiting,
// must not return at once and leave its lane's task queued, or loop 0 waits for ever. Each lane
// holds a fired task as loop 0's stop() begins, and each shard a pending timer.
TEST(EngineLoop, TwoLoopsDrainingALoopExecutorMayBothStopTheEngine) {
  struct State {
    std::shared_ptr<LoopExecutor> tasks = std::make_shared<LoopExecutor>(2);
    std::unique_ptr<Engine> e;
    std::atomic<int> drained{0};
    std::array<std::atomic<std::thread::id>, 2> loop_ids{};
    std::array<std::atomic<std::thread::id>, 2> ran_on{};
    std::array<std::size_t, 2> returned{99, 99};
  };
  auto s = std::make_shared<State>();
  s->e = std::make_unique<Engine>(workers(2, s->tasks));
  auto loop = [s](std::size_t lane) {
    s->loop_ids[lane].store(std::this_thread::get_id());
    EXPECT_EQ(s->tasks->drain(lane), 0u);  // this thread is the lane's loop
    s->drained.fetch_add(1);
    if (lane == 0) {  // a task waits in each lane as loop 0's stop() begins
      ASSERT_TRUE(eventually([&] { return s->tasks->queued(0) == 1 && s->tasks->queued(1) == 1; }));
    } else {
      ASSERT_TRUE(eventually([&] {
        Timer probe = s->e->schedule_after(1h, [] {});
        if (!probe) return probe.status() == Status::stopped;  // loop 0's stop() has begun
        EXPECT_TRUE(probe.cancel());
        return false;
      }));
    }
    s->returned[lane] = s->e->stop().size();
  };
  auto schedule = [s] {  // once both loops are their lanes' loops
    ASSERT_TRUE(eventually([&] { return s->drained.load() == 2; }));
    for (std::size_t shard = 0; shard < 2; ++shard) {
      ASSERT_TRUE(s->e->schedule_after_on(shard, 1h, [] {}));
      ASSERT_TRUE(s->e->schedule_after_on(
          shard, 0ns, [s, shard] { s->ran_on[shard].store(std::this_thread::get_id()); }));
    }
  };
  ASSERT_TRUE(all_return({[loop] { loop(0); }, [loop] { loop(1); }, schedule}))
      << "a loop's stop() waited forever for a task in another loop's lane";
  for (std::size_t lane = 0; lane < 2; ++lane) {
    EXPECT_EQ(s->ran_on[lane].load(), s->loop_ids[lane].load()) << "lane " << lane << "'s task ran elsewhere";
  }
  EXPECT_EQ(s->returned[0], 2u) << "the first stop() returns both shards' pending timers";
  EXPECT_EQ(s->returned[1], 0u) << "the second stop() returns nothing";
  EXPECT_EQ(s->e->stats().executing, 0u);
}

// A loop that drains its lane only when the lane's fd is readable, as executor.hpp says to, must
// never find tasks waiting behind an fd that is not. Were drain() to take the signal back before it
// resets the eventfd, an execute() in between would write the fd, the reset would erase that write,
// and the lane would stay "signalled" with its fd clear: no later execute() would write again, the
// loop would sleep for ever and stop() would wait for ever for its tasks. Here the worker fires
// rounds of timers due at one instant, one long burst of execute()s each, while the loop drains as
// fast as it can: each drain's window is crossed by an execute(). A lane with tasks queued whose fd
// stays unreadable for ten seconds is a lost wake-up (execute() writes within microseconds of its
// enqueue; the bound leaves room for a loaded machine): counted, then drained so that the test goes
// on.
TEST(EngineLoop, ALoopThatDrainsOnlyWhenItsFdIsReadableLosesNoWakeUp) {
  constexpr int kRounds = 40;
  constexpr int kPerRound = 10'000;
  auto tasks = std::make_shared<LoopExecutor>(1);
  Engine e(workers(1, tasks));
  std::atomic<int> ran{0}, lost{0};
  std::atomic<bool> done{false};
  std::thread loop([&] {
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    (void)::epoll_ctl(ep, EPOLL_CTL_ADD, tasks->fd(0), &ev);
    while (!done.load()) {
      if (::epoll_wait(ep, &ev, 1, 100) == 1) {
        (void)tasks->drain(0);
      } else if (tasks->queued(0) != 0 && ::epoll_wait(ep, &ev, 1, 10'000) == 0) {
        lost.fetch_add(1);
        (void)tasks->drain(0);
      }
    }
    (void)tasks->drain(0);
    ::close(ep);
  });
  for (int round = 1; round <= kRounds; ++round) {
    const Nanos when = e.now() + 20ms;
    for (int i = 0; i < kPerRound; ++i) ASSERT_TRUE(e.schedule_at(when, [&ran] { ran.fetch_add(1); }));
    ASSERT_TRUE(eventually([&] { return ran.load() == round * kPerRound; }));
  }
  EXPECT_EQ(lost.load(), 0) << "tasks waited in a lane whose fd was not readable";
  EXPECT_TRUE(e.stop().empty());
  done.store(true);
  loop.join();
}

TEST(EngineLoop, ATaskTellsItsShardAndBadLanesAreRefused) {
  EXPECT_THROW(LoopExecutor(0), std::invalid_argument);
  EXPECT_THROW(LoopExecutor(5000), std::invalid_argument);
  LoopExecutor tasks(2);
  EXPECT_THROW((void)tasks.fd(2), std::out_of_range);
  EXPECT_THROW((void)tasks.drain(2), std::out_of_range);
  EXPECT_EQ(Task().shard(), 0u);
  EXPECT_EQ(tasks.lane_count(), 2u);
}

}  // namespace
}  // namespace tickwheel::test
