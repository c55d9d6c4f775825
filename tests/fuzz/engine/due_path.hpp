// tests/fuzz/engine/due_path.hpp — the due path (EngineCore::commit, claim_due). A one-shot that the
// fuzz thread schedules at an absolute deadline (schedule_at / schedule_at_on, at the top level or
// from a task's callback) through the shard's queue (not as its owner, whose schedules link
// directly) is claimed by the scheduling thread itself when the executor says any_thread(),
// max_pending_per_shard is 0, the shard's loop sleeps (prepare_wait returned true, no finish_wait
// yet) with a plan past the end of the deadline's tick, and that tick is over by the engine's clock
// (due * tick <= now: a deadline at now takes it only on a tick's start). Then, before
// schedule_at() returns: the handle is expired, not pending, its cancel() fails; the shard's
// scheduled, fired and executing count it (live, not at a pass); its task is in the executor's
// queue (execute() came from the schedule, the only execute() outside a poll); no hand-off is
// queued, and the loop's eventfd was not signalled, so the sleep goes on. The task runs when the
// input says, as any other, its callable dies after the run, a later pass (or stop()'s drain) takes
// the node back, and stop() waits for it.
//
// That the due path wakes no loop is checked on the shard's eventfd, only for inputs under 4096
// bytes: a thread's 4096th post to a shard (a claim counts as one) nudges its sleeping loop
// whatever the plan (ProducerState::kNudgeEvery), and the model does not count posts; each post
// takes a byte of the input at least, so below 4096 bytes a readable eventfd is a signal.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/model.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::fuzz::engine {

class EngineRun;

class DuePath {
 public:
  DuePath(EngineRun& run, std::size_t input_size) noexcept : run_(run), no_nudge_(input_size < 4096) {}

  // Around a one-shot schedule call: an absolute one with an executor that takes tasks from any
  // thread may be claimed, so execute() may come; each shard's eventfd is read before, for
  // claimed() to compare.
  void open(bool absolute);
  void close();
  // The execute() calls the schedule made, for the next schedule to count its own.
  std::uint64_t take_handed();

  // Whether a one-shot this thread schedules at an absolute deadline (due at tick `due`) on shard
  // s, through its queue, is claimed by this thread and handed to the executor there and then.
  bool claims(std::size_t s, std::uint64_t due) const;
  // The checks and the model's record of a claim.
  void claimed(const tickwheel::Timer& t, std::uint32_t serial, Rec& r);

  // Whether shard s's eventfd has a signal its loop has not read (finish_wait() reads it).
  bool readable(std::size_t s) const;

 private:
  EngineRun& run_;
  const bool no_nudge_;          // no post is a shard's 4096th: only a signal makes its eventfd readable
  std::vector<bool> signalled_;  // each shard's eventfd readable before the schedule in the due window
};

}  // namespace tickwheel::fuzz::engine
