// stress/control.cpp — the control thread's loop.
#include "control.hpp"

#include <sys/prctl.h>
#include <time.h>

#include <cerrno>
#include <chrono>
#include <stdexcept>

#include "clock.hpp"
#include "placement.hpp"
#include "platform.hpp"

namespace tickwheel::stress {

ControlThread::ControlThread(std::int64_t tick_ns, bool spin, int cpu, int rt_priority)
    : tick_ns_(tick_ns), spin_(spin), cpu_(cpu), rt_priority_(rt_priority) {}

ControlThread::~ControlThread() { stop(); }

void ControlThread::start() {
  thread_ = std::thread([this] { run(); });
  while (tid_.load(std::memory_order_acquire) == 0)
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  if (!setup_error_.empty()) {
    stop();
    throw std::runtime_error(setup_error_);
  }
}

void ControlThread::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void ControlThread::run() noexcept {
  const pid_t me = current_tid();
  if (cpu_ >= 0) {
    if (std::string why = bind_thread(pthread_self(), {static_cast<unsigned>(cpu_)}); !why.empty()) {
      setup_error_ = "the control thread cannot be bound to CPU " + std::to_string(cpu_) + ": " + why;
    }
  }
  if (setup_error_.empty() && rt_priority_ > 0) {
    try {
      set_fifo(0, rt_priority_, "the control thread");
    } catch (const std::exception& e) {
      setup_error_ = e.what();
    }
  }
  // The same timer slack as the engine's workers (1 ns), so that the floor is measured as the
  // workers wait, not with the kernel's default 50 us of slack.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  const bool failed = !setup_error_.empty();
  tid_.store(me, std::memory_order_release);  // start() reads setup_error_ after this
  if (failed) return;

  const std::int64_t half = tick_ns_ / 2;
  // The first grid point k * tick + tick / 2 strictly after t.
  const auto next_after = [&](std::int64_t t) { return ((t - half) / tick_ns_ + 1) * tick_ns_ + half; };
  std::int64_t target = next_after(Clock::now());
  while (!stop_.load(std::memory_order_relaxed)) {
    std::int64_t now = 0;
    if (spin_) {
      while ((now = Clock::now()) < target) {
        __builtin_ia32_pause();
      }
    } else {
      Clock::sleep_until(target);
      now = Clock::now();
    }
    lateness_.record(static_cast<std::uint64_t>(now - target));
    target = next_after(now);
  }
}

}  // namespace tickwheel::stress
