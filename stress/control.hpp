// stress/control.hpp — the control thread: the platform's own floor, measured beside the engine,
// in the style of cyclictest (rt-tests) and jHiccup: it waits for a grid of the engine's tick, half
// a tick out of phase, and records how late it woke. See docs/stress.md, "The control thread".
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "histogram.hpp"

namespace tickwheel::stress {

class ControlThread {
 public:
  // tick_ns > 0; cpu < 0: not bound; rt_priority 0: the default policy, else SCHED_FIFO at it.
  ControlThread(std::int64_t tick_ns, bool spin, int cpu, int rt_priority);
  ~ControlThread();
  ControlThread(const ControlThread&) = delete;
  ControlThread& operator=(const ControlThread&) = delete;

  // Starts the thread and waits until it is bound and set up. Throws std::runtime_error if the
  // binding or the priority is refused (the message names the CPU or the priority and errno).
  void start();
  // Stops and joins the thread. Idempotent.
  void stop();

  // Wake-up lateness: the clock read after the wait minus the grid point waited for. Written by the
  // control thread only; read by any thread (ConcurrentHistogram).
  const ConcurrentHistogram& lateness() const noexcept { return lateness_; }
  pid_t tid() const noexcept { return tid_.load(std::memory_order_acquire); }
  int cpu() const noexcept { return cpu_; }

 private:
  void run() noexcept;

  const std::int64_t tick_ns_;
  const bool spin_;
  const int cpu_;
  const int rt_priority_;
  ConcurrentHistogram lateness_;
  // Release by the thread once set up (with setup_error_ written before it); acquire in start().
  std::atomic<pid_t> tid_{0};
  std::string setup_error_;
  std::atomic<bool> stop_{false};  // relaxed: a request, looked at once per wake-up
  std::thread thread_;
};

}  // namespace tickwheel::stress
