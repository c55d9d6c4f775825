// engine/core/shard_worker.cpp — a shard's worker thread: its start, its loop of passes, how it
// waits (spin, sleep, hybrid) and its binding.
#include "core/shard_worker.hpp"

#include <sys/mman.h>
#include <sys/prctl.h>

#include <cstdio>
#include <limits>
#include <memory>
#include <new>
#include <string>

#include "core/shard.hpp"
#include "platform/clock.hpp"
#include "platform/topology.hpp"
#include "tickwheel/detail/arith.hpp"

namespace tickwheel::detail {
namespace {

// Address space a new worker's first allocation may need for the allocator's per-thread state.
// jemalloc, when it is the process's allocator, crashes instead of failing if a thread's first
// allocation finds no address space left. So start() maps this much, inaccessible and uncommitted,
// before it creates the thread, and the thread unmaps it just before that first allocation: a
// start without the room fails cleanly, on the creating thread.
constexpr std::size_t kAllocatorHeadroom = std::size_t{4} << 20;

inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace

ShardWorker::ShardWorker(Shard& shard, unsigned cpu, const EngineOptions& opts) noexcept
    : shard_(shard),
      wait_strategy_(opts.wait),
      hybrid_spin_(opts.hybrid_spin),
      pin_(opts.pin_workers),
      cpu_(cpu) {}

void ShardWorker::start() {
  if (thread_.joinable()) return;  // started by an earlier start() that failed on a later shard
  shard_.inbox.make_reserve_token();
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

void ShardWorker::join() {
  if (thread_.joinable()) thread_.join();
}

void ShardWorker::describe_caller_driven() noexcept {
  (void)std::snprintf(binding_.data(), binding_.size(), "caller-driven (no worker thread)");
}

void ShardWorker::read(ShardStats& s) const noexcept {
  s.bound_cpu = bound_cpu_.load(std::memory_order_relaxed);
  if (ready()) s.binding = binding_.data();  // acquire in ready() pairs with mark_ready()'s release
}

void ShardWorker::bind() noexcept {
  if (!pin_) {
    (void)std::snprintf(binding_.data(), binding_.size(), "not pinned (pin_workers = false)");
    return;
  }
  const int error = shard_.host().topology().bind_thread(cpu_);
  if (error == 0) {
    (void)std::snprintf(binding_.data(), binding_.size(), "bound to PU %u", cpu_);
    bound_cpu_.store(static_cast<int>(cpu_), std::memory_order_relaxed);
    return;
  }
  std::array<char, 128> why{};
  Topology::describe_bind_error(error, cpu_, why);
  (void)std::snprintf(binding_.data(), binding_.size(), "not bound: %s", why.data());
  try {
    shard_.host().note_once(
        ShardHost::Notice::binding_refused,
        "tickwheel: shard " + std::to_string(shard_.index()) + " runs unpinned: " + why.data());
  } catch (...) {
    // No memory for the notice (or the log threw): stats().binding still says why.
  }
}

void ShardWorker::run(void* headroom) {
  ::munmap(headroom, kAllocatorHeadroom);
  {
    // The allocator's per-thread state, set up now, in the room just given back (see
    // kAllocatorHeadroom). Nothrow: if even this fails, the allocations that follow fail cleanly.
    const std::unique_ptr<char> first(new (std::nothrow) char);
  }
  warmed_.store(true, std::memory_order_release);  // see start()
  t_current_shard = &shard_;
  aim_own_lane();
  bind();
  // The kernel's timer slack (50 us by default) would make every timed wake that much late.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  shard_.prepare();  // first touch of the node memory happens here, on the pinned worker

  while (!shard_.stopping_.load(std::memory_order_acquire)) {
    shard_.pass(shard_.clock_now(), std::numeric_limits<std::size_t>::max());
    if (!shard_.cap_hit_) wait();
  }
  t_current_shard = nullptr;
  aim_own_lane();
}

void ShardWorker::wait() {
  switch (wait_strategy_) {
    case WaitStrategy::spin:
      shard_.planned_ns_ = shard_.wheel_.next_deadline();  // the next pass's tick lag is measured against it
      cpu_relax();
      return;
    case WaitStrategy::hybrid: {
      // The spin is real time; what is due is the engine's clock's.
      const Nanos spin_end = saturating_add(monotonic_now(), hybrid_spin_);  // any spin is valid
      const std::optional<Nanos> next = shard_.wheel_.next_deadline();
      shard_.planned_ns_ = next;  // as for spin; sleep_until() sets it again if the spin runs out
      for (;;) {
        if ((next && shard_.clock_now() >= *next) || !shard_.nothing_waits()) {
          return;
        }
        if (monotonic_now() >= spin_end) break;
        cpu_relax();
      }
      sleep_until(next);
      return;
    }
    case WaitStrategy::sleep: sleep_until(shard_.wheel_.next_deadline()); return;
  }
}

void ShardWorker::sleep_until(std::optional<Nanos> deadline) {
  shard_.planned_ns_ = deadline;
  if (deadline && *deadline <= shard_.clock_now()) return;
  Wakeup& wake = shard_.inbox.wake();
  const std::uint32_t seq = wake.prepare(wake_plan(deadline));
  // The deadline again, after prepare(): a clock_moved() whose signal that load did not see comes
  // after it, so makes the futex wait return at once; one it did see moved the clock before, so
  // this read sees the deadline reached. (With CLOCK_MONOTONIC this only skips a needless wait.)
  if (shard_.nothing_waits() && !(deadline && *deadline <= shard_.clock_now())) {
    // The futex times out on CLOCK_MONOTONIC: with a clock of the user's the worker sleeps until
    // woken, by a producer, or by Engine::clock_moved() from whoever moves that clock.
    wake.wait(seq, shard_.own_clock_ ? std::nullopt : deadline);
    bump(shard_.counters.wakeups);
  }
  wake.finish();
}

}  // namespace tickwheel::detail
