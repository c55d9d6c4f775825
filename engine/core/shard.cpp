// engine/core/shard.cpp — a shard's pass and what it takes in (cancels, moves, returned nodes,
// clears, hand-offs), its reserve of free nodes, the executor's side of a task, and the calls its
// own thread makes into its wheel. The worker thread is in shard_worker.cpp, the caller-driven
// side (polls, waits, ownership) in shard_driver.cpp.
#include "core/shard.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <span>

#include "tickwheel/detail/arith.hpp"

namespace tickwheel::detail {
namespace {

thread_local const ShardHost* t_task_engine = nullptr;

// The reserve of free nodes a shard keeps for other threads' schedules: refilled to its target
// whenever a pass finds it below half of it. The target starts at 1 Ki nodes (64 KiB of node
// memory per shard: a small process pays for what it uses, as the options promise when
// reserve_per_shard is 0) and doubles, up to kReserveMax (64 MiB), each time a pass finds the
// reserve emptied: producers then took nodes from their overflow pools, whose memory the shard
// keeps once those timers end, so without the growth every burst larger than the reserve would map
// overflow memory anew.
constexpr std::size_t kReserveStart = std::size_t{1} << 10;
constexpr std::size_t kReserveMax = std::size_t{1} << 20;

Wakeup::Kind wakeup_kind(const EngineOptions& opts) noexcept {
  if (opts.threads == Threads::workers) return Wakeup::Kind::futex;
  return opts.wake_loop ? Wakeup::Kind::callback : Wakeup::Kind::eventfd;
}

}  // namespace

const ShardHost* current_task_engine() noexcept { return t_task_engine; }

Shard::Shard(ShardHost& host, std::size_t index, unsigned cpu, const EngineOptions& opts, Nanos start)
    : host_(host),
      index_(index),
      wait_strategy_(opts.wait),
      transfer_cap_(opts.transfer_cap),
      reserve_(opts.reserve_per_shard),
      lock_memory_(opts.lock_memory),
      hybrid_spin_(opts.hybrid_spin),
      pin_(opts.pin_workers),
      manual_(opts.threads == Threads::manual),
      own_clock_(opts.clock != nullptr),
      on_pass_(opts.on_pass),
      on_pass_context_(opts.on_pass_context),
      cpu_(cpu),
      ticks_(static_cast<std::uint64_t>(opts.tick.count())),
      executor_(dynamic_cast<InlineExecutor*>(opts.executor.get()) != nullptr ? nullptr
                                                                              : opts.executor.get()),
      any_thread_executor_(executor_ != nullptr && executor_->any_thread() &&
                           opts.max_pending_per_shard == 0),
      wheel_(WheelOptions{.tick = opts.tick, .start = start, .max_pending = 0},
             ShardPolicy{.claims = &counters_.claimed, .shard = this}, arena_.id),
      reserve_target_(kReserveStart),
      admission_(opts.max_pending_per_shard, counters_.claimed),
      inbox_(wakeup_kind(opts), index, &opts.wake_loop, static_cast<std::uint64_t>(opts.tick.count())) {
  pool_map_.shard = static_cast<std::uint32_t>(index);
  lane_.shard = this;
  lane_.index = index;
  lane_.pool = &wheel_.pool();
}

void Shard::aim_lane() noexcept {
  Shard* const own = t_current_shard != nullptr ? t_current_shard : t_owned_shard;
  t_own_lane = own != nullptr ? &own->lane_ : nullptr;
}

bool Shard::dispatch(Node* node) noexcept {
  if (executor_ == nullptr) return false;
  // Relaxed: only the thread in the pass writes it (the worker, or the thread polling a
  // caller-driven shard: polls never overlap, and polling_ orders one after another), and stop()
  // reads it after joining the worker or waiting out the poll.
  bump(counters_.dispatched);
  executor_->execute(Task(this, node));
  return true;
}

void Shard::run_task(Node* node, moodycamel::ProducerToken* returned_token) noexcept {
  using Meta = PeriodicMeta;
  const std::uint64_t meta = callable_meta(node);
  const ShardHost* const outer = t_task_engine;
  t_task_engine = &host_;  // stop() from inside the callback is refused
  try {
    run_callable(node);
  } catch (...) {
    callback_threw();
  }
  t_task_engine = outer;
  std::uint64_t next_tick = 0;  // the tick of the next run; a one-shot wakes no one
  if (meta != 0) {
    if (Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay)) {
      // The next run is one period after this one ended: its tick goes back in `due`
      // (ShardWheel::rearm_returned). The node is this thread's until the enqueue below publishes
      // it (release; the worker's dequeue acquires). Release, as every write of `due` that
      // Timer::deadline() can race from another thread (see detail::store_due).
      const Nanos next =
          detail::saturating_add(run_end(), Nanos(static_cast<Nanos::rep>(Meta::period(meta))));
      next_tick = ticks_.due(next);
      store_due(node, next_tick, std::memory_order_release);
    } else {
      // The next grid point, or a later one if the timer misfired: waking for the first is never
      // late. `due` is the run's tick, written by the worker before it handed the task over; a
      // fixed rate's period is a whole number of ticks.
      next_tick = std::min(node->due + ticks_.floor(Meta::period(meta)), ticks_.max_tick());
    }
  }
  inbox_.give_back(node, returned_token);
  if (meta != 0) inbox_.wake_for(next_tick);
  counters_.completed.fetch_add(1, std::memory_order_release);  // see ShardCounters::completed
}

void Shard::callback_threw() noexcept {
  counters_.callback_errors.fetch_add(1, std::memory_order_relaxed);
  host_.report_callback_error(std::current_exception());
}

void Shard::wait_for_tasks(const std::function<std::uint64_t()>& claimed_elsewhere) const noexcept {
  // Acquire: pairs with run_task()'s release increment, so the returned nodes are all visible.
  while (counters_.completed.load(std::memory_order_acquire) !=
         counters_.dispatched.load(std::memory_order_relaxed) + claimed_elsewhere()) {
    executor_->run_while_stopping();  // tasks only this thread would run (see Executor)
    std::this_thread::yield();
  }
}

void Shard::drain_returned() noexcept {
  inbox_.drain_returned([this](Node* node) {
    if (callable_meta(node) == 0) {
      wheel_.release_node(node);  // a one-shot run destroyed its callable
    } else {
      wheel_.rearm_returned(node);
    }
  });
}

ShardStats Shard::stats(std::uint64_t claimed_elsewhere) const {
  ShardStats s;
  counters_.read(s, claimed_elsewhere);
  s.rejected = admission_.rejected();
  s.queue_depth = inbox_.queue_depth();
  s.bound_cpu = bound_cpu_.load(std::memory_order_relaxed);
  if (ready()) s.binding = binding_.data();  // acquire in ready() pairs with the worker's release
  return s;
}

void Shard::retire_owner_cancel(Node* node) noexcept {
  admission_.free_place();
  // Release: pairs with own_cancels()'s acquire, as a producer's cancel count. Only the shard's
  // thread (its owner, one at a time) writes it.
  bump(counters_.own_cancels, 1, std::memory_order_release);
  // A hand-off not taken in yet (scheduled from another thread, or before this thread owned the
  // shard) is not linked: adopt() finds it cancelled and recycles it, as for any cancel in transit.
  if (node->pprev == nullptr) return;
  wheel_.cancel_own(node);
}

std::size_t Shard::pass(Nanos now, std::size_t limit) noexcept {
  loop_now_ = std::max(loop_now_, now);
  // A load and a store, not an increment: this thread is the only writer (as every counter here).
  bump(counters_.passes);
  const std::optional<Nanos> planned = planned_ns_;
  const std::uint64_t moves_before = on_pass_ != nullptr ? wheel_.stats().moved : 0;
  if (planned_ns_ && now > *planned_ns_) counters_.note_lag((now - *planned_ns_).count());
  // Netty's order: cancels first (their nodes must not be transferred into the wheel as live
  // timers only to be unlinked again), then at most transfer_cap hand-offs, then what is due.
  const std::size_t cancels = drain_cancels();
  (void)drain_moves();  // before anything runs, as the cancels
  drain_returned();
  (void)serve_clears();  // after the periodic timers back from the executor are linked again
  const std::size_t moved = inbox_.take_handoffs(transfer_cap_, [this](Node* node) { wheel_.adopt(node); });
  cap_hit_ = moved == transfer_cap_ && inbox_.queue_depth() != 0;
  if (cap_hit_) bump(counters_.cap_hits);
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
  refill_reserve();
  publish_stats();
  if (on_pass_ != nullptr) [[unlikely]] {
    const PassReport report{.shard = index_,
                            .planned = planned,
                            .start = now,
                            .end = clock_now(),
                            .cancels = cancels,
                            .transferred = moved,
                            .fired = ran(),
                            .moved = wheel_.stats().moved - moves_before};
    on_pass_(on_pass_context_, report);
  }
  return ran();
}

std::size_t Shard::drain_cancels() noexcept {
  return inbox_.drain_cancels([this](const CancelRecord& r) { wheel_.retire(r.node, r.gen); });
}

std::size_t Shard::drain_moves() noexcept {
  // A stale record (the timer fired, ran, was cancelled or its node reused) is dropped.
  return inbox_.drain_moves([this](const MoveRecord& r) { (void)move_here(r.node, r.gen, r.deadline_ns); });
}

bool Shard::serve_clears() noexcept {
  if (!inbox_.clear_requested()) [[likely]] {
    return false;
  }
  (void)clear_here();
  return true;
}

void Shard::refill_reserve() noexcept {
  const std::size_t have = inbox_.reserve_size();
  if (have == 0 && reserve_target_ < kReserveMax) reserve_target_ *= 2;  // emptied since last pass
  if (have < reserve_target_ / 2) {
    inbox_.fill_reserve(
        reserve_target_ - have, [this](std::span<Node*> out) { return take_wheel_nodes(out); },
        [this](Node* node) { wheel_.release_node(node); });
  }
}

std::size_t Shard::take_wheel_nodes(std::span<Node*> out) noexcept {
  const std::uint32_t before = wheel_.pool().touched();
  const std::size_t n = wheel_.take_free_nodes(out);
  stamp_since(before);  // fresh nodes come last, in index order (the free list is used up first)
  return n;
}

bool Shard::move_here(Node* node, std::uint32_t pending_gen, std::uint64_t deadline_ns) noexcept {
  // Acquire: pairs with a canceller's compare-and-swap, so that a cancel seen is seen whole; one
  // that comes after this load leaves the node linked, where its record or the fire path finds it.
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return false;
  const std::uint64_t due = ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns)));
  // The owner outside a pass may queue it, as the standalone wheel does; a pass, a walk's aftermath
  // or a posted record moves it at once.
  if (owned_here_outside_pass()) {
    wheel_.move_own(node, due);
  } else {
    wheel_.move(node, due);
  }
  return true;
}

std::optional<Nanos> Shard::deadline_of(Node* node, std::uint32_t pending_gen) const noexcept {
  // A seqlock's read, the generation word standing in for the sequence: `due` counts only if the
  // word holds the handle's pending value both before and after it is read.
  //
  // Acquire: pairs with a periodic timer's re-arm (ShardPolicy::rearm's compare-and-swap, whose
  // release comes after its write of the next run's `due`, WheelCore::rearm): so once the timer
  // is pending again `due` is the next run's, not the last one's. (What the schedule wrote reached
  // this thread with the Timer itself, which the caller passed on with its own ordering.) Any other
  // value (fired, cancelled, running, another lifetime, a fresh node): nullopt.
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return std::nullopt;
  // Relaxed, through std::atomic_ref: every write this can race is atomic (detail::store_due).
  // Within the lifetime (a move, a re-arm) it reads the value before or after the write: both are
  // deadlines this timer had while it was asked, the answer engine.hpp promises.
  // A move the owner queued flags the due (ShardWheel::move_own): masked off, it is the new one.
  const std::uint64_t due = load_due(node) & ~ShardWheel::kMovingBit;
  // Acquire fence: pairs with the release of the write of `due` just read. If that write is of a
  // later lifetime of the node (the timer ended and the node was handed out again meanwhile: the
  // producer's store in EngineCore::commit, or any later one), the end of this timer came before
  // it, so the load below sees the word moved on, and the stale `due` is not answered.
  std::atomic_thread_fence(std::memory_order_acquire);
  // Relaxed: ordered by the fence above.
  if (node->gen.load(std::memory_order_relaxed) != pending_gen) return std::nullopt;
  // In ticks, linked or in transit (see Node::due); due <= the horizon: no overflow.
  return Nanos(static_cast<Nanos::rep>(due * ticks_.tick()));
}

std::size_t Shard::clear_here() noexcept {
  settle();
  const std::size_t cleared = wheel_.cancel_all();
  admission_.free_place(cleared);
  // Release: pairs with cleared()'s acquire, as direct_ does. Only this thread writes it.
  bump(counters_.cleared, cleared, std::memory_order_release);
  // Relaxed: a count for stats(), ordering nothing. Only this thread writes it.
  bump(counters_.clears);
  publish_stats();
  return cleared;
}

}  // namespace tickwheel::detail
