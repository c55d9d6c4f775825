// tests/fuzz/fuzz_engine.cpp — libFuzzer target: tickwheel::Engine in caller-driven mode
// (Threads::manual, one or two shards, a clock the target drives), single-threaded but for one
// helper described below, against a reference model of the contract in engine.hpp and executor.hpp.
//
// The input. The first bytes pick the options (shards, tick, transfer_cap, max_pending_per_shard,
// the clock's start, where callbacks run: inline, an InlineExecutor, or the target's own queueing
// executor; whether on_callback_error is set; now and then a raw set of options whose validation
// is checked instead). Then each front byte is one operation: schedule_after / schedule_at /
// schedule_on (a good shard or one past the last), schedule_every / schedule_every_on (good and
// bad periods, fixed rate and fixed delay, each Misfire policy, with and without an initial
// delay), Timer::cancel (of a pending, fired, running or cancelled timer, a default or a failed
// handle), moving the clock (small steps and big jumps; it never goes back), poll(shard) or
// poll(shard, now) with or without a limit (also of a shard that does not exist), running queued
// executor tasks (a few or all, oldest first or picked anywhere in the queue), a look at the
// handles, stop(). Bytes from the back decide what each callback does: nothing, move the clock (a
// long callback), run queued tasks, cancel any timer (itself included), schedule a one-shot or a
// periodic timer (on its own shard, which links directly, or through another shard's queue), poll
// the other shard (nested) or its own (refused, while it is being polled), stop() (refused), throw.
//
// The executor. It queues each Task and runs none until an operation (or a callback) says so, so a
// run is reproducible and tasks run late, out of order and nested. stop() waits for every task
// handed over, spinning on the calling thread, so the queue must run before or while it waits: an
// input byte picks either running it on the fuzz thread first (callbacks act as usual), or on a
// helper thread while stop() waits (callbacks take no action then, since what they saw would
// depend on how far stop() had got; the helper touches the model only inside callbacks, all of
// which finish before stop() can return).
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
  explicit EngineRun(Bytes& in) : in_(in) {}

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
        case 5:
        case 6: op_cancel(); break;
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

  // The executor: it queues each task and runs none until the input says so.
  class QueueExecutor final : public Executor {
   public:
    explicit QueueExecutor(EngineRun* run) noexcept : run_(run) {}
    void execute(Task task) noexcept override {
      check(static_cast<bool>(task), "execute() was given an empty task");
      check(!run_->polls_.empty(), "execute() was called outside poll()");
      tasks.push_back(task);
      ++handed;
    }

    std::deque<Task> tasks;
    std::uint64_t handed = 0;  // execute() calls so far

   private:
    EngineRun* run_;
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

  struct ShardModel {
    std::deque<std::uint32_t> queue;                          // hand-offs, oldest first
    std::map<std::uint64_t, std::set<std::uint32_t>> linked;  // live timers in the wheel, by due
    std::vector<std::uint32_t> returned;                      // nodes back from the executor
    std::int64_t wheel_now = 0;                               // the latest now a poll gave it
    std::uint64_t scheduled = 0;                              // timers that reached the wheel
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
    bool polling = false;
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
        executor_ = std::make_shared<QueueExecutor>(this);
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
    for (ShardModel& m : model_) m.wheel_now = g_clock;
    check(engine_->shard_count() == shards_ && engine_->tick().count() == tick_, "shard_count() or tick()");
    TICKWHEEL_FUZZ_TRACE("engine: %zu shards, tick %lld ns, cap %zu, max_pending %zu, clock %lld, %s",
                         shards_, ll(tick_), cap_, max_pending_, ll(g_clock),
                         executor_ ? "queueing executor" : "inline");
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
    std::size_t asked = Engine::any_shard;
    if (kind == 2) asked = in_.u8() % shards_;
    if (kind == 3) asked = shards_ + in_.u8() % 2;
    // The deadline, as the engine computes it: now on its clock plus the delay, or absolute.
    const bool absolute = kind == 1;
    const std::int64_t deadline = absolute ? d : sat_add(g_clock, d);
    const Expect e = expect(asked);
    tickwheel::Timer t;
    {
      Fire fn(this, serial);
      switch (kind) {
        case 0: t = engine_->schedule_after(Nanos(d), std::move(fn)); break;
        case 1: {
          const std::chrono::steady_clock::time_point at{
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(Nanos(d))};
          t = engine_->schedule_at(at, std::move(fn));
          break;
        }
        default: t = engine_->schedule_on(asked, Nanos(d), std::move(fn)); break;
      }
    }
    TICKWHEEL_FUZZ_TRACE("schedule #%u (kind %u, shard %lld, deadline %lld) -> %s, shard %zu", serial, kind,
                         asked == Engine::any_shard ? -1LL : static_cast<long long>(asked), ll(deadline),
                         std::string(to_string(t.status())).c_str(), t.shard());
    if (kind == 3) return no_such_shard(t, e);
    record(t, serial, e, Rec{}, deadline);
  }

  void op_schedule_every(std::uint8_t op) {
    const unsigned kind = (op >> 4) % 4;  // 0 and 1: any shard; 2: a given one; 3: one past the last
    const PeriodicCall call = PeriodicCall::decode(in_, tick_, [this] { return delay(); });
    const std::int64_t p = call.period_ns;
    const PeriodicOptions& opts = call.options;
    std::size_t asked = Engine::any_shard;
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
        asked == Engine::any_shard ? -1LL : static_cast<long long>(asked),
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
    record(t, serial, e, rec, sat_add(g_clock, first));
  }

  Expect expect(std::size_t asked) {
    Expect e;
    // Which shard: one asked for, else a callback's own (inline), else the thread's home shard.
    if (asked != Engine::any_shard) {
      e.target = asked;
    } else if (!polls_.empty()) {
      e.target = polls_.back().shard;
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
  // on its own shard, else queued for the shard's next transfer.
  void record(const tickwheel::Timer& t, std::uint32_t serial, const Expect& e, Rec rec,
              std::int64_t deadline) {
    const std::uint64_t rejected_now = engine_->stats().rejected;
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
    check(!t.cancelled() && !t.expired(), "a new timer's handle says cancelled or expired");
    Rec& r = recs_.emplace(serial, rec).first->second;
    serials_.push_back(serial);
    // A callback's schedule on its own shard is linked at once; any other goes through the queue.
    if (!polls_.empty() && polls_.back().shard == s) {
      const PollCtx& ctx = polls_.back();
      r.linked_poll = ctx.id;
      r.linked_call = ctx.call;
      r.linked_late = r.due <= ctx.running_due;
      ++model_[s].scheduled;
      link(serial, r, r.due);
    } else {
      model_[s].queue.push_back(serial);
    }
  }

  void failed(const tickwheel::Timer& t) {
    check(!t && !t.cancelled() && !t.expired() && t.shard() == 0, "a failed handle is not an empty one");
    tickwheel::Timer copy = t;
    check(!copy.cancel(), "cancel() of a failed handle returned true");
    last_failure_ = t;
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
    cancel(serials_[in_.u16() % serials_.size()]);
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
  // timer cancels wherever it is, and no run starts after that.
  void cancel(std::uint32_t serial) {
    Rec& r = recs_.at(serial);
    const bool expected = is_pending(r);
    cancelling_ = serial;
    const bool got = r.handle.cancel();
    cancelling_ = 0;
    TICKWHEEL_FUZZ_TRACE("cancel #%u -> %d", serial, got);
    check(got == expected, "cancel() returned what the model does not", got, expected);
    if (!got) return;
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
    check(r.handle.cancelled() && !r.handle.expired(), "a handle just cancelled does not say so");
    if (stopped_) {
      // After stop() a cancel retires the timer at once: its callable is gone, and it is counted.
      check(alive_.count(serial) == 0, "cancel() after stop() did not destroy the callable", serial);
      ++m.published_cancelled;
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
    PollCtx ctx{.shard = shard, .T = tick_of(m.wheel_now), .limit = limit, .id = ++polls_made_};
    ++m.passes;
    m.cancelled_in_poll = 0;  // the pass drains the cancels posted before it
    take_back(shard, last_T);
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
    const ShardStats st = engine_->stats().shards[shard];
    check(st.scheduled == m.scheduled, "stats().scheduled after a poll", lu(st.scheduled), lu(m.scheduled));
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
    std::vector<tickwheel::Timer> left = engine_->stop();
    if (helper.joinable()) {
      helper.join();
      quiet_ = false;
    }
    stopped_ = true;
    for (std::size_t s = 0; s < shards_; ++s) {
      take_back(s, tick_of(model_[s].wheel_now));
      check(model_[s].executing == 0, "stop() returned with tasks not run", static_cast<long long>(s));
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
      scheduled += m.scheduled;
      const ShardStats& ss = st.shards[s];
      check(returned[s] == expected[s], "stop() returned a shard's pending timers short or over",
            lu(returned[s]), lu(expected[s]));
      check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.cancelled_total &&
                ss.rearmed == m.rearmed && ss.skipped == m.skipped && ss.pending == returned[s],
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
      case 1: op_clock(); break;  // a long callback: time passes while it runs
      case 2: op_tasks(); break;  // the executor runs tasks from inside one
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
      check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.published_cancelled &&
                ss.rearmed == m.rearmed && ss.skipped == m.skipped,
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
    if (!m.queue.empty() || !m.returned.empty()) {
      check(nd && nd->count() == g_clock, "next_deadline() is not now while hand-offs or returned nodes wait",
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
  tickwheel::Timer last_failure_;
  std::set<std::uint32_t> alive_;
  std::set<std::uint32_t> awaiting_death_;  // ended timers whose callable must die in this operation
  std::uint32_t next_serial_ = 1;
  std::uint64_t schedules_ok_ = 0;
  std::uint64_t polls_made_ = 0;
  std::size_t maybe_ran_ = 0;  // tasks of maybe_handed timers run (settle_hand_overs)
  bool quiet_ = false;         // callbacks take no action
  bool stopped_ = false;
  bool destroying_ = false;
  std::uint32_t cancelling_ = 0;  // the timer whose cancel() is in progress
  bool expect_death_ = false;     // a cancel after stop(): the callable that dies names the timer
  std::uint32_t died_ = 0;
};

}  // namespace
}  // namespace tickwheel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tickwheel::fuzz::Bytes in(data, size);
  tickwheel::fuzz::EngineRun(in).run();
  return 0;
}
