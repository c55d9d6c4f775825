// The Wheel against a reference model: a seeded randomized test. Millions of random operations
// (schedule at every scale from negative delays to past the horizon, cancel of live / fired /
// cancelled / stale / garbage ids, reschedule of the same kinds of ids to deadlines at every scale,
// advance with jumps from zero to many revolutions of the upper levels and to the horizon, random
// expiry limits, and callbacks that themselves schedule, cancel, reschedule, try to advance and now
// and then throw) run against tickwheel::Wheel and against a plain reference model (std::set keyed
// by effective tick + maps id -> state). After every step the wheel must agree with the model.
//
// The seed comes from TICKWHEEL_SEED if set, else from std::random_device; it is printed with every
// failure so the run can be replayed. TICKWHEEL_MODEL_OPS scales the operation count.
//
// The model's notion of order. Each timer gets an effective tick when it is scheduled:
//   eff = max(due, P),  due = min(ceil(deadline / tick), horizon in ticks)
// where P is the wheel's processing tick at that moment:
//   - P starts at floor(start / tick);
//   - after a call that ran fewer than `limit` callbacks, P = floor(now / tick);
//   - after a call that ran exactly `limit`, P = the smallest eff among the timers still due, if
//     any remains (the wheel steps on, without running anything, to the first tick that has
//     callbacks waiting, and stops there), else floor(now / tick); a cancel in that state
//     recomputes P the same way (the wheel steps on as soon as the waiting timers are gone).
// A callback runs only if the model has it pending, with eff <= floor(now / tick), in
// non-decreasing eff order within a call. After a call with ran < limit no due timer remains; after
// a call with ran == limit no remaining timer has an eff below the largest eff that ran.
// Callbacks schedule only at deadlines after the tick being processed (the "at or before" case,
// deferred to the next call, is a unit test in wheel_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "support.hpp"
#include "tickwheel/wheel.hpp"

namespace tickwheel::test {
namespace {

constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? kI64Min : kI64Max;
  return r;
}
// Granularity of level k in ticks (level_unit from support.hpp), for any k a jump or delay uses.
std::int64_t unit(unsigned k) { return level_unit(k); }
constexpr std::int64_t kReachSlots = std::int64_t{Wheel::kSlots} + 2;  // a level's reach, a little over

class ModelRun {
 public:
  ModelRun(std::uint64_t seed, std::uint64_t ops)
      : seed_(seed), ops_(ops), rng_(seed), trace_(env_u64("TICKWHEEL_MODEL_TRACE", 0) != 0) {}

  // Runs until `ops` operations are done or the first disagreement. Returns "" or the failure.
  std::string run() {
    while (op_ < ops_ && failure_.empty()) {
      start_episode();
      const std::uint64_t len = 2000 + rng_() % 150000;
      const std::uint64_t end = std::min(ops_, op_ + len);
      while (op_ < end && failure_.empty()) {
        step();
        ++op_;
        if (failure_.empty()) check_invariants("after op");
      }
      end_episode();
    }
    return failure_;
  }

  std::uint64_t episodes() const { return episode_; }
  std::uint64_t total_fired() const { return total_fired_; }
  std::uint64_t total_cancelled() const { return total_cancelled_; }
  std::uint64_t total_limit_hits() const { return total_limit_hits_; }
  std::uint64_t total_rescheduled() const { return total_rescheduled_; }
  std::uint64_t total_in_place() const { return total_in_place_; }
  std::string summary() const {
    std::ostringstream os;
    os << op_ << " ops, " << episode_ << " wheels, " << total_fired_ << " fired, " << total_cancelled_
       << " cancelled, " << total_rescheduled_ << " rescheduled (" << total_in_place_ << " in place), "
       << total_rejected_ << " refused, " << total_limit_hits_ << " limit hits, " << total_nested_
       << " nested schedules, " << total_throws_ << " throws, " << total_moved_ << " moves ("
       << total_moved_ahead_ << " ahead), " << horizon_wheels_ << " wheels ran to the horizon";
    return os.str();
  }

  // The callable a model timer carries: 24 bytes, with a counting member.
  // What a model callback throws, now and then: advance() must let it through, count the timer as
  // fired, stay consistent and resume the pass in the next call.
  struct ModelThrow {};

  struct Fire {
    ModelRun* m;
    std::uint64_t serial;
    Counted c;
    void operator()() const { m->on_fire(serial); }
  };

 private:
  struct Rec {
    std::int64_t eff;
    std::int64_t due;
    Nanos deadline;
    TimerId id;
    std::size_t pos;  // index in live_
  };

  // ---- episodes -------------------------------------------------------------------------------

  void start_episode() {
    ++episode_;
    static constexpr Nanos kTicks[] = {Nanos(1us), Nanos(1ms), Nanos(1h), Nanos(1234567)};
    tick_ = kTicks[rng_() % std::size(kTicks)];
    max_tick_ = max_ticks(tick_);
    Nanos start{0};
    switch (rng_() % 8) {
      case 0:
      case 1:
      case 2: start = Nanos(0); break;
      case 3:
      case 4: start = Nanos(static_cast<std::int64_t>(rng_() % 1'000'000) * tick_.count()); break;
      case 5:
        start = Nanos(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(kI64Max / 2)));
        break;
      case 6: start = Nanos(static_cast<std::int64_t>(rng_() % 100'000'000'000ull)); break;
      case 7:
        start = rng_() % 4 == 0 ? Nanos(kI64Max - static_cast<std::int64_t>(rng_() % (200 * tick_.count())))
                                : Nanos(static_cast<std::int64_t>(rng_() % 5'000'000'000ull));
        break;
    }
    max_pending_ = rng_() % 5 == 0 ? static_cast<std::size_t>(1 + rng_() % (rng_() % 2 == 0 ? 64 : 3000)) : 0;
    // Both cancel strategies: unlink at once (the default below the L2's worth), always queue, and
    // a switch between them as the population crosses a small threshold.
    const std::uint64_t pick = rng_() % 3;
    const std::size_t batch_from = pick == 0 ? 0 : pick == 1 ? 1 : 2 + rng_() % 64;
    wheel_ = std::make_unique<Wheel>(WheelOptions{
        .tick = tick_, .start = start, .max_pending = max_pending_, .cancel_batch_from = batch_from});
    now_ = start;
    P_ = floor_ticks(start, tick_);
    caught_up_ = true;
    // Largest level (up to 3) whose revolution-sized jumps, at the rate op_advance makes them,
    // leave an episode far from the horizon: about 1e6 * unit(k) ticks per episode. With a 1 h
    // tick (horizon 2.5e6 ticks) that is 0: only jumps up to ~1 level-0 revolution.
    kmax_ = 0;
    while (kmax_ < 3 && sat_mul(4'000'000, unit(kmax_ + 1)) <= max_tick_) ++kmax_;
    recs_.clear();
    by_eff_.clear();
    by_raw_.clear();
    live_.clear();
    scheduled_ = rejected_ = cancelled_ = fired_ = rescheduled_ = calls_ = 0;
    trace("new wheel: tick ", tick_.count(), "ns start ", start.count(), "ns max_pending ", max_pending_);
    if (wheel_->now() != start) fail("now() != start after construction");
    if (wheel_->horizon().count() != max_tick_ * tick_.count()) fail("horizon() differs from the model's");
  }

  void end_episode() {
    if (!failure_.empty()) return;
    const WheelStats st = wheel_->stats();
    total_moved_ += st.moved;
    total_moved_ahead_ += st.moved_ahead;
    total_in_place_ += st.rescheduled_in_place;
    total_rejected_ += st.rejected;
    if (now_ >= wheel_->horizon()) ++horizon_wheels_;
    const long expected = static_cast<long>(recs_.size());
    if (lc_.live != expected) fail("live callables before destruction " + std::to_string(lc_.live));
    destroying_ = true;
    wheel_.reset();
    destroying_ = false;
    if (lc_.live != 0) {
      fail("~Wheel left " + std::to_string(lc_.live) + " callables alive (or destroyed some twice)");
    }
    // Every id of the old wheel is garbage to the next one: keep a few for the stale-id cancels.
    for (const auto& kv : recs_) remember_dead(kv.second.id);
  }

  // ---- operations -----------------------------------------------------------------------------

  void step() {
    const unsigned r = static_cast<unsigned>(rng_() % 100);
    if (r < 45) {
      if (recs_.size() >= 3000) return op_cancel();
      op_schedule();
    } else if (r < 60) {
      op_cancel();
    } else if (r < 68) {
      op_reschedule();
    } else {
      op_advance();
    }
  }

  // A deadline at every scale: negative, zero, a few ticks, level boundaries, the reach of levels
  // 1 to 4, the horizon and beyond.
  Nanos random_delay() {
    const unsigned mode = static_cast<unsigned>(rng_() % 1000);
    std::int64_t ticks = 0;
    if (mode < 50) {
      // Negative: a little, a lot, or the most negative there is.
      switch (rng_() % 4) {
        case 0:
          return -Nanos(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(3 * tick_.count())));
        case 1: return Nanos(sat_mul(-static_cast<std::int64_t>(rng_() % 100000), tick_.count()));
        case 2: return Nanos::min();
        default: return Nanos(kI64Min + static_cast<std::int64_t>(rng_() % 1000));
      }
    } else if (mode < 150) {
      ticks = static_cast<std::int64_t>(rng_() % 4);
    } else if (mode < 350) {
      ticks = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(2 * kReachSlots));
    } else if (mode < 900) {
      const unsigned k = 1 + static_cast<unsigned>(rng_() % 4);
      ticks = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(sat_mul(kReachSlots, unit(k))));
    } else if (mode < 980) {
      // Right at a level boundary: m * unit(k) + {-1, 0, 1} for m around G and S (units per next
      // level's unit, slots per level).
      const std::int64_t g = unit(1), sl = Wheel::kSlots;
      const std::int64_t mult[] = {1, g - 1, g, g + 1, sl - 1, sl, sl + 1};
      const unsigned k = static_cast<unsigned>(rng_() % 5);
      ticks = sat_mul(mult[rng_() % std::size(mult)], unit(k)) + static_cast<std::int64_t>(rng_() % 3) - 1;
    } else if (mode < 995) {
      // Log-uniform over the whole range of Nanos.
      const unsigned bits = static_cast<unsigned>(rng_() % 63);
      return Nanos(static_cast<std::int64_t>(rng_() >> (64 - bits - 1) >> 1));
    } else {
      // Near and past the horizon.
      switch (rng_() % 3) {
        case 0: return Nanos::max();
        case 1:
          return wheel_->horizon() - now_ - Nanos(static_cast<std::int64_t>(rng_() % 3) * tick_.count());
        default: return Nanos(kI64Max - static_cast<std::int64_t>(rng_() % 1000));
      }
    }
    const Nanos base(sat_mul(ticks, tick_.count()));
    const Nanos off(
        rng_() % 2 == 0 ? 0 : static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(tick_.count())));
    return base - off;
  }

  std::int64_t due_of(Nanos deadline) const { return std::min(ceil_ticks(deadline, tick_), max_tick_); }

  void op_schedule() {
    const Nanos delay = random_delay();
    const bool after = rng_() % 2 == 0;
    const Nanos deadline = saturating_add(now_, delay);
    const std::uint64_t serial = next_serial_++;
    const TimerId id = after ? wheel_->schedule_after(delay, Fire{this, serial, Counted(&lc_)})
                             : wheel_->schedule_at(deadline, Fire{this, serial, Counted(&lc_)});
    trace(after ? "schedule_after(" : "schedule_at(", after ? delay.count() : deadline.count(), ") #", serial,
          " -> raw ", id.raw(), " deadline ", deadline.count(), " eff ", std::max(due_of(deadline), P_));
    add_expected(id, serial, deadline, std::max(due_of(deadline), P_), "schedule");
  }

  // Records the outcome of a schedule in the model, after checking it.
  void add_expected(TimerId id, std::uint64_t serial, Nanos deadline, std::int64_t eff, const char* what) {
    const bool full = max_pending_ != 0 && recs_.size() >= max_pending_;
    if (full) {
      if (id || id.status() != Status::max_pending_reached) {
        fail(std::string(what) + ": expected a refusal with max_pending_reached at " +
             std::to_string(recs_.size()) + " pending, got status " + std::string(to_string(id.status())));
      }
      ++rejected_;
      return;
    }
    if (!id) {
      fail(std::string(what) + " failed unexpectedly: " + std::string(to_string(id.status())));
      return;
    }
    if (by_raw_.count(id.raw()) != 0) {
      fail(std::string(what) + " returned an id that names another pending timer");
      return;
    }
    ++scheduled_;
    Rec rec{eff, due_of(deadline), deadline, id, live_.size()};
    recs_.emplace(serial, rec);
    by_eff_.emplace(eff, serial);
    by_raw_.emplace(id.raw(), serial);
    live_.push_back(serial);
  }

  void remove(std::uint64_t serial) {
    auto it = recs_.find(serial);
    const Rec rec = it->second;
    by_eff_.erase({rec.eff, serial});
    by_raw_.erase(rec.id.raw());
    const std::uint64_t moved = live_.back();
    live_[rec.pos] = moved;
    recs_.at(moved).pos = rec.pos;
    live_.pop_back();
    recs_.erase(it);
    remember_dead(rec.id);
  }

  void remember_dead(TimerId id) {
    if (dead_.size() < 4096) {
      dead_.push_back(id);
    } else {
      dead_[dead_pos_++ % dead_.size()] = id;
    }
  }

  // An id for cancel, and whether the model expects cancel to return true for it.
  std::pair<TimerId, std::optional<std::uint64_t>> random_cancel_target() {
    const unsigned kind = static_cast<unsigned>(rng_() % 10);
    TimerId id;
    if (kind < 5 && !live_.empty()) {
      const std::uint64_t serial = live_[rng_() % live_.size()];
      id = recs_.at(serial).id;
    } else if (kind < 7 && !dead_.empty()) {
      id = dead_[rng_() % dead_.size()];
    } else if (kind == 7) {
      switch (rng_() % 3) {
        case 0: id = TimerId::from_raw(rng_()); break;
        case 1: id = TimerId::from_raw((rng_() << 32) | (rng_() % 8192)); break;
        default: id = TimerId::from_raw(((rng_() % 16) << 32) | (rng_() % 8192)); break;
      }
    } else if (kind == 8) {
      id = rng_() % 2 == 0 ? TimerId{}
                           : TimerId::from_raw(static_cast<std::uint64_t>(Status::max_pending_reached));
    } else if (!live_.empty() || !dead_.empty()) {
      // A live or dead timer's index with a neighbouring generation.
      const TimerId real = (dead_.empty() || (!live_.empty() && rng_() % 2 == 0))
                               ? recs_.at(live_[rng_() % live_.size()]).id
                               : dead_[rng_() % dead_.size()];
      const std::uint64_t gen = real.raw() >> 32;
      const std::uint64_t g2 = rng_() % 2 == 0 ? gen + 1 : gen - 1;
      id = TimerId::from_raw(((g2 & 0xFFFFFFFFu) << 32) | (real.raw() & 0xFFFFFFFFu));
    }
    std::optional<std::uint64_t> serial;
    if (auto it = by_raw_.find(id.raw()); it != by_raw_.end() && id) serial = it->second;
    return {id, serial};
  }

  void op_cancel() {
    const auto [id, serial] = random_cancel_target();
    const bool got = wheel_->cancel(id);
    trace("cancel(raw ", id.raw(), ") -> ", got, " expected ", serial.has_value());
    if (got != serial.has_value()) {
      fail("cancel(raw " + std::to_string(id.raw()) + ") returned " + (got ? "true" : "false") +
           ", the model expected " + (serial ? "true (pending)" : "false (not pending)"));
      return;
    }
    if (got) {
      remove(*serial);
      step_on_if_nothing_waits();
      ++cancelled_;
      ++total_cancelled_;
      if (lc_.live != static_cast<long>(recs_.size()) + callback_depth_) {
        fail("cancel did not destroy the callable before returning");
      }
    }
  }

  // A reschedule is a cancel and a schedule that keep the id: the timer takes the effective tick a
  // schedule would give it now, and then, as after a cancel, a wheel waiting after a limit hit
  // steps on if what waited there is gone.
  void op_reschedule() {
    const auto [id, serial] = random_cancel_target();
    Nanos delay = random_delay();
    bool after = rng_() % 2 == 0;
    Nanos deadline = saturating_add(now_, delay);
    if (serial && rng_() % 2 == 0) {
      // Near its deadline, as an idle timeout pushed back: often within its slot's unit, where
      // only the deadline changes.
      after = false;
      const std::int64_t ticks = static_cast<std::int64_t>(rng_() % 700) - 200;
      deadline = saturating_add(recs_.at(*serial).deadline, Nanos(sat_mul(ticks, tick_.count())));
    }
    const bool got = after ? wheel_->reschedule_after(id, delay) : wheel_->reschedule(id, deadline);
    trace(after ? "reschedule_after(raw " : "reschedule(raw ", id.raw(), ", ",
          after ? delay.count() : deadline.count(), ") -> ", got, " expected ", serial.has_value());
    if (got != serial.has_value()) {
      fail("reschedule(raw " + std::to_string(id.raw()) + ") returned " + (got ? "true" : "false") +
           ", the model expected " + (serial ? "true (pending)" : "false (not pending)"));
      return;
    }
    if (!got) return;
    move(*serial, deadline, std::max(due_of(deadline), P_));
    step_on_if_nothing_waits();
    ++rescheduled_;
    ++total_rescheduled_;
    // deadline() reads the rounded deadline, and 0 for a negative one.
    const std::int64_t rounded = std::max<std::int64_t>(due_of(deadline), 0) * tick_.count();
    const std::optional<Nanos> d = wheel_->deadline(id);
    if (d != Nanos(rounded)) {
      fail("deadline() after reschedule is " + (d ? std::to_string(d->count()) : std::string("nullopt")) +
           ", the model's rounded deadline " + std::to_string(rounded));
    }
  }

  // After a limit hit the wheel waits at the first tick with callbacks waiting; a cancel (or a move)
  // that takes the last of them lets it step on at once to the next such tick, or to now.
  void step_on_if_nothing_waits() {
    if (caught_up_) return;
    const bool any = !by_eff_.empty() && by_eff_.begin()->first <= call_now_tick_;
    P_ = any ? by_eff_.begin()->first : call_now_tick_;
    caught_up_ = !any;
  }

  // Gives a pending timer a new deadline and effective tick, keeping its serial and id.
  void move(std::uint64_t serial, Nanos deadline, std::int64_t eff) {
    Rec& rec = recs_.at(serial);
    by_eff_.erase({rec.eff, serial});
    rec.eff = eff;
    rec.due = due_of(deadline);
    rec.deadline = deadline;
    by_eff_.emplace(eff, serial);
  }

  void op_advance() {
    const unsigned mode = static_cast<unsigned>(rng_() % 10000);
    Nanos target = now_;
    const auto ticks = [&](std::int64_t n) { return Nanos(sat_mul(n, tick_.count())); };
    const Nanos sub(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(tick_.count())));
    if (mode < 300) {
      target = now_ - ticks(static_cast<std::int64_t>(rng_() % 1000)) - sub;  // time going back: ignored
    } else if (mode < 1200) {
      target = now_;
    } else if (mode < 5200) {
      target = saturating_add(now_, ticks(static_cast<std::int64_t>(rng_() % 4)) + sub);
    } else if (mode < 7700) {
      target = saturating_add(
          now_,
          ticks(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(kReachSlots + 10))) + sub);
    } else if (mode < 9999 || rng_() % 16 != 0) {
      // Up to one or ten revolutions of level k (k = 1..kmax).
      const unsigned k = kmax_ == 0 ? 0 : 1 + static_cast<unsigned>(rng_() % kmax_);
      const std::int64_t revs = rng_() % 8 == 0 ? 10 : 1;
      const std::int64_t n =
          static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(revs * Wheel::kSlots * unit(k)));
      target = saturating_add(now_, ticks(n) + sub);
    } else {
      // To (or next to) the end of time, about once every 160k advances. The rest of the episode
      // then runs at the horizon.
      switch (rng_() % 3) {
        case 0: target = Nanos::max(); break;
        case 1: target = wheel_->horizon() - ticks(1 + static_cast<std::int64_t>(rng_() % 200)); break;
        default: target = wheel_->horizon() - ticks(static_cast<std::int64_t>(rng_() % 2000000)); break;
      }
    }
    std::size_t limit = std::numeric_limits<std::size_t>::max();
    if (rng_() % 4 == 0) {
      limit = rng_() % 2 == 0 ? 1 + rng_() % 8 : 1 + rng_() % (recs_.size() + 1);
    }
    do_advance(target, limit);
  }

  void do_advance(Nanos target, std::size_t limit) {
    now_ = std::max(now_, target);
    call_now_tick_ = floor_ticks(now_, tick_);
    limit_ = limit;
    ran_ = 0;
    last_eff_ = kI64Min;
    in_advance_ = true;
    trace("advance(", target.count(), ", ", limit, ") now tick ", call_now_tick_);
    std::size_t got = 0;
    bool threw = false;
    try {
      got = wheel_->advance(target, limit);
    } catch (const ModelThrow&) {
      threw = true;
    }
    in_advance_ = false;
    trace("  -> ran ", got, threw ? " and threw" : "");
    ++calls_;
    if (!failure_.empty()) return;
    if (threw) {
      // The thrower counts as fired (on_fire recorded it); the rest of the pass resumes in the next
      // call. As after a limit hit, the wheel steps on to the first tick with callbacks waiting
      // (or to now), so P is the smallest eff still due.
      if (wheel_->now() != now_) fail("now() after a throwing advance differs from the model's");
      const bool waiting = !by_eff_.empty() && by_eff_.begin()->first <= call_now_tick_;
      P_ = waiting ? by_eff_.begin()->first : call_now_tick_;
      caught_up_ = !waiting;
      return;
    }
    if (got != ran_) {
      fail("advance returned " + std::to_string(got) + " but " + std::to_string(ran_) + " callbacks ran");
      return;
    }
    if (wheel_->now() != now_) {
      fail("now() " + std::to_string(wheel_->now().count()) + " after advance, expected " +
           std::to_string(now_.count()));
      return;
    }
    const bool any = !by_eff_.empty();
    const std::int64_t min_eff = any ? by_eff_.begin()->first : kI64Max;
    if (ran_ < limit) {
      if (any && min_eff <= call_now_tick_) {
        const Rec& r = recs_.at(by_eff_.begin()->second);
        fail("advance ran " + std::to_string(ran_) + " < limit but left a due timer: eff tick " +
             std::to_string(min_eff) + " (deadline " + std::to_string(r.deadline.count()) + "ns, due tick " +
             std::to_string(r.due) + ") <= now tick " + std::to_string(call_now_tick_));
        return;
      }
      P_ = call_now_tick_;
      caught_up_ = true;
    } else {
      caught_up_ = false;
      ++total_limit_hits_;
      if (any && min_eff < last_eff_) {
        fail("limit hit, but a timer with eff tick " + std::to_string(min_eff) +
             " is still pending while one with eff tick " + std::to_string(last_eff_) + " ran");
        return;
      }
      P_ = (any && min_eff <= call_now_tick_) ? min_eff : call_now_tick_;
    }
  }

  // ---- callbacks ------------------------------------------------------------------------------

  void on_fire(std::uint64_t serial) {
    if (!failure_.empty()) return;
    if (destroying_) return fail("~Wheel ran a callback");
    if (!in_advance_) return fail("a callback ran outside advance()");
    auto it = recs_.find(serial);
    if (it == recs_.end()) {
      return fail("callback of timer #" + std::to_string(serial) +
                  " ran, but the model has it fired or cancelled (ran twice, or after cancel)");
    }
    const Rec rec = it->second;
    trace("  fire #", serial, " eff ", rec.eff, " deadline ", rec.deadline.count());
    if (rec.eff > call_now_tick_) {
      return fail("early: timer with eff tick " + std::to_string(rec.eff) + " (deadline " +
                  std::to_string(rec.deadline.count()) + "ns, due tick " + std::to_string(rec.due) +
                  ") ran in advance to now tick " + std::to_string(call_now_tick_));
    }
    if (rec.eff < last_eff_) {
      return fail("out of order: eff tick " + std::to_string(rec.eff) + " ran after eff tick " +
                  std::to_string(last_eff_) + " in the same call");
    }
    last_eff_ = rec.eff;
    ++ran_;
    if (ran_ > limit_) return fail("more callbacks than the limit " + std::to_string(limit_));
    remove(serial);
    ++fired_;
    ++total_fired_;
    if (wheel_->pending_count() != recs_.size()) {
      return fail("pending() inside a callback is " + std::to_string(wheel_->pending_count()) + ", model " +
                  std::to_string(recs_.size()));
    }
    if (lc_.live != static_cast<long>(recs_.size()) + 1) {
      return fail("live callables inside a callback " + std::to_string(lc_.live) + ", expected " +
                  std::to_string(recs_.size() + 1));
    }
    ++callback_depth_;
    nested(rec);
    --callback_depth_;
    if (rng_() % 300 == 0) {
      ++total_throws_;
      trace("  throw");
      throw ModelThrow{};
    }
  }

  // Re-entrant operations from inside a callback.
  void nested(const Rec& self) {
    const unsigned r = static_cast<unsigned>(rng_() % 64);
    if (r < 4) {
      // Cancel another timer: one due in this very pass is the interesting case.
      op_cancel();
    } else if (r < 5) {
      if (wheel_->cancel(self.id)) fail("a callback cancelling itself got true");
    } else if (r < 9) {
      const std::int64_t T = self.eff;  // the tick being processed
      static constexpr std::int64_t kSpan[] = {3, 130, 9000, 600000};
      const std::int64_t d =
          1 + static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(kSpan[rng_() % 4]));
      if (T > max_tick_ - d) return;
      const Nanos off(static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(tick_.count())));
      const Nanos deadline = Nanos((T + d) * tick_.count()) - off;
      const std::uint64_t serial = next_serial_++;
      const TimerId id = wheel_->schedule_at(deadline, Fire{this, serial, Counted(&lc_)});
      trace("  nested schedule_at(", deadline.count(), ") #", serial, " eff ", T + d);
      add_expected(id, serial, deadline, T + d, "schedule from a callback");
      ++total_nested_;
    } else if (r < 12) {
      // Move another timer (or, from the dead ids, this one: false) past the tick being processed.
      const std::int64_t T = self.eff;
      const std::int64_t d = 1 + static_cast<std::int64_t>(rng_() % 600000);
      if (T > max_tick_ - d) return;
      const auto [id, serial] = random_cancel_target();
      const Nanos deadline = Nanos((T + d) * tick_.count()) - Nanos(static_cast<std::int64_t>(rng_() % 2));
      const bool got = wheel_->reschedule(id, deadline);
      trace("  nested reschedule(raw ", id.raw(), ", ", deadline.count(), ") -> ", got);
      if (got != serial.has_value()) return fail("reschedule from a callback disagrees with the model");
      if (got) {
        move(*serial, deadline, T + d);
        ++rescheduled_;
        ++total_rescheduled_;
      }
    } else if (r < 13) {
      const std::size_t before = wheel_->pending_count();
      const std::size_t got = wheel_->advance(Nanos::max());
      if (got != 0) fail("advance() from a callback returned " + std::to_string(got));
      if (wheel_->pending_count() != before) fail("advance() from a callback changed pending()");
    }
  }

  // ---- invariants -----------------------------------------------------------------------------

  void check_invariants(const char* when) {
    if (wheel_->pending_count() != recs_.size()) {
      return fail(std::string(when) + ": pending() " + std::to_string(wheel_->pending_count()) + ", model " +
                  std::to_string(recs_.size()));
    }
    if (lc_.live != static_cast<long>(recs_.size())) {
      return fail(std::string(when) + ": live callables " + std::to_string(lc_.live) + ", model pending " +
                  std::to_string(recs_.size()));
    }
    check_next_deadline(when);
    const WheelStats s = wheel_->stats();
    if (s.scheduled != scheduled_ || s.rejected != rejected_ || s.cancelled != cancelled_ ||
        s.fired != fired_ || s.rescheduled != rescheduled_ || s.passes > calls_) {
      std::ostringstream os;
      os << when << ": stats disagree: scheduled " << s.scheduled << "/" << scheduled_ << " rejected "
         << s.rejected << "/" << rejected_ << " cancelled " << s.cancelled << "/" << cancelled_ << " fired "
         << s.fired << "/" << fired_ << " rescheduled " << s.rescheduled << "/" << rescheduled_ << " passes "
         << s.passes << "/" << calls_;
      fail(os.str());
    }
  }

  // next_deadline() flushes the cancels and moves the wheel has queued, so it is asked after one
  // operation in four only: the others leave the queues as they are, and the next operations
  // (cancels of queued nodes, moves queued twice, cancel and reuse of a node with a move queued)
  // meet them there.
  void check_next_deadline(const char* when) {
    if (op_ % 4 != 0) return;
    const std::optional<Nanos> nd = wheel_->next_deadline();
    if (recs_.empty()) {
      if (nd) fail(std::string(when) + ": next_deadline() has a value with nothing pending");
    } else if (!nd) {
      fail(std::string(when) + ": next_deadline() is nullopt with timers pending");
    } else {
      const std::int64_t min_eff = by_eff_.begin()->first;
      const std::int64_t now_tick = floor_ticks(now_, tick_);
      if (min_eff <= now_tick) {
        if (*nd > now_) {
          fail(std::string(when) + ": a timer is due (eff tick " + std::to_string(min_eff) +
               ") but next_deadline() " + std::to_string(nd->count()) + " > now " +
               std::to_string(now_.count()));
        }
      } else if ((caught_up_ && *nd <= now_) || *nd > Nanos(min_eff * tick_.count())) {
        fail(std::string(when) + ": next_deadline() " + std::to_string(nd->count()) +
             " is not in (now, earliest rounded deadline] = (" + std::to_string(now_.count()) + ", " +
             std::to_string(min_eff * tick_.count()) + "]");
      }
    }
  }

  void fail(const std::string& what) {
    if (!failure_.empty()) return;
    std::ostringstream os;
    os << what << "\n  at op " << op_ << " of episode " << episode_ << " (tick " << tick_.count()
       << "ns, max_pending " << max_pending_ << ", now " << now_.count() << "ns, P " << P_ << ", pending "
       << recs_.size() << ")\n  " << replay_hint(seed_);
    failure_ = os.str();
  }

  // TICKWHEEL_MODEL_TRACE=1 prints every operation of a replayed run to stderr.
  template <class... Args>
  void trace(const Args&... args) {
    if (!trace_) return;
    std::ostringstream os;
    os << "[op " << op_ << "] ";
    (os << ... << args);
    std::fprintf(stderr, "%s\n", os.str().c_str());
  }

  std::uint64_t seed_;
  std::uint64_t ops_;
  std::mt19937_64 rng_;
  bool trace_ = false;
  std::uint64_t op_ = 0;
  std::uint64_t episode_ = 0;
  std::string failure_;

  std::unique_ptr<Wheel> wheel_;
  Nanos tick_{1ms};
  std::int64_t max_tick_ = 0;
  std::size_t max_pending_ = 0;
  Nanos now_{0};
  std::int64_t P_ = 0;
  // False while the wheel waits, after a call that hit its limit, at a tick with callbacks still
  // due (so its processing tick is behind now()); true once nothing due is left, whether a later
  // call ran them or cancels took them. While false a timer is due, so next_deadline() must be at
  // or before now(); while true and nothing is due it must be after now() (the lag this guards
  // against is pinned down by the two WheelNextDeadline.AfterALimitHit* unit tests).
  bool caught_up_ = true;
  unsigned kmax_ = 1;

  std::unordered_map<std::uint64_t, Rec> recs_;              // serial -> pending timer
  std::set<std::pair<std::int64_t, std::uint64_t>> by_eff_;  // (eff, serial) of pending timers
  std::unordered_map<std::uint64_t, std::uint64_t> by_raw_;  // id.raw() -> serial of pending timers
  std::vector<std::uint64_t> live_;                          // serials of pending timers
  std::vector<TimerId> dead_;                                // ids that fired or were cancelled
  std::size_t dead_pos_ = 0;
  std::uint64_t next_serial_ = 1;
  LiveCount lc_;

  // The advance() call in progress.
  bool in_advance_ = false;
  bool destroying_ = false;
  long callback_depth_ = 0;  // 1 inside a callback: its own callable is alive while it runs
  std::int64_t call_now_tick_ = 0;
  std::size_t limit_ = 0;
  std::size_t ran_ = 0;
  std::int64_t last_eff_ = kI64Min;

  // Per-wheel counters, compared with stats().
  std::uint64_t scheduled_ = 0, rejected_ = 0, cancelled_ = 0, fired_ = 0, rescheduled_ = 0, calls_ = 0;
  std::uint64_t total_fired_ = 0, total_cancelled_ = 0, total_limit_hits_ = 0, total_nested_ = 0;
  std::uint64_t total_moved_ = 0, total_moved_ahead_ = 0, total_rejected_ = 0, horizon_wheels_ = 0;
  std::uint64_t total_throws_ = 0, total_rescheduled_ = 0, total_in_place_ = 0;
};
static_assert(sizeof(ModelRun::Fire) == 24);

void run_model(std::uint64_t seed, std::uint64_t ops) {
  SCOPED_TRACE(replay_hint(seed));
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  ModelRun run(seed, ops);
  const std::string failure = run.run();
  EXPECT_TRUE(failure.empty()) << failure;
  std::printf("[ model    ] %s\n", run.summary().c_str());
  ::testing::Test::RecordProperty("episodes", std::to_string(run.episodes()));
  ::testing::Test::RecordProperty("fired", std::to_string(run.total_fired()));
  // The run must have exercised what it is meant to.
  if (ops >= 100000 && failure.empty()) {
    EXPECT_GT(run.total_fired(), ops / 20) << replay_hint(seed);
    EXPECT_GT(run.total_cancelled(), ops / 50) << replay_hint(seed);
    EXPECT_GT(run.total_limit_hits(), 0u) << replay_hint(seed);
    EXPECT_GT(run.total_rescheduled(), ops / 100) << replay_hint(seed);
    EXPECT_GT(run.total_in_place(), ops / 1000) << replay_hint(seed);
  }
}

// The default is what runs in about two seconds in a Release build; TICKWHEEL_MODEL_OPS scales it.
constexpr std::uint64_t kDefaultOps = 6'000'000;

TEST(WheelModel, RandomSeed) {
  const std::uint64_t seed = seed_from_env_or_random();
  std::printf("[ model    ] %s\n", replay_hint(seed).c_str());
  run_model(seed, env_u64("TICKWHEEL_MODEL_OPS", kDefaultOps));
}

// Fixed seeds: the same operations on every run.
TEST(WheelModel, FixedSeed1) { run_model(1, env_u64("TICKWHEEL_MODEL_OPS", kDefaultOps) / 8); }
TEST(WheelModel, FixedSeed20240611) { run_model(20240611, env_u64("TICKWHEEL_MODEL_OPS", kDefaultOps) / 8); }
TEST(WheelModel, FixedSeedC0FFEE) { run_model(0xC0FFEE, env_u64("TICKWHEEL_MODEL_OPS", kDefaultOps) / 8); }

}  // namespace
}  // namespace tickwheel::test
