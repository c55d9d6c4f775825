// tests/fuzz/engine/stop.cpp — stop() against the model.
#include "engine/stop.hpp"

#include <cstdint>
#include <stdexcept>
#include <utility>

#include "engine/run.hpp"
#include "tickwheel/status.hpp"

namespace tickwheel::fuzz::engine {

void StopOp::op_stop() {
  EngineModel& model = run_.model;
  TICKWHEEL_FUZZ_TRACE("stop()");
  if (model.stopped) {
    check(run_.engine->stop().empty(), "a second stop() returned timers");
    return;
  }
  // A clear posted and not served yet is served by stop()'s drain, after the tasks' nodes came
  // back: callables of that shard may die inside stop(), which the model learns of after it. Set
  // before the helper thread below starts, which reads it (died()) as its tasks destroy callables.
  run_.lifetimes.stop_clearing = true;
  std::thread helper = run_queue();
  std::vector<tickwheel::Timer> left = call_stop();
  run_.lifetimes.stop_clearing = false;
  model.owner.reset();  // stop() ends an ownership
  if (helper.joinable()) {
    helper.join();
    run_.callbacks.quiet = false;
  }
  model.stopped = true;
  drain_after_stop();
  const Tally tally = check_returned(left);
  check_stats(left, tally);
  // Cancel some of what stop() returned (the rest are destroyed by ~Engine): each cancel returns
  // true and destroys that timer's callable at once, which names it.
  const std::uint8_t which = run_.in.u8();
  for (std::size_t i = 0; i < left.size(); ++i) {
    if (((which >> (i % 8)) & 1) == 0) continue;
    cancel_returned(left[i]);
  }
}

// stop() waits for every task handed over: the queue runs first, here, or meanwhile, on a helper
// thread whose callbacks take no action (see executor.hpp). Returns the helper, if it started.
std::thread StopOp::run_queue() {
  QueueExecutor* executor = run_.executor.get();
  std::thread helper;
  if (executor == nullptr || executor->tasks.empty()) return helper;
  if ((run_.in.u8() & 1) == 0) {
    executor->run_all();
    return helper;
  }
  std::vector<Task> tasks(executor->tasks.begin(), executor->tasks.end());
  executor->tasks.clear();
  run_.callbacks.quiet = true;
  helper = std::thread([executor, tasks = std::move(tasks)] {
    for (const Task& t : tasks) executor->run(t);
  });
  return helper;
}

std::vector<tickwheel::Timer> StopOp::call_stop() {
  std::vector<tickwheel::Timer> left;
  try {
    left = run_.engine->stop();
  } catch (const std::logic_error&) {
    fail("stop() on the thread that owns a shard was refused");
  }
  return left;
}

// Each shard's drain: the moves posted, then what the executor returned, then a clear posted.
void StopOp::drain_after_stop() {
  EngineModel& model = run_.model;
  for (std::size_t s = 0; s < run_.config.shards; ++s) {
    ShardModel& m = model.shards[s];
    model.drain_moves(s, model.tick_of(m.wheel_now));  // its drain applies the moves posted, then
    model.take_back(s, model.tick_of(m.wheel_now), run_.lifetimes);  // takes back what the executor returned
    check(m.executing == 0, "stop() returned with tasks not run", static_cast<long long>(s));
    if (m.clear_posted) {  // then serves a clear posted before it
      m.clear_posted = false;
      model.clear(s);
    }
  }
}

// What stop() must return: every timer neither fired (one-shot) nor cancelled, queued ones and
// periodic ones back from the executor included.
StopOp::Tally StopOp::check_returned(const std::vector<tickwheel::Timer>& left) {
  EngineModel& model = run_.model;
  const std::size_t shards = run_.config.shards;
  Tally tally{.expected = std::vector<std::size_t>(shards, 0),
              .returned = std::vector<std::size_t>(shards, 0)};
  std::uint64_t pending = 0;
  for (auto& [serial, r] : model.recs) {
    if (r.cancelled || (r.where != Where::queued && r.where != Where::linked)) continue;
    ++tally.expected[r.shard];
    ++pending;
    if (r.where == Where::queued) model.link(serial, r, r.due);
  }
  check(left.size() == pending, "stop() did not return every pending timer",
        static_cast<long long>(left.size()), static_cast<long long>(pending));
  for (const tickwheel::Timer& t : left) {
    check(t && t.status() == Status::ok && !t.cancelled() && !t.expired() && t.shard() < shards,
          "a timer stop() returned is not a pending one");
    ++tally.returned[t.shard()];
  }
  return tally;
}

// After stop() every counter is the shard's whole history, and adds up.
void StopOp::check_stats(const std::vector<tickwheel::Timer>& left, const Tally& tally) {
  EngineModel& model = run_.model;
  const EngineStats st = run_.engine->stats();
  std::uint64_t scheduled = 0;
  for (std::size_t s = 0; s < run_.config.shards; ++s) {
    ShardModel& m = model.shards[s];
    m.scheduled += m.queue.size();
    m.cancelled_reached = m.cancelled_total;
    m.queue.clear();
    m.published_cancelled = m.cancelled_total;
    model.publish(s);
    scheduled += m.scheduled;
    const ShardStats& ss = st.shards[s];
    const std::size_t returned = tally.returned[s];
    check(returned == tally.expected[s], "stop() returned a shard's pending timers short or over",
          lu(returned), lu(tally.expected[s]));
    check(ss.scheduled == m.scheduled && ss.fired == m.fired && ss.cancelled == m.cancelled_total &&
              ss.rearmed == m.rearmed && ss.skipped == m.skipped && ss.pending == returned &&
              ss.rescheduled == m.rescheduled && ss.clears == m.clears && ss.cleared == m.cleared,
          "a shard's stats after stop() are not its whole history", lu(ss.scheduled), lu(ss.cancelled));
    check(ss.scheduled + ss.rearmed == ss.fired + ss.skipped + ss.cancelled + returned,
          "scheduled + rearmed != fired + skipped + cancelled + returned, per shard");
  }
  check(st.scheduled == scheduled &&
            st.scheduled + st.rearmed == st.fired + st.skipped + st.cancelled + left.size(),
        "scheduled + rearmed != fired + skipped + cancelled + returned by stop()", lu(st.scheduled),
        lu(st.fired + st.cancelled + left.size()));
}

void StopOp::cancel_returned(tickwheel::Timer& t) {
  EngineModel& model = run_.model;
  Lifetimes& lives = run_.lifetimes;
  lives.died_last = 0;
  lives.expect_death = true;
  const bool got = t.cancel();
  lives.expect_death = false;
  check(got && lives.died_last != 0, "cancel() of a timer stop() returned did not cancel it there and then");
  const std::uint32_t serial = lives.died_last;
  Rec& r = model.recs.at(serial);
  check(r.where == Where::linked && !r.cancelled && r.shard == t.shard(),
        "stop() returned a timer that was not pending on its shard", serial);
  ShardModel& m = model.shards[r.shard];
  ++m.cancelled_total;
  ++m.cancelled_reached;
  ++m.published_cancelled;
  model.unlink(serial, r);
  r.where = Where::ended;
  r.cancelled = true;
  r.ended_at = model.schedules_ok;
  check(!t.cancel() && !r.handle.cancel(), "a second cancel of a timer returned true");
}

}  // namespace tickwheel::fuzz::engine
