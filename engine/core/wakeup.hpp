// engine/core/wakeup.hpp — the wake-up protocol between a shard's sleeper and the threads that hand it
// work. The sleeper is the shard's worker (it blocks on a futex) or, in caller-driven mode, the
// loop that polls the shard (it blocks in its own wait: epoll on the shard's eventfd, or whatever
// EngineOptions::wake_loop wakes). One protocol for both:
//
//   sleeper:  prepare(plan)  publishes the time it will wake by itself (the plan), then a seq_cst
//                            fence; then it looks at its queues: work waiting -> finish(), no sleep
//             ... sleeps until the plan or a signal ...
//             finish()       plan := 0, "awake": from here no producer signals it
//   producer: enqueue, then wake_if_before(due): a seq_cst fence, then a load of the plan;
//             signal only if due is before it, and only if no other producer has signalled this
//             sleep yet (signal_once())
//
// (Dekker: each side's fence orders its store before its load, so either the sleeper sees the
// work before it sleeps or the producer sees the plan and signals.) A producer pays a system call
// only when it does wake a sleeper, never while the sleeper is awake (plan 0), and once per sleep:
// the producers that find the same plan after the first one's signal skip theirs. A nudge signals a
// sleeper whatever its plan, so that work it would not be woken for (cancels; hand-offs due after
// its plan) cannot pile up without bound while it sleeps.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "tickwheel/detail/node.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {

class Wakeup {
 public:
  // How signal() reaches the sleeper.
  enum class Kind : unsigned char {
    futex,     // a worker blocked in wait()
    eventfd,   // a polling loop waiting on fd() (Engine::wakeup_fd)
    callback,  // a polling loop woken by EngineOptions::wake_loop(index)
  };
  static constexpr std::uint64_t kAwake = 0;
  static constexpr std::uint64_t kUntilWoken = ~std::uint64_t{0};

  // `callback` (Kind::callback only) is called with `index`; it outlives this object.
  Wakeup(Kind kind, std::size_t index, const std::function<void(std::size_t)>* callback);
  ~Wakeup();
  Wakeup(const Wakeup&) = delete;
  Wakeup& operator=(const Wakeup&) = delete;
  Wakeup(Wakeup&&) = delete;
  Wakeup& operator=(Wakeup&&) = delete;

  // ---- The sleeper (one thread at a time) ----
  // Publishes the plan: the time in nanoseconds (the engine's clock) by which the sleeper wakes by
  // itself, kUntilWoken for none. Returns the futex word to pass to wait(). The caller must then
  // look at its queues and call finish() instead of sleeping if anything waits.
  std::uint32_t prepare(std::uint64_t plan_ns) noexcept {
    // This sleep has had no signal yet. Relaxed: the plan's release store below publishes it to a
    // producer that reads the plan (see signal_once()).
    signalled_.store(false, std::memory_order_relaxed);
    // Acquire: pairs with signal()'s release, so a signal before this load is seen as a new value.
    const std::uint32_t seq = futex_.load(std::memory_order_acquire);
    // Release: a producer whose acquire load reads this plan finds signalled_ reset (signal_once()).
    planned_ns_.store(plan_ns == kAwake ? 1 : plan_ns, std::memory_order_release);
    std::atomic_thread_fence(std::memory_order_seq_cst);  // Dekker with wake_if_before()
    return seq;
  }
  // A worker's sleep: blocks while the futex word is `seq`, until `until` (CLOCK_MONOTONIC) if given.
  void wait(std::uint32_t seq, const std::optional<Nanos>& until) noexcept;
  // Awake again: producers stop signalling. A loop's eventfd is drained if a signal came since
  // the last drain, so that a signal that came after the loop had already woken does not make its
  // next wait return at once; with none, no system call.
  void finish() noexcept;

  // ---- Producers (any thread) ----
  // After an enqueue of work due at due_ns: signals the sleeper if it sleeps, or is about to,
  // past due_ns.
  void wake_if_before(std::uint64_t due_ns) noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);                      // Dekker with prepare()
    if (due_ns < planned_ns_.load(std::memory_order_acquire)) signal_once();  // acquire: see prepare()
  }
  // After posting work that must not wait for the plan (a clear request): signals the sleeper
  // if it sleeps, or is about to, whatever its plan. The Dekker fence, as wake_if_before(): either
  // the sleeper sees the work before it sleeps, or this sees its plan and signals.
  void wake_if_sleeping() noexcept {
    std::atomic_thread_fence(std::memory_order_seq_cst);                       // Dekker with prepare()
    if (planned_ns_.load(std::memory_order_acquire) != kAwake) signal_once();  // acquire: see prepare()
  }
  // Signals the sleeper if it sleeps, whatever its plan. A hint (no fence); an awake sleeper looks
  // at its queues before it next sleeps. Acquire: see prepare().
  void nudge() noexcept {
    if (planned_ns_.load(std::memory_order_acquire) != kAwake) signal_once();
  }
  // Whether the sleeper sleeps, or is about to, past due_ns: what wake_if_before() would signal
  // for, read without its fence. Relaxed: a hint, for a producer choosing a path; a stale answer
  // costs a wake-up or saves none, and loses nothing.
  bool sleeps_past(std::uint64_t due_ns) const noexcept {
    return due_ns < planned_ns_.load(std::memory_order_relaxed);
  }
  // The sleeper's own thread linked work due at due_ns while its plan is out: a loop that runs
  // other handlers between prepare() and finish() (an io_context's thread, tickwheel/asio.hpp)
  // and schedules from them. Signals itself iff that is before the plan, so that its wait ends.
  // Relaxed, no fence: the plan is this thread's own store.
  void wake_self_if_before(std::uint64_t due_ns) noexcept {
    if (due_ns < planned_ns_.load(std::memory_order_relaxed)) [[unlikely]] {
      signal_once();
    }
  }
  // Signals unconditionally (stop, a moved clock): not once per sleep, since it may come while
  // the sleeper is awake, between a signal that set signalled_ and the next prepare().
  void signal() noexcept;

  // The eventfd of Kind::eventfd, else -1.
  int fd() const noexcept { return fd_; }
  // Whether the sleeper has announced a plan and not finished it.
  bool sleeping() const noexcept { return planned_ns_.load(std::memory_order_relaxed) != kAwake; }

 private:
  // The plan: kAwake while the sleeper is awake (it will look at its queues before it sleeps),
  // else the time it wakes by itself. Read by every producer on every hand-off, written by the
  // sleeper around a sleep: its own line.
  alignas(kCacheLine) std::atomic<std::uint64_t> planned_ns_{kAwake};
  // Bumped (release) by each signal: the futex word a worker waits on, and, for the others, a
  // record that a signal came (for an eventfd, after its write: see signal()). Its own line too.
  alignas(kCacheLine) std::atomic<std::uint32_t> futex_{0};
  // Set by the first producer that signals a sleep, reset by the sleeper's next prepare(): beside
  // futex_, which that producer writes next.
  std::atomic<bool> signalled_{false};
  // Kind::eventfd: signals begun (futex_ counts those done), and the sleeper's own record of
  // futex_ at its last read of the fd (see finish()).
  std::atomic<std::uint32_t> started_{0};
  std::uint32_t drained_ = 0;
  const Kind kind_;
  const std::size_t index_;
  const std::function<void(std::size_t)>* const callback_;
  int fd_ = -1;

  // A producer's signal: the first since the sleeper's prepare() signals, the others skip theirs.
  // Why a skip loses no wake-up: the skipper read this sleep's plan (acquire, after the plan's
  // release store that follows the reset), so its exchange comes after the reset and found the
  // flag set by a producer that signals after the reset. That signal either bumps futex_ after the
  // sleeper's load of `seq` (its wait returns at once or is woken), or before it: then its release
  // bump is seen by that acquire load, and with it that producer's own work, which the sleeper
  // finds when it looks at its queues, so it does not sleep. Either way it wakes, and looks at
  // every queue, the skipper's work included (see the fence argument in DESIGN.md). acq_rel: the
  // read-modify-write orders against the reset and the signal that follow it.
  void signal_once() noexcept {
    if (!signalled_.exchange(true, std::memory_order_acq_rel)) signal();
  }
};

}  // namespace tickwheel::detail
