// tests/thread_support.hpp — helpers shared by the test files that start threads: a bounded wait
// for a condition, a bounded wait for calls on threads of their own to return, a gate that holds a
// worker inside a callback, and a gate callbacks block on.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace tickwheel::test {

using namespace std::chrono_literals;

// Polls `pred` until it holds or `limit` passes; returns its last value. The limit only bounds a
// hung test: no test asserts how long the wait took.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 60s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end) return pred();
    std::this_thread::sleep_for(100us);
  }
  return true;
}

// Runs each call on a thread of its own and waits, at most `limit`, for all of them to return: the
// limit only bounds a hang (a deadlock fails the test instead of stalling it), no speed is asserted.
// True once all returned, their threads joined. False if one hangs: every thread is then detached
// and left to the process's exit, so what the calls use must outlive the test (hold it through a
// shared_ptr the calls capture).
inline bool all_return(std::vector<std::function<void()>> calls, std::chrono::milliseconds limit = 10s) {
  auto running = std::make_shared<std::atomic<std::size_t>>(calls.size());
  std::vector<std::thread> threads;
  threads.reserve(calls.size());
  for (auto& call : calls) {
    threads.emplace_back([call = std::move(call), running] {
      call();
      running->fetch_sub(1);
    });
  }
  const bool returned = eventually([&] { return running->load() == 0; }, limit);
  for (auto& thread : threads) {
    if (returned) {
      thread.join();
    } else {
      thread.detach();
    }
  }
  return returned;
}

// Holds a worker inside a callback until released, so the test can act while that shard can
// neither fire nor transfer anything.
struct HoldGate {
  std::atomic<bool> entered{false};
  std::atomic<bool> open{false};
  void pass() {  // in the callback
    entered.store(true);
    open.wait(false);
  }
  bool wait_entered() {
    return eventually([&] { return entered.load(); });
  }
  void release() {
    open.store(true);
    open.notify_all();
  }
};
// Declared after the Engine, so a failed assertion releases the worker before the engine's
// destructor joins it.
struct ReleaseOnExit {
  HoldGate& gate;
  ~ReleaseOnExit() { gate.release(); }
};

// A gate callbacks block on until the test opens it (or a generous bound passes, so that a broken
// engine fails the test instead of hanging it).
class Gate {
 public:
  void wait() {
    std::unique_lock lock(m_);
    cv_.wait_for(lock, 30s, [&] { return open_; });
  }
  void open() {
    {
      std::lock_guard lock(m_);
      open_ = true;
    }
    cv_.notify_all();
  }
  bool is_open() {
    std::lock_guard lock(m_);
    return open_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool open_ = false;
};

}  // namespace tickwheel::test
