// tests/fuzz/engine/model.hpp — the engine target's reference model: where each timer is and what
// each shard has counted, kept by hand from the contract in engine.hpp and executor.hpp. It calls
// nothing of the engine; the operations ask it what to expect, call the engine, check the answer
// and tell it what happened.
//
// Each shard has a FIFO hand-off queue (one producer thread here, so moodycamel's per-producer
// order holds), a set of timers linked in its wheel, each due at its deadline rounded up to the
// tick, and, with the executor, the nodes its tasks gave back. A poll takes those back (a periodic
// timer re-armed from the run it returned from, against the wheel's time as the last pass left it;
// fixed delay from the engine's clock when the task's callback returned), moves
// min(transfer_cap, queued) hand-offs into the wheel (a cancelled one is counted as cancelled
// there), then runs or hands over what is due. Inline, each callback is checked: its timer is
// linked on the shard being polled, was not cancelled, is due by the poll's now, and the poll has
// not reached its limit; a periodic one is not running already, and not a Misfire::skip timer a
// whole period behind; one linked during the pass at or before the tick the pass stands at (a
// callback's own-shard schedule, a periodic re-arm behind now) does not run in that same advance()
// call. A periodic timer is re-armed when its callback returns, by the rules of wheel.hpp (fixed
// rate on its grid, catch_up / fire_once_now / skip; fixed delay from the engine's clock as the
// callback returned, which engine.hpp promises inline as on an executor), unless it was cancelled
// meanwhile, from its own callback or another. With the executor nothing runs inside poll(): each
// due timer counts as fired when handed over, `executing` counts it until its task has run, a
// one-shot's callable dies right after its run, and a task runs only for a timer handed over (a
// cancel during that time stops the re-arm, not the run). After a poll that ran (or handed over)
// fewer than its limit, every timer linked before its last advance() call and due by its now has
// run, been handed over or been dropped by skip. stop() must return exactly the timers neither
// fired (one-shot) nor cancelled, hand-offs still queued and periodic timers between runs
// included; then scheduled + rearmed == fired + skipped + cancelled + returned, in total and per
// shard, each counter exactly as the model counted it. Every throw is counted in callback_errors
// and, when set, passed to on_callback_error, on whichever thread ran it.
//
// Pending between runs. A timer queued or linked and not cancelled: a one-shot not yet claimed, a
// periodic timer not out on a run. That is what reschedule() moves, deadline() reads, clear()
// cancels and for_each_pending() visits. A shard's own thread is a callback of its pass or its
// owner (own_shard). A move on the shard's own thread (but in a walk of it) happens there and
// then; any other is posted, and the shard applies it when it next drains its records (a pass's
// start, clear(), for_each_pending(), stop()) iff the timer still is pending between runs then: a
// one-shot that fired meanwhile and a cancelled timer drop it, a periodic timer re-armed since
// keeps its generation and moves. A move puts the timer where a schedule for that deadline would
// (a hand-off not taken in yet keeps its place in the queue with the new tick), restarts a
// fixed-rate grid there, and counts in ShardStats::rescheduled; the timer then runs by the usual
// checks at its new tick, not before, and not after a complete poll past it. clear() and
// for_each_pending() first drain the shard's posted moves and take every hand-off in, transfer_cap
// aside. A posted clear waits for the shard's next pass, which serves it after its moves and the
// executor's returned nodes, before it takes hand-offs in, or for stop(), if that comes first. An
// owner's schedules and cancels on its shard take effect in the wheel at once (its callables die in
// the cancel) and reach the published counters at the shard's next pass.
//
// Weaker spots, and why:
//   - Order among due timers is not checked here; the wheel target checks it in full, and a poll
//     is a wheel advance(). So the tick a pass stands at is known only from below: the running
//     timer's, or, for a periodic timer run from the due slot (which may be due later than where
//     the pass stands), that of the run that re-armed it there.
//   - A Timer::cancel() is counted in ShardStats::cancelled when the shard next meets it: at its
//     next poll's drain, or when the hand-off is transferred, or when the pass reaches the timer
//     first. The last case depends on where a pass stands inside a callback, so for a timer
//     cancelled while its shard is being polled the count is checked within bounds, and exactly
//     once stop() has drained everything. A periodic timer cancelled while it runs inline is
//     counted when its callback returns, one cancelled while out on the executor when its node
//     comes back: both exactly.
//   - Misfire::skip drops make no callback. The model knows which timers are a whole period
//     behind, and the pass's skipped count says how many it dropped; where that does not settle
//     which (a pass cut short by its limit, a callback cancelling a timer the pass may have
//     dropped before, a timer a callback linked in the pass's last advance() call), the model
//     cancels the timers in doubt, so it stays exact at the cost of losing them. At the end of
//     time a drop re-arms at the last tick, not after now, so in a pass that a throw split the
//     timer may run in a later advance() call of the same poll: that run tells of the drop.
//   - With the executor, a poll cut short by its limit hands over some of the due timers: a
//     one-shot's handle says which (expired()), a periodic timer's does not, so when the count
//     leaves it open the target runs the queued tasks at once, taking no action in them, to see.
//   - stop()'s wait for executor tasks has work to wait for only on the helper-thread path, and
//     then only if stop() gets there before the helper is done; the model's outcome is the same.
//   - next_deadline() is checked against bounds: now while hand-offs or returned nodes wait; a
//     value no later than the earliest due timer (or the wheel's now, if that is later) while
//     timers are linked; nullopt when nothing can be linked. A cancelled timer stays in the wheel
//     until its shard retires it, and the answer is a lower bound for timers past level 0.
//   - Timer::cancelled() / expired() are exact only until the node is reused by a later schedule
//     (engine.hpp says so): checked exactly before any later schedule, as implications after. A
//     periodic timer's node is its own until it is cancelled, so until then both are exact.
//   - Which shard a thread's first schedule_after lands on is not documented (round robin from
//     somewhere): learned from the first one that succeeds, then held to.
//   - A periodic timer is "out on a run", neither movable nor readable nor cleared nor visited,
//     from the claim of its run until its shard re-arms it: inline, while its callback runs; with
//     the executor, from the hand-over until the pass after its task returned takes the node back.
//     engine.hpp says "whose callback is running", which the executor's window (a task queued and
//     not started, or returned and not yet taken back) stretches; the model holds the engine to the
//     wider reading, the one its generation word implements.
//   - Inside a pass, a Misfire::skip timer a whole period behind may or may not have been dropped
//     yet, so its deadline is checked as either; a move or clear() of one counts as a cancel does
//     for the pass's skipped count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "fuzz_support.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class Lifetimes;

// What the model knows of the engine's options (decoded by EngineSetup).
struct EngineConfig {
  std::size_t shards = 1;
  std::int64_t tick = 1;
  std::uint64_t max_tick = 0;   // the last tick a Nanos can hold
  std::size_t cap = 1;          // transfer_cap
  std::size_t max_pending = 0;  // max_pending_per_shard
};

// Where a timer is. A one-shot: queued -> linked -> running (inline) -> ended, or with the
// executor linked -> handed -> in_task -> ended. A periodic timer goes round: linked -> running
// -> linked, or linked -> handed -> in_task -> returned -> linked; it ends only by a cancel.
enum class Where : std::uint8_t { queued, linked, running, handed, in_task, returned, ended };

inline constexpr std::uint64_t kNoFloor = ~std::uint64_t{0};

struct Rec {
  tickwheel::Timer handle;
  std::size_t shard = 0;
  std::uint64_t due = 0;  // the tick it is (or was last) linked for
  Where where = Where::queued;
  bool periodic = false;
  PeriodicRule rule;
  bool cancelled = false;         // its cancel() won
  bool fired = false;             // a one-shot claimed by its shard (run, or handed over)
  bool ran = false;               // a one-shot whose callback has run: its callable may die
  bool maybe_handed = false;      // one of the periodic timers a cut-short poll may have handed over
  std::int64_t ran_until = 0;     // with the executor: the engine's clock when its last run returned
  std::uint64_t ended_at = 0;     // schedules that had succeeded when it fired or was cancelled
  std::uint64_t linked_poll = 0;  // the poll in whose pass it was linked (0: none): a callback's
                                  // own-shard schedule, or a periodic re-arm
  std::uint32_t linked_call = 0;  // ... in which advance() call of that poll
  bool linked_late = false;       // ... at or before the tick of the timer running then
  // A tick the wheel had reached when this periodic timer was re-armed behind now, into the
  // due slot: its due tick may be ahead of where the wheel stands when it runs from there.
  std::uint64_t floor = kNoFloor;
};

// A reschedule posted to a shard (asked from a thread that is not its own, or from a walk of it):
// applied when the shard next drains its records, iff the timer is still pending between runs.
struct Move {
  std::uint32_t serial;
  std::uint64_t due;
};

struct ShardModel {
  std::deque<std::uint32_t> queue;                          // hand-offs, oldest first
  std::deque<Move> moves;                                   // reschedules posted, oldest first
  std::map<std::uint64_t, std::set<std::uint32_t>> linked;  // live timers in the wheel, by due
  std::vector<std::uint32_t> returned;                      // nodes back from the executor
  std::int64_t wheel_now = 0;                               // the latest now a poll gave it
  // The shard's loop time (Shard::loop_now()), what its own thread's relative deadlines count
  // from: the latest now a poll gave it, or the clock when the fuzz thread took ownership.
  std::int64_t loop_now = 0;
  std::uint64_t scheduled = 0;              // timers that reached the wheel
  std::uint64_t rescheduled = 0;            // moves the shard applied
  std::uint64_t published_scheduled = 0;    // ShardStats::scheduled and rescheduled as the shard
  std::uint64_t published_rescheduled = 0;  // last published them (a pass's end, clear(), stop())
  std::uint64_t cur_floor = 0;              // a tick the wheel has surely reached: the now of
                                            // the last poll that ran fewer than its limit
  std::uint64_t fired = 0;
  std::uint64_t rearmed = 0;
  std::uint64_t skipped = 0;
  std::uint64_t executing = 0;            // handed over, task not yet run
  std::uint64_t cancelled_reached = 0;    // cancelled timers the shard has met or must meet in the pass
  std::uint64_t cancelled_in_poll = 0;    // of those, cancelled while linked and this shard was
                                          // being polled, since its last poll began
  std::uint64_t cancelled_total = 0;      // cancelled timers of this shard, reached or not
  std::uint64_t published_cancelled = 0;  // ShardStats::cancelled as last read after a poll
  std::uint64_t passes = 0, cap_hits = 0, errors = 0;
  std::uint64_t clears = 0;   // clear() calls and posted clears served (ShardStats::clears)
  std::uint64_t cleared = 0;  // timers they cancelled (ShardStats::cleared)
  bool polling = false;
  bool walking = false;       // inside a for_each_pending() of it
  bool clear_posted = false;  // a post_clear() not served yet: the next pass (or stop()) serves it
  // The loop's wake-up time (Wakeup's plan, in ns) while it sleeps: from a prepare_wait() that
  // returned true until its finish_wait(). None while it is awake.
  std::optional<std::uint64_t> plan;
};

// A poll in progress (polls nest: a callback may poll the other shard).
struct PollCtx {
  std::size_t shard;
  std::uint64_t T;  // the tick of the poll's now
  std::size_t limit;
  std::uint64_t id;
  std::size_t ran = 0;
  std::uint32_t call = 0;             // advance() calls so far in this poll: one more per throw
  std::uint64_t running_due = 0;      // due tick of the callback running now
  std::uint64_t cancelled_skips = 0;  // timers a whole period behind, of Misfire::skip, that
                                      // callbacks cancelled: the pass may have dropped each before
  std::uint64_t unseen_skips = 0;     // drops learnt of by the run that followed (Callbacks::run_inline)
};

// The model of the whole engine: its shards, every timer ever scheduled, the polls in progress on
// this thread and what this thread is to the shards (home, owner).
struct EngineModel {
  explicit EngineModel(const EngineConfig& config) noexcept : cfg(config) {}

  // The engine is built: every shard's wheel starts at the clock's tick.
  void start(std::int64_t clock);

  // The tick of the wheel's now, as it advances to `now_ns` (>= 0), and a tick's time.
  std::uint64_t tick_of(std::int64_t now_ns) const;
  std::int64_t ns_of(std::uint64_t tick) const { return static_cast<std::int64_t>(tick) * cfg.tick; }

  // Pending as ShardStats::pending counts (a periodic timer wherever it is), and pending between
  // runs (what reschedule() moves and deadline() reads).
  static bool is_pending(const Rec& r) {
    return !r.cancelled && (r.periodic || r.where == Where::queued || r.where == Where::linked);
  }
  static bool movable(const Rec& r) {
    return !r.cancelled && (r.where == Where::queued || r.where == Where::linked);
  }
  std::uint64_t pending_on(std::size_t s) const;

  bool own_thread(std::size_t s) const;
  bool links_directly(std::size_t s) const;
  const PollCtx* pass_of(std::size_t s) const;
  bool deadline_ok(const Rec& r, std::int64_t ns) const;

  void link(std::uint32_t serial, Rec& r, std::uint64_t due);
  void unlink(std::uint32_t serial, const Rec& r);
  void won_cancel(std::uint32_t serial);
  void hand_over(std::uint32_t serial);
  void drop(std::uint32_t serial, const PollCtx& ctx);
  void apply_move(std::uint32_t serial, std::uint64_t due, std::uint64_t T);
  void drain_moves(std::size_t s, std::uint64_t T);
  void settle(std::size_t s);
  std::vector<std::uint32_t> clear(std::size_t s);
  void take_back(std::size_t s, std::uint64_t T, Lifetimes& lives);
  PollCtx begin_pass(std::size_t s, std::int64_t now, std::size_t limit, Lifetimes& lives);
  void publish(std::size_t s);

  const EngineConfig& cfg;
  std::vector<ShardModel> shards;
  std::map<std::uint32_t, Rec> recs;  // every timer ever scheduled, by serial
  std::vector<std::uint32_t> serials;
  std::vector<PollCtx> polls;        // the polls in progress, innermost last
  std::optional<std::size_t> home;   // this thread's shard for schedule_after / schedule_at
  std::optional<std::size_t> owner;  // the shard this thread owns (Engine::own_shard), if any
  std::uint64_t schedules_ok = 0;
  std::uint64_t polls_made = 0;
  bool stopped = false;

 private:
  void transfer(std::size_t s);
};

}  // namespace tickwheel::fuzz::engine
