// engine/exec/epoll_loop.cpp — EpollLoop: the caller-driven loop protocol around an epoll wait (see
// tickwheel/epoll_loop.hpp).
#include "tickwheel/epoll_loop.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <ctime>
#include <stdexcept>
#include <string>
#include <system_error>

namespace tickwheel {
namespace {

constexpr std::size_t kMaxEvents = 65536;

std::size_t checked_max_events(std::size_t n) {
  if (n == 0 || n > kMaxEvents) {
    throw std::invalid_argument("tickwheel::EpollLoop: max_events must be 1 .. " +
                                std::to_string(kMaxEvents) + ", got " + std::to_string(n));
  }
  return n;
}

}  // namespace

EpollLoop::EpollLoop(Engine& engine, std::size_t shard, EpollLoopOptions opts)
    : engine_(engine),
      shard_(shard),
      wake_fd_(engine.wakeup_fd(shard)),  // out_of_range; logic_error with workers or wake_loop
      events_(checked_max_events(opts.max_events)),
      epoll_fd_(opts.epoll_fd < 0 ? ::epoll_create1(EPOLL_CLOEXEC) : opts.epoll_fd),
      own_epoll_(opts.epoll_fd < 0) {
  if (epoll_fd_ < 0) {
    throw std::system_error(errno, std::generic_category(), "tickwheel::EpollLoop: epoll_create1");
  }
  epoll_event wake{};
  wake.events = EPOLLIN;
  wake.data.u64 = kWakeData;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake) != 0) {
    const int error = errno;
    if (own_epoll_) ::close(epoll_fd_);
    throw std::system_error(error, std::generic_category(),
                            "tickwheel::EpollLoop: adding the shard's wakeup_fd to the epoll set");
  }
  try {
    engine_.own_shard(shard_);
  } catch (...) {
    if (own_epoll_) {
      ::close(epoll_fd_);
    } else {
      (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, wake_fd_, nullptr);
    }
    throw;
  }
  old_slack_ = ::prctl(PR_GET_TIMERSLACK, 0UL, 0UL, 0UL, 0UL);
  (void)::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
}

EpollLoop::~EpollLoop() {
  if (engine_.owned_shard() == shard_) {
    try {
      engine_.release_shard(shard_);
    } catch (...) {  // only if this thread does not own it, which was just checked
    }
  }
  if (own_epoll_) {
    ::close(epoll_fd_);
  } else {
    (void)::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, wake_fd_, nullptr);
  }
  if (old_slack_ > 0) (void)::prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack_), 0UL, 0UL, 0UL);
}

namespace {

Nanos monotonic() noexcept {
  timespec ts{};
  (void)::clock_gettime(CLOCK_MONOTONIC, &ts);
  return Nanos(static_cast<Nanos::rep>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec);
}

}  // namespace

// Refused before any step of the protocol: a wait announced by another thread, or from inside a
// callback or a handler, would take the owner's place in it (a producer would wake the wrong wait,
// or none).
EpollLoop::Running::Running(EpollLoop& loop) : loop_(loop) {
  if (loop.running_) {
    throw std::logic_error(
        "tickwheel::EpollLoop::run_once: called from inside run_once() (a callback of shard " +
        std::to_string(loop.shard_) + ", or an event handler)");
  }
  loop.owner_ = loop.engine_.owned_shard() == loop.shard_;
  if (!loop.owner_ && !loop.engine_.stopped()) {
    throw std::logic_error("tickwheel::EpollLoop::run_once: this thread does not own shard " +
                           std::to_string(loop.shard_) + "; the thread that built the loop does");
  }
  loop.running_ = true;
}

// The loop protocol of engine.hpp with the poll at the end of the turn rather than its start, so
// that what the wait woke the loop for has run when run_once() returns (a loop that tests its own
// state between turns sees it), and the turn's events can be handled before it.
std::span<const epoll_event> EpollLoop::wait_turn() {
  turn_ = EpollTurn{};
  const Nanos start = monotonic();
  int n = 0;
  int error = 0;
  const std::optional<Nanos> until = owner_ ? engine_.next_deadline(shard_) : std::nullopt;
  if (owner_ && engine_.prepare_wait(shard_, until)) {
    std::optional<Nanos> left;
    if (until) left = std::max(*until - engine_.now(), Nanos(0));
    turn_.slept = !left || *left > Nanos(0);
    n = wait(left);
    error = errno;
    engine_.finish_wait(shard_);
  } else {
    n = wait(Nanos(0));  // hand-offs wait, or the engine stopped: look at the fds, don't sleep
    error = errno;
  }
  woke_ = monotonic();
  turn_.waited = woke_ - start;
  if (n < 0) {
    if (error == EINTR) return {};
    throw std::system_error(error, std::generic_category(), "tickwheel::EpollLoop::run_once: epoll wait");
  }
  const auto end = std::remove_if(events_.begin(), events_.begin() + n,
                                  [](const epoll_event& ev) { return ev.data.u64 == kWakeData; });
  turn_.events = static_cast<std::size_t>(end - events_.begin());
  return {events_.data(), turn_.events};
}

void EpollLoop::poll_turn(std::size_t limit) {
  if (owner_) turn_.ran = engine_.poll(shard_, limit);
  turn_.handled = monotonic() - woke_;
}

std::span<const epoll_event> EpollLoop::run_once(std::size_t limit) {
  const Running running(*this);
  const std::span<const epoll_event> ready = wait_turn();
  poll_turn(limit);
  return ready;
}

int EpollLoop::wait(std::optional<Nanos> left) {
  const int max = static_cast<int>(events_.size());
  if (nanosecond_waits_) {
    timespec ts{};
    if (left) {
      ts.tv_sec = static_cast<time_t>(left->count() / 1'000'000'000);
      ts.tv_nsec = static_cast<long>(left->count() % 1'000'000'000);
    }
    const int n = ::epoll_pwait2(epoll_fd_, events_.data(), max, left ? &ts : nullptr, nullptr);
    if (n >= 0 || errno != ENOSYS) return n;
    nanosecond_waits_ = false;  // a kernel before 5.11: milliseconds from now on
  }
  int ms = -1;
  if (left) {
    const auto up = std::chrono::ceil<std::chrono::milliseconds>(*left).count();  // never wake early
    ms = static_cast<int>(std::min<std::int64_t>(up, INT_MAX));
  }
  return ::epoll_wait(epoll_fd_, events_.data(), max, ms);
}

}  // namespace tickwheel
