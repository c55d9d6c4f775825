// engine/core/wakeup.cpp — the system calls of the wake-up protocol (see wakeup.hpp).
#include "core/wakeup.hpp"

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
  // An eventfd signal counts itself in started_ before its write and in futex_ after it. Nothing
  // to read when every signal begun has been counted done by an earlier drain (drained_): their
  // writes came before that drain's read, which reset them. Otherwise read; the drain covers the
  // signals done before it (acquire: pairs with the release after their writes). One begun and
  // not done keeps started_ above drained_, so each later finish() reads again until it is done:
  // the fd is never left readable with no read to come, and a signaller held up between its write
  // and its count costs a read per wait, never a loop spinning on a readable fd.
  const std::uint32_t done = futex_.load(std::memory_order_acquire);
  // Relaxed: a stale value only delays the read by one turn of the loop (the fd stays readable,
  // so the next wait returns at once, and the next finish() sees the bump).
  if (started_.load(std::memory_order_relaxed) == drained_) return;
  drained_ = done;
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
      started_.fetch_add(1, std::memory_order_relaxed);  // relaxed: see finish()
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
