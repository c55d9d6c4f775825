// engine/exec/loop_executor.cpp — LoopExecutor: a queue and an eventfd per lane (see executor.hpp).
#include <concurrentqueue/concurrentqueue.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/executor.hpp"

namespace tickwheel {
namespace {

constexpr std::size_t kMaxLanes = 4096;

// A number unique to each thread, for "the thread that drained this lane last".
std::atomic<std::uint64_t> g_next_thread{1};
std::uint64_t this_thread_number() noexcept {
  thread_local const std::uint64_t number = g_next_thread.fetch_add(1, std::memory_order_relaxed);
  return number;
}

}  // namespace

struct LoopExecutor::Impl {
  // One lane, on lines of its own: the workers that execute() into it and its loop bounce only it.
  struct alignas(detail::kCacheLine) Lane {
    moodycamel::ConcurrentQueue<Task> queue;
    int fd = -1;
    // True from an execute() that wrote the eventfd until the loop's next drain() takes it back:
    // while it is true, more tasks need no write (the fd is readable already). See execute().
    std::atomic<bool> signalled{false};
    std::atomic<std::uint64_t> drainer{0};  // this_thread_number() of the last drain(); relaxed: a hint

    Lane() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
      if (fd < 0) throw std::system_error(errno, std::generic_category(), "tickwheel::LoopExecutor: eventfd");
    }
    ~Lane() { ::close(fd); }
    Lane(const Lane&) = delete;
    Lane& operator=(const Lane&) = delete;
    Lane(Lane&&) = delete;
    Lane& operator=(Lane&&) = delete;

    void signal() const noexcept {
      const std::uint64_t one = 1;
      (void)::write(fd, &one, sizeof one);  // fails only if the counter would overflow: readable anyway
    }
  };

  std::vector<std::unique_ptr<Lane>> lanes;

  Lane& lane(std::size_t i, const char* call) const {
    if (i >= lanes.size()) {
      throw std::out_of_range(std::string("tickwheel::LoopExecutor::") + call + ": lane " +
                              std::to_string(i) + " of " + std::to_string(lanes.size()));
    }
    return *lanes[i];
  }

  static std::size_t drain(Lane& lane, std::size_t limit) noexcept {
    lane.drainer.store(this_thread_number(), std::memory_order_relaxed);
    // Reset the eventfd first, then take the signal back, then look at the queue. In this order an
    // execute() that finds the flag false (after the exchange) writes a counter that nothing here
    // resets, so the fd stays readable for it. The other order loses a wake-up: an execute() between
    // the exchange and the read writes the fd, the read erases it, and the flag, true again, stops
    // every later execute() from writing while the loop waits on a clear fd.
    std::uint64_t count = 0;
    (void)::read(lane.fd, &count, sizeof count);  // resets the counter; EAGAIN if it was 0
    // acq_rel: if it reads an execute()'s true, that task's enqueue is visible to the dequeues below.
    lane.signalled.exchange(false, std::memory_order_acq_rel);
    std::size_t ran = 0;
    Task task;
    while (ran < limit && lane.queue.try_dequeue(task)) {
      task.run();
      ++ran;
    }
    if (ran == limit && lane.queue.size_approx() != 0 &&
        !lane.signalled.exchange(true, std::memory_order_acq_rel)) {
      lane.signal();  // left some behind: come back
    }
    return ran;
  }
};

LoopExecutor::LoopExecutor(std::size_t lanes) : impl_(std::make_unique<Impl>()) {
  if (lanes == 0 || lanes > kMaxLanes) {
    throw std::invalid_argument("tickwheel::LoopExecutor: lanes must be between 1 and " +
                                std::to_string(kMaxLanes) + ", got " + std::to_string(lanes));
  }
  impl_->lanes.reserve(lanes);
  for (std::size_t i = 0; i < lanes; ++i) impl_->lanes.push_back(std::make_unique<Impl::Lane>());
}

LoopExecutor::~LoopExecutor() = default;

void LoopExecutor::execute(Task task) noexcept {
  Impl::Lane& lane = *impl_->lanes[task.shard() % impl_->lanes.size()];
  if (!lane.queue.enqueue(task)) {
    task.run();  // no memory for the queue: run it here, drop nothing
    return;
  }
  // acq_rel: releases the enqueue above to the drain() that takes the flag back; one write per
  // signal, however many tasks come before the loop drains.
  if (!lane.signalled.exchange(true, std::memory_order_acq_rel)) lane.signal();
}

std::size_t LoopExecutor::drain(std::size_t lane, std::size_t limit) {
  return Impl::drain(impl_->lane(lane, "drain"), limit);
}

int LoopExecutor::fd(std::size_t lane) const { return impl_->lane(lane, "fd").fd; }

std::size_t LoopExecutor::queued(std::size_t lane) const {
  return impl_->lane(lane, "queued").queue.size_approx();
}

std::size_t LoopExecutor::lane_count() const noexcept { return impl_->lanes.size(); }

void LoopExecutor::run_while_stopping() noexcept {
  const std::uint64_t me = this_thread_number();
  for (auto& lane : impl_->lanes) {
    if (lane->drainer.load(std::memory_order_relaxed) == me) Impl::drain(*lane, ~std::size_t{0});
  }
}

}  // namespace tickwheel
