// tests/fuzz/engine/callbacks.cpp — each callback checked against the model, and what it does.
#include "engine/callbacks.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

void Callbacks::on_fire(std::uint32_t serial) {
  EngineModel& model = run_.model;
  check(!run_.lifetimes.destroying, "~Engine ran a callback", serial);
  const auto it = model.recs.find(serial);
  check(it != model.recs.end(), "a callback of a timer never scheduled", serial);
  if (run_.executor) return on_task(serial, it->second);
  check(!model.polls.empty(), "a callback ran outside poll()", serial);
  run_inline(serial, it->second, model.polls.back());
}

void Callbacks::on_callback_error(std::exception_ptr e) {
  bool ours = false;
  try {
    std::rethrow_exception(std::move(e));
  } catch (const Thrown&) {
    ours = true;
  } catch (...) {
  }
  check(ours, "on_callback_error was given an exception no callback threw");
  ++errors_reported;
}

// What the contract says of a timer whose callback a pass runs inline.
void Callbacks::check_may_run(std::uint32_t serial, const Rec& r, const PollCtx& ctx) {
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
}

// A callback run inline by the pass `ctx` (the innermost poll in progress).
void Callbacks::run_inline(std::uint32_t serial, Rec& r, PollCtx& ctx) {
  EngineModel& model = run_.model;
  TICKWHEEL_FUZZ_TRACE("  #%u runs (due %lld, T %lld)", serial, lu(r.due), lu(ctx.T));
  check_may_run(serial, r, ctx);
  ShardModel& m = model.shards[r.shard];
  model.unlink(serial, r);
  if (r.periodic && r.rule.skips(r.due, ctx.T)) {
    // At the horizon a drop re-arms at the last tick, which is not after now: the next advance()
    // call runs it. So this run is allowed only there, in a pass an earlier callback's throw split.
    check(ctx.call > 0 && r.rule.first_grid_point_after(r.due, ctx.T, run_.config.max_tick) <= ctx.T,
          "a Misfire::skip timer a whole period behind ran", serial);
    ++ctx.unseen_skips;
    r.floor = std::min(r.floor, r.due);
    r.due = run_.config.max_tick;
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
    r.ended_at = model.schedules_ok;
    run_.lifetimes.awaiting_death.insert(serial);
  }
  check(!r.handle.cancelled() && r.handle.expired() != r.periodic,
        "inside its callback a timer's handle does not say expired (one-shot) or pending (periodic)", serial);
  const bool do_throw = act(serial, r);
  after_inline_run(serial, r, ctx);
  if (do_throw) {
    // The shard counts it and calls the wheel again for the rest of its limit: a new advance().
    ++m.errors;
    ++ctx.call;
    throw Thrown{};
  }
}

// As the callback returns: a one-shot has ended; a periodic timer ends if it was cancelled
// meanwhile (the re-arm, refused, destroys it), else is re-armed. At or before the pass's now it
// waits for the next call. Fixed delay counts from the engine's clock as the callback returned
// (engine.hpp), as for a task; not from the pass's now, which a long callback or poll(shard, now)
// leaves elsewhere.
void Callbacks::after_inline_run(std::uint32_t serial, Rec& r, const PollCtx& ctx) {
  if (!r.periodic) {
    r.where = Where::ended;
  } else if (r.cancelled) {
    r.where = Where::ended;
    run_.lifetimes.awaiting_death.insert(serial);
  } else {
    run_.model.link(serial, r,
                    r.rule.next_run(r.due, ctx.T, g_clock, run_.config.tick, run_.config.max_tick));
    r.linked_poll = ctx.id;
    r.linked_call = ctx.call;
    r.linked_late = true;
    if (r.due <= ctx.T) r.floor = ctx.running_due;
    TICKWHEEL_FUZZ_TRACE("  #%u re-armed for tick %lld", serial, lu(r.due));
  }
}

// A callback run by Task::run: the timer was handed over (or may have been, see
// PollOps::settle_hand_overs), and its node goes back to its shard when the callback returns.
void Callbacks::on_task(std::uint32_t serial, Rec& r) {
  const QueueExecutor& executor = *run_.executor;
  TICKWHEEL_FUZZ_TRACE("  task of #%u runs", serial);
  check(quiet || (!executor.task_polls.empty() && executor.task_polls.back() == run_.model.polls.size()),
        "with an executor a callback ran outside a task", serial);
  const bool maybe = r.where == Where::linked && r.maybe_handed;
  check(r.where == Where::handed || maybe, "a task ran for a timer that was not handed over", serial);
  if (maybe) {
    run_.model.hand_over(serial);
    ++maybe_ran;
  }
  ShardModel& m = run_.model.shards[r.shard];
  r.where = Where::in_task;
  if (!r.periodic) {
    r.ran = true;
    run_.lifetimes.awaiting_death.insert(serial);
  }
  check(!r.periodic || r.handle.cancelled() == r.cancelled,
        "inside its task a periodic timer's handle does not say whether it was cancelled", serial);
  check(r.handle.expired() != r.periodic, "inside its task a timer's handle says expired wrongly", serial);
  const bool do_throw = !quiet && act(serial, r);
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
bool Callbacks::act(std::uint32_t serial, const Rec& r) {
  Bytes& in = run_.in;
  Bytes::FromBack nested(in);
  const std::uint8_t what = in.u8();
  if (what != 0) TICKWHEEL_FUZZ_TRACE("  callback of #%u does %u", serial, what);
  switch (what % 8) {
    case 1: move_clock(in, run_.config.tick); break;  // a long callback: time passes while it runs
    case 2: run_.op_tasks(); break;                   // the executor runs tasks from inside one
    case 3: api_action(serial, r, what); break;       // 0x03 and 0x0B: nothing
    case 4:
      if (!run_.model.serials.empty()) run_.handles.cancel(run_.any_timer());
      break;
    case 5: {
      const std::uint8_t how = in.u8();
      if ((how & 3) == 3) {
        run_.schedules.op_schedule_every(how);
      } else {
        run_.schedules.op_schedule(how);
      }
      break;
    }
    case 6: {
      const std::uint8_t how = in.u8();
      // Another shard (when there is one) is polled in a nested pass; one being polled is refused.
      run_.polling.poll((r.shard + 1 + how) % run_.config.shards, std::nullopt,
                        (how & 0x80) != 0 ? how & 3 : Engine::kNoLimit);
      break;
    }
    case 7:
      check(catches<std::logic_error>([&] { static_cast<void>(run_.engine->stop()); }),
            "stop() from a callback was not refused");
      break;
    default: break;
  }
  // Its own cancel: false for a one-shot (it is firing), true for a periodic timer not cancelled.
  if ((what & 8) != 0) run_.handles.cancel(serial);
  return what >= 0xF0;
}

// A callback's use of the timer and shard API (act(), a byte 3 mod 8): inline, on its shard's own
// thread; on the executor, on the owner's thread or another.
void Callbacks::api_action(std::uint32_t serial, const Rec& r, std::uint8_t what) {
  Bytes& in = run_.in;
  switch ((what >> 4) & 7) {
    case 1:
    case 7:
      if (!run_.model.serials.empty()) {
        const std::uint8_t how = in.u8();
        run_.handles.reschedule(run_.any_timer(), how);
      }
      break;
    case 2: run_.handles.reschedule(serial, in.u8()); break;  // itself: firing or running, so refused
    case 3: {
      const std::uint8_t how = in.u8();
      run_.handles.check_deadline((how & 0x80) != 0 ? serial : run_.any_timer(), how);
      break;
    }
    case 4: {
      const std::uint8_t b = in.u8();
      if ((b & 0x80) != 0) {
        run_.shard_ops.post_clear(b, r.shard);
      } else {
        run_.shard_ops.clear_shard(run_.api_shard(r.shard, b));
      }
      break;
    }
    case 5: run_.shard_ops.walk_shard(run_.api_shard(r.shard, in.u8())); break;
    case 6: run_.raw_values.op_raw(); break;
    default: break;
  }
}

}  // namespace tickwheel::fuzz::engine
