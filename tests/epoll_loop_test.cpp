// EpollLoop, on real epoll: the caller-driven loop protocol of engine_loop_test.cpp written once
// (tickwheel/epoll_loop.hpp). Each loop runs on a thread of its own against real epoll, asleep for
// an hour unless something wakes it, so that a missing wake-up fails a bounded wait instead of
// passing late; the test's end stops the engine, which wakes the loop whatever happened. No timing
// figure is asserted: what is checked is what woke the loop, what ran, and how many turns it took.
#include "tickwheel/epoll_loop.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>

#include "engine_support.hpp"
#include "manual_clock.hpp"
#include "thread_support.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::test {
namespace {

using namespace std::chrono_literals;

long timer_slack() { return ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL); }

// A pipe whose read end a test adds to a loop's epoll set, under `tag`.
struct Pipe {
  std::array<int, 2> fds{-1, -1};
  Pipe() { EXPECT_EQ(::pipe2(fds.data(), O_NONBLOCK | O_CLOEXEC), 0); }
  ~Pipe() {
    ::close(fds[0]);
    ::close(fds[1]);
  }
  Pipe(const Pipe&) = delete;
  Pipe& operator=(const Pipe&) = delete;
  void add_to(const EpollLoop& loop, std::uint64_t tag) const {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    ASSERT_EQ(::epoll_ctl(loop.fd(), EPOLL_CTL_ADD, fds[0], &ev), 0);
  }
  void write_byte() const { ASSERT_EQ(::write(fds[1], "x", 1), 1); }
  void read_byte() const {
    char c = 0;
    (void)::read(fds[0], &c, 1);
  }
};

TEST(EpollLoop, AHandOffFromAnotherThreadWakesItsWait) {
  Engine e(real_clock_manual());
  std::atomic<bool> ready{false};
  std::atomic<int> ran{0};
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    ASSERT_TRUE(e.schedule_after(1h, [] {}));  // the loop's next deadline: an hour away
    ready.store(true);
    while (!e.stopped()) (void)loop.run_once();
  });
  ASSERT_TRUE(eventually([&] { return ready.load(); }));
  std::this_thread::sleep_for(1ms);  // the loop is in its hour-long wait
  ASSERT_TRUE(e.schedule_after_on(0, 0ns, [&ran] { ran.fetch_add(1); }));
  EXPECT_TRUE(eventually([&] { return ran.load() == 1; }, 30s))
      << "the loop slept through another thread's hand-off";
  EXPECT_EQ(e.stop().size(), 1u) << "stop() hands back the hour-long timer";  // and wakes the loop
  loop_thread.join();
}

TEST(EpollLoop, ATimerFiresAtItsDeadlineWithNoActivityOnTheUsersFds) {
  Engine e(real_clock_manual());
  Pipe quiet;
  std::atomic<bool> done{false};
  std::optional<Nanos> deadline;
  Nanos fired_at{0};
  int turns = 0;
  std::size_t events = 0;
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    quiet.add_to(loop, 1);
    ASSERT_TRUE(e.schedule_after(1h, [] {}));
    bool fired = false;
    const Timer t = e.schedule_after(20ms, [&] {
      fired_at = e.now();
      fired = true;
    });
    deadline = t.deadline();  // as the shard will run it: rounded up to the tick
    while (!fired && turns < 100 && !e.stopped()) {
      events += loop.run_once().size();
      ++turns;
    }
    done.store(true);
  });
  const bool returned = eventually([&] { return done.load(); }, 30s);
  EXPECT_TRUE(returned) << "the loop slept past its timer's deadline";
  (void)e.stop();
  loop_thread.join();
  if (!returned) return;
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(fired_at, *deadline) << "the timer fired early";
  EXPECT_EQ(events, 0u) << "events came back with no activity on the loop's fds";
  // One wait timed to the deadline and the poll after it; a wake-up a little early (the wait is
  // timed from a clock read a little before it starts) may cost one more. Not a spin, not a miss.
  EXPECT_LE(turns, 3) << "the loop did not sleep until its deadline";
}

TEST(EpollLoop, TheUsersEventsComeBackAndTheWakeupFdsNever) {
  Engine e(real_clock_manual());
  Pipe user;
  std::atomic<bool> ready{false};
  std::atomic<int> ran{0}, user_events{0}, wake_events{0}, other_events{0};
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    user.add_to(loop, 42);
    ASSERT_TRUE(e.schedule_after(1h, [] {}));
    const int wake_fd = e.wakeup_fd(0);
    ready.store(true);
    while (!e.stopped()) {
      for (const epoll_event& ev : loop.run_once()) {
        if (ev.data.u64 == EpollLoop::kWakeData || ev.data.fd == wake_fd) {
          wake_events.fetch_add(1);
        } else if (ev.data.u64 == 42 && ev.events == EPOLLIN) {
          user.read_byte();
          user_events.fetch_add(1);
        } else {
          other_events.fetch_add(1);
        }
      }
    }
  });
  ASSERT_TRUE(eventually([&] { return ready.load(); }));
  int writes = 0;
  for (int round = 0; round < 50; ++round) {
    // A hand-off from this thread wakes the loop through the wake-up fd...
    ASSERT_TRUE(e.schedule_after_on(0, 0ns, [&ran] { ran.fetch_add(1); }));
    ASSERT_TRUE(eventually([&] { return ran.load() == round + 1; }, 30s)) << "round " << round;
    if (round % 5 == 0) {  // ...and now and then the loop's own fd is ready
      user.write_byte();
      ++writes;
      ASSERT_TRUE(eventually([&] { return user_events.load() == writes; }, 30s)) << "round " << round;
    }
  }
  EXPECT_GE(e.stats().shards[0].wakeups, 50u);
  EXPECT_EQ(e.stop().size(), 1u);
  loop_thread.join();
  EXPECT_EQ(wake_events.load(), 0) << "the wake-up fd's events reached the user";
  EXPECT_EQ(other_events.load(), 0);
  EXPECT_EQ(user_events.load(), writes);
}

TEST(EpollLoop, ALimitLeavesTheRestToTheNextTurnsWhichDoNotSleep) {
  Engine e(real_clock_manual());
  std::atomic<bool> done{false};
  std::atomic<int> ran{0};
  int turns_after_first = 0;
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    ASSERT_TRUE(e.schedule_after(1h, [] {}));
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(e.schedule_after(0ns, [&ran] { ran.fetch_add(1); }));
    while (ran.load() == 0 && !e.stopped()) (void)loop.run_once(1);
    // Two due callbacks left: each turn runs one, and none sleeps (the hour-long timer is next).
    while (ran.load() < 3 && turns_after_first < 10 && !e.stopped()) {
      (void)loop.run_once(1);
      ++turns_after_first;
    }
    done.store(true);
  });
  EXPECT_TRUE(eventually([&] { return done.load(); }, 30s)) << "a turn slept with callbacks due";
  (void)e.stop();
  loop_thread.join();
  EXPECT_EQ(ran.load(), 3);
  EXPECT_LE(turns_after_first, 3);
}

// With a clock of the user's, the wait lasts what Engine::now() says is left, and clock_moved()
// cuts it short: the timer then runs at the clock's new time.
TEST(EpollLoop, AnOwnClockIsWhatTheWaitCountsAndClockMovedWakesIt) {
  Engine e(manual());
  std::atomic<bool> ready{false};
  std::atomic<int> ran{0};
  Nanos ran_at{0};
  const Nanos deadline = fake_now() + 1h;
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    ASSERT_TRUE(e.schedule_after(2h, [] {}));
    ASSERT_TRUE(e.schedule_after(deadline - fake_now(), [&] {
      ran_at = e.now();
      ran.fetch_add(1);
    }));
    ready.store(true);
    while (!e.stopped()) (void)loop.run_once();
  });
  ASSERT_TRUE(eventually([&] { return ready.load(); }));
  std::this_thread::sleep_for(1ms);  // the loop waits an hour of real time
  EXPECT_EQ(ran.load(), 0);
  advance_clock(1h + 1ms);  // past the deadline's tick, wherever in a tick the clock was
  e.clock_moved();
  EXPECT_TRUE(eventually([&] { return ran.load() == 1; }, 30s)) << "clock_moved() did not wake the loop";
  EXPECT_EQ(e.stop().size(), 1u);
  loop_thread.join();
  EXPECT_GE(ran_at, deadline);
}

// stop() from another thread wakes the loop and ends its ownership; from then on run_once() runs
// nothing and never sleeps, so a loop that checks Engine::stopped() before each turn cannot hang
// whichever side of that check the stop falls.
TEST(EpollLoop, AfterStopRunOnceNeverSleepsAndTheOwnershipHasEnded) {
  Engine e(real_clock_manual());
  Pipe unblock;  // a hung wait is cut short through this, so that the failure is reported
  std::atomic<bool> ready{false}, done{false};
  std::atomic<int> ran{0};
  std::optional<std::size_t> owned_after{99};
  std::thread loop_thread([&] {
    EpollLoop loop(e, 0);
    unblock.add_to(loop, 7);
    ASSERT_TRUE(e.schedule_after(1h, [&ran] { ran.fetch_add(1); }));
    ready.store(true);
    while (!e.stopped()) (void)loop.run_once();
    for (int i = 0; i < 3; ++i) (void)loop.run_once();
    owned_after = e.owned_shard();
    done.store(true);
  });
  ASSERT_TRUE(eventually([&] { return ready.load(); }));
  std::this_thread::sleep_for(1ms);
  EXPECT_EQ(e.stop().size(), 1u);
  const bool returned = eventually([&] { return done.load(); }, 30s);
  EXPECT_TRUE(returned) << "run_once() slept after stop()";
  if (!returned) unblock.write_byte();
  loop_thread.join();
  EXPECT_EQ(owned_after, std::nullopt) << "stop() did not end the loop's ownership";
  EXPECT_EQ(ran.load(), 0);
}

// A wait announced from another thread, or from inside a callback, would take the owner's place
// in the wake-up protocol: refused before any step of it.
TEST(EpollLoop, RunOnceOffTheOwnersThreadOrFromACallbackIsRefused) {
  Engine e(real_clock_manual());
  EpollLoop loop(e, 0);
  std::thread([&loop] { EXPECT_THROW((void)loop.run_once(), std::logic_error); }).join();
  bool refused = false;
  ASSERT_TRUE(e.schedule_after(0ns, [&] {
    try {
      (void)loop.run_once();
    } catch (const std::logic_error&) {
      refused = true;
    }
  }));
  ASSERT_TRUE(e.schedule_after(1h, [] {}));
  for (int turn = 0; turn < 100 && !refused; ++turn) (void)loop.run_once();
  EXPECT_TRUE(refused) << "run_once() from a callback of its shard was not refused";
  EXPECT_EQ(e.owned_shard(), std::optional<std::size_t>(0));
  EXPECT_EQ(e.stop().size(), 1u);
  std::thread([&loop] { EXPECT_NO_THROW((void)loop.run_once()) << "after stop() it only looks"; }).join();
}

// An answer read in the same turn as its timeout's tick: the handler form handles the turn's I/O
// before the due timers run, the span form runs them first. The timeout is made due, on the
// engine's clock, before the turn starts, and the answer is in the pipe by then, so one turn meets
// both whatever the scheduling.
TEST(EpollLoop, ATurnsEventsAreHandledBeforeItsDueTimersOnlyByTheHandlerForm) {
  Engine e(real_clock_manual());
  EpollLoop loop(e, 0);
  Pipe answers;
  answers.add_to(loop, 7);
  std::string order;
  const auto one_turn = [&](bool handler_form) {
    order.clear();
    Timer timeout = e.schedule_after(1ms, [&order] { order += 'T'; });
    ASSERT_TRUE(timeout);
    answers.write_byte();
    const std::optional<Nanos> due = timeout.deadline();
    ASSERT_TRUE(due.has_value());
    ASSERT_TRUE(eventually([&] { return e.now() >= *due; }));
    const auto on_event = [&](const epoll_event& ev) {
      EXPECT_EQ(ev.data.u64, 7u);
      answers.read_byte();
      order += 'I';
    };
    if (handler_form) {
      const EpollTurn turn = loop.run_once(on_event);
      EXPECT_EQ(turn.events, 1u);
      EXPECT_EQ(turn.ran, 1u);
      EXPECT_FALSE(turn.slept) << "something was due: the wait only looked";
    } else {
      for (const epoll_event& ev : loop.run_once()) on_event(ev);
      EXPECT_EQ(loop.last_turn().events, 1u);
      EXPECT_EQ(loop.last_turn().ran, 1u);
    }
  };
  one_turn(/*handler_form=*/true);
  EXPECT_EQ(order, "IT") << "the handler form: the turn's I/O, then the timeouts due in it";
  one_turn(/*handler_form=*/false);
  EXPECT_EQ(order, "TI") << "the span form: the due timeouts, then the events it returns";
  EXPECT_TRUE(e.stop().empty());
}

// What a turn reports. On the test's own clock, which stands still, a timer a millisecond ahead
// makes the turn sleep a millisecond of real time and run nothing; then a handler may schedule on
// the loop's shard (the owner's schedule), but not run a turn of its own.
TEST(EpollLoop, ATurnSaysWhatItDidAndAHandlerCannotNestATurn) {
  Engine e(manual());
  EpollLoop loop(e, 0);
  Pipe pipe;
  pipe.add_to(loop, 1);
  ASSERT_TRUE(e.schedule_after(1ms, [] {}));
  const EpollTurn slept = loop.run_once([](const epoll_event&) { ADD_FAILURE() << "no event was ready"; });
  EXPECT_TRUE(slept.slept);
  EXPECT_EQ(slept.ran, 0u) << "the engine's clock stood still";
  EXPECT_EQ(slept.events, 0u);

  pipe.write_byte();
  int scheduled = 0;
  bool refused = false;
  const EpollTurn handled = loop.run_once([&](const epoll_event&) {
    pipe.read_byte();
    scheduled += e.schedule_after(1h, [] {}) ? 1 : 0;
    try {
      (void)loop.run_once();
    } catch (const std::logic_error&) {
      refused = true;
    }
  });
  EXPECT_EQ(handled.events, 1u);
  EXPECT_EQ(scheduled, 1);
  EXPECT_TRUE(refused) << "run_once() from a handler of the turn under way";
  EXPECT_EQ(e.stop().size(), 2u);
}

TEST(EpollLoop, TheShardIsReleasedOnDestructionAndTheTimerSlackRestored) {
  Engine e(real_clock_manual(2));
  const long slack_before = timer_slack();
  ASSERT_GT(slack_before, 1);
  int fd = -1;
  {
    EpollLoop loop(e, 1);
    fd = loop.fd();
    EXPECT_EQ(loop.shard(), 1u);
    EXPECT_EQ(e.owned_shard(), std::optional<std::size_t>(1));
    EXPECT_EQ(timer_slack(), 1);
    std::thread([&e] {
      EXPECT_THROW((void)e.poll(1), std::logic_error) << "an owned shard was polled";
    }).join();
  }
  EXPECT_EQ(::fcntl(fd, F_GETFD), -1) << "the loop's own epoll set was left open";
  EXPECT_EQ(e.owned_shard(), std::nullopt) << "the shard was not released";
  EXPECT_EQ(timer_slack(), slack_before) << "the thread's timer slack was not restored";
  std::thread([&e] { EXPECT_NO_THROW((void)e.poll(1)); }).join();
  { EpollLoop again(e, 1); }

  // The user's epoll set: the wake-up fd goes in, and comes out again; the set stays open.
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  {
    EpollLoop loop(e, 0, {.epoll_fd = ep});
    EXPECT_EQ(loop.fd(), ep);
    epoll_event ev{};
    ev.events = EPOLLIN;
    EXPECT_EQ(::epoll_ctl(ep, EPOLL_CTL_ADD, e.wakeup_fd(0), &ev), -1);
    EXPECT_EQ(errno, EEXIST) << "the wake-up fd is not in the user's set";
  }
  EXPECT_EQ(::epoll_ctl(ep, EPOLL_CTL_DEL, e.wakeup_fd(0), nullptr), -1);
  EXPECT_EQ(errno, ENOENT) << "the wake-up fd was left in the user's set";
  EXPECT_NE(::fcntl(ep, F_GETFD), -1) << "the user's epoll set was closed";
  ::close(ep);
  EXPECT_TRUE(e.stop().empty());
}

// Each refusal leaves nothing behind: no shard owned, no wake-up fd in a set, the slack as it was.
TEST(EpollLoop, BadInputIsRefusedWithNothingOwnedOrChanged) {
  Engine e(real_clock_manual(2));
  const long slack = timer_slack();
  const auto nothing_left = [&](const char* what) {
    EXPECT_EQ(e.owned_shard(), std::nullopt) << what;
    EXPECT_EQ(timer_slack(), slack) << what;
  };
  EXPECT_THROW(EpollLoop(e, 2), std::out_of_range);
  nothing_left("shard out of range");

  Engine threaded(workers(1));
  EXPECT_THROW(EpollLoop(threaded, 0), std::logic_error);
  EngineOptions wake_loop_options = real_clock_manual();
  wake_loop_options.wake_loop = [](std::size_t) {};
  Engine wake_loop(wake_loop_options);
  EXPECT_THROW(EpollLoop(wake_loop, 0), std::logic_error);
  nothing_left("worker threads, wake_loop");

  for (const std::size_t bad : {std::size_t{0}, std::size_t{65537}}) {
    try {
      EpollLoop loop(e, 0, {.max_events = bad});
      ADD_FAILURE() << "max_events " << bad << " was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("got " + std::to_string(bad)), std::string::npos)
          << error.what();
    }
  }
  Pipe not_epoll;
  EXPECT_THROW(EpollLoop(e, 0, {.epoll_fd = not_epoll.fds[0]}), std::system_error);
  nothing_left("max_events, not an epoll fd");

  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  ASSERT_GE(ep, 0);
  std::atomic<bool> owned{false}, leave{false};
  std::thread other([&] {
    EpollLoop loop(e, 0);
    owned.store(true);
    while (!leave.load()) std::this_thread::sleep_for(100us);
  });
  ASSERT_TRUE(eventually([&] { return owned.load(); }));
  EXPECT_THROW(EpollLoop(e, 0, {.epoll_fd = ep}), std::logic_error) << "two owners";
  EXPECT_EQ(::epoll_ctl(ep, EPOLL_CTL_DEL, e.wakeup_fd(0), nullptr), -1);
  EXPECT_EQ(errno, ENOENT) << "a refused loop left the wake-up fd in the user's set";
  {
    EpollLoop mine(e, 1);
    leave.store(true);
    other.join();
    EXPECT_THROW(EpollLoop(e, 0), std::logic_error) << "a thread owns one shard at a time";
    EXPECT_EQ(e.owned_shard(), std::optional<std::size_t>(1));
  }
  nothing_left("owned elsewhere, owning another");
  ::close(ep);

  EXPECT_TRUE(e.stop().empty());
  EXPECT_THROW(EpollLoop(e, 0), std::logic_error) << "a stopped engine";
  nothing_left("stopped");
}

}  // namespace
}  // namespace tickwheel::test
