// tests/fuzz/fuzz_wheel.cpp — libFuzzer target: tickwheel::Wheel, operation by operation, against
// a plain reference model of the contract in wheel.hpp.
//
// The input. The first bytes pick the options (tick, start, max_pending; now and then a raw set of
// options whose validation is checked instead). Then each front byte is one operation: a one-shot
// schedule (after / at, with a delay from zero and negative to level boundaries, the horizon and
// past it), a periodic schedule (every cadence and misfire policy, good and bad periods, with and
// without an initial delay), either now and then with a null function pointer, a cancel (of a
// live, fired, cancelled, default, failed, neighbouring-generation or random id), a reschedule of
// such an id (near its deadline or anywhere), the queries of one, a walk of every pending timer, a
// clear() (these four between advance() calls only), an advance
// (small steps, jumps through the upper levels, time going back, to next_deadline(), to the end
// of time; with or without an expiry limit) or a look at the TimerId API. Bytes taken from the
// back decide what each callback does: nothing, cancel a timer (itself included), schedule a
// one-shot or periodic timer, try a nested advance(), throw.
//
// The model. Time is the integer tick. The model keeps every pending timer where the contract
// says the wheel holds it:
//   - `wheel`: due at tick `due`, which is after the tick the wheel was processing when it was
//     linked. A timer scheduled for a tick at or before that one goes to
//   - `due`: runs at the start of the next advance() call, never in the call that linked it
//     ("a timer scheduled at or before the tick being processed ... runs at the start of the next
//     call"; a periodic timer re-armed at or before the call's now waits the same way). At the
//     start of each call they become
//   - `late`: run first in this call, in no particular order, before any tick.
// P is the tick being processed, T the tick of the call's now. A call runs `late`, then the ticks
// from P to T in order, each tick's timers in any order. The model follows the wheel in lockstep:
// each callback must belong to the group the model is at, or every timer left in that group (and
// in the groups in between) must be one the contract says the pass drops without a callback (a
// fixed-rate Misfire::skip timer a whole period behind, counted in WheelStats::skipped).
// Re-arms follow the documented rules exactly: fixed rate on the grid d, d + p, ... (catch_up: the
// next grid point even if already past; fire_once_now and skip: the first grid point after now),
// fixed delay one period after the call's now; all clamped to the horizon.
//
// Where the wheel stops. A call that runs `limit` callbacks (or whose callback throws) leaves the
// rest for the next call, and does not lag behind time that holds nothing due: it stops in the
// group it was in if anything is left there or anything waits in `due`, else at the first later
// tick with timers (or at T). A cancel that empties the place where a stopped wheel waits lets it
// step on in the same way. The model does the same, since later placements (`due` or `wheel`)
// and next_deadline() depend on it.
//
// The one weaker spot: drops the model cannot see. Order within a tick is unspecified, so when a
// callback cancels a skip timer of the group being run, the pass may have dropped it (counted in
// skipped and rearmed) before the callback, or not; and when a call stops inside a group that
// holds skip timers, the pass may have dropped any of them before it stopped. The model takes
// the number of such drops from WheelStats::skipped (each is also one re-arm), checked against
// how many there can be. Where the stopped-in group's timers are concerned, none or all settles
// where they are; otherwise the model cancels exactly those timers (a pending periodic timer
// cancels with true wherever it is), so it stays exact at the cost of losing them.
//
// Checked after every operation: pending(), now(), every WheelStats counter the model can count
// (scheduled, rejected, cancelled, fired, rearmed, skipped; passes at most one per call) and the identity
// scheduled + rearmed == fired + skipped + cancelled + pending, next_deadline() (nullopt iff
// nothing is pending; now() while something waits in late/due or at the tick the wheel stopped
// at; otherwise in (P, earliest due], and exactly the earliest due when no level boundary lies
// before it), and callable lifetimes: each stored callable is destroyed exactly once, a cancel
// destroys it before returning (a periodic timer cancelling itself: when its callback returns),
// and ~Wheel destroys the rest without running them.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "fuzz_support.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::fuzz {
namespace {

struct Thrown {};  // what a callback throws when the input says so

long long ll(std::int64_t v) { return static_cast<long long>(v); }
unsigned long long ull(std::uint64_t v) { return static_cast<unsigned long long>(v); }

constexpr std::uint64_t kPoolLimit = (std::uint64_t{1} << 32) - 1;
void (*const kNullFn)() = nullptr;

class WheelRun {
 public:
  explicit WheelRun(Bytes& in) : in_(in) {}

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
        case 5: op_schedule_every(); break;
        case 6:
        case 7:
        case 8: op_cancel(); break;
        case 9: op_api(); break;
        case 15: op_ids(); break;
        default: op_advance(); break;
      }
      check_invariants();
    }
    destroying_ = true;
    wheel_.reset();
    destroying_ = false;
    check(alive_.empty(), "~Wheel left callables alive", static_cast<long long>(alive_.size()));
  }

 private:
  friend class Fire<WheelRun>;  // calls born(), on_fire() and died()

  enum class Place : std::uint8_t { wheel, late, due, running };

  struct Timer {
    TimerId id;
    std::uint64_t due = 0;  // the tick the wheel holds it for
    Place place = Place::wheel;
    bool periodic = false;
    PeriodicRule rule;
    std::size_t pos = 0;  // index in live_
  };

  // ---- setup ----------------------------------------------------------------------------------

  void setup() {
    static constexpr std::int64_t kTicks[] = {1'000, 1'000'000, 1'234'567, 3'600'000'000'000, 7'000};
    const std::uint8_t t = in_.u8();
    if (t >= 0xF0) check_option_validation();
    tick_ = kTicks[t % std::size(kTicks)];
    max_tick_ = static_cast<std::uint64_t>(kI64Max / tick_);
    std::int64_t start = 0;
    switch (in_.u8() % 6) {
      case 2: start = sat_add(sat_mul(in_.u16(), tick_), in_.u8()); break;
      case 3: start = static_cast<std::int64_t>(in_.u64() >> 2); break;
      case 4: start = kI64Max - sat_mul(in_.u16(), tick_) - in_.u8(); break;  // near the end of time
      case 5: start = static_cast<std::int64_t>(in_.u64() >> 1); break;
      default: break;
    }
    const std::uint8_t mp = in_.u8();
    max_pending_ = mp >= 0xC0 ? 1 + mp % 8 : 0;
    // Both cancel strategies, from a bit the byte above leaves unused (the corpus keeps its meaning):
    // always queue the unlink, or the default, which unlinks at once at these populations.
    const std::size_t batch_from = mp % 2 == 0 ? 1 : 0;
    wheel_ = std::make_unique<Wheel>(WheelOptions{.tick = Nanos(tick_),
                                                  .start = Nanos(start),
                                                  .max_pending = max_pending_,
                                                  .cancel_batch_from = batch_from});
    now_ = start;
    P_ = T_ = static_cast<std::uint64_t>(start / tick_);
    TICKWHEEL_FUZZ_TRACE("wheel: tick %lld ns, start %lld ns (tick %llu), max_pending %zu, cancel batch %s",
                         ll(tick_), ll(start), ull(P_), max_pending_, batch_from == 1 ? "always" : "default");
    check(wheel_->now().count() == start, "now() after construction is not start");
    check(wheel_->tick().count() == tick_, "tick() is not the tick asked for");
    check(wheel_->horizon().count() == static_cast<std::int64_t>(max_tick_) * tick_,
          "horizon() is not the last whole tick");
  }

  // A raw set of options: the constructor must throw std::invalid_argument exactly when one of them
  // is outside its documented range.
  void check_option_validation() {
    std::int64_t tick = 0;
    switch (in_.u8() % 5) {
      case 0: tick = 999; break;
      case 1: tick = 1'000; break;
      case 2: tick = 3'600'000'000'000; break;
      case 3: tick = 3'600'000'000'001; break;
      default: tick = static_cast<std::int64_t>(in_.u64()); break;
    }
    std::int64_t start = 0;
    switch (in_.u8() % 3) {
      case 0: start = 0; break;
      case 1: start = -1; break;
      default: start = static_cast<std::int64_t>(in_.u64()); break;
    }
    std::uint64_t max_pending = 0;
    switch (in_.u8() % 4) {
      case 0: max_pending = 0; break;
      case 1: max_pending = kPoolLimit; break;
      case 2: max_pending = kPoolLimit + 1; break;
      default: max_pending = in_.u64(); break;
    }
    const bool valid = tick >= 1'000 && tick <= 3'600'000'000'000 && start >= 0 && max_pending <= kPoolLimit;
    bool threw = false;
    try {
      Wheel w(WheelOptions{
          .tick = Nanos(tick), .start = Nanos(start), .max_pending = static_cast<std::size_t>(max_pending)});
    } catch (const std::invalid_argument&) {
      threw = true;
    }
    check(threw != valid, "the constructor's validation disagrees with the documented ranges", tick, start);
  }

  // ---- decoding -------------------------------------------------------------------------------

  // A delay at every scale; also used as an absolute deadline.
  std::int64_t delay() {
    const std::uint8_t kind = in_.u8();
    std::int64_t ticks = 0;
    switch (kind % 10) {
      case 0: return 0;
      case 1: ticks = (kind >> 4) & 7; break;
      case 2: ticks = in_.u8(); break;
      case 3: ticks = in_.u16(); break;
      case 4: {  // next to a level boundary: m units of level L, give or take a tick
        static constexpr std::int64_t kMult[] = {1, 255, 256, 257, 511, 512, 513};
        const unsigned level = in_.u8() % Wheel::kLevels;
        ticks = sat_add(
            sat_mul(kMult[in_.u8() % std::size(kMult)], std::int64_t{1} << (Wheel::kLevelBits * level)),
            static_cast<std::int64_t>(in_.u8() % 3) - 1);
        break;
      }
      case 5: return -sat_mul(in_.u8(), tick_) - in_.u8();
      case 6: return in_.u8() % 2 == 0 ? kI64Max : kI64Min;
      case 7:
        return sat_mul(static_cast<std::int64_t>(max_tick_) - in_.u8(), tick_) - now_;  // near the horizon
      case 8: return static_cast<std::int64_t>(in_.u64() >> (1 + in_.u8() % 63));
      default: return static_cast<std::int64_t>(in_.u64());
    }
    // Now and then a little less than whole ticks, so that rounding up is exercised.
    const std::int64_t off = (kind & 0x80) != 0 ? in_.u8() * (tick_ / 256) : 0;
    return sat_mul(ticks, tick_) - off;
  }

  std::size_t limit() {
    const std::uint8_t b = in_.u8();
    return (b & 0x80) != 0 ? b & 7 : std::numeric_limits<std::size_t>::max();
  }

  // An id to cancel: mostly live ones, also every kind of id that must cancel nothing.
  TimerId cancel_target() {
    const std::uint8_t kind = in_.u8();
    switch (kind % 8) {
      case 3:
        if (!dead_.empty()) return dead_[in_.u8() % dead_.size()];
        break;
      case 4: return TimerId{};
      case 5: return last_failure_;
      case 6: {
        const bool from_live = !live_.empty() && (dead_.empty() || (kind & 0x10) != 0);
        if (!from_live && dead_.empty()) break;
        const TimerId real =
            from_live ? timers_.at(live_[in_.u16() % live_.size()]).id : dead_[in_.u8() % dead_.size()];
        const std::uint64_t step = static_cast<std::uint64_t>(1 + in_.u8() % 4) << 32;
        return TimerId::from_raw((kind & 0x20) != 0 ? real.raw() + step : real.raw() - step);
      }
      case 7: return TimerId::from_raw(in_.u64());
      default: break;
    }
    if (live_.empty()) return TimerId::from_raw(in_.u64());
    return timers_.at(live_[in_.u16() % live_.size()]).id;
  }

  // ---- operations -----------------------------------------------------------------------------

  void op_schedule(std::uint8_t op) {
    const std::int64_t d = delay();
    const bool at = (op & 0x10) != 0;
    const bool absolute = (op & 0x20) != 0;  // schedule_at a deadline of its own, not now + d
    const std::int64_t deadline = at && absolute ? d : sat_add(now_, d);
    if ((op & 0xE0) == 0xE0)
      return null_callback(at ? wheel_->schedule_at(Nanos(deadline), kNullFn)
                              : wheel_->schedule_after(Nanos(d), kNullFn));
    const std::uint32_t serial = next_serial_++;
    TimerId id;
    {
      Fire fn(this, serial);
      id = at ? wheel_->schedule_at(Nanos(deadline), std::move(fn))
              : wheel_->schedule_after(Nanos(d), std::move(fn));
    }
    Timer t;
    expect_scheduled(id, serial, t, due_tick(deadline, tick_));
  }

  void op_schedule_every() {
    const PeriodicCall call = PeriodicCall::decode(in_, tick_, [this] { return delay(); });
    const std::int64_t p = call.period_ns;
    if (call.null_fn) return null_callback(wheel_->schedule_every(Nanos(p), kNullFn, call.options));
    const std::uint32_t serial = next_serial_++;
    TimerId id;
    {
      Fire fn(this, serial);
      id = wheel_->schedule_every(Nanos(p), std::move(fn), call.options);
    }
    if (call.refused(tick_)) {
      check(!id && id.status() == Status::bad_period, "a bad period was not refused with bad_period", p);
      check_failed_id(id);
      return;
    }
    Timer t;
    t.periodic = true;
    t.rule = call.rule(tick_);
    expect_scheduled(id, serial, t, due_tick(sat_add(now_, call.first_delay()), tick_));
  }

  // Checks a schedule's outcome and records the timer. Linked for `due`: in the due slot if that is
  // at or before the tick being processed, else in the wheel.
  void expect_scheduled(TimerId id, std::uint32_t serial, Timer t, std::uint64_t due) {
    const std::uint64_t limit = max_pending_ != 0 ? max_pending_ : kPoolLimit;
    if (timers_.size() >= limit) {
      check(!id && id.status() == Status::max_pending_reached, "a schedule past max_pending was not refused",
            static_cast<long long>(timers_.size()));
      ++rejected_;
      check_failed_id(id);
      return;
    }
    check(static_cast<bool>(id), "a schedule failed", static_cast<long long>(id.status()));
    check(id.status() == Status::ok && TimerId::from_raw(id.raw()) == id,
          "a good id's status or raw form is wrong");
    check(by_raw_.count(id.raw()) == 0, "a schedule returned the id of a pending timer");
    ++scheduled_;
    t.id = id;
    t.due = due;
    t.pos = live_.size();
    live_.push_back(serial);
    by_raw_.emplace(id.raw(), serial);
    Timer& rec = timers_.emplace(serial, t).first->second;
    place(serial, rec, due <= P_ ? Place::due : Place::wheel);
    TICKWHEEL_FUZZ_TRACE("  #%u scheduled%s: due tick %llu, %s (P %llu)", serial,
                         t.periodic ? " periodic" : "", ull(due), due <= P_ ? "due slot" : "wheel", ull(P_));
  }

  // A null function pointer is refused before anything else (max_pending, a bad period), with
  // nothing changed and nothing counted.
  void null_callback(TimerId id) {
    check(!id && id.status() == Status::null_callback,
          "a null function pointer was not refused with null_callback");
    check_failed_id(id);
  }

  void check_failed_id(TimerId id) {
    last_failure_ = id;
    check(!wheel_->cancel(id), "cancel of a failed id returned true");
    bool threw = false;
    try {
      static_cast<void>(checked(id));
    } catch (const ScheduleError& e) {
      threw = e.status() == id.status();
    }
    check(threw, "checked() on a failed id did not throw ScheduleError with its status");
  }

  void op_cancel() {
    const TimerId id = cancel_target();
    const auto it = by_raw_.find(id.raw());
    const bool expected = static_cast<bool>(id) && it != by_raw_.end();
    const std::uint32_t serial = expected ? it->second : 0;
    const bool got = cancel(id, serial);
    TICKWHEEL_FUZZ_TRACE("cancel(raw %llx) -> %d (#%u)", ull(id.raw()), got, serial);
    check(got == expected, "cancel() returned what the model does not", got, expected);
    if (!got) return;
    cancelled(serial);
    step_on_after_cancel();
  }

  // Wheel::cancel(id), where the model expects the callable of `serial` (0: none) may die inside.
  bool cancel(TimerId id, std::uint32_t serial) {
    cancelling_ = serial;
    const bool got = wheel_->cancel(id);
    cancelling_ = 0;
    return got;
  }

  // The model's side of a cancel that returned true.
  void cancelled(std::uint32_t serial) {
    ++cancelled_;
    const Timer& t = timers_.at(serial);
    const bool running = t.place == Place::running;
    // A skip timer of the group the pass is in may have been dropped (and counted) before this
    // cancel, or not: the call's end reads which from the counters.
    if (in_call_ && skip_due(t) &&
        (late_phase_ ? t.place == Place::late : t.place == Place::wheel && t.due == P_)) {
      ++cancelled_skips_;
    }
    forget(serial);
    // A running periodic timer's callable is in use: it goes when the callback returns.
    if (!running)
      check(alive_.count(serial) == 0, "cancel() returned before destroying the callable", serial);
  }

  // A cancel outside advance() that takes the last timer where a stopped wheel waits (late, due,
  // or the tick it stopped at) lets it step on, as a call that ran out of budget would have.
  void step_on_after_cancel() {
    if (P_ == T_ || !late_.empty() || !due_.empty() || slots_.count(P_) != 0) return;
    step_to_next_timers();
  }

  void step_to_next_timers() {
    const auto next = slots_.upper_bound(P_);
    P_ = next != slots_.end() && next->first <= T_ ? next->first : T_;
  }

  void op_advance() {
    const std::uint8_t kind = in_.u8();
    std::int64_t target = now_;
    switch (kind % 8) {
      case 1: target = sat_add(now_, sat_mul((kind >> 4) & 7, tick_) + in_.u8() * (tick_ / 256)); break;
      case 2: target = sat_add(now_, sat_mul(in_.u8(), tick_)); break;
      case 3: target = sat_add(now_, sat_mul(in_.u16(), tick_)); break;
      case 4: {  // through the upper levels
        const unsigned level = 1 + in_.u8() % 4;
        target =
            sat_add(now_, sat_mul(sat_mul(in_.u16(), std::int64_t{1} << (Wheel::kLevelBits * level)), tick_));
        break;
      }
      case 5: target = now_ - sat_mul(in_.u16(), tick_); break;  // time going back: ignored
      case 6: {                                                  // as an event loop does
        const std::optional<Nanos> nd = wheel_->next_deadline();
        target = nd ? nd->count() : sat_add(now_, tick_);
        break;
      }
      case 7:
        target = (kind & 0x30) == 0 ? kI64Max
                                    : sat_add(now_, sat_mul(in_.u8(), sat_mul(std::int64_t{1} << 24, tick_)));
        break;
      default: break;
    }
    advance(target, limit());
  }

  void advance(std::int64_t target, std::size_t limit) {
    now_ = std::max(now_, target);
    T_ = std::min(static_cast<std::uint64_t>(now_ / tick_), max_tick_);
    ++passes_;
    TICKWHEEL_FUZZ_TRACE("advance(%lld, limit %lld): T %llu, P %llu", ll(target),
                         static_cast<long long>(limit), ull(T_), ull(P_));
    for (std::uint32_t s : due_) {
      timers_.at(s).place = Place::late;
      late_.insert(s);
    }
    due_.clear();
    in_call_ = true;
    late_phase_ = true;
    cancelled_skips_ = 0;
    limit_ = limit;
    ran_ = 0;
    bool threw = false;
    std::size_t got = 0;
    try {
      got = wheel_->advance(Nanos(target), limit);
    } catch (const Thrown&) {
      threw = true;
    }
    in_call_ = false;
    TICKWHEEL_FUZZ_TRACE("  -> ran %zu%s", ran_, threw ? ", threw" : "");
    check(wheel_->now().count() == now_, "now() after advance() is not the latest now", wheel_->now().count(),
          now_);
    if (!threw)
      check(got == ran_, "advance() returned a count other than the callbacks run",
            static_cast<long long>(got), static_cast<long long>(ran_));
    if (!threw && ran_ < limit) {
      finish_call();
    } else {
      stop_call();
    }
  }

  // A call that ran fewer callbacks than its limit and did not throw went through everything due:
  // what is left up to now must be skip timers, dropped.
  void finish_call() {
    if (late_phase_) {
      pass_over(late_, "advance() stopped below its limit but left a late timer unrun");
      late_phase_ = false;
    }
    for (;;) {
      if (const auto g = slots_.find(P_); g != slots_.end()) {
        pass_over(std::set<std::uint32_t>(g->second),
                  "advance() stopped below its limit but left a due timer unrun");
      }
      const auto next = slots_.upper_bound(P_);
      if (next == slots_.end() || next->first > T_) break;
      P_ = next->first;
    }
    P_ = T_;
    count_unseen_drops(cancelled_skips_, "more skips than the model allows");
  }

  // A call cut short by its limit or a throw. First the skip timers of the group it stopped in,
  // which the pass may or may not have dropped (see the top of the file), then where it stopped.
  void stop_call() {
    std::vector<std::uint32_t> maybe;
    const std::set<std::uint32_t>* group = nullptr;
    if (late_phase_) {
      group = &late_;
    } else if (const auto g = slots_.find(P_); g != slots_.end()) {
      group = &g->second;
    }
    if (group != nullptr) {
      for (std::uint32_t s : *group) {
        if (skip_due(timers_.at(s))) maybe.push_back(s);
      }
    }
    const std::uint64_t delta = count_unseen_drops(cancelled_skips_ + maybe.size(),
                                                   "more skips than skip timers the pass could have dropped");
    // How many of `maybe` were dropped: the rest of delta are cancelled ones.
    const std::uint64_t least = delta > cancelled_skips_ ? delta - cancelled_skips_ : 0;
    const std::uint64_t most = std::min<std::uint64_t>(delta, maybe.size());
    TICKWHEEL_FUZZ_TRACE("  stopped short at P %llu (%s): %llu..%llu of %zu skip timers there dropped",
                         ull(P_), late_phase_ ? "late" : "tick", ull(least), ull(most), maybe.size());
    const bool known = least == most && (least == 0 || least == maybe.size());
    if (known && least != 0) {
      for (std::uint32_t s : maybe) drop(s);
    }
    // The wheel stays where it stopped if anything is left there or waits in the due slot;
    // otherwise it steps on to the first tick with timers, or to now.
    if (!(late_phase_ && !late_.empty()) && slots_.count(P_) == 0 && due_.empty()) step_to_next_timers();
    if (!known) {
      for (std::uint32_t s : maybe) {
        check(cancel(timers_.at(s).id, s), "cancel of a pending periodic timer returned false", s);
        cancelled(s);
        step_on_after_cancel();
      }
    }
  }

  // Every timer of a group the pass has left must be a skip timer: drop it as the pass did.
  void pass_over(const std::set<std::uint32_t>& group, const char* what) {
    const std::vector<std::uint32_t> members(group.begin(), group.end());
    for (std::uint32_t s : members) {
      check(skip_due(timers_.at(s)), what, s);
      skip(s);
    }
  }

  // A fixed-rate Misfire::skip timer whose run, due at its tick, is a whole period behind the
  // call's now: the pass drops it without running it.
  bool skip_due(const Timer& t) const { return t.periodic && t.rule.skips(t.due, T_); }

  void skip(std::uint32_t serial) {
    ++skipped_;
    ++rearmed_;
    drop(serial);
  }

  // Where a dropped skip timer goes: the first grid point after now.
  void drop(std::uint32_t serial) {
    Timer& t = timers_.at(serial);
    TICKWHEEL_FUZZ_TRACE("  #%u skipped (due %llu)", serial, ull(t.due));
    relink(serial, t, t.rule.first_grid_point_after(t.due, T_, max_tick_));
  }

  // Adds the drops the model could not see to the counters: each drop is one skip and one re-arm.
  // `unseen` is at most how many there can be.
  std::uint64_t count_unseen_drops(std::uint64_t unseen, const char* what) {
    const std::uint64_t delta = wheel_->stats().skipped - skipped_;
    check(delta <= unseen, what, static_cast<long long>(delta), static_cast<long long>(unseen));
    skipped_ += delta;
    rearmed_ += delta;
    return delta;
  }

  // A periodic timer's next period: behind (at or before now) it waits in the due slot.
  void relink(std::uint32_t serial, Timer& t, std::uint64_t next) {
    unplace(serial, t);
    t.due = next;
    place(serial, t, next <= T_ ? Place::due : Place::wheel);
    TICKWHEEL_FUZZ_TRACE("  #%u re-armed for tick %llu (%s)", serial, ull(next),
                         next <= T_ ? "due slot" : "wheel");
  }

  // The TimerId API on ids the wheel issued: live, fired or cancelled, failed, default. (An
  // arbitrary from_raw() value is not one: its status() means nothing.)
  void op_ids() {
    const std::uint8_t kind = in_.u8();
    TimerId id;
    if (kind % 4 == 0 && !live_.empty()) {
      id = timers_.at(live_[in_.u16() % live_.size()]).id;
    } else if (kind % 4 == 1 && !dead_.empty()) {
      id = dead_[in_.u8() % dead_.size()];
    } else if (kind % 4 == 2) {
      id = last_failure_;
    }
    check(TimerId::from_raw(id.raw()) == id, "from_raw(raw()) is not the id");
    check((id.status() == Status::ok) == static_cast<bool>(id), "an id's status and truth disagree");
    check(TimerId{}.status() == Status::no_timer && !TimerId{}, "a default id is not an empty no_timer id");
    if (id) {
      check(checked(id) == id, "checked() changed a good id");
    } else {
      bool threw = false;
      try {
        static_cast<void>(checked(id));
      } catch (const ScheduleError& e) {
        threw = e.status() == id.status();
      }
      check(threw, "checked() on a false id did not throw ScheduleError with its status");
    }
  }

  // reschedule() (mostly), the queries, a walk, now and then a clear(): between advance() calls.
  void op_api() {
    const std::uint8_t kind = in_.u8();
    switch (kind % 8) {
      case 5: return op_queries();
      case 6: return op_walk();
      case 7:
        if ((kind & 0x30) == 0x30) return op_clear();
        break;
      default: break;
    }
    op_reschedule(kind);
  }

  // A reschedule is a move of a pending timer's due, which then sits where a schedule (a periodic
  // timer: a re-arm) would put it, and, as after a cancel, a stopped wheel whose waiting timer
  // moved away steps on. Anything else: false, nothing touched.
  void op_reschedule(std::uint8_t kind) {
    const TimerId id = cancel_target();
    const auto it = by_raw_.find(id.raw());
    const bool expected = static_cast<bool>(id) && it != by_raw_.end();
    const std::int64_t d = delay();
    bool after = (kind & 0x80) != 0;
    std::int64_t deadline = sat_add(now_, d);
    if (expected && (kind & 0x40) != 0) {  // near its deadline: within its slot's span, or not
      after = false;
      const auto due = static_cast<std::int64_t>(timers_.at(it->second).due);
      deadline = sat_add(sat_mul(due, tick_), sat_mul(std::int64_t{in_.u8()} - 64, tick_));
    }
    const bool got = after ? wheel_->reschedule_after(id, Nanos(d)) : wheel_->reschedule(id, Nanos(deadline));
    TICKWHEEL_FUZZ_TRACE("reschedule(raw %llx, %lld) -> %d", ull(id.raw()), static_cast<long long>(deadline),
                         got);
    check(got == expected, "reschedule() returned what the model does not", got, expected);
    if (!got) return;
    ++rescheduled_;
    const std::uint32_t serial = it->second;
    Timer& t = timers_.at(serial);
    unplace(serial, t);
    t.due = due_tick(deadline, tick_);
    const std::uint64_t due_by = t.periodic && P_ != T_ ? T_ : P_;
    place(serial, t, t.due <= due_by ? Place::due : Place::wheel);
    step_on_after_cancel();
    check(wheel_->deadline(id) == Nanos(static_cast<std::int64_t>(t.due) * tick_),
          "deadline() after a reschedule is not the rounded deadline", static_cast<long long>(t.due));
  }

  // is_pending(), deadline() and remaining() of any id, against the model.
  void op_queries() {
    const TimerId id = cancel_target();
    const auto it = by_raw_.find(id.raw());
    const bool pending = static_cast<bool>(id) && it != by_raw_.end();
    check(wheel_->is_pending(id) == pending, "is_pending() disagrees with the model", pending);
    const std::optional<Nanos> at = wheel_->deadline(id);
    const std::optional<Nanos> left = wheel_->remaining(id);
    if (!pending) {
      check(!at && !left, "deadline() or remaining() of a timer that is not pending has a value");
      return;
    }
    const std::int64_t due_ns = static_cast<std::int64_t>(timers_.at(it->second).due) * tick_;
    check(at == Nanos(due_ns), "deadline() is not the rounded deadline", at ? at->count() : -1, due_ns);
    check(left == Nanos(std::max<std::int64_t>(due_ns - now_, 0)), "remaining() is not deadline() - now()");
  }

  // for_each_pending() visits every pending timer once, with its deadline.
  void op_walk() {
    std::size_t visits = 0;
    wheel_->for_each_pending([&](TimerId id, Nanos deadline) {
      ++visits;
      const auto it = by_raw_.find(id.raw());
      check(it != by_raw_.end(), "for_each_pending() visited an id that is not pending");
      const std::int64_t due_ns = static_cast<std::int64_t>(timers_.at(it->second).due) * tick_;
      check(deadline.count() == due_ns, "for_each_pending() gave a deadline that is not the rounded one",
            deadline.count(), due_ns);
    });
    check(visits == timers_.size(), "for_each_pending() did not visit every pending timer once",
          static_cast<long long>(visits), static_cast<long long>(timers_.size()));
  }

  // clear(): every pending timer cancelled, its callable destroyed, none run; the wheel catches up.
  void op_clear() {
    const std::vector<std::uint32_t> pending(live_);
    clearing_ = true;
    const std::size_t got = wheel_->clear();
    clearing_ = false;
    check(got == pending.size(), "clear() did not count every pending timer", static_cast<long long>(got),
          static_cast<long long>(pending.size()));
    for (const std::uint32_t serial : pending) {
      ++cancelled_;
      forget(serial);
      check(alive_.count(serial) == 0, "clear() returned before destroying a callable", serial);
    }
    P_ = T_;
  }

  // ---- callbacks ------------------------------------------------------------------------------

  void on_fire(std::uint32_t serial) {
    check(!destroying_, "~Wheel ran a callback", serial);
    check(in_call_, "a callback ran outside advance()", serial);
    const auto it = timers_.find(serial);
    check(it != timers_.end(), "a callback ran after its timer fired or was cancelled", serial);
    Timer& t = it->second;
    check(t.place != Place::due, "a timer ran in the advance() call that linked it at or before its tick",
          serial);
    check(t.place != Place::wheel || t.due <= T_, "early: a timer ran before its tick",
          static_cast<long long>(t.due), static_cast<long long>(T_));
    check(ran_ < limit_, "more callbacks than the limit", static_cast<long long>(limit_));
    reach(serial, t);
    TICKWHEEL_FUZZ_TRACE("  #%u runs (due %llu, P %llu)", serial, ull(t.due), ull(P_));
    check(!skip_due(t), "a Misfire::skip timer a whole period behind ran", serial);
    ++ran_;
    ++fired_;
    const bool periodic = t.periodic;
    const TimerId self_id = t.id;
    if (periodic) {
      unplace(serial, t);
      t.place = Place::running;
    } else {
      forget(serial);
    }
    // Everything pending is alive, and the running callable, and nothing else.
    check(alive_.size() == timers_.size() + (periodic ? 0 : 1) && alive_.count(serial) == 1,
          "callables alive inside a callback are not the pending timers plus the running one",
          static_cast<long long>(alive_.size()), static_cast<long long>(timers_.size()));
    check(wheel_->pending_count() == timers_.size(), "pending() inside a callback",
          static_cast<long long>(wheel_->pending_count()), static_cast<long long>(timers_.size()));
    bool do_throw = false;
    {
      Bytes::FromBack nested(in_);
      const std::uint8_t what = in_.u8();
      if (what != 0) TICKWHEEL_FUZZ_TRACE("  callback of #%u does %u", serial, what);
      switch (what % 8) {
        case 4: nested_cancel(cancel_target()); break;
        case 5: op_schedule(in_.u8()); break;
        case 6: op_schedule_every(); break;
        case 7:
          // True for a periodic timer (no further run), false for a one-shot (already firing).
          check(cancel(self_id, serial) == periodic, "a callback cancelling itself", periodic);
          if (periodic) cancelled(serial);
          break;
        default: break;
      }
      if ((what & 8) != 0) {
        const std::size_t before = wheel_->pending_count();
        check(wheel_->advance(Nanos::max()) == 0, "advance() from a callback ran something");
        check(wheel_->pending_count() == before && wheel_->now().count() == now_,
              "advance() from a callback changed the wheel");
      }
      do_throw = what >= 0xF0;
    }
    if (periodic) {
      ++rearmed_;  // the period after this run: re-armed, or taken by a cancel during the run
      if (const auto self = timers_.find(serial); self != timers_.end())
        relink(serial, self->second,
               self->second.rule.next_run(self->second.due, T_, now_, tick_, max_tick_));
    }
    if (do_throw) throw Thrown{};
  }

  void nested_cancel(TimerId id) {
    const auto it = by_raw_.find(id.raw());
    const bool expected = static_cast<bool>(id) && it != by_raw_.end();
    const std::uint32_t serial = expected ? it->second : 0;
    check(cancel(id, serial) == expected, "cancel() from a callback returned what the model does not");
    if (expected) cancelled(serial);
  }

  // Moves the model's pass on until the group it is at holds `serial`. Every group it leaves must
  // hold only skip timers, which the pass dropped.
  void reach(std::uint32_t serial, const Timer& t) {
    for (;;) {
      if (late_phase_) {
        if (t.place == Place::late) return;
        pass_over(late_, "a timer ran before a late timer (due at the start of the call)");
        late_phase_ = false;
        continue;
      }
      check(t.place == Place::wheel, "a late timer ran after the call went on to the ticks", serial);
      if (t.due == P_) return;
      if (const auto g = slots_.find(P_); g != slots_.end()) {
        pass_over(std::set<std::uint32_t>(g->second),
                  "out of order: a timer ran before one of an earlier tick");
      }
      const auto next = slots_.upper_bound(P_);
      check(next != slots_.end() && next->first <= T_, "a timer ran that the model has not due", serial);
      P_ = next->first;
    }
  }

  void born(std::uint32_t serial) { alive_.insert(serial); }
  void died(std::uint32_t serial) {
    check(alive_.erase(serial) == 1, "a callable was destroyed twice", serial);
    const auto it = timers_.find(serial);
    check(destroying_ || clearing_ || serial == cancelling_ || it == timers_.end(),
          "the callable of a pending timer was destroyed", serial);
  }

  // ---- model bookkeeping ----------------------------------------------------------------------

  void place(std::uint32_t serial, Timer& t, Place where) {
    t.place = where;
    switch (where) {
      case Place::wheel: slots_[t.due].insert(serial); break;
      case Place::late: late_.insert(serial); break;
      case Place::due: due_.insert(serial); break;
      case Place::running: break;
    }
  }

  void unplace(std::uint32_t serial, const Timer& t) {
    switch (t.place) {
      case Place::wheel: {
        const auto g = slots_.find(t.due);
        g->second.erase(serial);
        if (g->second.empty()) slots_.erase(g);
        break;
      }
      case Place::late: late_.erase(serial); break;
      case Place::due: due_.erase(serial); break;
      case Place::running: break;
    }
  }

  // The timer is no longer pending: fired (one-shot) or cancelled.
  void forget(std::uint32_t serial) {
    Timer& t = timers_.at(serial);
    unplace(serial, t);
    const std::uint32_t moved = live_.back();
    live_[t.pos] = moved;
    timers_.at(moved).pos = t.pos;
    live_.pop_back();
    by_raw_.erase(t.id.raw());
    if (dead_.size() < 64) {
      dead_.push_back(t.id);
    } else {
      dead_[dead_next_++ % dead_.size()] = t.id;
    }
    timers_.erase(serial);
  }

  // ---- invariants -----------------------------------------------------------------------------

  void check_invariants() {
    const auto pending = static_cast<long long>(timers_.size());
    check(wheel_->pending_count() == timers_.size(), "pending()",
          static_cast<long long>(wheel_->pending_count()), pending);
    check(alive_.size() == timers_.size(), "callables alive are not the pending timers",
          static_cast<long long>(alive_.size()), pending);
    check(wheel_->now().count() == now_, "now()");
    const WheelStats s = wheel_->stats();
    check(s.scheduled == scheduled_, "stats().scheduled", static_cast<long long>(s.scheduled),
          static_cast<long long>(scheduled_));
    check(s.rejected == rejected_, "stats().rejected", static_cast<long long>(s.rejected),
          static_cast<long long>(rejected_));
    check(s.cancelled == cancelled_, "stats().cancelled", static_cast<long long>(s.cancelled),
          static_cast<long long>(cancelled_));
    check(s.fired == fired_, "stats().fired", static_cast<long long>(s.fired),
          static_cast<long long>(fired_));
    check(s.rearmed == rearmed_, "stats().rearmed", static_cast<long long>(s.rearmed),
          static_cast<long long>(rearmed_));
    check(s.skipped == skipped_, "stats().skipped", static_cast<long long>(s.skipped),
          static_cast<long long>(skipped_));
    check(s.passes <= passes_, "stats().passes (at most one per call)", static_cast<long long>(s.passes),
          static_cast<long long>(passes_));
    check(s.rescheduled == rescheduled_, "stats().rescheduled", static_cast<long long>(s.rescheduled),
          static_cast<long long>(rescheduled_));
    check(s.scheduled + s.rearmed == s.fired + s.skipped + s.cancelled + wheel_->pending_count(),
          "scheduled + rearmed != fired + skipped + cancelled + pending");

    const std::optional<Nanos> nd = wheel_->next_deadline();
    if (timers_.empty()) {
      check(!nd, "next_deadline() has a value with nothing pending", nd ? nd->count() : 0);
      return;
    }
    check(nd.has_value(), "next_deadline() is nullopt with timers pending", pending);
    if (!late_.empty() || !due_.empty() || slots_.count(P_) != 0) {
      check(nd->count() == now_, "next_deadline() is not now() while timers wait to run", nd->count(), now_);
      return;
    }
    // Every upper-level slot starts on a multiple of the level-1 unit after P, so before the first
    // such boundary the answer is exact; beyond it, a lower bound.
    const std::uint64_t earliest = slots_.begin()->first;
    const std::int64_t lo = static_cast<std::int64_t>(P_) * tick_;
    const std::int64_t hi = static_cast<std::int64_t>(earliest) * tick_;
    check(nd->count() > lo && nd->count() <= hi, "next_deadline() is not in (processing tick, earliest due]",
          nd->count(), hi);
    const std::uint64_t unit = std::uint64_t{1} << Wheel::kLevelBits;
    if (earliest <= (P_ / unit + 1) * unit)
      check(nd->count() == hi, "next_deadline() is not the earliest due", nd->count(), hi);
  }

  Bytes& in_;
  std::unique_ptr<Wheel> wheel_;
  std::int64_t tick_ = 1;
  std::uint64_t max_tick_ = 0;
  std::size_t max_pending_ = 0;

  std::int64_t now_ = 0;  // the wheel's now, in ns
  std::uint64_t P_ = 0;   // the tick being processed (where the wheel stands)
  std::uint64_t T_ = 0;   // the tick of the last advance()'s now

  std::map<std::uint32_t, Timer> timers_;  // pending, by serial
  std::map<std::uint64_t, std::uint32_t> by_raw_;
  std::vector<std::uint32_t> live_;                         // the serials of timers_, for picking one
  std::map<std::uint64_t, std::set<std::uint32_t>> slots_;  // Place::wheel, by due tick; no empty sets
  std::set<std::uint32_t> late_;
  std::set<std::uint32_t> due_;
  std::set<std::uint32_t> alive_;  // serials whose callable exists
  std::vector<TimerId> dead_;      // ids of fired and cancelled timers
  std::size_t dead_next_ = 0;
  TimerId last_failure_;
  std::uint32_t next_serial_ = 1;

  std::uint64_t rescheduled_ = 0;
  std::uint64_t scheduled_ = 0, rejected_ = 0, cancelled_ = 0, fired_ = 0, rearmed_ = 0, skipped_ = 0,
                passes_ = 0;

  // The advance() call in progress.
  bool in_call_ = false;
  bool late_phase_ = false;  // still running the late timers
  std::size_t limit_ = 0;
  std::size_t ran_ = 0;
  std::uint64_t cancelled_skips_ = 0;  // skip timers of the group being run, cancelled by callbacks
  bool destroying_ = false;
  std::uint32_t cancelling_ = 0;  // the timer a cancel() in progress may destroy
  bool clearing_ = false;         // inside clear(): any pending timer's callable may die
};

}  // namespace
}  // namespace tickwheel::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tickwheel::fuzz::Bytes in(data, size);
  tickwheel::fuzz::WheelRun(in).run();
  return 0;
}
