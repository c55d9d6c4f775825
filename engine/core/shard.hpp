// engine/core/shard.hpp — one shard of the Engine: a wheel, the pass that advances it, and the
// calls its own thread makes straight into it. Its other jobs are parts of their own, each a
// public member labelled with the threads that use it: what other threads send it and how they
// wake it (ShardInbox), its places under max_pending_per_shard (Admission), what it counts
// (ShardCounters), its side of the executor (ShardTasks), its reserve of free nodes
// (ShardReserve), its worker thread (ShardWorker) or its caller-driven loop (ShardLoop).
//
// Data flow of a timer scheduled from another thread:
//   producer: node from its cache (refilled in bulk from the inbox's reserve, or from its own
//             overflow pool when the reserve is empty) -> callable stored -> ShardInbox::hand_over
//   worker:   each pass drains cancels, moves at most transfer_cap hand-offs into the wheel
//             (ShardWheel::adopt), advances the wheel to now (callbacks run, claiming each node by
//             compare-and-swap), tops the reserve back up from the wheel's pool, then waits.
//   cancel:   any thread wins the compare-and-swap on the node's generation, then posts
//             {node, cancelled generation}; the worker unlinks and recycles the node if it is still
//             that lifetime and still linked (else whoever met it first did). A periodic timer
//             caught running is cancelled by a second compare-and-swap (running -> cancelled) with
//             no record: its node is not linked, and the re-arm, refused, recycles it.
//   executor: the worker claims a due node as usual and hands it over as a Task; the executor's
//             thread runs it (ShardTasks::run) and gives the node back; the worker's next pass recycles it
//             (one-shot) or re-arms it (periodic), waking for a periodic node whose next run is
//             before its planned wake-up, as for a hand-off.
//   clear:    any thread posts a request and wakes a sleeper whatever its plan; the shard's thread,
//             at the start of its next pass (after the cancels, moves and returned nodes, before
//             anything runs), takes in every hand-off waiting (not capped by transfer_cap) and
//             cancels every timer in the wheel (clear_here()).
//   reschedule: a thread other than the shard's checks that the timer is pending (one load) and posts
//             {node, pending generation, new deadline} (one order for every producer, so the last
//             call to return wins), waking the worker iff the new deadline is before its planned
//             wake-up; the worker, draining moves right after cancels in its pass, before anything
//             runs, moves the node if it still holds that generation (a hand-off not yet taken in gets
//             its deadline rewritten). The shard's own thread applies the posted moves, then moves it
//             at once (move_here).
// Only the shard's thread ever links, unlinks or recycles a node, so the wheel stays single-threaded.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/admission.hpp"
#include "core/shard_counters.hpp"
#include "core/shard_host.hpp"
#include "core/shard_inbox.hpp"
#include "core/shard_loop.hpp"
#include "core/shard_reserve.hpp"
#include "core/shard_tasks.hpp"
#include "core/shard_wheel.hpp"
#include "core/shard_worker.hpp"
#include "platform/clock.hpp"
#include "tickwheel/detail/arith.hpp"
#include "tickwheel/detail/memory.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::detail {

// The plan a sleeper publishes (Wakeup::prepare) for a wait until `until`, or until woken.
inline std::uint64_t wake_plan(const std::optional<Nanos>& until) noexcept {
  return until ? static_cast<std::uint64_t>(std::max<Nanos::rep>(until->count(), 0)) : Wakeup::kUntilWoken;
}

class Shard {
  // The arena the wheel's node memory comes from (see detail/memory.hpp); declared before the
  // wheel so that it outlives the wheel's pool.
  struct Arena {
    const unsigned id = create_arena();
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena() { destroy_arena(id); }
  };

 public:
  // The shard `index` of `host`, its worker to be bound to PU `cpu`; its wheel starts at `start`.
  Shard(ShardHost& host, std::size_t index, unsigned cpu, const EngineOptions& opts, Nanos start);
  ~Shard() = default;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  std::size_t index() const noexcept { return index_; }
  ShardHost& host() const noexcept { return host_; }
  // The shortcut of the shard's own thread into its wheel (detail/own_lane.hpp): opened by the
  // engine (`engine` is its core, as Engine knows it) unless admission has work to do, shut by
  // stop(). Any thread.
  void open_lane(const void* engine) noexcept {
    lane_.engine = engine;
    lane_.open.store(!admission.limited(), std::memory_order_relaxed);
  }
  void shut_lane() noexcept { lane_.open.store(false, std::memory_order_relaxed); }
  // The counters the shard keeps; `pending` is left for EngineCore::stats(), which sums the
  // producers' schedules and cancels with the counters' own (see there). `claimed_elsewhere`:
  // tasks other threads handed to the executor (ShardTasks::execute_claimed), counted by them.
  ShardStats stats(std::uint64_t claimed_elsewhere) const;
  // stop(): the worker finishes its pass and returns; in caller-driven mode, a poll in progress is
  // waited out, an owner until it lets go, and later polls are refused. The calling thread must own
  // no shard of this engine (EngineCore::shut_down lets the caller's go first).
  void request_stop() noexcept;

  // ---- Which thread is the shard's (inline, below). ----
  // Whether the calling thread owns this shard and is outside a pass of it: its wheel is this
  // thread's to change directly, as a callback's schedules change it.
  bool owned_here_outside_pass() const noexcept;
  // Whether the calling thread is this shard's: a callback of its pass (a worker, or a thread in
  // poll()), or its owner (Engine::own_shard). What the calls below require.
  bool is_own_thread() const noexcept;
  // Whether a for_each_pending() walk is under way (on the shard's thread): changes to the wheel
  // are posted then, as from another thread, so that the walk's lists stay as they are.
  bool walking() const noexcept { return walking_; }
  // Whether a Timer::reschedule() of this shard's timer is this thread's to make at once: the
  // shard's own thread, outside a walk of it (whose lists must stay as they are: posted then, as
  // from another thread).
  bool can_move_at_once() const noexcept { return is_own_thread() && !walking_; }

  // ---- The shard's own thread (is_own_thread()), or the worker applying a record. ----
  // Moves the timer whose node holds pending generation `pending_gen` to deadline_ns (the engine's
  // clock): rounded up to the tick and placed as a schedule would place it, or, for a hand-off not
  // taken in yet, its deadline rewritten before its adoption. False, with nothing touched, if the
  // node no longer holds that generation (fired, running, cancelled, reused). O(1).
  bool move_here(Node* node, std::uint32_t pending_gen, std::uint64_t deadline_ns) noexcept;
  // Timer::reschedule() where can_move_at_once(): refused, with the posted moves left to the next
  // pass, for a timer no longer pending (a periodic one running included); else the moves posted
  // before it applied first, so that this one, the last, wins, and moved at once, so the answer is
  // exact. A relative deadline counts from loop_now(), as the owner's schedule does.
  Moved reschedule_here(Node* node, std::uint32_t pending_gen, Nanos when, bool relative) noexcept {
    // Acquire: as Timer::is_pending(), pairs with the compare-and-swap that moved the word on.
    if (node->gen.load(std::memory_order_acquire) != pending_gen) return Moved(Moved::Outcome::refused);
    const Nanos deadline = relative ? saturating_add(loop_now_, when) : when;
    if (inbox.moves_waiting()) [[unlikely]] {
      (void)drain_moves();
    }
    return Moved(move_here(node, pending_gen, move_deadline_ns(deadline)) ? Moved::Outcome::moved
                                                                          : Moved::Outcome::refused);
  }
  // Cancels every pending timer of the shard (posted cancels retired and hand-offs taken in first),
  // destroying their callables; returns how many it cancelled. Each is won by compare-and-swap, so
  // a cancel racing it on another thread wins or loses as against Timer::cancel(). O(pending).
  std::size_t clear_here() noexcept;
  // Calls visit(Timer, deadline) for every pending timer of the shard (posted cancels and moves
  // applied and hand-offs taken in first); returns how many. May throw what visit throws.
  template <class Visit>
  std::size_t walk_here(Visit&& visit);
  // Links a node from reserve.own_node(), its callable stored, at `deadline` (the engine's clock):
  // its generation and deadline set, straight into the wheel, no queue; the owner's own loop, if
  // its wait is announced past the new tick, signalled (an Asio-style loop schedules from other
  // handlers while it waits). Returns the generation.
  std::uint32_t link_own(Node* node, Nanos deadline) noexcept {
    const std::uint32_t gen = next_lifetime(node->gen.load(std::memory_order_relaxed));
    // Relaxed: other threads get the node through the Timer this schedule returns, which the
    // caller passes on with its own ordering.
    node->gen.store(gen, std::memory_order_relaxed);
    // Release, after the generation: as EngineCore::commit() writes it (see there).
    const std::uint64_t due = ticks_.due(deadline);
    store_due(node, due, std::memory_order_release);
    wheel_.link_new(node);
    if (loop_waits_) [[unlikely]] {
      inbox.wake_self_for(due);
    }
    // Release: pairs with EngineCore::pending()'s acquire. Only this thread writes it.
    bump(counters.direct, 1, std::memory_order_release);
    return gen;
  }
  // A cancel won by the owner outside a pass (owned_here_outside_pass()): counted, its callable
  // destroyed, unlinked and recycled at once or with the next batch (ShardWheel::cancel_own()); a
  // hand-off not taken in yet is left to adopt(), which recycles it.
  void retire_owner_cancel(Node* node) noexcept;
  // What the shard's own thread counts a relative deadline from: its loop's time, the later of the
  // last pass's `now` and the clock read when the polling loop last finished a wait
  // (ShardLoop::finish_wait()) or took ownership (ShardLoop::own()), as an event loop caches its
  // time once per iteration. The shard's own thread only.
  Nanos loop_now() const noexcept { return loop_now_; }

  // ---- After join() (the stopping thread, which now owns the shard). ----
  // Retires posted cancels, takes back what the executor returned, and adopts what is still in
  // the hand-off queue: every timer that neither ran nor was cancelled is then in the wheel. Then
  // serves a clear posted before stop() began that no pass served: those timers are cancelled,
  // not handed back.
  void drain_stopped() noexcept;
  std::size_t drain_cancels() noexcept;  // records taken; also the engine's destructor, after stop()
  // The wheel, for the stopping thread and the engine's teardown: the timers to hand back, a cancel
  // that comes after stop(), the callables to destroy.
  ShardWheel& wheel() noexcept { return wheel_; }
  void publish_stats() noexcept { counters.publish(wheel_.stats()); }

 private:
  friend class ShardWorker;  // runs pass() and waits on the shard's behalf
  friend class ShardLoop;    // likewise, for a loop of the caller's
  friend void aim_own_lane() noexcept;

  void prepare() noexcept;  // the reserve's first fill, then ready: on the thread that will pass
  // No hand-off, no returned node, no move or clear, no stop: a sleep may begin.
  bool nothing_waits() const noexcept {
    return !inbox.work_waiting() && !stopping_.load(std::memory_order_acquire);
  }
  std::size_t pass(Nanos now, std::size_t limit) noexcept;
  // Serves the clears posted since the last one served (ShardInbox::post_clear()): clear_here().
  // Returns whether there was one. The shard's thread (a pass, or the stopping thread in
  // drain_stopped()).
  bool serve_clears() noexcept;
  // Drains posted cancels and moves and takes every waiting hand-off in: what clear_here() and
  // walk_here() do first, so that they see every pending timer as it is now.
  void settle() noexcept;
  std::size_t drain_moves() noexcept;  // records taken (applied or found stale)
  void drain_returned() noexcept;
  // The engine's clock: CLOCK_MONOTONIC, or EngineOptions::clock through the host.
  Nanos clock_now() const noexcept { return own_clock_ ? host_.now() : monotonic_now(); }

  ShardHost& host_;
  const std::size_t index_;
  const std::size_t transfer_cap_;
  const bool manual_;
  const bool own_clock_;  // EngineOptions::clock is set: passes read it (host_.now())
  void (*const on_pass_)(void*, const PassReport&) noexcept;  // EngineOptions::on_pass
  void* const on_pass_context_;
  const TickDivider ticks_;  // the engine's tick
  Arena arena_;

 public:
  // Written by the shard's thread, read by any (see the parts below); before the wheel, whose
  // policy holds the address of its claims counter.
  // NOLINTNEXTLINE(cppcoreguidelines-non-private-member-variables-in-classes,misc-non-private-member-variables-in-classes)
  ShardCounters counters;

 private:
  // The shard's thread only (and the stopping thread after join).
  ShardWheel wheel_;
  std::optional<Nanos> planned_ns_;  // the deadline the last wait aimed at, for the tick lag
  bool cap_hit_ = false;             // the last pass left hand-offs beyond transfer_cap
  bool walking_ = false;             // inside walk_here()
  bool loop_waits_ = false;          // the polling thread's wait is announced (ShardLoop)
  Nanos loop_now_{0};                // see loop_now()
  OwnLane lane_;                     // see open_lane(); t_own_lane points here on the shard's thread

 public:
  // ---- The parts (their headers say which threads call what). Each holds references to those it
  // works with, bound here and used only once the shard is built. Public: each is a class that
  // keeps its own state private, and its callers name the part they use (shard.inbox.post_clear()),
  // where accessors would only repeat each name. ----
  // NOLINTBEGIN(cppcoreguidelines-non-private-member-variables-in-classes,misc-non-private-member-variables-in-classes)
  ShardReserve reserve;  // the shard's thread: the reserve of free nodes, own_node()
  Admission admission;   // any thread
  ShardTasks tasks;      // the executor's side: the pass, producers, executor threads, stop()
  ShardWorker worker;    // the worker thread, or a caller-driven shard's binding text
  ShardInbox inbox;      // any thread posts and wakes, the shard's thread takes
  ShardLoop loop;        // the caller-driven loop and the owner
  // NOLINTEND(cppcoreguidelines-non-private-member-variables-in-classes,misc-non-private-member-variables-in-classes)

 private:
  // Written once by stop() (request_stop()), read by every pass and by polls: a line of its own.
  alignas(kCacheLine) std::atomic<bool> stopping_{false};
};

template <class Visit>
std::size_t Shard::walk_here(Visit&& visit) {
  settle();
  const ShardWheel::ScopedFlag walking(walking_);  // cleared however the walk is left (visit may throw)
  std::size_t visited = 0;
  const auto tick = static_cast<Nanos::rep>(ticks_.tick());
  wheel_.for_each_pending_node([&](Node* node) {
    // Relaxed: this thread links and unlinks; a racing cancel (another thread's CAS) may make the
    // timer end right after, which the Timer handed over answers for itself.
    const std::uint32_t gen = node->gen.load(std::memory_order_relaxed);
    if ((gen & 3) != kPending) return;
    ++visited;
    visit(Timer(this, node, gen), Nanos(static_cast<Nanos::rep>(node->due) * tick));
  });
  return visited;
}

// The shard whose pass the calling thread is in (its worker, or a thread inside its poll()), and
// the shard the calling thread owns (Engine::own_shard), or nullptr: what the schedule, cancel and
// reschedule paths ask first. Plain thread-locals, constant-initialised, so each is one load, no
// call. Written by the shard's code only: its worker and its loop.
inline thread_local Shard* t_current_shard = nullptr;
inline thread_local Shard* t_owned_shard = nullptr;
inline Shard* current_shard() noexcept { return t_current_shard; }
inline Shard* owned_shard() noexcept { return t_owned_shard; }
// Points t_own_lane where t_current_shard and t_owned_shard now say: the pass's shard first.
void aim_own_lane() noexcept;
// The engine whose task the calling thread is running (inside Task::run), or nullptr.
const ShardHost* current_task_engine() noexcept;

inline bool Shard::owned_here_outside_pass() const noexcept {
  return t_owned_shard == this && t_current_shard != this && !walking_;
}
inline bool Shard::is_own_thread() const noexcept { return t_current_shard == this || t_owned_shard == this; }

}  // namespace tickwheel::detail
