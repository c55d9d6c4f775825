// engine/shard.cpp — the worker loop, the wake protocol, transfers, cancels and the node reserve.
#include "shard.hpp"

#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <ctime>
#include <limits>
#include <stdexcept>

#include "clock.hpp"
#include "engine_core.hpp"
#include "tickwheel/detail/arith.hpp"

namespace tickwheel::detail {
namespace {

thread_local Shard* t_current_shard = nullptr;
thread_local const EngineCore* t_task_engine = nullptr;

// The reserve of free nodes a worker keeps for producers: refilled to its target whenever a pass
// finds it below half of it. The target starts at 16 Ki nodes (1 MiB of node memory per shard) and
// doubles, up to kReserveMax (64 MiB), each time a pass finds the reserve emptied: producers then
// took nodes from their overflow pools, whose memory the shard keeps once those timers end, so
// without the growth every burst larger than the reserve would map overflow memory anew.
constexpr std::size_t kReserveStart = std::size_t{16} << 10;
constexpr std::size_t kReserveMax = std::size_t{1} << 20;
// Nodes, hand-offs or cancel records moved per queue call, through a buffer on the stack that is
// left uninitialised: the dequeue fills what is read, and zeroing 8 or 16 KiB would tax every pass.
constexpr std::size_t kBulk = 1024;

void futex_wake(std::atomic<std::uint32_t>* word) noexcept {
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// Blocks while *word == expected, until an absolute CLOCK_MONOTONIC time (or forever).
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected,
                const std::optional<Nanos>& until) noexcept {
  timespec ts{};
  if (until) {
    ts.tv_sec = static_cast<time_t>(until->count() / 1'000'000'000);
    ts.tv_nsec = static_cast<long>(until->count() % 1'000'000'000);
  }
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT_BITSET_PRIVATE, expected,
            until ? &ts : nullptr, nullptr, FUTEX_BITSET_MATCH_ANY);
}

inline void cpu_relax() noexcept { __builtin_ia32_pause(); }

}  // namespace

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t),
              "the futex word is used through its address");

Shard* current_shard() noexcept { return t_current_shard; }
const EngineCore* current_task_engine() noexcept { return t_task_engine; }

Shard::Shard(EngineCore& core, std::size_t index, const EngineOptions& opts, Nanos start)
    : core_(core),
      index_(index),
      wait_strategy_(opts.wait),
      transfer_cap_(opts.transfer_cap),
      max_pending_(opts.max_pending_per_shard),
      reserve_(opts.reserve_per_shard),
      lock_memory_(opts.lock_memory),
      hybrid_spin_(opts.hybrid_spin),
      pin_(opts.pin_workers),
      manual_(opts.threads == Threads::manual),
      cpu_(core.cpu_for(index)),
      tick_ns_(static_cast<std::uint64_t>(opts.tick.count())),
      executor_(dynamic_cast<InlineExecutor*>(opts.executor.get()) != nullptr ? nullptr
                                                                              : opts.executor.get()),
      wheel_(WheelOptions{.tick = opts.tick, .start = start, .max_pending = 0}),
      reserve_target_(kReserveStart) {
  wheel_.share();
  wheel_.pool_.use_arena(arena_.id);
  if (executor_ != nullptr) wheel_.set_dispatch(&Shard::dispatch, this);
  wheel_.set_run_clock(&Shard::run_clock, &core_);
}

// The engine's clock when an inline fixed-delay run returns, as run_task() reads it on an executor.
Nanos Shard::run_clock(const void* core) noexcept {
  return std::max(static_cast<const EngineCore*>(core)->now(), Nanos(0));
}

// ---- Any thread ----

bool Shard::hand_over(moodycamel::ProducerToken& token, Node* node) noexcept {
  const std::uint64_t due = node->due;  // the deadline in ns, until the worker adopts it
  // The enqueue publishes the node (release; the worker's dequeue acquires it). It allocates only
  // when the producer's block list must grow, which stops once it covers the peak backlog; if
  // that allocation fails nothing was handed over and the caller fails the schedule.
  if (!transfers_.enqueue(token, node)) return false;
  // The caller's load of stopped_ relies on the fence in here too (EngineCore::commit): one fence
  // per hand-off serves both pairings.
  wake_if_before(due);
  return true;
}

void Shard::wake_if_before(std::uint64_t due_ns) noexcept {
  // Dekker with sleep_until(): this fence orders the caller's enqueue before the load of the
  // worker's plan, the worker's fence orders its plan before its look at the queues. So either the
  // worker sees the node before it sleeps, or this load sees the plan and wakes it if the node is
  // due earlier.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (due_ns < planned_wake_ns_.load(std::memory_order_relaxed)) {
    // Release: pairs with the worker's acquire load of the futex word before it plans a sleep.
    futex_.fetch_add(1, std::memory_order_release);
    futex_wake(&futex_);
  }
}

void Shard::dispatch(void* self, Node* node) noexcept {
  auto* shard = static_cast<Shard*>(self);
  // Relaxed: only this worker writes it, and stop() reads it after joining the worker.
  shard->dispatched_.store(shard->dispatched_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  shard->executor_->execute(Task(shard, node));
}

void Shard::run_task(Node* node, moodycamel::ProducerToken* returned_token) noexcept {
  using Meta = PeriodicMeta;
  // Read before the run: a one-shot run destroys the callable, and with it what meta would ask.
  const std::uint64_t meta = node->thunk(node->storage.data(), Op::meta);
  const EngineCore* const outer = t_task_engine;
  t_task_engine = &core_;  // stop() from inside the callback is refused
  try {
    node->thunk(node->storage.data(), Op::run);
  } catch (...) {
    callback_threw();
  }
  t_task_engine = outer;
  std::uint64_t next_ns = std::numeric_limits<std::uint64_t>::max();  // a one-shot wakes no one
  if (meta != 0) {
    if (Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay)) {
      // The worker places the next run from here (Wheel::rearm_returned); the node is this
      // thread's until the enqueue below publishes it (release; the worker's dequeue acquires).
      node->due = static_cast<std::uint64_t>(std::max<Nanos::rep>(core_.now().count(), 0));
      next_ns = detail::saturating_add(node->due, Meta::period(meta));
    } else {
      // The next grid point, or a later one if the timer misfired: waking for the first is never
      // late. `due` is the run's tick, written by the worker before it handed the task over.
      next_ns = detail::saturating_add(node->due * tick_ns_, Meta::period(meta));
    }
  }
  // An enqueue fails only when the queue cannot allocate; a node must not be lost, so try again
  // (without this thread's token, then with it) until memory is found.
  while (!(returned_token != nullptr ? returned_.enqueue(*returned_token, node) : returned_.enqueue(node))) {
    returned_token = nullptr;
    std::this_thread::yield();
  }
  if (meta != 0) wake_if_before(next_ns);
  completed_.fetch_add(1, std::memory_order_release);  // see completed_
}

void Shard::callback_threw() noexcept {
  callback_errors_.fetch_add(1, std::memory_order_relaxed);
  core_.report_callback_error(std::current_exception());
}

void Shard::wait_for_tasks() const noexcept {
  // Acquire: pairs with run_task()'s release increment, so the returned nodes are all visible.
  while (completed_.load(std::memory_order_acquire) != dispatched_.load(std::memory_order_relaxed)) {
    std::this_thread::yield();
  }
}

void Shard::drain_returned() noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t n = 0;
  while ((n = returned_.try_dequeue_bulk(nodes.data(), kBulk)) != 0) {
    for (std::size_t i = 0; i < n; ++i) {
      Node* node = nodes[i];
      if (node->thunk(node->storage.data(), Op::meta) == 0) {
        wheel_.release_node(node);  // a one-shot run destroyed its callable
      } else {
        wheel_.rearm_returned(node);
      }
    }
  }
}

void Shard::post_cancel(moodycamel::ProducerToken& token, Node* node, std::uint32_t cancelled_gen) noexcept {
  // Does not wake the worker (but for the caller's nudge, once per kNudgeEvery posts): most
  // timers are cancelled, and the node is harmless until the next pass (if its time comes
  // first, the worker's claim fails and it recycles the node then, which is also what happens
  // if this enqueue cannot allocate).
  cancels_.enqueue(token, CancelRecord{node, cancelled_gen});
}

void Shard::nudge() noexcept {
  // Relaxed: a hint. A worker that is awake (0) drains the queues before it plans its next sleep.
  if (planned_wake_ns_.load(std::memory_order_relaxed) == 0) return;
  futex_.fetch_add(1, std::memory_order_release);  // as in wake_if_before()
  futex_wake(&futex_);
}

std::size_t Shard::take_nodes(Node** out, std::size_t n) noexcept {
  return free_nodes_.try_dequeue_bulk(out, n);
}

bool Shard::admit() noexcept {
  if (max_pending_ == 0) return true;
  // Pending = admitted - done, the latter as the worker last published it: an overestimate by
  // what ended since, so the limit is never exceeded, only reached a little early.
  const std::uint64_t done = done_.load(std::memory_order_relaxed);
  const std::uint64_t before = admitted_.fetch_add(1, std::memory_order_relaxed);
  if (before - std::min(before, done) < max_pending_) return true;
  admitted_.fetch_sub(1, std::memory_order_relaxed);
  count_rejected();
  return false;
}

ShardStats Shard::stats() const {
  ShardStats s;
  s.scheduled = scheduled_.load(std::memory_order_relaxed);
  s.fired = fired_.load(std::memory_order_relaxed);
  s.cancelled = cancelled_.load(std::memory_order_relaxed);
  s.rearmed = rearmed_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.pending = pending_.load(std::memory_order_relaxed);
  s.queue_depth = transfers_.size_approx();
  s.transfer_cap_hits = cap_hits_.load(std::memory_order_relaxed);
  s.passes = passes_.load(std::memory_order_relaxed);
  s.wakeups = wakeups_.load(std::memory_order_relaxed);
  s.callback_errors = callback_errors_.load(std::memory_order_relaxed);
  const std::uint64_t completed = completed_.load(std::memory_order_relaxed);
  const std::uint64_t dispatched = dispatched_.load(std::memory_order_relaxed);
  s.executing = dispatched - std::min(dispatched, completed);  // two snapshots: never negative
  s.max_tick_lag_ns = max_lag_ns_.load(std::memory_order_relaxed);
  s.bound_cpu = bound_cpu_.load(std::memory_order_relaxed);
  if (ready()) s.binding = binding_;  // acquire in ready() pairs with the worker's release
  return s;
}

// ---- The worker thread ----

void Shard::start_worker() {
  thread_ = std::thread([this] { run(); });
}

void Shard::request_stop() noexcept {
  // seq_cst, and seq_cst on polling_ here and in poll(): a poll that takes polling_ then reads
  // stopping_, so either it sees stopping_ and runs nothing, or this loop sees it polling and
  // waits for it to end. (For a worker, any order would do: it reads stopping_ each pass.)
  stopping_.store(true, std::memory_order_seq_cst);
  if (manual_) {
    while (polling_.load(std::memory_order_seq_cst)) std::this_thread::yield();
    return;
  }
  futex_.fetch_add(1, std::memory_order_release);
  futex_wake(&futex_);
}

void Shard::join() {
  if (thread_.joinable()) thread_.join();
}

void Shard::link_direct(Node* node) noexcept { wheel_.adopt(node); }

void Shard::run() {
  t_current_shard = this;
  if (!pin_) {
    binding_ = "not pinned (pin_workers = false)";
  } else if (std::string why = core_.topology().bind_this_thread(cpu_); why.empty()) {
    binding_ = "bound to PU " + std::to_string(cpu_);
    bound_cpu_.store(static_cast<int>(cpu_), std::memory_order_relaxed);
  } else {
    binding_ = "not bound: " + why;
    core_.note_once(EngineCore::Notice::binding_refused,
                    "tickwheel: shard " + std::to_string(index_) + " runs unpinned: " + why);
  }
  // The kernel's timer slack (50 us by default) would make every timed wake that much late.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  prepare();  // first touch of the node memory happens here, on the pinned worker

  while (!stopping_.load(std::memory_order_acquire)) {
    pass(monotonic_now(), std::numeric_limits<std::size_t>::max());
    if (!cap_hit_) wait();
  }
  t_current_shard = nullptr;
}

void Shard::prepare() noexcept {
  if (reserve_ != 0) reserve_memory();
  reserve_token_.emplace(free_nodes_);
  top_up(reserve_target_);
  ready_.store(true, std::memory_order_release);
}

// The timers asked for plus the hand-out reserve that prepare() fills from the same pool next.
void Shard::reserve_memory() noexcept {
  const std::uint64_t nodes = std::uint64_t{reserve_} + reserve_target_;
  const int err = wheel_.pool_.reserve(nodes, lock_memory_);
  if (err == 0) return;
  try {
    core_.note_once(EngineCore::Notice::reserve_refused, "tickwheel: shard " + std::to_string(index_) + ": " +
                                                             wheel_.pool_.describe_refusal(nodes, err));
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the line, or the log hook threw
  }
}

void Shard::start_manual() noexcept {
  binding_ = "caller-driven (no worker thread)";
  prepare();
}

std::size_t Shard::poll(Nanos now, std::size_t limit) {
  if (polling_.exchange(true, std::memory_order_seq_cst)) {
    throw std::logic_error("tickwheel::Engine::poll: shard " + std::to_string(index_) +
                           " is being polled by another thread; each shard must have one polling thread");
  }
  std::size_t ran = 0;
  if (!stopping_.load(std::memory_order_seq_cst)) {  // see request_stop()
    // Callbacks run on this thread: a schedule on this shard from one goes straight into the wheel,
    // and stop() from one is refused, as on a worker. (A callback may poll another engine.)
    Shard* const outer = t_current_shard;
    t_current_shard = this;
    ran = pass(now, limit);
    t_current_shard = outer;
    planned_ns_ = wheel_.next_deadline();  // the tick lag of the next poll is measured against it
  }
  // Release: the next poll, from whichever thread, sees this one's wheel.
  polling_.store(false, std::memory_order_release);
  return ran;
}

std::optional<Nanos> Shard::next_deadline(Nanos now) const noexcept {
  if (transfers_.size_approx() != 0 || returned_.size_approx() != 0) return now;
  return wheel_.next_deadline();
}

std::size_t Shard::pass(Nanos now, std::size_t limit) noexcept {
  passes_.fetch_add(1, std::memory_order_relaxed);
  if (planned_ns_ && now > *planned_ns_) {
    const std::int64_t lag = (now - *planned_ns_).count();
    if (lag > max_lag_ns_.load(std::memory_order_relaxed)) max_lag_ns_.store(lag, std::memory_order_relaxed);
  }
  // Netty's order: cancels first (their nodes must not be transferred into the wheel as live
  // timers only to be unlinked again), then at most transfer_cap hand-offs, then what is due.
  drain_cancels();
  drain_returned();
  const std::size_t moved = transfer(transfer_cap_);
  cap_hit_ = moved == transfer_cap_ && transfers_.size_approx() != 0;
  if (cap_hit_) cap_hits_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t fired_before = wheel_.stats().fired;
  auto ran = [&] { return static_cast<std::size_t>(wheel_.stats().fired - fired_before); };
  for (;;) {
    try {
      wheel_.advance(now, limit - ran());
      break;
    } catch (...) {
      // The callback counts as fired; the wheel resumes the rest of the pass on the next call.
      callback_threw();
    }
  }
  refill();
  publish_stats();
  return ran();
}

void Shard::drain_cancels() noexcept {
  std::array<CancelRecord, kBulk> records;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t n = 0;
  while ((n = cancels_.try_dequeue_bulk(records.data(), kBulk)) != 0) {
    for (std::size_t i = 0; i < n; ++i) wheel_.retire(records[i].node, records[i].gen);
  }
}

std::size_t Shard::transfer(std::size_t cap) noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t moved = 0;
  while (moved < cap) {
    const std::size_t n = transfers_.try_dequeue_bulk(nodes.data(), std::min(kBulk, cap - moved));
    if (n == 0) break;
    for (std::size_t i = 0; i < n; ++i) wheel_.adopt(nodes[i]);
    moved += n;
  }
  return moved;
}

void Shard::refill() noexcept {
  const std::size_t have = free_nodes_.size_approx();
  if (have == 0 && reserve_target_ < kReserveMax) reserve_target_ *= 2;  // emptied since last pass
  if (have < reserve_target_ / 2) top_up(reserve_target_ - have);
}

void Shard::top_up(std::size_t want) noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  while (want != 0) {
    const std::size_t n = wheel_.take_free_nodes(std::span(nodes).first(std::min(kBulk, want)));
    if (n == 0) break;
    if (!free_nodes_.enqueue_bulk(*reserve_token_, nodes.data(), n)) {
      for (std::size_t i = 0; i < n; ++i) wheel_.release_node(nodes[i]);  // the queue could not grow
      break;
    }
    want -= n;
  }
}

void Shard::publish_stats() noexcept {
  const WheelStats w = wheel_.stats();
  scheduled_.store(w.scheduled, std::memory_order_relaxed);
  fired_.store(w.fired, std::memory_order_relaxed);
  cancelled_.store(w.cancelled, std::memory_order_relaxed);
  rearmed_.store(w.rearmed, std::memory_order_relaxed);
  skipped_.store(w.skipped, std::memory_order_relaxed);
  pending_.store(wheel_.pending(), std::memory_order_relaxed);
  done_.store(w.fired + w.skipped + w.cancelled - w.rearmed, std::memory_order_relaxed);
}

void Shard::wait() {
  switch (wait_strategy_) {
    case WaitStrategy::spin:
      planned_ns_ = wheel_.next_deadline();  // the next pass's tick lag is measured against it
      cpu_relax();
      return;
    case WaitStrategy::hybrid: {
      const Nanos spin_end = monotonic_now() + hybrid_spin_;
      const std::optional<Nanos> next = wheel_.next_deadline();
      planned_ns_ = next;  // as for spin; sleep_until() sets it again if the spin runs out
      for (;;) {
        const Nanos now = monotonic_now();
        if ((next && now >= *next) || transfers_.size_approx() != 0 || returned_.size_approx() != 0 ||
            stopping_.load(std::memory_order_acquire)) {
          return;
        }
        if (now >= spin_end) break;
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
  if (deadline && *deadline <= monotonic_now()) return;
  const std::uint32_t seq = futex_.load(std::memory_order_acquire);
  const std::uint64_t plan =
      deadline ? static_cast<std::uint64_t>(deadline->count()) : std::numeric_limits<std::uint64_t>::max();
  planned_wake_ns_.store(plan, std::memory_order_relaxed);
  // Dekker with wake_if_before(): see the fence there. Nodes back from the executor count as
  // work too: a periodic one is not in the wheel's plan until it is re-armed.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (transfers_.size_approx() == 0 && returned_.size_approx() == 0 &&
      !stopping_.load(std::memory_order_acquire)) {
    futex_wait(&futex_, seq, deadline);
    wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
  planned_wake_ns_.store(0, std::memory_order_relaxed);
}

}  // namespace tickwheel::detail
