// tests/fuzz/fuzz_engine.cpp — libFuzzer target: tickwheel::Engine in caller-driven mode
// (Threads::manual, one or two shards, a clock the target drives), single-threaded but for one
// helper thread (see engine/executor.hpp), against a reference model of the contract in engine.hpp
// and executor.hpp (engine/model.hpp).
//
// The input. The first bytes pick the options (engine/setup.hpp). Then each front byte is one
// operation, by its value mod 16 (and its high bits):
//   0-3     a one-shot schedule: schedule_after / schedule_at / schedule_after_on / schedule_at_on,
//           a good shard or one past the last (engine/schedules.hpp)
//   4, 5    Timer::cancel (engine/handles.hpp); 6 below 0x80 too
//   6       from 0x80 up, the timer and shard API (op_api): 0x86 and 0xE6 reschedule /
//           reschedule_after, 0x96 deadline() / remaining() (engine/handles.hpp); 0xA6 raw values
//           (engine/raw_values.hpp); 0xB6 clear or post_clear / post_clear_all, 0xC6
//           for_each_pending, 0xD6 own_shard / release_shard (engine/shard_ops.hpp); 0xF6 the
//           loop's sleep, prepare_wait / finish_wait (engine/loop_wait.hpp)
//   7, 8    move the clock (small steps and big jumps; it never goes back; engine/clock.hpp)
//   9-13    poll(shard) or poll(shard, now), with or without a limit, of a shard that exists or
//           not, then perhaps the loop's sleep until next_deadline() (engine/polls.hpp)
//   14      schedule_every / schedule_every_on (engine/schedules.hpp)
//   15      by bits 4-5: a look at a timer's handle (0), running queued executor tasks (1, 2: a few
//           or all, oldest first or picked anywhere in the queue), stop() (3, engine/stop.hpp)
// Bytes from the back decide what each callback does (engine/callbacks.hpp), so that a change which
// makes one more callback run shifts only those decisions, not every later operation. After every
// operation the invariants are checked (engine/checks.hpp); at the end, stop() if none came, then
// ~Engine must destroy every callable left without running it.
//
// The files of engine/, one concept each: run.hpp (the run that holds the parts), setup, model,
// lifetimes (the callables'), executor (the queueing executor), clock, schedules, due_path (a due
// timer claimed by the scheduling thread), handles, raw_values, shard_ops, loop_wait, polls, stop,
// callbacks, checks.
#include <cstddef>
#include <cstdint>

#include "engine/clock.hpp"
#include "engine/run.hpp"
#include "fuzz_support.hpp"

namespace tickwheel::fuzz::engine {

void EngineRun::run() {
  setup.build();
  run_ops(in, *this);
  if (!model.stopped) stopping.op_stop();
  check_invariants();
  destroy_checking_callables(engine, lifetimes.destroying, lifetimes.alive, "~Engine left callables alive");
}

void EngineRun::step(std::uint8_t op) {
  switch (op % 16) {
    case 0:
    case 1:
    case 2:
    case 3: schedules.op_schedule(op); break;
    case 4:
    case 5: handles.op_cancel(); break;
    case 6:
      if (op >= 0x80) {
        op_api(op);
      } else {
        handles.op_cancel();
      }
      break;
    case 7:
    case 8: move_clock(in, config.tick); break;
    case 14: schedules.op_schedule_every(op); break;
    case 15:
      switch ((op >> 4) & 3) {
        case 0: op_handles(); break;
        case 3: stopping.op_stop(); break;
        default: op_tasks(); break;
      }
      break;
    default: polling.op_poll(op); break;
  }
}

// Ops 0x86, 0x96, ..., 0xF6 from the top level: the timer and shard API, and the loop's sleep.
void EngineRun::op_api(std::uint8_t op) {
  switch ((op >> 4) & 7) {
    case 0:
    case 6: handles.op_reschedule(); break;
    case 1: handles.op_deadline(); break;
    case 2: raw_values.op_raw(); break;
    case 3: {
      const std::uint8_t b = in.u8();
      if ((b & 0x80) != 0) {
        shard_ops.post_clear(b, 0);
      } else {
        shard_ops.clear_shard(pick_shard(b));
      }
      break;
    }
    case 4: shard_ops.walk_shard(pick_shard(in.u8())); break;
    case 7: loop.op_wait(); break;
    default: shard_ops.op_own(); break;
  }
}

// A delay, also an absolute deadline: zero, ticks less a little, up to a byte or two of ticks,
// far ones, negative ones, the ends of time, anything.
std::int64_t EngineRun::delay() {
  const std::int64_t tick = config.tick;
  const std::uint8_t kind = in.u8();
  switch (kind % 8) {
    case 0: return 0;
    case 1: return sat_mul((kind >> 4) & 7, tick) - in.u8() * (tick / 256);
    case 2: return sat_mul(in.u8(), tick);
    case 3: return sat_mul(in.u16(), tick);
    case 4: return sat_mul(sat_mul(in.u8(), std::int64_t{1} << (8 * (1 + in.u8() % 3))), tick);
    case 5: return -sat_mul(in.u8(), tick) - in.u8();
    case 6: return in.u8() % 2 == 0 ? kI64Max : kI64Min;
    default: return static_cast<std::int64_t>(in.u64());
  }
}

// A poll's limit: none, or 0 to 7.
std::size_t EngineRun::limit() {
  const std::uint8_t b = in.u8();
  return (b & 0x80) != 0 ? b & 7 : Engine::kNoLimit;
}

std::uint32_t EngineRun::any_timer() { return model.serials[in.u16() % model.serials.size()]; }

// A shard, and now and then one that does not exist.
std::size_t EngineRun::pick_shard(std::uint8_t b) const {
  return (b & 0x70) == 0x70 ? config.shards + (b & 1) : b % config.shards;
}

// A callback's own shard, another, or one that does not exist, as byte b says.
std::size_t EngineRun::api_shard(std::size_t own, std::uint8_t b) const {
  return (b & 0x70) == 0x70 ? config.shards + (b & 1) : (own + b) % config.shards;
}

// The executor runs queued tasks as the input says; with no executor, a look at a handle instead.
void EngineRun::op_tasks() {
  if (!executor) return op_handles();
  executor->run_as_told(in);
}

void EngineRun::op_handles() {
  if (model.serials.empty()) return;
  invariants.check_handle(any_timer());
}

}  // namespace tickwheel::fuzz::engine

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tickwheel::fuzz::Bytes in(data, size);
  tickwheel::fuzz::engine::EngineRun(in, size).run();
  return 0;
}
