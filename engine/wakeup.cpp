// engine/wakeup.cpp — the system calls of the wake-up protocol (see wakeup.hpp).
#include "wakeup.hpp"

#include <linux/futex.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <system_error>

namespace tickwheel::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "the futex word is used through its address");

Wakeup::Wakeup(Kind kind, std::size_t index, const std::function<void(std::size_t)>* callback)
    : kind_(kind), index_(index), callback_(callback) {
  if (kind_ == Kind::eventfd) {
    fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (fd_ < 0) throw std::system_error(errno, std::generic_category(), "tickwheel: eventfd");
  }
}

Wakeup::~Wakeup() {
  if (fd_ >= 0) ::close(fd_);
}

void Wakeup::wait(std::uint32_t seq, const std::optional<Nanos>& until) noexcept {
  timespec ts{};
  if (until) {
    ts.tv_sec = static_cast<time_t>(until->count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(until->count() % 1'000'000'000);
  }
  // Blocks while the word is still `seq`, until an absolute CLOCK_MONOTONIC time (or forever).
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&futex_), FUTEX_WAIT_BITSET_PRIVATE, seq,
            until ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void Wakeup::finish() noexcept {
  planned_ns_.store(kAwake, std::memory_order_relaxed);
  if (fd_ < 0) return;
  // Acquire: pairs with signal()'s release, which follows its write to the fd. So every signal
  // this load counts has written, and the read below resets what they wrote. A signal it does not
  // count may have written too (the read takes that as well) or may write later; either way its
  // bump comes after this load, so a later finish() sees the word moved and drains again: the fd
  // is never left readable with no drain to come.
  const std::uint32_t seen = futex_.load(std::memory_order_acquire);
  if (seen == drained_) return;
  drained_ = seen;
  std::uint64_t count = 0;
  (void)::read(fd_, &count, sizeof count);  // resets the counter; EAGAIN when it was 0
}

void Wakeup::signal() noexcept {
  switch (kind_) {
    case Kind::futex:
      // Release: pairs with prepare()'s acquire load of the word. Before the wake-up: a sleeper
      // not yet blocked then finds the word moved from its `seq`, and does not block.
      futex_.fetch_add(1, std::memory_order_release);
      ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&futex_), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr,
                0);
      return;
    case Kind::eventfd: {
      const std::uint64_t one = 1;
      (void)::write(fd_, &one, sizeof one);  // fails only when the counter would overflow: set anyway
      // Release, after the write: pairs with finish()'s acquire load (see there).
      futex_.fetch_add(1, std::memory_order_release);
      return;
    }
    case Kind::callback:
      futex_.fetch_add(1, std::memory_order_release);  // release: the record of a signal, as above
      try {
        (*callback_)(index_);
      } catch (...) {
        // EngineOptions::wake_loop must not throw; what it throws is dropped, as documented there.
      }
      return;
  }
}

}  // namespace tickwheel::detail
