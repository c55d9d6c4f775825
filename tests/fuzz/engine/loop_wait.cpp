// tests/fuzz/engine/loop_wait.cpp — prepare_wait() and finish_wait() against the model.
#include "engine/loop_wait.hpp"

#include <algorithm>
#include <stdexcept>

#include "engine/clock.hpp"
#include "engine/run.hpp"

namespace tickwheel::fuzz::engine {

// The loop wakes before it polls (PollOps::poll) or sleeps again, one wait at a time, as a real
// loop does.
void LoopWait::op_wait() {
  Engine& engine = *run_.engine;
  const std::int64_t tick = run_.config.tick;
  const std::uint8_t b = run_.in.u8();
  const std::size_t s = run_.pick_shard(b);
  const bool finish = (b & 0x08) != 0;
  if (s >= run_.config.shards) {
    check(
        throws<std::out_of_range>([&] { finish ? engine.finish_wait(s) : (void)engine.prepare_wait(s, {}); }),
        "prepare_wait() or finish_wait() of a shard that does not exist");
    return;
  }
  if (run_.model.shards[s].plan) wake(s);
  if (finish) return;
  std::optional<std::int64_t> until;
  switch ((b >> 1) & 3) {
    case 0: break;
    case 1: until = sat_add(g_clock, -1 - sat_mul(run_.in.u8(), tick / 8)); break;
    case 2: until = g_clock; break;
    default: until = sat_add(g_clock, 1 + sat_mul(run_.in.u8(), tick / 8)); break;
  }
  sleep(s, until);
}

void LoopWait::sleep(std::size_t s, std::optional<std::int64_t> until) {
  const EngineModel& model = run_.model;
  ShardModel& m = run_.model.shards[s];
  // False while work waits that a sleep would leave (hand-offs, cancelled ones included, returned
  // nodes, posted moves, a posted clear), and once stopped.
  const bool expected =
      !model.stopped && m.queue.empty() && m.returned.empty() && m.moves.empty() && !m.clear_posted;
  const bool slept = run_.engine->prepare_wait(s, until ? std::optional<Nanos>(Nanos(*until)) : std::nullopt);
  TICKWHEEL_FUZZ_TRACE("prepare_wait(%zu, %lld) -> %d", s, until ? ll(*until) : -1LL, slept);
  check(slept == expected, "prepare_wait() did not sleep exactly when nothing waits", slept, expected);
  if (!slept) return;
  // Wakeup's plan: the time (a negative one is 0), or none; 0 is its "awake", so a plan of 0 is 1.
  m.plan = !until ? ~std::uint64_t{0}
                  : std::max<std::uint64_t>(static_cast<std::uint64_t>(std::max<std::int64_t>(*until, 0)), 1);
}

void LoopWait::wake(std::size_t s) {
  ShardModel& m = run_.model.shards[s];
  TICKWHEEL_FUZZ_TRACE("finish_wait(%zu)", s);
  run_.engine->finish_wait(s);
  m.plan.reset();
  m.loop_now = std::max(m.loop_now, g_clock);
}

}  // namespace tickwheel::fuzz::engine
