// tests/fuzz/fuzz_engine.cpp — libFuzzer target: tickwheel::Engine in caller-driven mode
// (Threads::manual, one or two shards, a clock the target drives), single-threaded but for one
// helper described below, against a reference model of the contract in engine.hpp and executor.hpp.
//
// The input. The first bytes pick the options (shards, tick, transfer_cap, max_pending_per_shard,
// the clock's start, where callbacks run: inline, an InlineExecutor, or the target's own queueing
// executor, whose any_thread() the input picks; whether on_callback_error is set; now and then a
// raw set of options whose validation is checked instead). Then each front byte is one operation:
// schedule_after / schedule_at / schedule_after_on / schedule_at_on (a good shard or one past the
// last; absolute deadlines from zero or near the clock), schedule_every / schedule_every_on (good and
// bad periods, fixed rate and fixed delay, each Misfire policy, with and without an initial
// delay), Timer::cancel (of a pending, fired, running or cancelled timer, a default or a failed
// handle; through the handle or the one its raw() gives back), moving the clock (small steps and
// big jumps; it never goes back), poll(shard) or poll(shard, now) with or without a limit (also of
// a shard that does not exist), after which the loop may sleep until its next_deadline(), running
// queued executor tasks (a few or all, oldest first or picked anywhere in the queue), a look at the
// handles, stop(). The op bytes 0x86, 0x96, ..., 0xE6 (a cancel's before issue 17) are its API:
// Timer::reschedule / reschedule_after (any timer, any deadline, past, far and saturating ones
// included; through the handle or its raw form), Timer::deadline() / remaining(), raw values (a
// timer's in any state, garbled, forged, another lifetime of its node, random), Engine::clear(shard),
// post_clear(shard) / post_clear_all() and for_each_pending(shard) (whose visitor looks, cancels or
// moves the timer it visits, reads its deadline, tries what a walk refuses, posts a clear, or
// throws), and Engine::own_shard / release_shard: the fuzz thread becomes a shard's owner, so that
// its schedules and cancels there go straight into the wheel and it may read and walk the shard
// between polls (op 0xD6; 0xF6 was one too before the loop's sleep came). Op 0xF6 is the loop's
// sleep: Engine::prepare_wait(shard, until) (until none, before, at or after now) or
// finish_wait(shard); the fuzz thread, the loop that polls every shard, announces a sleep or ends
// it, and meanwhile schedules as the loop's other threads would. Bytes from the back decide what
// each callback does: nothing, move the clock (a long callback), run queued tasks, cancel any timer
// (itself included), schedule a one-shot or a periodic timer (on its own shard, which links
// directly, or through another shard's queue), poll the other shard (nested) or its own (refused,
// while it is being polled), stop() (refused), throw, or (a byte 3 mod 8, by its high nibble) a
// call of issue 17's API: reschedule any timer or itself, read a deadline, clear (at once or
// posted) or walk its own shard or another, try raw values.
//
// The executor. It queues each Task and runs none until an operation (or a callback) says so, so a
// run is reproducible and tasks run late, out of order and nested. stop() waits for every task
// handed over, spinning on the calling thread, so the queue must run before or while it waits: an
// input byte picks either running it on the fuzz thread first (callbacks act as usual), or on a
// helper thread while stop() waits (callbacks take no action then, since what they saw would
// depend on how far stop() had got; the helper touches the model only inside callbacks, all of
// which finish before stop() can return). A poll hands tasks over; with any_thread(), so may a
// schedule_at() outside any poll (the due path, below), and nothing else.
//
// The model. Each shard has a FIFO hand-off queue (one producer thread here, so moodycamel's
// per-producer order holds), a set of timers linked in its wheel, each due at its deadline rounded
// up to the tick, and, with the executor, the nodes its tasks gave back. A poll takes those back
// (a periodic timer re-armed from the run it returned from, against the wheel's time as the last
// pass left it; fixed delay from the engine's clock when the task's callback returned), moves
// min(transfer_cap, queued) hand-offs into the wheel (a cancelled one is counted as cancelled
// there), then runs or hands over what is due. Inline, the model checks each callback: its timer
// is linked on the shard being polled, was not cancelled, is due by the poll's now, and the poll
// has not reached its limit; a periodic one is not running already, and not a Misfire::skip timer
// a whole period behind; one linked during the pass at or before the tick the pass stands at (a
// callback's own-shard schedule, a periodic re-arm behind now) does not run in that same
// advance() call. A periodic timer is re-armed when its callback returns, by the rules of wheel.hpp
// (fixed rate on its grid, catch_up / fire_once_now / skip; fixed delay from the engine's clock
// as the callback returned, which engine.hpp promises inline as on an executor), unless it was
// cancelled meanwhile, from its own callback or another. With the executor nothing runs inside
// poll(): each due timer counts as fired when handed over, `executing` counts it until its task
// has run, a one-shot's callable dies right after its run, and a task runs only for a timer
// handed over (a cancel during that time stops the re-arm, not the run). After a poll that
// ran (or handed over) fewer than its limit, every timer linked before its last advance() call
// and due by its now has run, been handed over or been dropped by skip. stop() must return exactly
// the timers neither fired (one-shot) nor cancelled, hand-offs still queued and periodic timers
// between runs included; then scheduled + rearmed == fired + skipped + cancelled + returned, in
// total and per shard, each counter exactly as the model counted it. Every throw is counted in
// callback_errors and, when set, passed to on_callback_error, on whichever thread ran it.
//
// The loop's sleep. prepare_wait() sleeps iff no hand-off (a cancelled one too), returned node,
// posted move or posted clear waits and stop() has not begun, which the model knows exactly; a
// poll ends the sleep first (finish_wait), as a loop does, and so the loop time becomes the clock's.
//
// The due path (EngineCore::commit, claim_due). A one-shot that the fuzz thread schedules at an
// absolute deadline (schedule_at / schedule_at_on, at the top level or from a task's callback)
// through the shard's queue (not as its owner, whose schedules link directly) is claimed by the
// scheduling thread itself when the executor says any_thread(), max_pending_per_shard is 0, the
// shard's loop sleeps (prepare_wait returned true, no finish_wait yet) with a plan past the end of
// the deadline's tick, and that tick is over by the engine's clock (due * tick <= now: a deadline
// at now takes it only on a tick's start). Then, before schedule_at() returns: the handle is
// expired, not pending, its cancel() fails; the shard's scheduled, fired and executing count it
// (live, not at a pass); its task is in the executor's queue (execute() came from the schedule,
// the only execute() outside a poll); no hand-off is queued, and the loop's eventfd was not
// signalled, so the sleep goes on. The task runs when the input says, as any other, its callable
// dies after the run, a later pass (or stop()'s drain) takes the node back, and stop() waits for
// it.
//
// Issue 17's API, in the model. "Pending between runs" is a timer queued or linked and not
// cancelled: a one-shot not yet claimed, a periodic timer not out on a run (see below). The shard's
// own thread is a callback of its pass or its owner (own_shard). Timer::pending() is exact in every
// state (a one-shot asking about itself in its callback: false; a periodic timer: true until
// cancelled). reschedule() on the shard's own thread (but in a walk of it) moves the timer there
// and then and returns true exactly when it is pending between runs; from elsewhere (another
// shard's callback, the top level of a thread not the owner, a walk's visitor) it returns true iff
// the timer was pending between runs and stop() had not begun, and posts the move, which the shard
// applies when it next drains its records (a pass's start, clear(), for_each_pending(), stop())
// iff the timer still is then: a one-shot that fired meanwhile and a cancelled timer drop it, a
// periodic timer re-armed since keeps its generation and moves. A move puts the timer where a
// schedule for that deadline would (a hand-off not taken in yet keeps its place in the queue with
// the new tick), restarts a fixed-rate grid there, and counts in ShardStats::rescheduled; the
// timer then runs by the usual checks at its new tick, not before, and not after a complete poll
// past it. deadline() / remaining(), from any thread, give the due tick's time (less the clock, or
// zero) iff the timer is pending between runs, else nullopt. clear() and for_each_pending() (own thread only,
// not from a walk of the shard; std::out_of_range past the last shard) first drain the shard's posted moves
// and take every hand-off in, transfer_cap aside; clear() then cancels exactly the timers pending between
// runs there, returns how many, destroys their callables at once (never run), and leaves
// stats().cancelled counting every cancel the shard has met; the walk visits exactly those timers,
// once each, with the deadline deadline() reads, and its visitor's cancels and moves are posted.
// post_clear() / post_clear_all() (any thread, a visitor's included; std::out_of_range past the last
// shard) return false once stop() has begun, else true; the request waits for the shard's next
// pass, which serves it after its moves and the executor's returned nodes, before it takes
// hand-offs in: it does what clear() does then (every hand-off in, every timer pending between
// runs cancelled), or stop() does, if it comes first; next_deadline() is "now" meanwhile, and
// ShardStats::clears and cleared count clears and what they cancelled. Before the engine's first
// start nothing is posted (there is nothing to clear). A
// raw() round trip names the same timer in every state; timer_from_raw() of 0 or of a locator no
// node has is empty, and a handle from any other value answers pending() iff the model has a timer
// pending with exactly that raw value, and otherwise cancels, moves and reads nothing. An owner's
// schedules and cancels on its shard take effect in the wheel at once (its callables die in the
// cancel) and reach the published counters at the shard's next pass.
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
//   - That the due path wakes no loop is checked on the shard's eventfd, only for inputs under 4096
//     bytes: a thread's 4096th post to a shard (a claim counts as one) nudges its sleeping loop
//     whatever the plan, and the model does not count posts; each post takes a byte at least.
#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

#include "fuzz_support.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/executor.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz {
namespace {

struct Thrown {};  // what a callback throws when the input says so

long long ll(std::int64_t v) { return static_cast<long long>(v); }
long long lu(std::uint64_t v) { return static_cast<long long>(v); }

void (*const kNullFn)() = nullptr;

// The engine's clock: the target moves it, forward only.
std::int64_t g_clock = 0;
Nanos fuzz_clock() noexcept { return Nanos(g_clock); }

class EngineRun {
 public:
  // A thread's posts to a shard nudge its sleeping loop once per 4096 (ProducerState::kNudgeEvery),
  // and each post here takes a byte of the input at least: below 4096 bytes, a wake-up is a signal.
  EngineRun(Bytes& in, std::size_t size) : in_(in), no_nudge_(size < 4096) {}

  void run() {
    setup();
    while (!in_.empty()) {
      const std::uint8_t op = in_.u8();
      switch (op % 16) {
        case 0:
        case 1:
        case 2:
        case 3: op_schedule(op); break;
        case 4:
        case 5: op_cancel(); break;
        case 6:
          if (op >= 0x80) {
            op_api(op);
          } else {
            op_cancel();
          }
          break;
        case 7:
        case 8: op_clock(); break;
        case 14: op_schedule_every(op); break;
        case 15:
          switch ((op >> 4) & 3) {
            case 0: op_handles(); break;
            case 3: op_stop(); break;
            default: op_tasks(); break;
          }
          break;
        default: op_poll(op); break;
      }
      check_invariants();
    }
    if (!stopped_) op_stop();
    check_invariants();
    destroying_ = true;
    engine_.reset();
    destroying_ = false;
    check(alive_.empty(), "~Engine left callables alive", static_cast<long long>(alive_.size()));
  }

 private:
  friend class Fire<EngineRun>;  // calls born(), on_fire() and died()

  // The executor: it queues each task and runs none until the input says so. any_thread() as the
  // input chose: true lets a schedule_at() from the fuzz thread hand a due timer over itself.
  class QueueExecutor final : public Executor {
   public:
    QueueExecutor(EngineRun* run, bool any_thread) noexcept : run_(run), any_thread_(any_thread) {}
    void execute(Task task) noexcept override {
      check(static_cast<bool>(task), "execute() was given an empty task");
      if (run_->polls_.empty()) {
        // Outside a poll only the due path hands tasks over, from inside the schedule itself;
        // record() checks that it did so exactly when the model says.
        check(run_->due_window_, "execute() was called outside poll() and outside a schedule_at()");
        ++run_->due_handed_;
      }
      tasks.push_back(task);
      ++handed;
    }
    bool any_thread() const noexcept override { return any_thread_; }

    std::deque<Task> tasks;
    std::uint64_t handed = 0;  // execute() calls so far

   private:
    EngineRun* run_;
    const bool any_thread_;
  };

  // Where a timer is. A one-shot: queued -> linked -> running (inline) -> ended, or with the
  // executor linked -> handed -> in_task -> ended. A periodic timer goes round: linked -> running
  // -> linked, or linked -> handed -> in_task -> returned -> linked; it ends only by a cancel.
  enum class Where : std::uint8_t { queued, linked, running, handed, in_task, returned, ended };

  static constexpr std::uint64_t kNoFloor = ~std::uint64_t{0};

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
    std::uint64_t unseen_skips = 0;     // drops learnt of by the run that followed (see on_fire)
  };

  // What a schedule expects, read before it is made: the shard it must land on, if known, whether
  // each shard admits one more timer under max_pending_per_shard, and the rejected count.
  struct Expect {
    std::optional<std::size_t> target;
    std::vector<bool> admits;
    std::uint64_t rejected = 0;
  };

  // ---- setup ----------------------------------------------------------------------------------

  void setup() {
    static constexpr std::int64_t kTicks[] = {1'000'000, 1'000, 7'000, 1'234'567};
    const std::uint8_t a = in_.u8();
    if (a >= 0xF8) check_option_validation();
    shards_ = 1 + (a & 1);
    tick_ = kTicks[(a >> 1) % std::size(kTicks)];
    max_tick_ = static_cast<std::uint64_t>(kI64Max / tick_);
    const std::uint8_t b = in_.u8();
    cap_ = (b & 3) == 0 ? 100'000 : (b & 3);
    max_pending_ = b >= 0xC0 ? 1 + (b >> 2) % 8 : 0;
    const std::uint8_t c = in_.u8();
    switch (c % 4) {
      case 1: g_clock = sat_mul(in_.u16(), tick_); break;
      case 2: g_clock = static_cast<std::int64_t>(in_.u64() >> 2); break;
      case 3: g_clock = kI64Max - sat_mul(in_.u16(), tick_); break;
      default: g_clock = 1'000'000'000'000; break;
    }
    EngineOptions opts;
    opts.shards = shards_;
    opts.tick = Nanos(tick_);
    opts.transfer_cap = cap_;
    opts.max_pending_per_shard = max_pending_;
    opts.log = [](std::string_view) {};  // the throw notice is expected; keep the fuzzer's output clean
    opts.threads = Threads::manual;
    opts.clock = &fuzz_clock;
    switch ((c >> 2) % 8) {
      case 5: opts.executor = std::make_shared<InlineExecutor>(); break;  // the same as none
      case 6:
      case 7:
        // any_thread() half the time: false keeps every hand-over inside poll(), as before it existed.
        executor_ = std::make_shared<QueueExecutor>(this, (c & 0x40) != 0);
        opts.executor = executor_;
        break;
      default: break;
    }
    if ((c & 0x20) != 0) {
      error_handler_ = true;
      opts.on_callback_error = [this](std::exception_ptr e) {
        bool ours = false;
        try {
          std::rethrow_exception(std::move(e));
        } catch (const Thrown&) {
          ours = true;
        } catch (...) {
        }
        check(ours, "on_callback_error was given an exception no callback threw");
        ++errors_reported_;
      };
    }
    engine_ = std::make_unique<Engine>(std::move(opts));
    model_.assign(shards_, ShardModel{});
    polls_.reserve(2 * shards_ + 1);  // polls nest at most once per shard: references stay valid
    for (ShardModel& m : model_) {
      m.wheel_now = g_clock;
      m.cur_floor = tick_of(g_clock);  // the wheel starts at its clock's tick
    }
    check(engine_->shard_count() == shards_ && engine_->tick().count() == tick_, "shard_count() or tick()");
    TICKWHEEL_FUZZ_TRACE(
        "engine: %zu shards, tick %lld ns, cap %zu, max_pending %zu, clock %lld, %s", shards_, ll(tick_),
        cap_, max_pending_, ll(g_clock),
        executor_ ? (executor_->any_thread() ? "queueing executor, any thread" : "queueing executor")
                  : "inline");
  }

  // A raw set of options: the constructor must throw std::invalid_argument exactly when one is
  // outside its documented range. (Threads::workers is valid, with a clock of one's own too since
  // workers read it; it is not built here, since its workers would start threads.)
  void check_option_validation() {
    const std::uint8_t k = in_.u8();
    EngineOptions opts;
    opts.shards = 1 + k % 2;
    opts.threads = Threads::manual;
    opts.clock = &fuzz_clock;
    opts.log = [](std::string_view) {};
    bool valid = true;
    switch (k % 5) {
      case 0:
        opts.tick = Nanos((k & 8) != 0 ? 999 : 3'600'000'000'001);
        valid = false;
        break;
      case 1:
        opts.transfer_cap = 0;
        valid = false;
        break;
      case 2:
        opts.shards = 4097;
        valid = false;
        break;
      case 3:
        opts.hybrid_spin = Nanos(-1);
        valid = false;
        break;
      default:
        if ((k & 8) != 0) {
          opts.lock_memory = true;  // with no reserve to lock
        } else {
          opts.max_pending_per_shard = 10;
          opts.reserve_per_shard = 11;
        }
        valid = false;
        break;
    }
    bool threw = false;
    try {
      Engine e(std::move(opts));
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check(threw != valid, "the constructor's validation disagrees with the documented ranges", k);
  }

  // ---- decoding -------------------------------------------------------------------------------

  std::int64_t delay() {
    const std::uint8_t kind = in_.u8();
    switch (kind % 8) {
      case 0: return 0;
      case 1: return sat_mul((kind >> 4) & 7, tick_) - in_.u8() * (tick_ / 256);
      case 2: return sat_mul(in_.u8(), tick_);
      case 3: return sat_mul(in_.u16(), tick_);
      case 4: return sat_mul(sat_mul(in_.u8(), std::int64_t{1} << (8 * (1 + in_.u8() % 3))), tick_);
      case 5: return -sat_mul(in_.u8(), tick_) - in_.u8();
      case 6: return in_.u8() % 2 == 0 ? kI64Max : kI64Min;
      default: return static_cast<std::int64_t>(in_.u64());
    }
  }

  std::size_t limit() {
    const std::uint8_t b = in_.u8();
    return (b & 0x80) != 0 ? b & 7 : Engine::kNoLimit;
  }

  // The tick of the wheel's now, as it advances to `now_ns` (>= 0).
  std::uint64_t tick_of(std::int64_t now_ns) const {
    return std::min(static_cast<std::uint64_t>(now_ns) / static_cast<std::uint64_t>(tick_), max_tick_);
  }

  // ---- operations -----------------------------------------------------------------------------

  void op_schedule(std::uint8_t op) {
    const unsigned kind = (op >> 4) % 4;
    const std::int64_t d = delay();
    if (kind == 0 && (op & 0xC0) == 0xC0) {
      // A null function pointer is refused before anything else, and not counted as rejected.
      const std::uint64_t rejected = engine_->stats().rejected;
      const tickwheel::Timer t = engine_->schedule_after(Nanos(d), kNullFn);
      check(!t && t.status() == Status::null_callback && engine_->stats().rejected == rejected,
            "a null function pointer was not refused with null_callback");
      return failed(t);
    }
    const std::uint32_t serial = next_serial_++;
    std::size_t asked = Engine::kAnyShard;
    if (kind == 2) asked = in_.u8() % shards_;
    if (kind == 3) asked = shards_ + in_.u8() % 2;
    // The deadline, as the engine computes it: the delay from its clock (or the shard's loop time,
    // see base_for()), or absolute: schedule_at, and schedule_at_on for a given shard (op bit 0).
    // Bit 1 puts an absolute deadline near the clock (the delay from it), where the ticks that are
    // over and those that are not meet: the due path's edge.
    const bool absolute = kind == 1 || (kind == 2 && (op & 1) != 0);
    const Expect e = expect(asked);
    const std::int64_t deadline = !absolute       ? sat_add(base_for(e), d)
                                  : (op & 2) != 0 ? sat_add(g_clock, d)
                                                  : d;
    tickwheel::Timer t;
    {
      Fire fn(this, serial);
      // Only an absolute one-shot may be claimed by this thread (see record()), which wakes no loop:
      // each shard's eventfd is read before, for record() to compare.
      due_window_ = absolute && executor_ && executor_->any_thread();
      signalled_.clear();
      for (std::size_t s = 0; due_window_ && s < shards_; ++s) signalled_.push_back(readable(s));
      switch (kind) {
        case 0: t = engine_->schedule_after(Nanos(d), std::move(fn)); break;
        case 1: t = engine_->schedule_at(Nanos(deadline), std::move(fn)); break;
        default:
          t = absolute ? engine_->schedule_at_on(asked, Nanos(deadline), std::move(fn))
                       : engine_->schedule_after_on(asked, Nanos(d), std::move(fn));
          break;
      }
      due_window_ = false;
    }
    TICKWHEEL_FUZZ_TRACE("schedule #%u (kind %u, %s, shard %lld, deadline %lld) -> %s, shard %zu", serial,
                         kind, absolute ? "at" : "after",
                         asked == Engine::kAnyShard ? -1LL : static_cast<long long>(asked), ll(deadline),
                         std::string(to_string(t.status())).c_str(), t.shard());
    if (kind == 3) return no_such_shard(t, e);
    record(t, serial, e, Rec{}, deadline, absolute);
  }

  void op_schedule_every(std::uint8_t op) {
    const unsigned kind = (op >> 4) % 4;  // 0 and 1: any shard; 2: a given one; 3: one past the last
    const PeriodicCall call = PeriodicCall::decode(in_, tick_, [this] { return delay(); });
    const std::int64_t p = call.period_ns;
    const PeriodicOptions& opts = call.options;
    std::size_t asked = Engine::kAnyShard;
    if (kind == 2) asked = in_.u8() % shards_;
    if (kind == 3) asked = shards_ + in_.u8() % 2;
    const Expect e = expect(asked);
    if (call.null_fn) {
      // A null function pointer is refused first, whatever the period or the shard.
      const tickwheel::Timer t = engine_->schedule_every_on(asked, Nanos(p), kNullFn, opts);
      check(!t && t.status() == Status::null_callback && engine_->stats().rejected == e.rejected,
            "a null function pointer was not refused with null_callback");
      return failed(t);
    }
    const std::uint32_t serial = next_serial_++;
    tickwheel::Timer t;
    {
      Fire fn(this, serial);
      t = kind == 0 ? engine_->schedule_every(Nanos(p), std::move(fn), opts)
                    : engine_->schedule_every_on(asked, Nanos(p), std::move(fn), opts);
    }
    const std::int64_t first = call.first_delay();
    TICKWHEEL_FUZZ_TRACE(
        "schedule_every #%u (period %lld, %s, misfire %u, first %lld, shard %lld) -> %s, shard %zu", serial,
        ll(p), opts.cadence == Cadence::fixed_rate ? "fixed rate" : "fixed delay",
        static_cast<unsigned>(opts.misfire), ll(first),
        asked == Engine::kAnyShard ? -1LL : static_cast<long long>(asked),
        std::string(to_string(t.status())).c_str(), t.shard());
    if (call.refused(tick_)) {
      // Refused before a shard is chosen, so before no_such_shard and stopped; not counted.
      check(!t && t.status() == Status::bad_period, "a bad period was not refused with bad_period", p);
      check(engine_->stats().rejected == e.rejected, "bad_period was counted as rejected");
      return failed(t);
    }
    if (kind == 3) return no_such_shard(t, e);
    Rec rec;
    rec.periodic = true;
    rec.rule = call.rule(tick_);
    record(t, serial, e, rec, sat_add(base_for(e), first));
  }

  // What a relative deadline counts from (Engine::schedule_after): the shard's loop time where the
  // schedule goes straight into the wheel (a callback on its own shard; the owner, outside a
  // callback of another shard), else the engine's clock now.
  std::int64_t base_for(const Expect& e) const {
    if (!e.target || *e.target >= shards_) return g_clock;
    const bool direct = polls_.empty() ? owner_ == *e.target : polls_.back().shard == *e.target;
    return direct ? model_[*e.target].loop_now : g_clock;
  }

  Expect expect(std::size_t asked) {
    Expect e;
    // Which shard: one asked for, else a callback's own (inline), else the thread's home shard.
    if (asked != Engine::kAnyShard) {
      e.target = asked;
    } else if (!polls_.empty()) {
      e.target = polls_.back().shard;
    } else if (owner_) {
      e.target = owner_;  // the shard this thread owns
    } else if (home_) {
      e.target = home_;
    }
    // Admission under max_pending_per_shard: exact, one thread scheduling (see model_pending()).
    const EngineStats st = engine_->stats();
    e.admits.assign(shards_, true);
    if (max_pending_ != 0) {
      for (std::size_t s = 0; s < shards_; ++s) e.admits[s] = model_pending(s) < max_pending_;
    }
    e.rejected = st.rejected;
    return e;
  }

  void no_such_shard(const tickwheel::Timer& t, const Expect& e) {
    check(!t && t.status() == Status::no_such_shard,
          "a schedule on a shard past the last did not fail with no_such_shard");
    check(engine_->stats().rejected == e.rejected, "no_such_shard was counted as rejected");
    failed(t);
  }

  // Checks a schedule's outcome and records the timer: linked at once when a callback schedules it
  // on its own shard, claimed and handed to the executor at once when it takes the due path (see
  // due_path()), else queued for the shard's next transfer.
  void record(const tickwheel::Timer& t, std::uint32_t serial, const Expect& e, Rec rec,
              std::int64_t deadline, bool absolute = false) {
    const std::uint64_t rejected_now = engine_->stats().rejected;
    const std::uint64_t claimed_here = std::exchange(due_handed_, 0);  // execute() calls in the schedule
    if (!t) check(claimed_here == 0, "a schedule that failed handed a task to the executor");
    if (stopped_) {
      check(!t && t.status() == Status::stopped, "a schedule after stop() did not fail with stopped");
      check(rejected_now == e.rejected + 1, "a schedule refused after stop() was not counted as rejected");
      return failed(t);
    }
    if (!t) {
      check(t.status() == Status::max_pending_reached, "a schedule failed",
            static_cast<long long>(t.status()));
      check(max_pending_ != 0 && (e.target ? !e.admits[*e.target] : (!e.admits[0] || !e.admits[shards_ - 1])),
            "a schedule was refused with max_pending_reached below the limit");
      check(rejected_now == e.rejected + 1, "a refused schedule was not counted as rejected");
      return failed(t);
    }
    check(t.status() == Status::ok, "a good handle's status is not ok");
    check(rejected_now == e.rejected, "a schedule that succeeded was counted as rejected");
    const std::size_t s = t.shard();
    check(s < shards_, "a timer on a shard that does not exist", static_cast<long long>(s));
    if (e.target) {
      check(s == *e.target, "a timer landed on another shard than the one due", static_cast<long long>(s),
            static_cast<long long>(*e.target));
    } else {
      home_ = s;  // the thread's first schedule outside a callback: its home shard from now on
    }
    check(e.admits[s], "a schedule was admitted past max_pending_per_shard", static_cast<long long>(s));
    ++schedules_ok_;
    rec.handle = t;
    rec.shard = s;
    rec.due = due_tick(deadline, tick_);
    Rec& r = recs_.emplace(serial, rec).first->second;
    serials_.push_back(serial);
    const bool direct = polls_.empty() ? owner_ == s : polls_.back().shard == s;
    const bool claimed = absolute && !r.periodic && !direct && due_path(s, r.due);
    check(claimed_here == (claimed ? 1 : 0),
          "a schedule handed a task to the executor other than the due path says", lu(claimed_here), claimed);
    if (claimed) {
      // Claimed by this thread, as a pass claims: the timer has fired already, is counted in
      // scheduled, fired and executing at once (the shard's counters, read live), and its task
      // waits in the executor's queue; the shard meets its node only when a pass takes it back.
      tickwheel::Timer copy = t;
      check(!t.cancelled() && t.expired() && !t.is_pending() && !copy.cancel(),
            "a timer the due path claimed is not expired, or its cancel() won", serial);
      check(!no_nudge_ || signalled_[s] || !readable(s), "the due path woke the shard's loop", serial);
      ShardModel& m = model_[s];
      ++m.scheduled;
      ++m.published_scheduled;
      ++m.fired;
      ++m.executing;
      r.where = Where::handed;
      r.fired = true;
      r.ended_at = schedules_ok_;
      TICKWHEEL_FUZZ_TRACE("  #%u claimed by its scheduler: handed to the executor at once", serial);
      return;
    }
    check(!t.cancelled() && !t.expired() && t.is_pending(),
          "a new timer's handle says cancelled, expired or not pending");
    // A callback's schedule on its own shard is linked at once, and so is the owner's on the shard
    // it owns (outside a callback of another shard); any other goes through the queue.
    if (!polls_.empty() && polls_.back().shard == s) {
      const PollCtx& ctx = polls_.back();
      r.linked_poll = ctx.id;
      r.linked_call = ctx.call;
      r.linked_late = r.due <= ctx.running_due;
      ++model_[s].scheduled;
      link(serial, r, r.due);
    } else if (polls_.empty() && owner_ == s) {
      ++model_[s].scheduled;  // published at the shard's next pass
      link(serial, r, r.due);
    } else {
      model_[s].queue.push_back(serial);
    }
  }

  // Whether a one-shot that this thread schedules at an absolute deadline (due at tick `due`) on
  // shard s, through its queue (not the owner's nor a callback's own-shard link), is claimed by
  // this thread and handed to the executor there and then (EngineCore::commit): an executor that
  // takes tasks from any thread, no max_pending_per_shard (its places only a pass gives back), a
  // shard whose loop has announced a sleep past the tick's end (Wakeup::sleeps_past: the hand-off
  // would wake it), and the tick over by the engine's clock. One thread, no race: exact.
  bool due_path(std::size_t s, std::uint64_t due) const {
    if (!executor_ || !executor_->any_thread() || max_pending_ != 0 || !model_[s].plan) return false;
    const auto end = static_cast<std::uint64_t>(ns_of(due));  // due <= max_tick_: no overflow
    return end < *model_[s].plan && ns_of(due) <= g_clock;
  }

  void failed(const tickwheel::Timer& t) {
    check(!t && !t.cancelled() && !t.expired() && t.shard() == 0, "a failed handle is not an empty one");
    check_empty(t);
    last_failure_ = t;
  }

  // A default or failed handle, anywhere: nothing to cancel, move, ask or name.
  static void check_empty(const tickwheel::Timer& t) {
    tickwheel::Timer copy = t;
    check(!copy.cancel(), "cancel() of an empty handle returned true");
    check(!copy.is_pending() && copy.raw() == 0, "an empty handle says pending, or has a raw value");
    check(!copy.reschedule_after(Nanos(0)) && !copy.reschedule(Nanos{}),
          "reschedule() of an empty handle returned true");
    check(!copy.deadline() && !copy.remaining(), "deadline() or remaining() of an empty handle has a value");
  }

  // Timer::cancel on a recorded timer, a default handle or a failed one.
  void op_cancel() {
    const std::uint8_t kind = in_.u8();
    if (kind % 8 == 6 || serials_.empty()) {
      tickwheel::Timer none;
      check(!none.cancel() && !none && none.status() == Status::no_timer && !none.cancelled() &&
                !none.expired(),
            "a default handle is not an empty no_timer handle");
      return;
    }
    if (kind % 8 == 7) {
      check(!last_failure_.cancel(), "cancel() of a failed handle returned true");
      return;
    }
    cancel(serials_[in_.u16() % serials_.size()], kind >> 4);  // the handle or its raw form
  }

  // ShardStats::pending as the model sees it: timers scheduled on the shard whose cancel has not
  // won and, one-shot, that were not claimed to run (still queued or linked); a periodic timer
  // counts wherever it is. What max_pending_per_shard admits against, and what a cancel can win.
  std::uint64_t model_pending(std::size_t s) const {
    std::uint64_t n = 0;
    for (const auto& [serial, r] : recs_) n += r.shard == s && is_pending(r) ? 1 : 0;
    return n;
  }
  static bool is_pending(const Rec& r) {
    return !r.cancelled && (r.periodic || r.where == Where::queued || r.where == Where::linked);
  }

  // True iff the timer was not cancelled before and, a one-shot, is still pending; a periodic
  // timer cancels wherever it is, and no run starts after that. Through the handle or the one
  // timer_from_raw() gives back for its raw() (see handle()), or `use` (a walk's own Timer).
  void cancel(std::uint32_t serial, unsigned how = 0, const tickwheel::Timer* use = nullptr) {
    Rec& r = recs_.at(serial);
    const bool expected = is_pending(r);
    tickwheel::Timer h = use != nullptr ? *use : handle(r, how);
    cancelling_ = serial;
    const bool got = h.cancel();
    cancelling_ = 0;
    TICKWHEEL_FUZZ_TRACE("cancel #%u -> %d", serial, got);
    check(got == expected, "cancel() returned what the model does not", got, expected);
    if (!got) return;
    won_cancel(serial);
    check(r.handle.cancelled() && !r.handle.expired() && !r.handle.is_pending(),
          "a handle just cancelled does not say so");
    if (stopped_) {
      // After stop() a cancel retires the timer at once: its callable is gone, and it is counted.
      check(alive_.count(serial) == 0, "cancel() after stop() did not destroy the callable", serial);
      ++model_[r.shard].published_cancelled;
    }
  }

  // The model's side of a cancel that won (Timer::cancel, or clear()): where it is counted.
  void won_cancel(std::uint32_t serial) {
    Rec& r = recs_.at(serial);
    ShardModel& m = model_[r.shard];
    ++m.cancelled_total;
    r.cancelled = true;
    r.ended_at = schedules_ok_;
    switch (r.where) {
      case Where::queued: r.where = Where::ended; break;  // counted when the hand-off is transferred
      case Where::linked:
        ++m.cancelled_reached;
        if (m.polling) {
          ++m.cancelled_in_poll;
          for (PollCtx& ctx : polls_) {
            if (ctx.shard == r.shard && r.periodic && r.rule.skips(r.due, ctx.T)) ++ctx.cancelled_skips;
          }
        }
        unlink(serial, r);
        r.where = Where::ended;
        break;
      case Where::running: ++m.cancelled_reached; break;  // counted when its callback returns
      default: break;  // out on the executor: counted when its node comes back
    }
  }

  void op_clock() {
    const std::uint8_t kind = in_.u8();
    switch (kind % 4) {
      case 0: g_clock = sat_add(g_clock, (kind >> 2) * (tick_ / 4)); break;
      case 1: g_clock = sat_add(g_clock, sat_mul(in_.u8(), tick_)); break;
      case 2: g_clock = sat_add(g_clock, sat_mul(in_.u16(), sat_mul(1 + in_.u8() % 64, tick_))); break;
      default: g_clock = (kind & 0xF0) == 0xF0 ? kI64Max : sat_add(g_clock, sat_mul(in_.u16(), tick_)); break;
    }
    TICKWHEEL_FUZZ_TRACE("clock -> %lld", ll(g_clock));
  }

  void op_poll(std::uint8_t op) {
    const std::uint8_t how = in_.u8();
    std::size_t shard = how % shards_;
    if ((how & 0x70) == 0x70) shard = shards_ + (how & 1);  // one that does not exist
    std::optional<std::int64_t> now;
    if ((how & 0x08) != 0) {
      switch ((op >> 4) % 4) {
        case 0: now = g_clock; break;
        case 1: now = g_clock - sat_mul(in_.u8(), tick_); break;  // behind: the wheel keeps its time
        case 2: now = sat_add(g_clock, sat_mul(in_.u8(), tick_)); break;
        default: now = sat_add(g_clock, sat_mul(in_.u16(), sat_mul(in_.u8(), tick_))); break;
      }
    }
    poll(shard, now, limit());
    // Bits 1 and 2: then the loop sleeps until the shard's next deadline, as a loop does.
    if ((how & 0x06) == 0x06 && shard < shards_) {
      const std::optional<Nanos> next = engine_->next_deadline(shard);
      sleep(shard, next ? std::optional<std::int64_t>(next->count()) : std::nullopt);
    }
  }

  void poll(std::size_t shard, std::optional<std::int64_t> now, std::size_t limit) {
    TICKWHEEL_FUZZ_TRACE("poll(%zu, %lld, limit %lld)", shard, now ? ll(*now) : -1LL,
                         static_cast<long long>(limit));
    if (shard >= shards_) {
      bool threw = false;
      try {
        static_cast<void>(now ? engine_->poll(shard, Nanos(*now), limit) : engine_->poll(shard, limit));
      } catch (const std::out_of_range&) {
        threw = true;
      }
      check(threw, "poll() of a shard that does not exist did not throw out_of_range");
      bool nd_threw = false;
      try {
        static_cast<void>(engine_->next_deadline(shard));
      } catch (const std::out_of_range&) {
        nd_threw = true;
      }
      check(nd_threw, "next_deadline() of a shard that does not exist did not throw out_of_range");
      return;
    }
    ShardModel& m = model_[shard];
    if (m.plan) wake(shard);  // a sleeping loop wakes to poll
    if (m.polling) {
      // This thread polls it already, further out: a second poll of one shard is refused.
      bool threw = false;
      try {
        static_cast<void>(engine_->poll(shard, limit));
      } catch (const std::logic_error&) {
        threw = true;
      }
      check(threw, "a nested poll() of the shard being polled was not refused");
      return;
    }
    if (stopped_) {
      check((now ? engine_->poll(shard, Nanos(*now), limit) : engine_->poll(shard, limit)) == 0,
            "poll() after stop() ran something");
      return;
    }
    const std::uint64_t last_T = tick_of(m.wheel_now);  // the wheel's now until this pass moves it
    m.wheel_now = std::max(m.wheel_now, now ? *now : g_clock);
    m.loop_now = std::max(m.loop_now, now ? *now : g_clock);
    PollCtx ctx{.shard = shard, .T = tick_of(m.wheel_now), .limit = limit, .id = ++polls_made_};
    ++m.passes;
    m.cancelled_in_poll = 0;     // the pass drains the cancels posted before it
    drain_moves(shard, last_T);  // then the moves, before anything runs
    take_back(shard, last_T);
    if (m.clear_posted) {  // a posted clear: every hand-off in, every timer pending cancelled
      m.clear_posted = false;
      TICKWHEEL_FUZZ_TRACE("  serves a posted clear");
      clear_model(shard);
    }
    // The transfer: the oldest hand-offs first, at most transfer_cap of them.
    std::size_t moved = 0;
    while (moved < cap_ && !m.queue.empty()) {
      const std::uint32_t serial = m.queue.front();
      m.queue.pop_front();
      ++moved;
      ++m.scheduled;
      Rec& r = recs_.at(serial);
      if (r.cancelled) {
        ++m.cancelled_reached;
      } else {
        link(serial, r, r.due);
      }
    }
    if (moved == cap_ && !m.queue.empty()) ++m.cap_hits;
    const std::uint64_t handed_before = executor_ ? executor_->handed : 0;
    polls_.push_back(ctx);
    m.polling = true;
    const std::size_t got = now ? engine_->poll(shard, Nanos(*now), limit) : engine_->poll(shard, limit);
    m.polling = false;
    ctx = polls_.back();
    polls_.pop_back();
    TICKWHEEL_FUZZ_TRACE("  -> ran %zu", got);
    if (executor_) {
      check(got == executor_->handed - handed_before,
            "poll() returned a count other than the tasks handed over", static_cast<long long>(got),
            lu(executor_->handed - handed_before));
      settle_hand_overs(ctx, got);
    } else {
      check(got == ctx.ran, "poll() returned a count other than the callbacks run",
            static_cast<long long>(got), static_cast<long long>(ctx.ran));
    }
    const bool complete = got < limit;
    const std::vector<std::uint32_t> in_doubt = settle_skips(ctx, complete);
    if (complete) {
      // Below its limit the pass went through everything due that was linked before its last
      // advance() call (earlier calls ended in a throw; what they linked behind runs in the next).
      for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
        for (std::uint32_t serial : it->second) {
          const Rec& r = recs_.at(serial);
          check(r.linked_poll == ctx.id && r.linked_call == ctx.call,
                "poll() stopped below its limit but left a due timer unrun", serial, lu(it->first));
        }
      }
    }
    if (complete) m.cur_floor = ctx.T;  // the wheel caught up with the poll's now
    const ShardStats st = engine_->stats().shards[shard];
    check(st.scheduled == m.scheduled, "stats().scheduled after a poll", lu(st.scheduled), lu(m.scheduled));
    check(st.rescheduled == m.rescheduled, "stats().rescheduled after a poll is not the moves applied",
          lu(st.rescheduled), lu(m.rescheduled));
    check(st.clears == m.clears && st.cleared == m.cleared,
          "stats().clears or cleared after a poll is not the clears served and what they cancelled",
          lu(st.clears), lu(m.cleared));
    publish(shard);
    check(st.fired == m.fired, "stats().fired after a poll", lu(st.fired), lu(m.fired));
    check(st.rearmed == m.rearmed, "stats().rearmed after a poll", lu(st.rearmed), lu(m.rearmed));
    check(st.cancelled <= m.cancelled_reached && st.cancelled + m.cancelled_in_poll >= m.cancelled_reached,
          "stats().cancelled after a poll is outside what the shard can have met", lu(st.cancelled),
          lu(m.cancelled_reached));
    m.published_cancelled = st.cancelled;
    for (std::uint32_t serial : in_doubt) cancel(serial);
  }

  // The start of a pass with the executor: the nodes its tasks gave back. A one-shot's node is
  // freed; a periodic timer is re-armed from the run it came back from, with the wheel's now still
  // that of the last pass (tick T), or ends there if it was cancelled meanwhile.
  void take_back(std::size_t shard, std::uint64_t T) {
    ShardModel& m = model_[shard];
    for (std::uint32_t serial : m.returned) {
      Rec& r = recs_.at(serial);
      if (!r.periodic) continue;
      check(r.where == Where::returned, "a returned node is not the model's", serial);
      if (r.cancelled) {
        r.where = Where::ended;
        ++m.cancelled_reached;
        if (alive_.count(serial) != 0) awaiting_death_.insert(serial);  // dies in this drain
        continue;
      }
      r.linked_poll = 0;
      link(serial, r, r.rule.next_run(r.due, T, r.ran_until, tick_, max_tick_));
      // Due by T, it waits in the due slot, where a wheel left behind by a cut-short pass may run it
      // before it reaches its tick (see Rec::floor).
      if (r.due <= T) r.floor = m.cur_floor;
      TICKWHEEL_FUZZ_TRACE("  #%u back from its task, re-armed for tick %lld", serial, lu(r.due));
    }
    m.returned.clear();
  }

  // Which timers a poll handed to the executor: every due one (but skip timers a whole period
  // behind) if it stopped below its limit; else `got` of them, which a one-shot's handle tells
  // (expired()) and only the tasks tell for periodic timers.
  void settle_hand_overs(const PollCtx& ctx, std::size_t got) {
    ShardModel& m = model_[ctx.shard];
    std::vector<std::uint32_t> one_shots, periodic;
    for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
      for (std::uint32_t serial : it->second) {
        const Rec& r = recs_.at(serial);
        if (r.periodic && r.rule.skips(it->first, ctx.T)) continue;
        (r.periodic ? periodic : one_shots).push_back(serial);
      }
    }
    if (got < ctx.limit) {
      check(got == one_shots.size() + periodic.size(),
            "a poll below its limit did not hand over every due timer", static_cast<long long>(got),
            static_cast<long long>(one_shots.size() + periodic.size()));
      for (std::uint32_t serial : one_shots) hand_over(serial);
      for (std::uint32_t serial : periodic) hand_over(serial);
      return;
    }
    std::size_t went = 0;
    for (std::uint32_t serial : one_shots) {
      const Rec& r = recs_.at(serial);
      if (r.handle.expired()) {
        hand_over(serial);
        ++went;
      } else {
        check(!r.handle.cancelled(), "a due timer a cut-short poll left says cancelled", serial);
      }
    }
    check(went <= got && got - went <= periodic.size(), "a poll handed over more timers than were due",
          static_cast<long long>(got), static_cast<long long>(one_shots.size() + periodic.size()));
    const std::size_t rest = got - went;
    if (rest == periodic.size()) {
      for (std::uint32_t serial : periodic) hand_over(serial);
      return;
    }
    if (rest == 0) return;
    TICKWHEEL_FUZZ_TRACE("  %zu of %zu due periodic timers handed over: running the queue to see which", rest,
                         periodic.size());
    for (std::uint32_t serial : periodic) recs_.at(serial).maybe_handed = true;
    maybe_ran_ = 0;
    const bool was_quiet = std::exchange(quiet_, true);
    while (!executor_->tasks.empty()) {
      const Task t = executor_->tasks.front();
      executor_->tasks.pop_front();
      run_task(t);
    }
    quiet_ = was_quiet;
    for (std::uint32_t serial : periodic) recs_.at(serial).maybe_handed = false;
    check(maybe_ran_ == rest, "the tasks run were not those of the periodic timers handed over",
          static_cast<long long>(maybe_ran_), static_cast<long long>(rest));
  }

  void hand_over(std::uint32_t serial) {
    Rec& r = recs_.at(serial);
    ShardModel& m = model_[r.shard];
    unlink(serial, r);
    r.where = Where::handed;
    r.maybe_handed = false;
    ++m.fired;
    ++m.executing;
    if (r.periodic) {
      ++m.rearmed;
    } else {
      r.fired = true;
      r.ended_at = schedules_ok_;
    }
  }

  // Misfire::skip drops make no callback: the pass's skipped count says how many there were. A
  // pass below its limit drops every skip timer a whole period behind that was linked before its
  // last advance() call; the rest of such timers, and those cancelled during the pass, it may or
  // may not have dropped. Returns the timers whose drop stays in doubt, for the caller to cancel
  // once the pass's counters are checked.
  std::vector<std::uint32_t> settle_skips(const PollCtx& ctx, bool complete) {
    ShardModel& m = model_[ctx.shard];
    std::vector<std::uint32_t> sure, maybe;
    for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
      for (std::uint32_t serial : it->second) {
        const Rec& r = recs_.at(serial);
        if (!r.periodic || !r.rule.skips(it->first, ctx.T)) continue;
        const bool in_last_call = r.linked_poll == ctx.id && r.linked_call == ctx.call;
        (complete && !in_last_call ? sure : maybe).push_back(serial);
      }
    }
    const std::uint64_t delta = engine_->stats().shards[ctx.shard].skipped - m.skipped;
    const std::uint64_t least = sure.size() + ctx.unseen_skips;
    const std::uint64_t most = least + maybe.size() + ctx.cancelled_skips;
    check(delta >= least && delta <= most,
          "stats().skipped after a poll is outside what the pass can have dropped", lu(delta), lu(least));
    m.skipped += delta;
    m.rearmed += delta;
    for (std::uint32_t serial : sure) drop(serial, ctx);
    const std::uint64_t optional = delta - least;
    TICKWHEEL_FUZZ_TRACE("  skipped %llu: %zu sure, %llu of %zu in doubt and %llu cancelled",
                         static_cast<unsigned long long>(delta), sure.size(),
                         static_cast<unsigned long long>(optional), maybe.size(),
                         static_cast<unsigned long long>(ctx.cancelled_skips));
    if (optional == 0) return {};
    if (optional == maybe.size() + ctx.cancelled_skips) {
      for (std::uint32_t serial : maybe) drop(serial, ctx);
      return {};
    }
    return maybe;
  }

  // Where a dropped skip timer goes: the first grid point after now; at the horizon that is the
  // last tick, at or before now, so it waits for the next advance() call.
  void drop(std::uint32_t serial, const PollCtx& ctx) {
    Rec& r = recs_.at(serial);
    unlink(serial, r);
    const std::uint64_t was_due = r.due;
    link(serial, r, r.rule.first_grid_point_after(was_due, ctx.T, max_tick_));
    if (r.due <= ctx.T) {
      r.linked_poll = ctx.id;
      r.linked_call = ctx.call;
      r.linked_late = true;
      r.floor = was_due;  // the pass dropped it at its tick
    }
    TICKWHEEL_FUZZ_TRACE("  #%u skipped, re-armed for tick %lld", serial, lu(r.due));
  }

  // The executor runs queued tasks: a few or all, the oldest first or picked anywhere.
  void op_tasks() {
    if (!executor_) return op_handles();
    const std::uint8_t how = in_.u8();
    std::size_t n = (how & 0x80) != 0 ? executor_->tasks.size() : 1 + (how & 3);
    while (n-- != 0 && !executor_->tasks.empty()) {
      const std::size_t i = (how & 0x40) != 0 ? in_.u8() % executor_->tasks.size() : 0;
      const Task t = executor_->tasks[i];
      executor_->tasks.erase(executor_->tasks.begin() + static_cast<std::ptrdiff_t>(i));
      run_task(t);
    }
  }

  void run_task(Task t) {
    task_polls_.push_back(polls_.size());
    t.run();
    task_polls_.pop_back();
  }

  void op_stop() {
    TICKWHEEL_FUZZ_TRACE("stop()");
    if (stopped_) {
      check(engine_->stop().empty(), "a second stop() returned timers");
      return;
    }
    // A clear posted and not served yet is served by stop()'s drain, after the tasks' nodes came
    // back: callables of that shard may die inside stop(), which the model learns of after it. Set
    // before the helper thread below starts, which reads it (died()) as its tasks destroy callables.
    stop_clearing_ = true;
    // stop() waits for every task handed over: the queue runs first, here, or meanwhile, on a
    // helper thread whose callbacks take no action (see the top of the file).
    std::thread helper;
    if (executor_ && !executor_->tasks.empty()) {
      if ((in_.u8() & 1) == 0) {
        while (!executor_->tasks.empty()) {
          const Task t = executor_->tasks.front();
          executor_->tasks.pop_front();
          run_task(t);
        }
      } else {
        std::vector<Task> tasks(executor_->tasks.begin(), executor_->tasks.end());
        executor_->tasks.clear();
        quiet_ = true;
        helper = std::thread([this, tasks = std::move(tasks)] {
          for (const Task& t : tasks) run_task(t);
        });
      }
    }
    std::vector<tickwheel::Timer> left;
    try {
      left = engine_->stop();
    } catch (const std::logic_error&) {
      fail("stop() on the thread that owns a shard was refused");
    }
    stop_clearing_ = false;
    owner_.reset();  // stop() ends an ownership
    if (helper.joinable()) {
      helper.join();
      quiet_ = false;
    }
    stopped_ = true;
    for (std::size_t s = 0; s < shards_; ++s) {
      drain_moves(s, tick_of(model_[s].wheel_now));  // its drain applies the moves posted, then
      take_back(s, tick_of(model_[s].wheel_now));    // takes back what the executor returned
      check(model_[s].executing == 0, "stop() returned with tasks not run", static_cast<long long>(s));
      if (model_[s].clear_posted) {  // then serves a clear posted before it
        model_[s].clear_posted = false;
        clear_model(s);
      }
    }
    // What stop() must return: every timer neither fired (one-shot) nor cancelled, queued ones and
    // periodic ones back from the executor included.
    std::vector<std::size_t> expected(shards_, 0);
    std::uint64_t pending = 0;
    for (auto& [serial, r] : recs_) {
      if (r.cancelled || (r.where != Where::queued && r.where != Where::linked)) continue;
      ++expected[r.shard];
      ++pending;
      if (r.where == Where::queued) link(serial, r, r.due);
    }
    check(left.size() == pending, "stop() did not return every pending timer",
          static_cast<long long>(left.size()), static_cast<long long>(pending));
    std::vector<std::size_t> returned(shards_, 0);
    for (const tickwheel::Timer& t : left) {
      check(t && t.status() == Status::ok && !t.cancelled() && !t.expired() && t.shard() < shards_,
            "a timer stop() returned is not a pending one");
      ++returned[t.shard()];
    }
    const EngineStats st = engine_->stats();
    std::uint64_t scheduled = 0;
    for (std::size_t s = 0; s < shards_; ++s) {
      ShardModel& m = model_[s];
      m.scheduled += m.queue.size();
      m.cancelled_reached = m.cancelled_total;
      m.queue.clear();
      m.published_cancelled = m.cancelled_total;
      publish(s);
      scheduled += m.scheduled;
      const ShardStats& ss = st.shards[s];
      check(returned[s] == expected[s], "stop() returned a shard's pending timers short or over",
            lu(returned[s]), lu(expected[s]));
      check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.cancelled_total &&
                ss.rearmed == m.rearmed && ss.skipped == m.skipped && ss.pending == returned[s] &&
                ss.rescheduled == m.rescheduled && ss.clears == m.clears && ss.cleared == m.cleared,
            "a shard's stats after stop() are not its whole history", lu(ss.scheduled), lu(ss.cancelled));
      check(ss.scheduled + ss.rearmed == ss.fired + ss.skipped + ss.cancelled + returned[s],
            "scheduled + rearmed != fired + skipped + cancelled + returned, per shard");
    }
    check(st.scheduled == scheduled &&
              st.scheduled + st.rearmed == st.fired + st.skipped + st.cancelled + left.size(),
          "scheduled + rearmed != fired + skipped + cancelled + returned by stop()", lu(st.scheduled),
          lu(st.fired + st.cancelled + left.size()));
    // Cancel some of what stop() returned (the rest are destroyed by ~Engine): each cancel returns
    // true and destroys that timer's callable at once, which names it.
    const std::uint8_t which = in_.u8();
    for (std::size_t i = 0; i < left.size(); ++i) {
      if (((which >> (i % 8)) & 1) == 0) continue;
      cancel_returned(left[i]);
    }
  }

  void cancel_returned(tickwheel::Timer& t) {
    died_ = 0;
    expect_death_ = true;
    const bool got = t.cancel();
    expect_death_ = false;
    check(got && died_ != 0, "cancel() of a timer stop() returned did not cancel it there and then");
    Rec& r = recs_.at(died_);
    check(r.where == Where::linked && !r.cancelled && r.shard == t.shard(),
          "stop() returned a timer that was not pending on its shard", died_);
    ShardModel& m = model_[r.shard];
    ++m.cancelled_total;
    ++m.cancelled_reached;
    ++m.published_cancelled;
    unlink(died_, r);
    r.where = Where::ended;
    r.cancelled = true;
    r.ended_at = schedules_ok_;
    check(!t.cancel() && !r.handle.cancel(), "a second cancel of a timer returned true");
  }

  void op_handles() {
    if (serials_.empty()) return;
    check_handle(serials_[in_.u16() % serials_.size()]);
  }

  void check_handle(std::uint32_t serial) {
    const Rec& r = recs_.at(serial);
    const tickwheel::Timer& h = r.handle;
    check(static_cast<bool>(h) && h.status() == Status::ok && h.shard() == r.shard,
          "a good handle's bool, status or shard");
    const bool fresh = r.ended_at == schedules_ok_;  // no schedule since: the node is not reused
    if (r.periodic) {
      check(!h.expired(), "a periodic timer's handle says expired", serial);
      check(r.cancelled ? h.cancelled() || !fresh : !h.cancelled(), "a periodic timer's handle", serial);
    } else if (r.cancelled) {
      check(!h.expired() && (h.cancelled() || !fresh), "a cancelled timer's handle", serial);
    } else if (r.fired) {
      check(!h.cancelled() && (h.expired() || !fresh), "a fired timer's handle", serial);
    } else {
      check(!h.cancelled() && !h.expired(), "a pending timer's handle says cancelled or expired", serial);
    }
    // pending() is exact in every state: it reads the generation, which no later timer shares.
    check(h.is_pending() == is_pending(r), "pending() is not whether the model says the timer may still run",
          serial, is_pending(r));
    const std::uint64_t raw = h.raw();
    const tickwheel::Timer back = engine_->timer_from_raw(raw);
    check(raw != 0 && back && back.raw() == raw && back.shard() == r.shard &&
              back.is_pending() == h.is_pending() && back.cancelled() == h.cancelled() &&
              back.expired() == h.expired(),
          "timer_from_raw(raw()) does not answer as the handle", serial);
  }

  // ---- issue 17: reschedule, deadline, raw handles, clear, walk, ownership -----------------------

  // Whether this thread is shard s's own (what deadline(), clear() and for_each_pending() need, and
  // where reschedule() moves at once): inside a callback of its pass, or its owner.
  bool own_thread(std::size_t s) const {
    return (!polls_.empty() && polls_.back().shard == s) || owner_ == s;
  }

  // The pass of shard s this thread is in (further out, if a callback polls another shard), or null.
  const PollCtx* pass_of(std::size_t s) const {
    for (const PollCtx& ctx : polls_) {
      if (ctx.shard == s) return &ctx;
    }
    return nullptr;
  }

  // A recorded timer's handle, itself or (bit 0 of `how`) what timer_from_raw() gives back for its
  // raw(): that names the same timer, whatever state it is in, so every call answers the same.
  tickwheel::Timer handle(const Rec& r, unsigned how) {
    if ((how & 1) == 0) return r.handle;
    const std::uint64_t raw = r.handle.raw();
    const tickwheel::Timer back = engine_->timer_from_raw(raw);
    check(raw != 0 && back && back.status() == Status::ok && back.raw() == raw && back.shard() == r.shard,
          "timer_from_raw(raw()) is not a handle of the same timer", lu(raw));
    return back;
  }

  // Pending between runs: what reschedule() moves and deadline() reads. A periodic timer out on a
  // run is not, inline or on the executor, until its shard re-arms it (see the top).
  static bool movable(const Rec& r) {
    return !r.cancelled && (r.where == Where::queued || r.where == Where::linked);
  }

  std::int64_t ns_of(std::uint64_t tick) const { return static_cast<std::int64_t>(tick) * tick_; }

  // Whether `ns` is the deadline the shard reads for the timer: its due tick's. Inside a pass of
  // its shard a Misfire::skip timer a whole period behind may have been dropped to the next grid
  // point already (see settle_skips).
  bool deadline_ok(const Rec& r, std::int64_t ns) const {
    if (ns == ns_of(r.due)) return true;
    const PollCtx* ctx = pass_of(r.shard);
    return ctx != nullptr && r.periodic && r.rule.skips(r.due, ctx->T) &&
           ns == ns_of(r.rule.first_grid_point_after(r.due, ctx->T, max_tick_));
  }

  // The shard publishes its counters: at the end of a pass, in clear(), in stop().
  void publish(std::size_t s) {
    ShardModel& m = model_[s];
    m.published_scheduled = m.scheduled;
    m.published_rescheduled = m.rescheduled;
  }

  // A move the shard applies: at once on its own thread, or a posted one as it drains its records
  // (outside a pass, `T` is the tick of its last pass's now). A hand-off not taken in yet only takes
  // the new tick. A linked timer is linked again as a callback's schedule would be, but a periodic
  // one due by the pass's now waits in the due slot, as its re-arm would (wheel.hpp: it never runs
  // twice in one advance() call), so it gets a re-arm's bookkeeping.
  void apply_move(std::uint32_t serial, std::uint64_t due, std::uint64_t T) {
    Rec& r = recs_.at(serial);
    ShardModel& m = model_[r.shard];
    ++m.rescheduled;
    TICKWHEEL_FUZZ_TRACE("  #%u moved to tick %lld", serial, lu(due));
    if (r.where == Where::queued) {
      r.due = due;
      return;
    }
    PollCtx* ctx = nullptr;
    for (PollCtx& c : polls_) {
      if (c.shard == r.shard) ctx = &c;
    }
    // The pass may have dropped a skip timer a whole period behind before this move, as before a
    // cancel (see PollCtx::cancelled_skips).
    if (ctx != nullptr && r.periodic && r.rule.skips(r.due, ctx->T)) ++ctx->cancelled_skips;
    unlink(serial, r);
    link(serial, r, due);
    if (ctx == nullptr) {
      r.linked_poll = 0;
      // In the due slot, where a wheel left behind by a cut-short pass may run it early (Rec::floor).
      if (r.periodic && due <= T) r.floor = m.cur_floor;
      return;
    }
    r.linked_poll = ctx->id;
    r.linked_call = ctx->call;
    if (r.periodic) {
      r.linked_late = true;
      if (due <= ctx->T) r.floor = ctx->running_due;
    } else {
      r.linked_late = due <= ctx->running_due;
    }
  }

  // The shard drains its posted moves (at a pass's start, in clear() and for_each_pending(), in
  // stop()), oldest first. Each applies iff its timer is still pending between runs: a one-shot that
  // fired and a cancelled timer drop it; a periodic timer re-armed since keeps its generation, so it
  // moves; one out on the executor, not yet re-armed, drops it.
  void drain_moves(std::size_t s, std::uint64_t T) {
    const std::deque<Move> moves = std::exchange(model_[s].moves, {});
    for (const Move& mv : moves) {
      if (movable(recs_.at(mv.serial))) apply_move(mv.serial, mv.due, T);
    }
  }

  // What clear() and for_each_pending() do first: the cancels posted to the shard retired (the
  // model has them), its posted moves applied, and every hand-off taken in, transfer_cap aside.
  void settle(std::size_t s) {
    ShardModel& m = model_[s];
    drain_moves(s, tick_of(m.wheel_now));
    const PollCtx* ctx = pass_of(s);
    while (!m.queue.empty()) {
      const std::uint32_t serial = m.queue.front();
      m.queue.pop_front();
      ++m.scheduled;
      Rec& r = recs_.at(serial);
      if (r.cancelled) {
        ++m.cancelled_reached;
        continue;
      }
      link(serial, r, r.due);
      if (ctx != nullptr) {  // taken in during a pass: as a callback's schedule on its own shard
        r.linked_poll = ctx->id;
        r.linked_call = ctx->call;
        r.linked_late = r.due <= ctx->running_due;
      }
    }
  }

  template <class E, class F>
  static bool throws(F&& f) {
    try {
      f();
    } catch (const E& e) {
      return typeid(e) == typeid(E);
    }
    return false;
  }

  // A shard, and now and then one that does not exist.
  std::size_t pick_shard(std::uint8_t b) const {
    return (b & 0x70) == 0x70 ? shards_ + (b & 1) : b % shards_;
  }

  // Ops 0x86, 0x96, ..., 0xF6: the API of issue 17, from the top level.
  void op_api(std::uint8_t op) {
    switch ((op >> 4) & 7) {
      case 0:
      case 6: op_reschedule(); break;
      case 1: op_deadline(); break;
      case 2: op_raw(); break;
      case 3: {
        const std::uint8_t b = in_.u8();
        if ((b & 0x80) != 0) {
          post_clear(b, 0);
        } else {
          clear_shard(pick_shard(b));
        }
        break;
      }
      case 4: walk_shard(pick_shard(in_.u8())); break;
      case 7: op_wait(); break;
      default: op_own(); break;
    }
  }

  void op_reschedule() {
    const std::uint8_t how = in_.u8();
    if (serials_.empty() || how % 8 == 7) {
      check_empty(tickwheel::Timer{});
      check_empty(last_failure_);
      return;
    }
    reschedule(serials_[in_.u16() % serials_.size()], how);
  }

  // Timer::reschedule (bit 0 of `how`) or reschedule_after, through the handle or its raw form (bit
  // 1), or through `use`. On the shard's own thread, but for a walk of it, the moves posted before
  // are applied and then this one, and true says it was: exactly when the timer is pending between
  // runs. Elsewhere it is
  // posted: true iff the timer was pending between runs when asked and stop() had not begun; the
  // shard applies it when it next drains its records, if the timer still is (drain_moves).
  void reschedule(std::uint32_t serial, std::uint8_t how, const tickwheel::Timer* use = nullptr) {
    const Rec& r = recs_.at(serial);
    const bool absolute = (how & 1) != 0;
    const std::int64_t d = delay();
    tickwheel::Timer h = use != nullptr ? *use : handle(r, how >> 1);
    ShardModel& m = model_[r.shard];
    const bool here = own_thread(r.shard) && !m.walking;
    const bool expected = movable(r) && (here || !stopped_);
    const std::int64_t deadline = absolute ? d : sat_add(here ? m.loop_now : g_clock, d);
    const bool got = absolute ? h.reschedule(Nanos(d)) : h.reschedule_after(Nanos(d));
    TICKWHEEL_FUZZ_TRACE("reschedule #%u to %lld (%s) -> %d", serial, ll(deadline), here ? "here" : "posted",
                         got);
    check(got == expected, "reschedule() returned what the model does not", got, expected);
    if (!got) return;
    const std::uint64_t due = due_tick(deadline, tick_);
    if (here) {
      // The moves posted before this one are applied first: the last to return wins.
      drain_moves(r.shard, tick_of(m.wheel_now));
      apply_move(serial, due, tick_of(m.wheel_now));
    } else {
      m.moves.push_back(Move{serial, due});
    }
    check(h.is_pending() && r.handle.is_pending(), "a timer just moved does not say pending", serial);
  }

  void op_deadline() {
    const std::uint8_t how = in_.u8();
    if (serials_.empty() || how % 8 == 7) {
      check_empty(tickwheel::Timer{});
      check_empty(last_failure_);
      return;
    }
    check_deadline(serials_[in_.u16() % serials_.size()], how >> 1);
  }

  // Timer::deadline() and remaining(), from any thread: the time of the due tick iff the timer is
  // pending between runs (a posted move counts once its shard applied it), and that less the
  // engine's clock, or zero.
  void check_deadline(std::uint32_t serial, unsigned how, const tickwheel::Timer* use = nullptr) {
    const Rec& r = recs_.at(serial);
    const tickwheel::Timer h = use != nullptr ? *use : handle(r, how);
    const std::optional<Nanos> when = h.deadline();
    const std::optional<Nanos> left = h.remaining();
    TICKWHEEL_FUZZ_TRACE("deadline #%u -> %lld", serial, when ? ll(when->count()) : -1LL);
    check(when.has_value() == movable(r),
          "deadline() has a value other than iff the timer is pending between runs", serial,
          when.has_value());
    if (!when) {
      check(!left, "remaining() has a value where deadline() has none", serial);
      return;
    }
    check(deadline_ok(r, when->count()), "deadline() is not the time of the tick the timer is due at",
          when->count(), ns_of(r.due));
    check(left && left->count() == std::max<std::int64_t>(when->count() - g_clock, 0),
          "remaining() is not deadline() less the engine's clock, or zero", serial);
  }

  // What a raw value names: no node (a handle must not come back), a node this engine handed out
  // (one must), or either (a garbled or random value).
  enum class Named : std::uint8_t { nothing, node, either };

  // Raw values: a recorded timer's, garbled, forged, 0, random; timer_from_raw() checked on each.
  void op_raw() {
    const std::uint8_t how = in_.u8();
    if (serials_.empty() || how % 8 == 0) {
      check(tickwheel::Timer{}.raw() == 0 && last_failure_.raw() == 0, "raw() of an empty handle is not 0");
      check_raw(0, Named::nothing);
      check_raw(~std::uint64_t{0}, Named::nothing);
      return;
    }
    const Rec& r = recs_.at(serials_[in_.u16() % serials_.size()]);
    const std::uint64_t raw = r.handle.raw();
    const tickwheel::Timer copy = r.handle;
    check(raw != 0 && copy.raw() == raw, "a good handle's raw() is 0, or not its copy's", lu(raw));
    constexpr std::uint64_t kLocator = 0xFFFF'FFFFULL;
    switch (how % 8) {
      case 1: check_raw(raw, Named::node); break;  // the timer it names, in whatever state it is now
      case 2: {                                    // another state of the same lifetime
        const std::uint64_t state = 1 + in_.u8() % 3U;
        check_raw(raw ^ (state << 32), Named::either);
        break;
      }
      case 3: {  // another lifetime of the node: the one it holds now, or none
        const std::uint64_t lives = std::uint64_t{4} * (1 + in_.u8() % 8U);
        check_raw((in_.u8() & 1) != 0 ? raw + (lives << 32) : raw - (lives << 32), Named::either);
        break;
      }
      case 4: {  // a locator in the last chunk, never numbered (it would take 2^32 nodes)
        const std::uint64_t node = in_.u16() & 0xFFFU;
        check_raw((raw & ~kLocator) | 0xFFFF'F000ULL | node, Named::nothing);
        break;
      }
      case 5: check_raw(in_.u64(), Named::either); break;
      case 6: {  // this generation with another timer's node
        const Rec& o = recs_.at(serials_[in_.u16() % serials_.size()]);
        check_raw((raw & ~kLocator) | (o.handle.raw() & kLocator), Named::either);
        break;
      }
      default: check_raw(raw & kLocator, Named::either); break;  // generation 0, no handle's
    }
  }

  // timer_from_raw(raw): a handle that answers as the timer the value names (pending() iff the model
  // has a timer pending with exactly that raw value), or an empty one; a handle that names no
  // pending timer cancels, moves and reads nothing.
  void check_raw(std::uint64_t raw, Named named) {
    tickwheel::Timer t = engine_->timer_from_raw(raw);
    std::uint32_t live = 0;  // the timer pending with that raw value, if any
    for (const auto& [serial, r] : recs_) {
      if (is_pending(r) && r.handle.raw() == raw) live = serial;
    }
    TICKWHEEL_FUZZ_TRACE("timer_from_raw(%llx) -> %d (names #%u)", static_cast<unsigned long long>(raw),
                         static_cast<bool>(t), live);
    if (!t) {
      check(named != Named::node && live == 0, "timer_from_raw() of a timer's raw value is empty", lu(raw));
      check(t.status() == Status::no_timer, "an empty handle from timer_from_raw() is not no_timer", lu(raw));
      check_empty(t);
      return;
    }
    check(named != Named::nothing, "timer_from_raw() of a value that names no node gave a handle", lu(raw));
    check(t.status() == Status::ok && t.raw() == raw && t.shard() < shards_,
          "timer_from_raw(): the handle's status, raw() or shard", lu(raw));
    check(t.is_pending() == (live != 0),
          "timer_from_raw(): pending() is not whether the value names a pending timer", lu(raw), live);
    if (live != 0) {
      check(t.shard() == recs_.at(live).shard, "timer_from_raw(): the shard is not the timer's", live);
      return;
    }
    check(!t.cancel() && !t.reschedule_after(Nanos(0)) && !t.is_pending(),
          "a stale or forged handle from timer_from_raw() cancelled or moved something", lu(raw));
    check(!t.deadline(), "deadline() of a stale or forged handle has a value", lu(raw));
  }

  // Engine::clear(s): the shard's own thread only, not from a walk of it. It settles the shard, then
  // cancels every timer pending between runs there, as many cancel()s would: it returns how many,
  // their callables die now and never run, and stats().cancelled then counts every cancel the shard
  // has met (exact outside a pass of it; inside one, the poll's own check bounds it).
  void clear_shard(std::size_t s) {
    TICKWHEEL_FUZZ_TRACE("clear(%zu)", s);
    if (s >= shards_) {
      check(throws<std::out_of_range>([&] { static_cast<void>(engine_->clear(s)); }),
            "clear() of a shard that does not exist did not throw out_of_range");
      return;
    }
    ShardModel& m = model_[s];
    if (!own_thread(s) || m.walking) {
      check(throws<std::logic_error>([&] { static_cast<void>(engine_->clear(s)); }),
            "clear() from a thread not the shard's, or from a walk of it, was not refused",
            static_cast<long long>(s));
      return;
    }
    const std::vector<std::uint32_t> cleared = clear_model(s);  // first: their callables die in clear()
    const std::size_t got = engine_->clear(s);
    TICKWHEEL_FUZZ_TRACE("  -> cleared %zu", got);
    check(got == cleared.size(), "clear() did not cancel exactly the shard's pending timers",
          static_cast<long long>(got), static_cast<long long>(cleared.size()));
    for (std::uint32_t serial : cleared) {
      const tickwheel::Timer& h = recs_.at(serial).handle;
      check(h.cancelled() && !h.is_pending() && alive_.count(serial) == 0,
            "a timer clear() cancelled does not say so, or its callable lives", serial);
    }
    publish(s);
    m.cancelled_in_poll = 0;  // every cancel posted to the shard is retired now
    if (pass_of(s) == nullptr) {
      const std::uint64_t c = engine_->stats().shards[s].cancelled;
      check(c == m.cancelled_reached, "after clear() stats().cancelled is not every cancel the shard has met",
            lu(c), lu(m.cancelled_reached));
      m.published_cancelled = c;
    }
  }

  // What a clear does to shard s, in the model, before the engine does it (the callables die in
  // it): settles the shard, then cancels every timer pending between runs there. Returns them.
  std::vector<std::uint32_t> clear_model(std::size_t s) {
    ShardModel& m = model_[s];
    settle(s);
    std::vector<std::uint32_t> cleared;
    for (const auto& [due, set] : m.linked) cleared.insert(cleared.end(), set.begin(), set.end());
    for (std::uint32_t serial : cleared) won_cancel(serial);
    ++m.clears;
    m.cleared += cleared.size();
    return cleared;
  }

  // Engine::post_clear(s) or post_clear_all() (bits 2-3 of `b` both set), from any thread: the
  // shard is `own` + b (or one that does not exist, as api_shard picks). False once stopped, with
  // nothing posted; else true, and the shard's next pass (or stop()) serves it (see poll(), op_stop()).
  // Before the first start there is nothing to clear and nothing is posted: the model learns
  // whether the engine started only while no schedule has succeeded, from next_deadline() ("now"
  // iff a clear waits), which is where it matters.
  void post_clear(std::uint8_t b, std::size_t own) {
    const bool all = (b & 0x0C) == 0x0C;
    const std::size_t s = (b & 0x70) == 0x70 ? shards_ + (b & 1) : (own + b) % shards_;
    TICKWHEEL_FUZZ_TRACE("post_clear%s(%zu)", all ? "_all" : "", all ? 0 : s);
    if (!all && s >= shards_) {
      check(throws<std::out_of_range>([&] { static_cast<void>(engine_->post_clear(s)); }),
            "post_clear() of a shard that does not exist did not throw out_of_range");
      return;
    }
    const bool posted = all ? engine_->post_clear_all() : engine_->post_clear(s);
    check(posted == !stopped_, "post_clear() was refused before stop(), or taken after it");
    if (stopped_) return;
    for (std::size_t t = 0; t < shards_; ++t) {
      if (!all && t != s) continue;
      if (schedules_ok_ == 0) {
        const std::optional<Nanos> nd = engine_->next_deadline(t);
        model_[t].clear_posted = nd.has_value() && nd->count() == g_clock;
      } else {
        model_[t].clear_posted = true;
      }
    }
  }

  // Engine::for_each_pending(s): threads and refusals as clear(). It settles the shard, then visits
  // each timer pending between runs there once, with its deadline. The visitor, as the input says,
  // only looks, or cancels or moves the timer it visits (posted, so the walk's lists stay as they
  // are), reads its deadline, tries what a walk refuses, or throws, which leaves the walk.
  void walk_shard(std::size_t s) {
    TICKWHEEL_FUZZ_TRACE("for_each_pending(%zu)", s);
    auto walk = [&](auto&& each) { return engine_->for_each_pending(s, each); };
    if (s >= shards_) {
      check(throws<std::out_of_range>([&] { static_cast<void>(walk([](tickwheel::Timer, Nanos) {})); }),
            "for_each_pending() of a shard that does not exist did not throw out_of_range");
      return;
    }
    ShardModel& m = model_[s];
    if (!own_thread(s) || m.walking) {
      check(throws<std::logic_error>([&] { static_cast<void>(walk([](tickwheel::Timer, Nanos) {})); }),
            "for_each_pending() from a thread not the shard's, or from a walk of it, was not refused",
            static_cast<long long>(s));
      return;
    }
    settle(s);
    std::map<std::uint64_t, std::uint32_t> pending;  // by raw value
    for (const auto& [due, set] : m.linked) {
      for (std::uint32_t serial : set) pending.emplace(recs_.at(serial).handle.raw(), serial);
    }
    const bool acts = (in_.u8() & 1) != 0;  // a byte per visit says what the visitor does, or none
    std::set<std::uint32_t> seen;
    std::size_t n = 0;
    bool threw = false;
    m.walking = true;
    try {
      n = walk([&](tickwheel::Timer t, Nanos deadline) {
        const auto it = pending.find(t.raw());
        check(it != pending.end(), "for_each_pending() visited a timer not pending on the shard",
              lu(t.raw()));
        const std::uint32_t serial = it->second;
        check(seen.insert(serial).second, "for_each_pending() visited a timer twice", serial);
        check(t && t.shard() == s && t.is_pending(), "a visited timer's handle is not a pending one", serial);
        check(deadline_ok(recs_.at(serial), deadline.count()),
              "for_each_pending() gave a deadline the model does not", deadline.count(),
              ns_of(recs_.at(serial).due));
        if (acts) visit(s, serial, t, deadline);
      });
    } catch (const Thrown&) {
      threw = true;
    }
    m.walking = false;
    TICKWHEEL_FUZZ_TRACE("  -> visited %zu of %zu%s", seen.size(), pending.size(),
                         threw ? ", then threw" : "");
    if (!threw) {
      check(n == seen.size() && seen.size() == pending.size(),
            "for_each_pending() did not visit every pending timer once", static_cast<long long>(n),
            static_cast<long long>(pending.size()));
    }
  }

  void visit(std::size_t s, std::uint32_t serial, const tickwheel::Timer& t, Nanos deadline) {
    const std::uint8_t what = in_.u8();
    switch (what % 8) {
      case 1: cancel(serial, 0, &t); break;
      case 2: reschedule(serial, what >> 4, &t); break;
      case 3: {
        const std::optional<Nanos> when = t.deadline();
        check(when && *when == deadline, "deadline() inside a walk is not what the walk gave", serial);
        break;
      }
      case 4: {
        const bool refused =
            throws<std::logic_error>([&] { static_cast<void>(engine_->clear(s)); }) &&
            throws<std::logic_error>(
                [&] { static_cast<void>(engine_->for_each_pending(s, [](tickwheel::Timer, Nanos) {})); }) &&
            throws<std::logic_error>([&] { static_cast<void>(engine_->poll(s)); });
        check(refused,
              "clear(), for_each_pending() or poll() of a shard from its walk's visitor was not refused");
        break;
      }
      case 5: throw Thrown{};
      case 6: post_clear(static_cast<std::uint8_t>(what & 0x0C), s); break;  // posted: the walk goes on
      default: break;
    }
  }

  // Engine::own_shard / release_shard, from the top level: the fuzz thread becomes a shard's owner
  // (its schedules without a shard go there, its schedules and cancels there go straight into the
  // wheel, and it may read and walk the shard), or lets it go.
  void op_own() {
    const std::uint8_t b = in_.u8();
    const std::size_t s = pick_shard(b);
    const bool release = (b & 0x08) != 0;
    TICKWHEEL_FUZZ_TRACE("%s(%zu)", release ? "release_shard" : "own_shard", s);
    auto call = [&] { release ? engine_->release_shard(s) : engine_->own_shard(s); };
    if (s >= shards_) {
      check(throws<std::out_of_range>(call), "own_shard() or release_shard() of a shard that does not exist");
      return;
    }
    if (release ? owner_ != s : stopped_ || (owner_ && *owner_ != s)) {
      check(throws<std::logic_error>(call),
            "release_shard() of a shard not owned, or own_shard() after stop() or of a second shard, was not "
            "refused",
            static_cast<long long>(s));
      return;
    }
    if (!release && owner_ != s) model_[s].loop_now = std::max(model_[s].loop_now, g_clock);
    call();
    owner_ = release ? std::nullopt : std::optional<std::size_t>(s);
  }

  // Engine::prepare_wait / finish_wait, from the top level: the fuzz thread, the polling thread of
  // every shard, announces that its loop sleeps (until `until`: none, before, at or after now), or
  // wakes. The loop wakes before it polls (poll()) or sleeps again, one wait at a time, as a real
  // loop does; meanwhile the thread goes on scheduling, as the loop's other threads would.
  void op_wait() {
    const std::uint8_t b = in_.u8();
    const std::size_t s = pick_shard(b);
    const bool finish = (b & 0x08) != 0;
    if (s >= shards_) {
      check(throws<std::out_of_range>(
                [&] { finish ? engine_->finish_wait(s) : (void)engine_->prepare_wait(s, {}); }),
            "prepare_wait() or finish_wait() of a shard that does not exist");
      return;
    }
    if (model_[s].plan) wake(s);
    if (finish) return;
    std::optional<std::int64_t> until;
    switch ((b >> 1) & 3) {
      case 0: break;
      case 1: until = sat_add(g_clock, -1 - sat_mul(in_.u8(), tick_ / 8)); break;
      case 2: until = g_clock; break;
      default: until = sat_add(g_clock, 1 + sat_mul(in_.u8(), tick_ / 8)); break;
    }
    sleep(s, until);
  }

  // The loop of shard s, awake, announces a sleep until `until` (none: until woken).
  void sleep(std::size_t s, std::optional<std::int64_t> until) {
    ShardModel& m = model_[s];
    // False while work waits that a sleep would leave (hand-offs, cancelled ones included, returned
    // nodes, posted moves, a posted clear), and once stopped.
    const bool expected =
        !stopped_ && m.queue.empty() && m.returned.empty() && m.moves.empty() && !m.clear_posted;
    const bool slept = engine_->prepare_wait(s, until ? std::optional<Nanos>(Nanos(*until)) : std::nullopt);
    TICKWHEEL_FUZZ_TRACE("prepare_wait(%zu, %lld) -> %d", s, until ? ll(*until) : -1LL, slept);
    check(slept == expected, "prepare_wait() did not sleep exactly when nothing waits", slept, expected);
    if (!slept) return;
    // Wakeup's plan: the time (a negative one is 0), or none; 0 is its "awake", so a plan of 0 is 1.
    m.plan = !until
                 ? ~std::uint64_t{0}
                 : std::max<std::uint64_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(*until, 0)), 1);
  }

  // Whether shard s's eventfd has a signal its loop has not read (finish_wait() reads it).
  bool readable(std::size_t s) const {
    pollfd p{.fd = engine_->wakeup_fd(s), .events = POLLIN, .revents = 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
  }

  // The loop's wait ends: from here its shard's loop time is the clock's (Shard::loop_now()).
  void wake(std::size_t s) {
    TICKWHEEL_FUZZ_TRACE("finish_wait(%zu)", s);
    engine_->finish_wait(s);
    model_[s].plan.reset();
    model_[s].loop_now = std::max(model_[s].loop_now, g_clock);
  }

  // A callback's use of the API of issue 17 (act(), case 3): inline, on its shard's own thread; on
  // the executor, on the owner's thread or another.
  void api_action(std::uint32_t serial, const Rec& r, std::uint8_t what) {
    switch ((what >> 4) & 7) {
      case 1:
      case 7:
        if (!serials_.empty()) {
          const std::uint8_t how = in_.u8();
          reschedule(serials_[in_.u16() % serials_.size()], how);
        }
        break;
      case 2: reschedule(serial, in_.u8()); break;  // itself: firing or running, so refused
      case 3: {
        const std::uint8_t how = in_.u8();
        check_deadline((how & 0x80) != 0 ? serial : serials_[in_.u16() % serials_.size()], how);
        break;
      }
      case 4: {
        const std::uint8_t b = in_.u8();
        if ((b & 0x80) != 0) {
          post_clear(b, r.shard);
        } else {
          clear_shard(api_shard(r.shard, b));
        }
        break;
      }
      case 5: walk_shard(api_shard(r.shard, in_.u8())); break;
      case 6: op_raw(); break;
      default: break;
    }
  }

  // A callback's own shard, another, or one that does not exist, as byte b says.
  std::size_t api_shard(std::size_t own, std::uint8_t b) const {
    return (b & 0x70) == 0x70 ? shards_ + (b & 1) : (own + b) % shards_;
  }

  // ---- callbacks ------------------------------------------------------------------------------

  void on_fire(std::uint32_t serial) {
    check(!destroying_, "~Engine ran a callback", serial);
    const auto it = recs_.find(serial);
    check(it != recs_.end(), "a callback of a timer never scheduled", serial);
    if (executor_) return on_task(serial, it->second);
    check(!polls_.empty(), "a callback ran outside poll()", serial);
    PollCtx& ctx = polls_.back();
    Rec& r = it->second;
    TICKWHEEL_FUZZ_TRACE("  #%u runs (due %lld, T %lld)", serial, lu(r.due), lu(ctx.T));
    check(r.where != Where::running, "a periodic timer's runs overlap", serial);
    check(!r.cancelled, "a cancelled timer ran", serial);
    check(r.where != Where::ended, "a timer ran twice", serial);
    check(r.where == Where::linked, "a timer ran before its hand-off was transferred", serial);
    check(r.shard == ctx.shard, "a timer ran in a poll of another shard", serial);
    check(r.due <= ctx.T, "early: a timer ran before its tick", lu(r.due), lu(ctx.T));
    check(!(r.linked_poll == ctx.id && r.linked_call == ctx.call && r.linked_late),
          "a timer linked during a pass at or before the tick being processed ran in the same advance() call",
          serial);
    check(ctx.ran < ctx.limit, "more callbacks than the poll's limit", static_cast<long long>(ctx.limit));
    ShardModel& m = model_[r.shard];
    unlink(serial, r);
    if (r.periodic && r.rule.skips(r.due, ctx.T)) {
      // At the horizon a drop re-arms at the last tick, which is not after now: the next advance()
      // call runs it. So this run is allowed only there, in a pass an earlier callback's throw split.
      check(ctx.call > 0 && r.rule.first_grid_point_after(r.due, ctx.T, max_tick_) <= ctx.T,
            "a Misfire::skip timer a whole period behind ran", serial);
      ++ctx.unseen_skips;
      r.floor = std::min(r.floor, r.due);
      r.due = max_tick_;
    }
    ++ctx.ran;
    ++m.fired;
    // The tick the pass stands at is at least this (a timer run from the due slot may be due later
    // than where the wheel stands: see Rec::floor).
    ctx.running_due = std::min(r.due, r.floor);
    r.where = Where::running;
    if (r.periodic) {
      ++m.rearmed;
    } else {
      r.fired = true;
      r.ran = true;
      r.ended_at = schedules_ok_;
      awaiting_death_.insert(serial);
    }
    check(!r.handle.cancelled() && r.handle.expired() != r.periodic,
          "inside its callback a timer's handle does not say expired (one-shot) or pending (periodic)",
          serial);
    const bool do_throw = act(serial, r);
    if (!r.periodic) {
      r.where = Where::ended;
    } else if (r.cancelled) {
      r.where = Where::ended;
      awaiting_death_.insert(serial);  // the re-arm, refused, destroys it
    } else {
      // Re-armed as its callback returns: at or before the pass's now it waits for the next call.
      // Fixed delay counts from the engine's clock as the callback returned (engine.hpp), as for a
      // task; not from the pass's now, which a long callback or poll(shard, now) leaves elsewhere.
      link(serial, r, r.rule.next_run(r.due, ctx.T, g_clock, tick_, max_tick_));
      r.linked_poll = ctx.id;
      r.linked_call = ctx.call;
      r.linked_late = true;
      if (r.due <= ctx.T) r.floor = ctx.running_due;
      TICKWHEEL_FUZZ_TRACE("  #%u re-armed for tick %lld", serial, lu(r.due));
    }
    if (do_throw) {
      // The shard counts it and calls the wheel again for the rest of its limit: a new advance().
      ++m.errors;
      ++ctx.call;
      throw Thrown{};
    }
  }

  // A callback run by Task::run: the timer was handed over (or may have been, see
  // settle_hand_overs), and its node goes back to its shard when the callback returns.
  void on_task(std::uint32_t serial, Rec& r) {
    TICKWHEEL_FUZZ_TRACE("  task of #%u runs", serial);
    check(quiet_ || (!task_polls_.empty() && task_polls_.back() == polls_.size()),
          "with an executor a callback ran outside a task", serial);
    const bool maybe = r.where == Where::linked && r.maybe_handed;
    check(r.where == Where::handed || maybe, "a task ran for a timer that was not handed over", serial);
    if (maybe) {
      hand_over(serial);
      ++maybe_ran_;
    }
    ShardModel& m = model_[r.shard];
    r.where = Where::in_task;
    if (!r.periodic) {
      r.ran = true;
      awaiting_death_.insert(serial);
    }
    check(!r.periodic || r.handle.cancelled() == r.cancelled,
          "inside its task a periodic timer's handle does not say whether it was cancelled", serial);
    check(r.handle.expired() != r.periodic, "inside its task a timer's handle says expired wrongly", serial);
    const bool do_throw = !quiet_ && act(serial, r);
    // Task::run reads the engine's clock when the callback returns (fixed delay counts from
    // there), then gives the node back: `executing` no longer counts it.
    r.ran_until = g_clock;
    r.where = r.periodic ? Where::returned : Where::ended;
    --m.executing;
    m.returned.push_back(serial);
    if (do_throw) {
      ++m.errors;
      throw Thrown{};
    }
  }

  // What a callback does, read from the back. Returns whether it then throws.
  bool act(std::uint32_t serial, const Rec& r) {
    Bytes::FromBack nested(in_);
    const std::uint8_t what = in_.u8();
    if (what != 0) TICKWHEEL_FUZZ_TRACE("  callback of #%u does %u", serial, what);
    switch (what % 8) {
      case 1: op_clock(); break;                   // a long callback: time passes while it runs
      case 2: op_tasks(); break;                   // the executor runs tasks from inside one
      case 3: api_action(serial, r, what); break;  // 0x03 and 0x0B: nothing
      case 4:
        if (!serials_.empty()) cancel(serials_[in_.u16() % serials_.size()]);
        break;
      case 5: {
        const std::uint8_t how = in_.u8();
        if ((how & 3) == 3) {
          op_schedule_every(how);
        } else {
          op_schedule(how);
        }
        break;
      }
      case 6: {
        const std::uint8_t how = in_.u8();
        // Another shard (when there is one) is polled in a nested pass; one being polled is refused.
        poll((r.shard + 1 + how) % shards_, std::nullopt, (how & 0x80) != 0 ? how & 3 : Engine::kNoLimit);
        break;
      }
      case 7: {
        bool threw = false;
        try {
          static_cast<void>(engine_->stop());
        } catch (const std::logic_error&) {
          threw = true;
        }
        check(threw, "stop() from a callback was not refused");
        break;
      }
      default: break;
    }
    // Its own cancel: false for a one-shot (it is firing), true for a periodic timer not cancelled.
    if ((what & 8) != 0) cancel(serial);
    return what >= 0xF0;
  }

  void born(std::uint32_t serial) { alive_.insert(serial); }
  void died(std::uint32_t serial) {
    check(alive_.erase(serial) == 1, "a callable was destroyed twice", serial);
    awaiting_death_.erase(serial);
    const auto it = recs_.find(serial);
    if (it == recs_.end()) return;  // a failed schedule's callable
    const Rec& r = it->second;
    if (expect_death_) {
      died_ = serial;
      return;
    }
    if (destroying_) return;
    if (stop_clearing_ && model_[r.shard].clear_posted) return;  // stop() serves a posted clear
    check(serial == cancelling_ || r.cancelled || r.ran, "the callable of a pending timer was destroyed",
          serial);
    check(r.where != Where::handed && r.where != Where::in_task && r.where != Where::running,
          "a callable was destroyed before or while its callback ran", serial);
  }

  void link(std::uint32_t serial, Rec& r, std::uint64_t due) {
    r.due = due;
    r.where = Where::linked;
    r.floor = kNoFloor;
    model_[r.shard].linked[due].insert(serial);
  }

  void unlink(std::uint32_t serial, const Rec& r) {
    if (r.where != Where::linked) return;
    auto& linked = model_[r.shard].linked;
    const auto g = linked.find(r.due);
    g->second.erase(serial);
    if (g->second.empty()) linked.erase(g);
  }

  // ---- invariants -----------------------------------------------------------------------------

  void check_invariants() {
    check(awaiting_death_.empty(), "a callable was not destroyed after its last run",
          awaiting_death_.empty() ? 0 : *awaiting_death_.begin());
    const EngineStats st = engine_->stats();
    std::uint64_t errors = 0, live = 0;
    for (std::size_t s = 0; s < shards_; ++s) {
      const ShardModel& m = model_[s];
      const ShardStats& ss = st.shards[s];
      // An owner's schedules, cancels and moves change its wheel at once, but its counters only as
      // the shard next publishes them.
      check(ss.scheduled == m.published_scheduled && ss.fired == m.fired &&
                ss.cancelled == m.published_cancelled && ss.rearmed == m.rearmed && ss.skipped == m.skipped &&
                ss.rescheduled == m.published_rescheduled,
            "a shard's published stats changed outside its passes", lu(ss.scheduled), lu(ss.cancelled));
      check(ss.pending == model_pending(s),
            "stats().pending is not the timers scheduled and neither claimed nor cancelled", lu(ss.pending),
            lu(model_pending(s)));
      check(ss.executing == m.executing, "stats().executing is not the tasks handed over and not run",
            lu(ss.executing), lu(m.executing));
      check(ss.passes == m.passes && ss.transfer_cap_hits == m.cap_hits && ss.callback_errors == m.errors,
            "passes, transfer_cap_hits or callback_errors", lu(ss.passes), lu(m.passes));
      check(ss.queue_depth == m.queue.size(), "queue_depth", lu(ss.queue_depth), lu(m.queue.size()));
      errors += m.errors;
      live += m.queue.size() + m.executing;
      for (const auto& [due, set] : m.linked) live += set.size();
      check_next_deadline(s);
    }
    check(st.callback_errors == errors, "total callback_errors");
    if (error_handler_) check(errors_reported_ == errors, "on_callback_error was not called once per throw");
    // Every pending timer's callable is alive (died() refuses the opposite); cancelled ones may
    // still be, until their shard meets them.
    check(alive_.size() >= live, "fewer callables alive than pending timers", lu(alive_.size()), lu(live));
    if (stopped_) check(alive_.size() == live, "after stop() a cancelled timer's callable is alive");
    if (!serials_.empty()) check_handle(serials_.back());
  }

  void check_next_deadline(std::size_t s) {
    const ShardModel& m = model_[s];
    const std::optional<Nanos> nd = engine_->next_deadline(s);
    if (stopped_) {
      check(!nd, "next_deadline() has a value after stop()", nd ? nd->count() : 0);
      return;
    }
    if (!m.queue.empty() || !m.returned.empty() || !m.moves.empty() || m.clear_posted) {
      check(nd && nd->count() == g_clock,
            "next_deadline() is not now while hand-offs, returned nodes, posted moves or a clear wait",
            nd ? nd->count() : -1);
      return;
    }
    // Cancelled timers the shard may not have met yet are still in its wheel.
    const bool maybe_more = m.cancelled_reached > m.published_cancelled;
    if (m.linked.empty()) {
      if (!maybe_more) check(!nd, "next_deadline() has a value with nothing linked", nd ? nd->count() : 0);
      return;
    }
    check(nd.has_value(), "next_deadline() is nullopt with timers linked");
    const std::int64_t earliest = sat_mul(static_cast<std::int64_t>(m.linked.begin()->first), tick_);
    check(nd->count() <= std::max(earliest, m.wheel_now), "next_deadline() is after the earliest due timer",
          nd->count(), earliest);
  }

  Bytes& in_;
  std::shared_ptr<QueueExecutor> executor_;  // null: callbacks run inline
  std::unique_ptr<Engine> engine_;
  std::size_t shards_ = 1;
  std::int64_t tick_ = 1;
  std::uint64_t max_tick_ = 0;
  std::size_t cap_ = 1;
  std::size_t max_pending_ = 0;
  bool error_handler_ = false;  // EngineOptions::on_callback_error is set
  std::uint64_t errors_reported_ = 0;

  std::vector<ShardModel> model_;
  std::map<std::uint32_t, Rec> recs_;  // every timer ever scheduled, by serial
  std::vector<std::uint32_t> serials_;
  std::vector<PollCtx> polls_;           // the polls in progress, innermost last
  std::vector<std::size_t> task_polls_;  // the tasks running, innermost last: polls_.size() at their start
  std::optional<std::size_t> home_;      // this thread's shard for schedule_after / schedule_at
  std::optional<std::size_t> owner_;     // the shard this thread owns (Engine::own_shard), if any
  tickwheel::Timer last_failure_;
  std::set<std::uint32_t> alive_;
  std::set<std::uint32_t> awaiting_death_;  // ended timers whose callable must die in this operation
  std::uint32_t next_serial_ = 1;
  std::uint64_t schedules_ok_ = 0;
  std::uint64_t polls_made_ = 0;
  std::size_t maybe_ran_ = 0;     // tasks of maybe_handed timers run (settle_hand_overs)
  bool quiet_ = false;            // callbacks take no action
  const bool no_nudge_;           // no post is a shard's 4096th: only a signal makes its eventfd readable
  std::vector<bool> signalled_;   // each shard's eventfd readable before the schedule in the due window
  bool due_window_ = false;       // inside a schedule that may take the due path: execute() may come
  std::uint64_t due_handed_ = 0;  // execute() calls in that window
  bool stopped_ = false;
  bool destroying_ = false;
  bool stop_clearing_ = false;    // inside stop(), which serves the clears posted and not served
  std::uint32_t cancelling_ = 0;  // the timer whose cancel() is in progress
  bool expect_death_ = false;     // a cancel after stop(): the callable that dies names the timer
  std::uint32_t died_ = 0;
};

}  // namespace
}  // namespace tickwheel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tickwheel::fuzz::Bytes in(data, size);
  tickwheel::fuzz::EngineRun(in, size).run();
  return 0;
}
