// engine/core/shard.hpp — one shard of the Engine: a wheel and the thread that owns it (its worker,
// or the caller-driven loop that polls or owns it). What other threads send it goes through its
// inbox (shard_inbox.hpp), its places through its admission (admission.hpp), and what it counts
// through its counters (shard_counters.hpp). This class is the shard's own thread's: the pass and
// what it takes in (shard.cpp), the worker thread (shard_worker.cpp), the caller-driven loop and
// ownership (shard_driver.cpp), and the calls the shard's thread makes straight into its wheel.
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
//             thread runs it (run_task) and gives the node back; the worker's next pass recycles it
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

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <thread>

#include "core/admission.hpp"
#include "core/directory.hpp"
#include "core/move_queue.hpp"
#include "core/shard_counters.hpp"
#include "core/shard_host.hpp"
#include "core/shard_inbox.hpp"
#include "core/shard_wheel.hpp"
#include "platform/clock.hpp"
#include "tickwheel/detail/arith.hpp"
#include "tickwheel/detail/memory.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::detail {

class ShardHost;

// The plan a sleeper publishes (Wakeup::prepare) for a wait until `until`, or until woken.
inline std::uint64_t wake_plan(const std::optional<Nanos>& until) noexcept {
  return until ? static_cast<std::uint64_t>(std::max<Nanos::rep>(until->count(), 0)) : Wakeup::kUntilWoken;
}

class Shard {
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
    lane_.open.store(!admission_.limited(), std::memory_order_relaxed);
  }
  void shut_lane() noexcept { lane_.open.store(false, std::memory_order_relaxed); }

  // ---- Any thread. ----
  // What other threads send the shard, and its wake-ups (shard_inbox.hpp).
  ShardInbox& inbox() noexcept { return inbox_; }
  const ShardInbox& inbox() const noexcept { return inbox_; }
  // Admission for max_pending_per_shard (admission.hpp).
  Admission& admission() noexcept { return admission_; }
  const Admission& admission() const noexcept { return admission_; }
  // Whether a timer due at tick `due_tick` should skip the worker (EngineCore::commit): an executor
  // that takes tasks from any thread, and a worker that sleeps past the tick's end, so that a
  // hand-off would wake it. A hint (see Wakeup::sleeps_past); the caller still checks the clock.
  bool skips_worker(std::uint64_t due_tick) const noexcept {
    return any_thread_executor_ && inbox_.wake().sleeps_past(due_tick * ticks_.tick());
  }
  // Hands a one-shot node, claimed by the calling thread (not the worker) and counted in its
  // producer's `dispatched`, straight to the executor. Precondition: skips_worker() was true.
  void execute_claimed(Node* node) noexcept { executor_->execute(Task(this, node)); }
  // Asks the shard's thread to move a timer that was pending with generation `pending_gen` to
  // deadline_ns (a record from `records`, applied at the start of the next pass, right after the
  // cancel records, in the order posted); wakes the sleeper iff that is before its planned
  // wake-up. False, with nothing posted, if no record could be had (no memory).
  [[nodiscard]] bool post_move(MoveRecordCache& records, Node* node, std::uint32_t pending_gen,
                               std::uint64_t deadline_ns) noexcept {
    return inbox_.post_move(records, node, pending_gen, deadline_ns,
                            ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns))));
  }
  // The deadline of a timer whose node holds pending generation `pending_gen`, rounded up to the
  // tick as the wheel runs it; nullopt if the node holds another value (see there), at either of
  // the two loads of the generation that bracket the read of `due`. O(1), three loads.
  std::optional<Nanos> deadline_of(Node* node, std::uint32_t pending_gen) const noexcept;
  // Runs a node the worker handed to the executor, on the calling thread, and gives it back (see
  // Task::run). `returned_token` is the calling thread's producer token for the returned queue, or null.
  void run_task(Node* node, moodycamel::ProducerToken* returned_token) noexcept;
  // The counters the worker keeps; `pending` is left for EngineCore::stats(), which sums the
  // producers' schedules and cancels with direct_scheduled() and claimed() (see there).
  // `claimed_elsewhere`: tasks other threads handed to the executor (execute_claimed), counted
  // by them; they count as scheduled, fired and, until they return, executing.
  ShardStats stats(std::uint64_t claimed_elsewhere) const;
  // Timers a callback on this shard's own pass scheduled straight into its wheel, and one-shot
  // timers claimed to run (or handed to the executor). Acquire: each pairs with the release store
  // that counted it, so a reader that sees a claim also sees the schedule that preceded it.
  std::uint64_t direct_scheduled() const noexcept { return counters_.direct.load(std::memory_order_acquire); }
  std::uint64_t claimed() const noexcept { return counters_.claimed.load(std::memory_order_acquire); }
  // Timers clear_here() cancelled. Acquire: as claimed().
  std::uint64_t cleared() const noexcept { return counters_.cleared.load(std::memory_order_acquire); }
  // Cancels the owner won and retired itself (retire_owner_cancel()). Acquire: as claimed().
  std::uint64_t own_cancels() const noexcept { return counters_.own_cancels.load(std::memory_order_acquire); }

  // ---- The worker thread. ----
  // Creates the worker thread unless it runs already; the thread binds, fills the reserve, then
  // runs. What can fail is done here, on the calling thread, before the thread exists: throws
  // std::bad_alloc or std::system_error, with nothing changed, if the reserve's queue token or the
  // thread cannot be had. The thread itself allocates nothing until its first pass.
  void start_worker();
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }
  // The worker finishes its pass and returns; in caller-driven mode, waits out a poll in
  // progress, and an owner until it lets go, and refuses later polls. The calling thread must own
  // no shard of this engine (EngineCore::shut_down lets the caller's go first).
  void request_stop() noexcept;
  void join();

  // ---- Caller-driven mode (EngineOptions::threads == Threads::manual). ----
  // The polling loop's side of the wake-up protocol (Engine::prepare_wait, finish_wait; see
  // wakeup.hpp): false, with no plan left published, when work already waits.
  bool prepare_wait(std::optional<Nanos> until) noexcept;
  void finish_wait() noexcept;
  // The calling thread becomes the shard's owner (Engine::own_shard): it holds the shard as a poll
  // does, from now until disown() (release_shard(), or its own stop()), its exit, or its first
  // poll() after stop() began. Throws std::logic_error if another thread polls or owns it, this
  // thread owns another shard, or the engine is stopping.
  void own();
  void disown() noexcept;  // by the owner
  // Whether the calling thread owns this shard and is outside a pass of it: its wheel is this
  // thread's to change directly, as a callback's schedules change it.
  bool owned_here_outside_pass() const noexcept;  // (inline, below)
  // Whether the calling thread is this shard's: a callback of its pass (a worker, or a thread in
  // poll()), or its owner (Engine::own_shard). What the calls below require.
  bool is_own_thread() const noexcept;  // (inline, below)
  // Whether a for_each_pending() walk is under way (on the shard's thread): changes to the wheel
  // are posted then, as from another thread, so that the walk's lists stay as they are.
  bool walking() const noexcept { return walking_; }

  // ---- The shard's own thread (is_own_thread()), or the worker applying a record. ----
  // Moves the timer whose node holds pending generation `pending_gen` to deadline_ns (the engine's
  // clock): rounded up to the tick and placed as a schedule would place it, or, for a hand-off not
  // taken in yet, its deadline rewritten before its adoption. False, with nothing touched, if the
  // node no longer holds that generation (fired, running, cancelled, reused). O(1).
  bool move_here(Node* node, std::uint32_t pending_gen, std::uint64_t deadline_ns) noexcept;
  // Whether a Timer::reschedule() of this shard's timer is this thread's to make at once: the
  // shard's own thread, outside a walk of it (whose lists must stay as they are: posted then, as
  // from another thread).
  bool can_move_at_once() const noexcept { return is_own_thread() && !walking_; }
  // Timer::reschedule() where can_move_at_once(): refused, with the posted moves left to the next pass,
  // for a timer no longer pending (a periodic one running included); else the moves posted before
  // it applied first, so that this one, the last, wins, and moved at once, so the answer is exact.
  // A relative deadline counts from loop_now(), as the owner's schedule does.
  Moved reschedule_here(Node* node, std::uint32_t pending_gen, Nanos when, bool relative) noexcept {
    // Acquire: as Timer::is_pending(), pairs with the compare-and-swap that moved the word on.
    if (node->gen.load(std::memory_order_acquire) != pending_gen) return Moved(Moved::Outcome::refused);
    const Nanos deadline = relative ? saturating_add(loop_now_, when) : when;
    (void)drain_moves();
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

  // Fills the reserve on the calling thread, binds nothing. Throws std::bad_alloc, with nothing
  // changed, if the reserve's queue token cannot be had.
  void start_manual();
  // One pass at `now` on the calling thread, at most `limit` callbacks; returns how many ran.
  // Throws std::logic_error if another thread is polling this shard; 0 once stop() began.
  std::size_t poll(Nanos now, std::size_t limit);
  // The wheel's next deadline, or now if hand-offs are waiting. The polling thread only.
  std::optional<Nanos> next_deadline(Nanos now) const noexcept;
  // The shard's own thread (a callback on it, or its owner): a node for a timer it schedules here,
  // and the linking of it, with its callable stored, at `deadline` (the engine's clock): its
  // generation and deadline set, straight into the wheel, no queue. link_own() returns the
  // generation.
  Node* own_node() noexcept {
    const std::uint32_t before = wheel_.pool().touched();
    Node* const node = wheel_.acquire_node();
    stamp_since(before);
    return node;
  }
  std::uint32_t link_own(Node* node, Nanos deadline) noexcept {
    const std::uint32_t gen = next_lifetime(node->gen.load(std::memory_order_relaxed));
    // Relaxed: other threads get the node through the Timer this schedule returns, which the
    // caller passes on with its own ordering.
    node->gen.store(gen, std::memory_order_relaxed);
    // Release, after the generation: as EngineCore::commit() writes it (see there).
    store_due(node, ticks_.due(deadline), std::memory_order_release);
    wheel_.link_new(node);
    // Release: pairs with direct_scheduled()'s acquire. Only this thread writes it.
    bump(counters_.direct, 1, std::memory_order_release);
    return gen;
  }
  // A cancel won by the owner outside a pass (owned_here_outside_pass()): counted, its callable
  // destroyed, unlinked and recycled at once or with the next batch (ShardWheel::cancel_own()); a
  // hand-off not taken in yet is left to adopt(), which recycles it.
  void retire_owner_cancel(Node* node) noexcept;
  // What the shard's own thread counts a relative deadline from: its loop's time, the later of the
  // last pass's `now` and the clock read when the polling loop last finished a wait
  // (finish_wait()) or took ownership (own()), as an event loop caches its time once per
  // iteration. The shard's own thread only.
  Nanos loop_now() const noexcept { return loop_now_; }

  // ---- After join() (the stopping thread, which now owns the shard). ----
  // Waits until every task handed to the executor has run: those the worker handed over, and
  // those other threads did (execute_claimed), counted by `claimed_elsewhere()`, read again on each
  // round. Their threads may still schedule and cancel, so the caller must hold no lock they take.
  void wait_for_tasks(const std::function<std::uint64_t()>& claimed_elsewhere) const noexcept;
  // Retires posted cancels, takes back what the executor returned, and adopts what is still in
  // the hand-off queue: every timer that neither ran nor was cancelled is then in the wheel. Then
  // serves a clear posted before stop() began that no pass served: those timers are cancelled,
  // not handed back.
  void drain_stopped() noexcept {
    drain_cancels();
    drain_moves();
    drain_returned();
    while (inbox_.take_handoffs(~std::size_t{0}, [this](Node* node) { wheel_.adopt(node); }) != 0) {
    }
    (void)serve_clears();
    publish_stats();
  }
  // Timers in the wheel (a periodic one counts once): at least as many as hand_back() finds.
  std::size_t wheel_pending() const noexcept { return wheel_.pending_count(); }
  // After drain_stopped(): calls fn(Timer) for each timer still pending in the wheel (a periodic
  // one between its runs). Runs under the engine's lifecycle lock: a cancel from fn is posted, not
  // retired (see EngineCore::on_cancel), so the walk's lists stay as they are.
  template <class Fn>
  void hand_back(Fn&& fn) {
    wheel_.for_each_pending_node(
        [&](Node* node) { fn(Timer(this, node, node->gen.load(std::memory_order_relaxed))); });
  }
  std::size_t drain_cancels() noexcept;  // records taken; also the engine's destructor, after stop()
  std::size_t drain_moves() noexcept;    // records taken (applied or found stale)
  void drain_returned() noexcept;
  void publish_stats() noexcept { counters_.publish(wheel_.stats()); }
  // The engine's teardown: destroys the callables of the timers still linked that come from `pool`
  // (ShardWheel::destroy_callables_from()); own_pool() is the wheel's.
  void destroy_callables_from(const NodePool& pool) noexcept { wheel_.destroy_callables_from(pool); }
  const NodePool& own_pool() const noexcept { return wheel_.pool(); }
  // A cancel that comes after stop() (the caller holds the engine's lifecycle mutex).
  void retire_after_stop(Node* node, std::uint32_t cancelled_gen) noexcept {
    wheel_.retire(node, cancelled_gen);
    publish_stats();
  }

 private:
  // The worker thread's loop and its wait (shard_worker.cpp).
  void run(void* headroom);
  void prepare() noexcept;
  void describe_binding() noexcept;
  void reserve_memory() noexcept;  // EngineOptions::reserve_per_shard, on the thread that prepares
  void wait();
  void sleep_until(std::optional<Nanos> deadline);
  // No hand-off, no returned node, no move or clear, no stop: a sleep may begin.
  bool nothing_waits() const noexcept {
    return !inbox_.work_waiting() && !stopping_.load(std::memory_order_acquire);
  }
  // The pass and what it takes in (shard.cpp).
  std::size_t pass(Nanos now, std::size_t limit) noexcept;
  // Serves the clears posted since the last one served (ShardInbox::post_clear()): clear_here().
  // Returns whether there was one. The shard's thread (a pass, or the stopping thread in
  // drain_stopped()).
  bool serve_clears() noexcept;
  // Keeps the reserve of free nodes other threads take from at its target, which starts small and
  // doubles (up to a bound) each time a pass finds the reserve emptied.
  void refill_reserve() noexcept;
  // ShardWheel::take_free_nodes, and the locators (see directory.hpp) of the nodes handed out fresh.
  std::size_t take_wheel_nodes(std::span<Node*> out) noexcept;
  // Gives the nodes the wheel's pool handed out fresh since it had handed out `before` their
  // locators (a fresh node comes only once the free list is empty).
  void stamp_since(std::uint32_t before) noexcept {
    if (const std::uint32_t after = wheel_.pool().touched(); after != before) [[unlikely]] {
      host_.directory().stamp(wheel_.pool(), pool_map_, before, after);
    }
  }
  // Drains posted cancels and moves and takes every waiting hand-off in: what clear_here() and
  // walk_here() do first, so that they see every pending timer as it is now.
  void settle() noexcept {
    drain_cancels();
    drain_moves();
    (void)inbox_.take_all_handoffs([this](Node* node) { wheel_.adopt(node); });
  }
  // Points t_own_lane where t_current_shard and t_owned_shard now say: the pass's shard first.
  static void aim_lane() noexcept;
  // The wheel's policy (ShardPolicy) asks these, on the thread in the pass.
  friend struct ShardPolicy;
  // Hands a claimed node to the executor (true), or leaves it to run in the pass (false: none).
  bool dispatch(Node* node) noexcept;
  // When an inline fixed-delay run ended: the engine's clock now.
  Nanos run_end() const noexcept { return std::max(host_.now(), Nanos(0)); }
  void callback_threw() noexcept;  // inside a catch block, any thread
  // The engine's clock: CLOCK_MONOTONIC, or EngineOptions::clock through the host.
  Nanos clock_now() const noexcept { return own_clock_ ? host_.now() : monotonic_now(); }

  ShardHost& host_;
  const std::size_t index_;
  const WaitStrategy wait_strategy_;
  const std::size_t transfer_cap_;
  const std::size_t reserve_;  // EngineOptions::reserve_per_shard
  const bool lock_memory_;
  const Nanos hybrid_spin_;
  const bool pin_;
  const bool manual_;
  const bool own_clock_;  // EngineOptions::clock is set: passes read it (host_.now())
  void (*const on_pass_)(void*, const PassReport&) noexcept;  // EngineOptions::on_pass
  void* const on_pass_context_;
  const unsigned cpu_;
  const TickDivider ticks_;   // the engine's tick, for the next-run ticks run_task() computes
  Executor* const executor_;  // null: callbacks run inline; else owned by the engine's options
  // executor_ takes tasks from any thread (Executor::any_thread), and no max_pending_per_shard,
  // whose places only the worker's claims give back: other threads may claim due timers.
  const bool any_thread_executor_;

  // The arena the wheel's node memory comes from (see detail/memory.hpp); declared before the
  // wheel so that it outlives the wheel's pool.
  struct Arena {
    const unsigned id = create_arena();
    Arena() = default;
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;
    ~Arena() { destroy_arena(id); }
  } arena_;

  // Written by the shard's thread, read by any (see shard_counters.hpp); before the wheel, whose
  // policy holds the claims counter's address.
  ShardCounters counters_;
  // Worker only (and the stopping thread after join).
  ShardWheel wheel_;
  std::thread thread_;
  std::optional<Nanos> planned_ns_;  // the deadline the last wait aimed at, for the tick lag
  bool cap_hit_ = false;
  std::size_t reserve_target_;       // free nodes refill_reserve() aims at
  bool walking_ = false;             // inside walk_here() (the shard's thread)
  bool in_poll_pass_ = false;        // inside poll()'s pass (the polling thread; see poll())
  Nanos loop_now_{0};                // see loop_now()
  OwnLane lane_;                     // see open_lane(); t_own_lane points here on the shard's thread
  NodeDirectory::PoolMap pool_map_;  // the wheel pool's locators (see directory.hpp)

  // Written by the worker before ready_, read by any thread after it.
  std::atomic<int> bound_cpu_{-1};
  std::atomic<bool> ready_{false};
  std::atomic<bool> warmed_{false};  // the worker has made its first allocation (start_worker())
  // How the worker is bound, as text formatted in place: a worker must not allocate before it runs.
  // Written by the worker before ready_ (release), read after it (acquire).
  std::array<char, 160> binding_{};

  Admission admission_;  // any thread; its counters on a line of their own
  alignas(kCacheLine) std::atomic<bool> stopping_{false};
  // Caller-driven mode: set while a poll runs, or while a thread owns the shard, so that two threads
  // never drive one wheel and stop() can wait for a poll (or an owner) to end (see poll() and
  // request_stop() for the pairing).
  std::atomic<bool> polling_{false};
  ShardInbox inbox_;
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
// call. Written by the shard's code only (shard.cpp).
inline thread_local Shard* t_current_shard = nullptr;
inline thread_local Shard* t_owned_shard = nullptr;
inline Shard* current_shard() noexcept { return t_current_shard; }
inline Shard* owned_shard() noexcept { return t_owned_shard; }
// The engine whose task the calling thread is running (inside Task::run), or nullptr.
const ShardHost* current_task_engine() noexcept;

inline bool Shard::owned_here_outside_pass() const noexcept {
  return t_owned_shard == this && t_current_shard != this && !walking_;
}
inline bool Shard::is_own_thread() const noexcept { return t_current_shard == this || t_owned_shard == this; }

}  // namespace tickwheel::detail
