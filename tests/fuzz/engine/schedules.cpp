// tests/fuzz/engine/schedules.cpp — the schedule calls and the record of what they made.
#include "engine/schedules.hpp"

#include <string>
#include <utility>

#include "engine/clock.hpp"
#include "engine/run.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz::engine {

// A one-shot: op bits 4-5 pick schedule_after (0), schedule_at (1), a given shard (2: bit 0 for
// schedule_at_on) or one past the last (3); op bits 6-7 both set with schedule_after pass a null
// function pointer instead of a callable.
void ScheduleOps::op_schedule(std::uint8_t op) {
  Engine& engine = *run_.engine;
  const unsigned kind = (op >> 4) % 4;
  const std::int64_t d = run_.delay();
  if (kind == 0 && (op & 0xC0) == 0xC0) {
    // A null function pointer is refused before anything else, and not counted as rejected.
    const std::uint64_t rejected = engine.stats().rejected;
    const tickwheel::Timer t = engine.schedule_after(Nanos(d), kNullFn);
    check(!t && t.status() == Status::null_callback && engine.stats().rejected == rejected,
          "a null function pointer was not refused with null_callback");
    return failed(t);
  }
  const std::uint32_t serial = next_serial_++;
  const std::size_t asked = decode_asked(kind);
  // The deadline, as the engine computes it: the delay from its clock (or the shard's loop time,
  // see base_for()), or absolute: schedule_at, and schedule_at_on for a given shard (op bit 0).
  // Bit 1 puts an absolute deadline near the clock (the delay from it), where the ticks that are
  // over and those that are not meet: the due path's edge.
  const bool absolute = kind == 1 || (kind == 2 && (op & 1) != 0);
  const Expect e = expect(asked);
  const std::int64_t deadline = !absolute ? sat_add(base_for(e), d) : (op & 2) != 0 ? sat_add(g_clock, d) : d;
  const tickwheel::Timer t = call(kind, asked, absolute, d, deadline, serial);
  TICKWHEEL_FUZZ_TRACE("schedule #%u (kind %u, %s, shard %lld, deadline %lld) -> %s, shard %zu", serial, kind,
                       absolute ? "at" : "after",
                       asked == Engine::kAnyShard ? -1LL : static_cast<long long>(asked), ll(deadline),
                       std::string(to_string(t.status())).c_str(), t.shard());
  if (kind == 3) return no_such_shard(t, e);
  record(t, serial, e, Rec{}, deadline, absolute);
}

// The shard a schedule asks for: any (kinds 0 and 1), a given one (2), one past the last (3).
std::size_t ScheduleOps::decode_asked(unsigned kind) {
  const std::size_t shards = run_.config.shards;
  std::size_t asked = Engine::kAnyShard;
  if (kind == 2) asked = run_.in.u8() % shards;
  if (kind == 3) asked = shards + run_.in.u8() % 2;
  return asked;
}

// The one-shot schedule call itself. Only an absolute one-shot may be claimed by this thread (see
// record()), which wakes no loop: the due path watches the call.
tickwheel::Timer ScheduleOps::call(unsigned kind, std::size_t asked, bool absolute, std::int64_t d,
                                   std::int64_t deadline, std::uint32_t serial) {
  Engine& engine = *run_.engine;
  tickwheel::Timer t;
  Fire fn(&run_, serial);
  run_.due_path.open(absolute);
  switch (kind) {
    case 0: t = engine.schedule_after(Nanos(d), std::move(fn)); break;
    case 1: t = engine.schedule_at(Nanos(deadline), std::move(fn)); break;
    default:
      t = absolute ? engine.schedule_at_on(asked, Nanos(deadline), std::move(fn))
                   : engine.schedule_after_on(asked, Nanos(d), std::move(fn));
      break;
  }
  run_.due_path.close();
  return t;
}

// A periodic timer: op bits 4-5 pick any shard (0 and 1), a given one (2) or one past the last (3);
// the call's period and flags as PeriodicCall decodes them.
void ScheduleOps::op_schedule_every(std::uint8_t op) {
  Engine& engine = *run_.engine;
  const unsigned kind = (op >> 4) % 4;
  const PeriodicCall call = PeriodicCall::decode(run_.in, run_.config.tick, [this] { return run_.delay(); });
  const std::int64_t p = call.period_ns;
  const PeriodicOptions& opts = call.options;
  const std::size_t asked = decode_asked(kind);
  const Expect e = expect(asked);
  if (call.null_fn) {
    // A null function pointer is refused first, whatever the period or the shard.
    const tickwheel::Timer t = engine.schedule_every_on(asked, Nanos(p), kNullFn, opts);
    check(!t && t.status() == Status::null_callback && engine.stats().rejected == e.rejected,
          "a null function pointer was not refused with null_callback");
    return failed(t);
  }
  const std::uint32_t serial = next_serial_++;
  tickwheel::Timer t;
  {
    Fire fn(&run_, serial);
    t = kind == 0 ? engine.schedule_every(Nanos(p), std::move(fn), opts)
                  : engine.schedule_every_on(asked, Nanos(p), std::move(fn), opts);
  }
  const std::int64_t first = call.first_delay();
  TICKWHEEL_FUZZ_TRACE(
      "schedule_every #%u (period %lld, %s, misfire %u, first %lld, shard %lld) -> %s, shard %zu", serial,
      ll(p), opts.cadence == Cadence::fixed_rate ? "fixed rate" : "fixed delay",
      static_cast<unsigned>(opts.misfire), ll(first),
      asked == Engine::kAnyShard ? -1LL : static_cast<long long>(asked),
      std::string(to_string(t.status())).c_str(), t.shard());
  if (call.refused(run_.config.tick)) {
    // Refused before a shard is chosen, so before no_such_shard and stopped; not counted.
    check(!t && t.status() == Status::bad_period, "a bad period was not refused with bad_period", p);
    check(engine.stats().rejected == e.rejected, "bad_period was counted as rejected");
    return failed(t);
  }
  if (kind == 3) return no_such_shard(t, e);
  Rec rec;
  rec.periodic = true;
  rec.rule = call.rule(run_.config.tick);
  record(t, serial, e, rec, sat_add(base_for(e), first));
}

// What a relative deadline counts from (Engine::schedule_after): the shard's loop time where the
// schedule goes straight into the wheel (a callback on its own shard; the owner, outside a
// callback of another shard), else the engine's clock now.
std::int64_t ScheduleOps::base_for(const Expect& e) const {
  const EngineModel& model = run_.model;
  if (!e.target || *e.target >= run_.config.shards) return g_clock;
  return model.links_directly(*e.target) ? model.shards[*e.target].loop_now : g_clock;
}

Expect ScheduleOps::expect(std::size_t asked) {
  const EngineModel& model = run_.model;
  const std::size_t shards = run_.config.shards;
  Expect e;
  // Which shard: one asked for, else a callback's own (inline), else the thread's home shard.
  if (asked != Engine::kAnyShard) {
    e.target = asked;
  } else if (!model.polls.empty()) {
    e.target = model.polls.back().shard;
  } else if (model.owner) {
    e.target = model.owner;  // the shard this thread owns
  } else if (model.home) {
    e.target = model.home;
  }
  // Admission under max_pending_per_shard: exact, one thread scheduling (see pending_on()).
  const EngineStats st = run_.engine->stats();
  e.admits.assign(shards, true);
  if (run_.config.max_pending != 0) {
    for (std::size_t s = 0; s < shards; ++s) e.admits[s] = model.pending_on(s) < run_.config.max_pending;
  }
  e.rejected = st.rejected;
  return e;
}

void ScheduleOps::no_such_shard(const tickwheel::Timer& t, const Expect& e) {
  check(!t && t.status() == Status::no_such_shard,
        "a schedule on a shard past the last did not fail with no_such_shard");
  check(run_.engine->stats().rejected == e.rejected, "no_such_shard was counted as rejected");
  failed(t);
}

// Checks a schedule's outcome and records the timer: linked at once when a callback schedules it
// on its own shard, claimed and handed to the executor at once when it takes the due path (see
// DuePath), else queued for the shard's next transfer.
void ScheduleOps::record(const tickwheel::Timer& t, std::uint32_t serial, const Expect& e, Rec rec,
                         std::int64_t deadline, bool absolute) {
  EngineModel& model = run_.model;
  const std::uint64_t rejected_now = run_.engine->stats().rejected;
  const std::uint64_t claimed_here = run_.due_path.take_handed();  // execute() calls in the schedule
  if (!t) check(claimed_here == 0, "a schedule that failed handed a task to the executor");
  if (refused(t, e, rejected_now)) return failed(t);
  const std::size_t s = landed(t, e, rejected_now);
  ++model.schedules_ok;
  rec.handle = t;
  rec.shard = s;
  rec.due = due_tick(deadline, run_.config.tick);
  Rec& r = model.recs.emplace(serial, rec).first->second;
  model.serials.push_back(serial);
  const bool claimed = absolute && !r.periodic && !model.links_directly(s) && run_.due_path.claims(s, r.due);
  check(claimed_here == (claimed ? 1 : 0),
        "a schedule handed a task to the executor other than the due path says", lu(claimed_here), claimed);
  if (claimed) return run_.due_path.claimed(t, serial, r);
  check(!t.cancelled() && !t.expired() && t.is_pending(),
        "a new timer's handle says cancelled, expired or not pending");
  link_or_queue(serial, r);
}

// A schedule that failed: after stop(), with `stopped`; else only under max_pending_per_shard.
// Both are counted as rejected. Returns whether it failed.
bool ScheduleOps::refused(const tickwheel::Timer& t, const Expect& e, std::uint64_t rejected_now) {
  if (run_.model.stopped) {
    check(!t && t.status() == Status::stopped, "a schedule after stop() did not fail with stopped");
    check(rejected_now == e.rejected + 1, "a schedule refused after stop() was not counted as rejected");
    return true;
  }
  if (t) return false;
  check(t.status() == Status::max_pending_reached, "a schedule failed", static_cast<long long>(t.status()));
  check(run_.config.max_pending != 0 &&
            (e.target ? !e.admits[*e.target] : (!e.admits[0] || !e.admits[run_.config.shards - 1])),
        "a schedule was refused with max_pending_reached below the limit");
  check(rejected_now == e.rejected + 1, "a refused schedule was not counted as rejected");
  return true;
}

// A schedule that succeeded: its handle, and the shard it landed on, which is the one due. The
// thread's first schedule outside a callback, on no given shard, learns its home shard.
std::size_t ScheduleOps::landed(const tickwheel::Timer& t, const Expect& e, std::uint64_t rejected_now) {
  check(t.status() == Status::ok, "a good handle's status is not ok");
  check(rejected_now == e.rejected, "a schedule that succeeded was counted as rejected");
  const std::size_t s = t.shard();
  check(s < run_.config.shards, "a timer on a shard that does not exist", static_cast<long long>(s));
  if (e.target) {
    check(s == *e.target, "a timer landed on another shard than the one due", static_cast<long long>(s),
          static_cast<long long>(*e.target));
  } else {
    run_.model.home = s;  // its home shard from now on
  }
  check(e.admits[s], "a schedule was admitted past max_pending_per_shard", static_cast<long long>(s));
  return s;
}

// A callback's schedule on its own shard is linked at once, and so is the owner's on the shard it
// owns (outside a callback of another shard); any other goes through the queue.
void ScheduleOps::link_or_queue(std::uint32_t serial, Rec& r) {
  EngineModel& model = run_.model;
  const std::size_t s = r.shard;
  if (!model.polls.empty() && model.polls.back().shard == s) {
    const PollCtx& ctx = model.polls.back();
    r.linked_poll = ctx.id;
    r.linked_call = ctx.call;
    r.linked_late = r.due <= ctx.running_due;
    ++model.shards[s].scheduled;
    model.link(serial, r, r.due);
  } else if (model.polls.empty() && model.owner == s) {
    ++model.shards[s].scheduled;  // published at the shard's next pass
    model.link(serial, r, r.due);
  } else {
    model.shards[s].queue.push_back(serial);
  }
}

void ScheduleOps::failed(const tickwheel::Timer& t) {
  check(!t && !t.cancelled() && !t.expired() && t.shard() == 0, "a failed handle is not an empty one");
  check_empty(t);
  last_failure = t;
}

void ScheduleOps::check_empty(const tickwheel::Timer& t) {
  tickwheel::Timer copy = t;
  check(!copy.cancel(), "cancel() of an empty handle returned true");
  check(!copy.is_pending() && copy.raw() == 0, "an empty handle says pending, or has a raw value");
  check(!copy.reschedule_after(Nanos(0)) && !copy.reschedule(Nanos{}),
        "reschedule() of an empty handle returned true");
  check(!copy.deadline() && !copy.remaining(), "deadline() or remaining() of an empty handle has a value");
}

}  // namespace tickwheel::fuzz::engine
