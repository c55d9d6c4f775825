// engine/core/shard_tasks.hpp — a shard's side of its executor (EngineOptions::executor): handing a
// claimed timer over as a Task, running a Task on the executor's thread and giving its node back,
// and waiting at stop() for every task handed out.
//
// Threads: dispatch() is the shard's own thread's (its pass); execute_claimed() and skips_worker()
// any producer's (a due timer that skips the worker); run() the executor's threads'; wait_for_all()
// the stopping thread's, once the worker is joined. With no executor (inline callbacks) only
// dispatch(), which then hands nothing over, and callback_threw() are called.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <cstdint>
#include <functional>

#include "core/shard_counters.hpp"
#include "core/shard_host.hpp"
#include "core/shard_inbox.hpp"
#include "tickwheel/detail/arith.hpp"
#include "tickwheel/engine_options.hpp"
#include "tickwheel/executor.hpp"

namespace tickwheel::detail {

class Shard;

class ShardTasks {
 public:
  // The tasks of `shard`, whose host, inbox and counters these are; `opts` the engine's.
  ShardTasks(Shard& shard, ShardHost& host, ShardInbox& inbox, ShardCounters& counters,
             const EngineOptions& opts) noexcept;

  // Whether a timer due at tick `due_tick` should skip the worker (EngineCore::commit): an executor
  // that takes tasks from any thread, and a worker that sleeps past the tick's end, so that a
  // hand-off would wake it. A hint (see Wakeup::sleeps_past); the caller still checks the clock.
  bool skips_worker(std::uint64_t due_tick) const noexcept {
    return any_thread_ && inbox_.wake().sleeps_past(due_tick * ticks_.tick());
  }
  // Hands a one-shot node, claimed by the calling thread (not the worker) and counted in its
  // producer's `dispatched`, straight to the executor. Precondition: skips_worker() was true.
  void execute_claimed(Node* node) noexcept;
  // Hands a node the pass claimed to the executor (true), or leaves it to run in the pass (false:
  // there is none).
  bool dispatch(Node* node) noexcept;
  // Runs a node handed to the executor, on the calling thread, and gives it back (see Task::run).
  // `returned_token` is the calling thread's producer token for the returned queue, or null.
  void run(Node* node, moodycamel::ProducerToken* returned_token) noexcept;
  // Waits until every task handed to the executor has run: those the pass handed over, and those
  // other threads did (execute_claimed), counted by `claimed_elsewhere()`, read again on each round.
  // Their threads may still schedule and cancel, so the caller must hold no lock they take.
  void wait_for_all(const std::function<std::uint64_t()>& claimed_elsewhere) const noexcept;
  // Counts and reports the exception being handled (inside a catch block, any thread).
  void callback_threw() noexcept;
  // When an inline fixed-delay run ended: the engine's clock now.
  Nanos run_end() const noexcept { return std::max(host_.now(), Nanos(0)); }

 private:
  Shard& shard_;
  ShardHost& host_;
  ShardInbox& inbox_;
  ShardCounters& counters_;
  const TickDivider ticks_;   // the engine's tick, for the next-run ticks run() computes
  Executor* const executor_;  // null: callbacks run inline; else owned by the engine's options
  // executor_ takes tasks from any thread (Executor::any_thread), and no max_pending_per_shard,
  // whose places only the shard's claims give back: other threads may claim due timers.
  const bool any_thread_;
};

}  // namespace tickwheel::detail
