// tests/fuzz/fuzz_engine.cpp — libFuzzer target: tickwheel::Engine in caller-driven mode
// (Threads::manual, one or two shards, a clock the target drives), single-threaded, against a
// reference model of the contract in engine.hpp.
//
// The input. The first bytes pick the options (shards, tick, transfer_cap, max_pending_per_shard,
// the clock's start; now and then a raw set of options whose validation is checked instead). Then
// each front byte is one operation: schedule_after / schedule_at / schedule_on (a good shard or
// one past the last), Timer::cancel (of a pending, fired or cancelled timer, a default or a failed
// handle), moving the clock (small steps and big jumps; it never goes back), poll(shard) or
// poll(shard, now) with or without a limit (also of a shard that does not exist), a look at the
// handles, stop(). Bytes from the back decide what each callback does: nothing, cancel any timer
// (itself included), schedule (on its own shard, which links directly, or through another shard's
// queue), poll the other shard (nested) or its own (refused), stop() (refused), throw.
//
// The model. Each shard has a FIFO hand-off queue (one producer thread here, so moodycamel's
// per-producer order holds) and a set of timers linked in its wheel, each due at its deadline
// rounded up to the tick. A poll moves min(transfer_cap, queued) hand-offs into the wheel (a
// cancelled one is counted as cancelled there), then runs callbacks. The model checks each
// callback: its timer is linked on the shard being polled, was neither cancelled nor run, is due
// by the poll's now, and the poll has not reached its limit; and one a callback linked directly
// at or before the tick of the timer running then does not run in that same advance() call.
// After a poll that ran fewer than its limit, every timer linked before the poll and due by its
// now has run. stop() must return exactly the timers neither run nor cancelled (hand-offs still
// queued included), and then scheduled == fired + cancelled + returned, in total and per shard.
//
// Weaker spots, and why:
//   - Order among due timers is not checked here; the wheel target checks it in full, and a poll
//     is a wheel advance().
//   - A Timer::cancel() is counted in ShardStats::cancelled when the shard next meets it: at its
//     next poll's drain, or when the hand-off is transferred, or when the pass reaches the timer
//     first. The last case depends on where a pass stands inside a callback, so for a timer
//     cancelled while its shard is being polled the count is checked within bounds, and exactly
//     once stop() has drained everything.
//   - next_deadline() is checked against bounds: now while hand-offs wait; a value no later than
//     the earliest due timer (or the wheel's now, if that is later) while timers are linked;
//     nullopt when nothing can be linked. A cancelled timer stays in the wheel until its shard
//     retires it, and the answer is a lower bound for timers past level 0.
//   - Timer::cancelled() / expired() are exact only until the node is reused by a later schedule
//     (engine.hpp says so): checked exactly before any later schedule, as implications after.
//   - Which shard a thread's first schedule_after lands on is not documented (round robin from
//     somewhere): learned from the first one that succeeds, then held to.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fuzz_support.hpp"
#include "tickwheel/engine.hpp"
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
        case 14: op_handles(); break;
        case 15:
          if ((op & 0x30) == 0x30) {
            op_stop();
          } else {
            op_handles();
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
  // The callable every timer carries. It holds one entry of alive_ from its creation to its
  // destruction, handed on by the move constructor, so the model sees when the engine destroys a
  // callable, and a second destruction.
  class Fire {
   public:
    Fire(EngineRun* run, std::uint32_t serial) noexcept : run_(run), serial_(serial), owner_(true) {
      run_->alive_.insert(serial_);
    }
    Fire(Fire&& o) noexcept : run_(o.run_), serial_(o.serial_), owner_(std::exchange(o.owner_, false)) {}
    Fire(const Fire&) = delete;
    Fire& operator=(const Fire&) = delete;
    Fire& operator=(Fire&&) = delete;
    ~Fire() {
      if (owner_) run_->died(serial_);
    }
    void operator()() { run_->on_fire(serial_); }

   private:
    EngineRun* run_;
    std::uint32_t serial_;
    bool owner_;
  };

  enum class State : std::uint8_t { queued, linked, fired, cancelled };

  struct Rec {
    tickwheel::Timer handle;
    std::size_t shard = 0;
    std::uint64_t due = 0;
    State state = State::queued;
    std::uint64_t ended_at = 0;     // schedules that had succeeded when it fired or was cancelled
    std::uint64_t direct_poll = 0;  // the poll whose callback linked it directly (0: handed over)
    std::uint32_t direct_call = 0;  // ... in which advance() call of that poll
    bool direct_late = false;       // ... at or before the tick of the timer running then
  };

  struct ShardModel {
    std::deque<std::uint32_t> queue;                          // hand-offs, oldest first
    std::map<std::uint64_t, std::set<std::uint32_t>> linked;  // live timers in the wheel, by due
    std::int64_t wheel_now = 0;                               // the latest now a poll gave it
    std::uint64_t scheduled = 0;                              // timers that reached the wheel
    std::uint64_t fired = 0;
    std::uint64_t cancelled_reached = 0;    // cancelled timers that reached the wheel
    std::uint64_t cancelled_in_poll = 0;    // of those, cancelled while this shard was being polled,
                                            // since its last poll began
    std::uint64_t cancelled_total = 0;      // cancelled timers of this shard, reached or not
    std::uint64_t published_cancelled = 0;  // ShardStats::cancelled as last read after a poll
    std::uint64_t passes = 0, cap_hits = 0, errors = 0;
    std::uint64_t admitted = 0;  // schedules admitted under max_pending_per_shard
    bool polling = false;
  };

  // A poll in progress (polls nest: a callback may poll the other shard).
  struct PollCtx {
    std::size_t shard;
    std::uint64_t T;  // the tick of the poll's now
    std::size_t limit;
    std::size_t ran = 0;
    std::uint64_t id;
    std::uint32_t call = 0;         // advance() calls so far in this poll: one more per throw
    std::uint64_t running_due = 0;  // due tick of the callback running now
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
    switch (in_.u8() % 4) {
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
    engine_ = std::make_unique<Engine>(std::move(opts));
    model_.assign(shards_, ShardModel{});
    polls_.reserve(2 * shards_ + 1);  // polls nest at most once per shard: references stay valid
    for (ShardModel& m : model_) m.wheel_now = g_clock;
    check(engine_->shard_count() == shards_ && engine_->tick().count() == tick_, "shard_count() or tick()");
    TICKWHEEL_FUZZ_TRACE("engine: %zu shards, tick %lld ns, cap %zu, max_pending %zu, clock %lld", shards_,
                         ll(tick_), cap_, max_pending_, ll(g_clock));
  }

  // A raw set of options: the constructor must throw std::invalid_argument exactly when one is
  // outside its documented range. (Threads::workers without a clock would be valid; it is not
  // built here, since its workers would start threads.)
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
        opts.threads = Threads::workers;
        valid = false;
        break;  // an own clock needs manual
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
    // Which shard: one asked for, else a callback's own, else the thread's home shard.
    std::optional<std::size_t> target;
    if (asked != Engine::any_shard) {
      target = asked;
    } else if (!polls_.empty()) {
      target = polls_.back().shard;
    } else if (home_) {
      target = home_;
    }
    // Admission under max_pending_per_shard, as the shard sees it: admitted minus what it last
    // published as fired or cancelled.
    std::vector<bool> admits(shards_, true);
    if (max_pending_ != 0) {
      const EngineStats st = engine_->stats();
      for (std::size_t s = 0; s < shards_; ++s) {
        const std::uint64_t done = st.shards[s].fired + st.shards[s].cancelled;
        const std::uint64_t a = model_[s].admitted;
        admits[s] = a - std::min(a, done) < max_pending_;
      }
    }
    const std::uint64_t rejected_before = engine_->stats().rejected;
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
    const std::uint64_t rejected_now = engine_->stats().rejected;
    if (kind == 3) {
      check(!t && t.status() == Status::no_such_shard,
            "schedule_on a shard past the last did not fail with no_such_shard");
      check(rejected_now == rejected_before, "no_such_shard was counted as rejected");
      return failed(t);
    }
    if (stopped_) {
      check(!t && t.status() == Status::stopped, "a schedule after stop() did not fail with stopped");
      check(rejected_now == rejected_before + 1,
            "a schedule refused after stop() was not counted as rejected");
      return failed(t);
    }
    if (!t) {
      check(t.status() == Status::max_pending_reached, "a schedule failed",
            static_cast<long long>(t.status()));
      check(max_pending_ != 0 && (target ? !admits[*target] : (!admits[0] || !admits[shards_ - 1])),
            "a schedule was refused with max_pending_reached below the limit");
      check(rejected_now == rejected_before + 1, "a refused schedule was not counted as rejected");
      return failed(t);
    }
    check(t.status() == Status::ok, "a good handle's status is not ok");
    check(rejected_now == rejected_before, "a schedule that succeeded was counted as rejected");
    const std::size_t s = t.shard();
    check(s < shards_, "a timer on a shard that does not exist", static_cast<long long>(s));
    if (target) {
      check(s == *target, "a timer landed on another shard than the one due", static_cast<long long>(s),
            static_cast<long long>(*target));
    } else {
      home_ = s;  // the thread's first schedule outside a callback: its home shard from now on
    }
    check(admits[s], "a schedule was admitted past max_pending_per_shard", static_cast<long long>(s));
    if (max_pending_ != 0) ++model_[s].admitted;
    ++schedules_ok_;
    Rec rec;
    rec.handle = t;
    rec.shard = s;
    rec.due = due_tick(deadline, tick_);
    // A callback's schedule on its own shard is linked at once; any other goes through the queue.
    if (!polls_.empty() && polls_.back().shard == s) {
      const PollCtx& ctx = polls_.back();
      rec.state = State::linked;
      rec.direct_poll = ctx.id;
      rec.direct_call = ctx.call;
      rec.direct_late = rec.due <= ctx.running_due;
      ++model_[s].scheduled;
      model_[s].linked[rec.due].insert(serial);
    } else {
      model_[s].queue.push_back(serial);
    }
    recs_.emplace(serial, rec);
    serials_.push_back(serial);
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

  void cancel(std::uint32_t serial) {
    Rec& r = recs_.at(serial);
    const bool expected = r.state == State::queued || r.state == State::linked;
    cancelling_ = serial;
    const bool got = r.handle.cancel();
    cancelling_ = 0;
    TICKWHEEL_FUZZ_TRACE("cancel #%u -> %d", serial, got);
    check(got == expected, "cancel() returned what the model does not", got, expected);
    if (!got) return;
    ShardModel& m = model_[r.shard];
    ++m.cancelled_total;
    if (r.state == State::linked) {
      ++m.cancelled_reached;
      if (m.polling) ++m.cancelled_in_poll;
      unlink(serial, r);
    }
    r.state = State::cancelled;
    r.ended_at = schedules_ok_;
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
    const std::int64_t given = now ? *now : g_clock;
    m.wheel_now = std::max(m.wheel_now, given);
    PollCtx ctx{
        .shard = shard,
        .T = std::min(static_cast<std::uint64_t>(m.wheel_now) / static_cast<std::uint64_t>(tick_), max_tick_),
        .limit = limit,
        .id = ++polls_made_};
    ++m.passes;
    m.cancelled_in_poll = 0;  // the pass drains the cancels posted before it
    // The transfer: the oldest hand-offs first, at most transfer_cap of them.
    std::size_t moved = 0;
    while (moved < cap_ && !m.queue.empty()) {
      const std::uint32_t serial = m.queue.front();
      m.queue.pop_front();
      ++moved;
      ++m.scheduled;
      Rec& r = recs_.at(serial);
      if (r.state == State::cancelled) {
        ++m.cancelled_reached;
      } else {
        r.state = State::linked;
        m.linked[r.due].insert(serial);
      }
    }
    if (moved == cap_ && !m.queue.empty()) ++m.cap_hits;
    polls_.push_back(ctx);
    m.polling = true;
    const std::size_t got = now ? engine_->poll(shard, Nanos(*now), limit) : engine_->poll(shard, limit);
    m.polling = false;
    ctx = polls_.back();
    polls_.pop_back();
    TICKWHEEL_FUZZ_TRACE("  -> ran %zu", got);
    check(got == ctx.ran, "poll() returned a count other than the callbacks run", static_cast<long long>(got),
          static_cast<long long>(ctx.ran));
    if (ctx.ran < limit) {
      // Below its limit the poll ran everything due that was linked before it began.
      for (auto it = m.linked.begin(); it != m.linked.end() && it->first <= ctx.T; ++it) {
        for (std::uint32_t serial : it->second) {
          check(recs_.at(serial).direct_poll == ctx.id,
                "poll() stopped below its limit but left a due timer unrun", serial, lu(it->first));
        }
      }
    }
    const ShardStats st = engine_->stats().shards[shard];
    check(st.scheduled == m.scheduled, "stats().scheduled after a poll", lu(st.scheduled), lu(m.scheduled));
    check(st.fired == m.fired, "stats().fired after a poll", lu(st.fired), lu(m.fired));
    check(st.cancelled <= m.cancelled_reached && st.cancelled + m.cancelled_in_poll >= m.cancelled_reached,
          "stats().cancelled after a poll is outside what the shard can have met", lu(st.cancelled),
          lu(m.cancelled_reached));
    m.published_cancelled = st.cancelled;
  }

  void op_stop() {
    TICKWHEEL_FUZZ_TRACE("stop()");
    if (stopped_) {
      check(engine_->stop().empty(), "a second stop() returned timers");
      return;
    }
    std::vector<tickwheel::Timer> left = engine_->stop();
    stopped_ = true;
    // What stop() must return: every timer neither run nor cancelled, queued ones included.
    std::vector<std::size_t> expected(shards_, 0);
    std::uint64_t pending = 0;
    for (auto& [serial, r] : recs_) {
      if (r.state != State::queued && r.state != State::linked) continue;
      ++expected[r.shard];
      ++pending;
      if (r.state == State::queued) {
        r.state = State::linked;
        model_[r.shard].linked[r.due].insert(serial);
      }
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
      check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.cancelled_total,
            "a shard's stats after stop() are not its whole history", lu(ss.scheduled), lu(ss.cancelled));
      check(ss.scheduled == ss.fired + ss.cancelled + returned[s],
            "scheduled != fired + cancelled + returned, per shard");
    }
    check(st.scheduled == scheduled && st.scheduled == st.fired + st.cancelled + left.size(),
          "scheduled != fired + cancelled + returned by stop()", lu(st.scheduled),
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
    check(r.state == State::linked && r.shard == t.shard(),
          "stop() returned a timer that was not pending on its shard", died_);
    ShardModel& m = model_[r.shard];
    ++m.cancelled_total;
    ++m.cancelled_reached;
    ++m.published_cancelled;
    unlink(died_, r);
    r.state = State::cancelled;
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
    switch (r.state) {
      case State::queued:
      case State::linked:
        check(!h.cancelled() && !h.expired(), "a pending timer's handle says cancelled or expired", serial);
        break;
      case State::fired:
        check(!h.cancelled() && (h.expired() || !fresh), "a fired timer's handle", serial);
        break;
      case State::cancelled:
        check(!h.expired() && (h.cancelled() || !fresh), "a cancelled timer's handle", serial);
        break;
    }
  }

  // ---- callbacks ------------------------------------------------------------------------------

  void on_fire(std::uint32_t serial) {
    check(!destroying_, "~Engine ran a callback", serial);
    check(!polls_.empty(), "a callback ran outside poll()", serial);
    PollCtx& ctx = polls_.back();
    const auto it = recs_.find(serial);
    check(it != recs_.end(), "a callback of a timer never scheduled", serial);
    Rec& r = it->second;
    TICKWHEEL_FUZZ_TRACE("  #%u runs (due %lld, T %lld)", serial, lu(r.due), lu(ctx.T));
    check(r.state != State::fired, "a timer ran twice", serial);
    check(r.state != State::cancelled, "a cancelled timer ran", serial);
    check(r.state == State::linked, "a timer ran before its hand-off was transferred", serial);
    check(r.shard == ctx.shard, "a timer ran in a poll of another shard", serial);
    check(r.due <= ctx.T, "early: a timer ran before its tick", lu(r.due), lu(ctx.T));
    check(!(r.direct_poll == ctx.id && r.direct_call == ctx.call && r.direct_late),
          "a timer a callback linked at or before the tick being processed ran in the same advance() call",
          serial);
    check(ctx.ran < ctx.limit, "more callbacks than the poll's limit", static_cast<long long>(ctx.limit));
    ++ctx.ran;
    ShardModel& m = model_[r.shard];
    ++m.fired;
    unlink(serial, r);
    r.state = State::fired;
    r.ended_at = schedules_ok_;
    ctx.running_due = r.due;
    awaiting_death_.insert(serial);
    check(r.handle.expired() && !r.handle.cancelled(),
          "inside its callback a timer's handle does not say expired");
    bool do_throw = false;
    {
      Bytes::FromBack nested(in_);
      const std::uint8_t what = in_.u8();
      if (what != 0) TICKWHEEL_FUZZ_TRACE("  callback of #%u does %u", serial, what);
      switch (what % 8) {
        case 4:
          if (!serials_.empty()) cancel(serials_[in_.u16() % serials_.size()]);
          break;
        case 5: op_schedule(in_.u8()); break;
        case 6: {
          const std::uint8_t how = in_.u8();
          // Another shard (when there is one) is polled in a nested pass; this one is refused.
          poll((ctx.shard + 1 + how) % shards_, std::nullopt, (how & 0x80) != 0 ? how & 3 : Engine::kNoLimit);
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
      if ((what & 8) != 0) check(!r.handle.cancel(), "a running timer's own cancel() returned true");
      do_throw = what >= 0xF0;
    }
    if (do_throw) {
      // The shard counts it and calls the wheel again for the rest of its limit: a new advance().
      ++m.errors;
      ++polls_.back().call;
      throw Thrown{};
    }
  }

  void died(std::uint32_t serial) {
    check(alive_.erase(serial) == 1, "a callable was destroyed twice", serial);
    awaiting_death_.erase(serial);
    const auto it = recs_.find(serial);
    if (it == recs_.end()) return;  // a failed schedule's callable
    const State s = it->second.state;
    if (expect_death_) {
      died_ = serial;
      return;
    }
    check(destroying_ || serial == cancelling_ || s == State::fired || s == State::cancelled,
          "the callable of a pending timer was destroyed", serial);
  }

  void unlink(std::uint32_t serial, const Rec& r) {
    if (r.state != State::linked) return;
    auto& linked = model_[r.shard].linked;
    const auto g = linked.find(r.due);
    g->second.erase(serial);
    if (g->second.empty()) linked.erase(g);
  }

  // ---- invariants -----------------------------------------------------------------------------

  void check_invariants() {
    check(awaiting_death_.empty(), "a fired timer's callable was not destroyed after its run",
          awaiting_death_.empty() ? 0 : *awaiting_death_.begin());
    const EngineStats st = engine_->stats();
    std::uint64_t errors = 0, pending = 0;
    for (std::size_t s = 0; s < shards_; ++s) {
      const ShardModel& m = model_[s];
      const ShardStats& ss = st.shards[s];
      check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.published_cancelled,
            "a shard's published stats changed outside its passes", lu(ss.scheduled), lu(ss.cancelled));
      check(ss.scheduled + ss.rearmed == ss.fired + ss.skipped + ss.cancelled + ss.pending &&
                ss.rearmed == 0 && ss.skipped == 0,
            "scheduled + rearmed != fired + skipped + cancelled + pending (no periodic timers here)");
      check(ss.passes == m.passes && ss.transfer_cap_hits == m.cap_hits && ss.callback_errors == m.errors,
            "passes, transfer_cap_hits or callback_errors", lu(ss.passes), lu(m.passes));
      check(ss.queue_depth == m.queue.size(), "queue_depth", lu(ss.queue_depth), lu(m.queue.size()));
      errors += m.errors;
      std::size_t live = m.queue.size();
      for (const auto& [due, set] : m.linked) live += set.size();
      pending += live;
      check_next_deadline(s);
    }
    check(st.callback_errors == errors, "total callback_errors");
    // Every pending timer's callable is alive (died() refuses the opposite); cancelled ones may
    // still be, until their shard meets them.
    check(alive_.size() >= pending, "fewer callables alive than pending timers", lu(alive_.size()),
          lu(pending));
    if (stopped_) check(alive_.size() == pending, "after stop() a cancelled timer's callable is alive");
    if (!serials_.empty()) check_handle(serials_.back());
  }

  void check_next_deadline(std::size_t s) {
    const ShardModel& m = model_[s];
    const std::optional<Nanos> nd = engine_->next_deadline(s);
    if (!m.queue.empty()) {
      check(nd && nd->count() == g_clock, "next_deadline() is not now while hand-offs wait",
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
  std::unique_ptr<Engine> engine_;
  std::size_t shards_ = 1;
  std::int64_t tick_ = 1;
  std::uint64_t max_tick_ = 0;
  std::size_t cap_ = 1;
  std::size_t max_pending_ = 0;

  std::vector<ShardModel> model_;
  std::map<std::uint32_t, Rec> recs_;  // every timer ever scheduled, by serial
  std::vector<std::uint32_t> serials_;
  std::vector<PollCtx> polls_;       // the polls in progress, innermost last
  std::optional<std::size_t> home_;  // this thread's shard for schedule_after / schedule_at
  tickwheel::Timer last_failure_;
  std::set<std::uint32_t> alive_;
  std::set<std::uint32_t> awaiting_death_;  // fired, callable not yet destroyed
  std::uint32_t next_serial_ = 1;
  std::uint64_t schedules_ok_ = 0;
  std::uint64_t polls_made_ = 0;
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
