// engine/core/shard_worker.cpp — a shard's worker thread (EngineOptions::threads ==
// Threads::workers): its start, its loop of passes, how it waits (spin, sleep, hybrid) and how it
// stops. Only the worker runs these, but for start_worker(), request_stop() and join(), which the
// engine's lifecycle calls from the thread that starts or stops it.
#include <sys/mman.h>
#include <sys/prctl.h>

#include <array>
#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <thread>

#include "core/shard.hpp"
#include "platform/clock.hpp"
#include "platform/topology.hpp"
#include "tickwheel/detail/arith.hpp"

namespace tickwheel::detail {
namespace {

// Address space a new worker's first allocation may need for the allocator's per-thread state.
// jemalloc, when it is the process's allocator, crashes instead of failing if a thread's first
// allocation finds no address space left. So start_worker() maps this much, inaccessible and
// uncommitted, before it creates the thread, and the thread unmaps it just before that first
// allocation: a start without the room fails cleanly, on the creating thread.
constexpr std::size_t kAllocatorHeadroom = std::size_t{4} << 20;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

void Shard::start_worker() {
  if (thread_.joinable()) return;  // started by an earlier start() that failed on a later shard
  inbox_.make_reserve_token();
  void* const headroom =
      ::mmap(nullptr, kAllocatorHeadroom, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (headroom == MAP_FAILED) throw std::bad_alloc();
  try {
    thread_ = std::thread([this, headroom] { run(headroom); });
  } catch (...) {
    ::munmap(headroom, kAllocatorHeadroom);
    throw;
  }
  // Until the thread has made its first allocation in the room given back, this thread maps
  // nothing: the next worker's stack would take that room.
  while (!warmed_.load(std::memory_order_acquire)) std::this_thread::yield();
}

void Shard::request_stop() noexcept {
  // seq_cst, and seq_cst on polling_ here and in poll(): a poll that takes polling_ then reads
  // stopping_, so either it sees stopping_ and runs nothing, or this loop sees it polling and
  // waits for it to end. (For a worker, any order would do: it reads stopping_ each pass.)
  stopping_.store(true, std::memory_order_seq_cst);
  inbox_.wake().signal();  // a worker, or an owner's loop asleep in its wait: its next poll() lets go
  if (manual_) {
    // A poll, or an owner on another thread until its next poll() or its own stop() (which lets
    // the shard go before it waits for the lifecycle mutex that this thread holds).
    while (polling_.load(std::memory_order_seq_cst)) std::this_thread::yield();
  }
}

void Shard::join() {
  if (thread_.joinable()) thread_.join();
}

void Shard::describe_binding() noexcept {
  if (!pin_) {
    (void)std::snprintf(binding_.data(), binding_.size(), "not pinned (pin_workers = false)");
    return;
  }
  const int error = host_.topology().bind_thread(cpu_);
  if (error == 0) {
    (void)std::snprintf(binding_.data(), binding_.size(), "bound to PU %u", cpu_);
    bound_cpu_.store(static_cast<int>(cpu_), std::memory_order_relaxed);
    return;
  }
  std::array<char, 128> why{};
  Topology::describe_bind_error(error, cpu_, why);
  (void)std::snprintf(binding_.data(), binding_.size(), "not bound: %s", why.data());
  try {
    host_.note_once(ShardHost::Notice::binding_refused,
                    "tickwheel: shard " + std::to_string(index_) + " runs unpinned: " + why.data());
  } catch (...) {
    // No memory for the notice (or the log threw): stats().binding still says why.
  }
}

void Shard::run(void* headroom) {
  ::munmap(headroom, kAllocatorHeadroom);
  {
    // The allocator's per-thread state, set up now, in the room just given back (see
    // kAllocatorHeadroom). Nothrow: if even this fails, the allocations that follow fail cleanly.
    const std::unique_ptr<char> first(new (std::nothrow) char);
  }
  warmed_.store(true, std::memory_order_release);  // see start_worker()
  t_current_shard = this;
  aim_lane();
  describe_binding();
  // The kernel's timer slack (50 us by default) would make every timed wake that much late.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  prepare();  // first touch of the node memory happens here, on the pinned worker

  while (!stopping_.load(std::memory_order_acquire)) {
    pass(clock_now(), std::numeric_limits<std::size_t>::max());
    if (!cap_hit_) wait();
  }
  t_current_shard = nullptr;
  aim_lane();
}

void Shard::prepare() noexcept {
  if (reserve_ != 0) reserve_memory();
  inbox_.fill_reserve(
      reserve_target_, [this](std::span<Node*> out) { return take_wheel_nodes(out); },
      [this](Node* node) { wheel_.release_node(node); });
  ready_.store(true, std::memory_order_release);
}

// The timers asked for plus the hand-out reserve that prepare() fills from the same pool next.
void Shard::reserve_memory() noexcept {
  const std::uint64_t nodes = std::uint64_t{reserve_} + reserve_target_;
  const int err = wheel_.reserve(nodes, lock_memory_);
  if (err == 0) return;
  try {
    host_.note_once(ShardHost::Notice::reserve_refused, "tickwheel: shard " + std::to_string(index_) + ": " +
                                                            wheel_.describe_refusal(nodes, err));
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the line, or the log hook threw
  }
}

void Shard::wait() {
  switch (wait_strategy_) {
    case WaitStrategy::spin:
      planned_ns_ = wheel_.next_deadline();  // the next pass's tick lag is measured against it
      cpu_relax();
      return;
    case WaitStrategy::hybrid: {
      // The spin is real time; what is due is the engine's clock's.
      const Nanos spin_end = saturating_add(monotonic_now(), hybrid_spin_);  // any spin is valid
      const std::optional<Nanos> next = wheel_.next_deadline();
      planned_ns_ = next;  // as for spin; sleep_until() sets it again if the spin runs out
      for (;;) {
        if ((next && clock_now() >= *next) || !nothing_waits()) {
          return;
        }
        if (monotonic_now() >= spin_end) break;
        cpu_relax();
      }
      sleep_until(next);
      return;
    }
    case WaitStrategy::sleep: sleep_until(wheel_.next_deadline()); return;
  }
}

void Shard::sleep_until(std::optional<Nanos> deadline) {
  planned_ns_ = deadline;
  if (deadline && *deadline <= clock_now()) return;
  const std::uint32_t seq = inbox_.wake().prepare(wake_plan(deadline));
  // The deadline again, after prepare(): a clock_moved() whose signal that load did not see comes
  // after it, so makes the futex wait return at once; one it did see moved the clock before, so
  // this read sees the deadline reached. (With CLOCK_MONOTONIC this only skips a needless wait.)
  if (nothing_waits() && !(deadline && *deadline <= clock_now())) {
    // The futex times out on CLOCK_MONOTONIC: with a clock of the user's the worker sleeps until
    // woken, by a producer, or by Engine::clock_moved() from whoever moves that clock.
    inbox_.wake().wait(seq, own_clock_ ? std::nullopt : deadline);
    bump(counters_.wakeups);
  }
  inbox_.wake().finish();
}

}  // namespace tickwheel::detail
