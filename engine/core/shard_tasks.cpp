// engine/core/shard_tasks.cpp — a shard's side of its executor.
#include "core/shard_tasks.hpp"

#include <algorithm>
#include <thread>

#include "tickwheel/detail/node.hpp"

namespace tickwheel::detail {
namespace {

thread_local const ShardHost* t_task_engine = nullptr;

}  // namespace

const ShardHost* current_task_engine() noexcept { return t_task_engine; }

ShardTasks::ShardTasks(Shard& shard, ShardHost& host, ShardInbox& inbox, ShardCounters& counters,
                       const EngineOptions& opts) noexcept
    : shard_(shard),
      host_(host),
      inbox_(inbox),
      counters_(counters),
      ticks_(static_cast<std::uint64_t>(opts.tick.count())),
      executor_(dynamic_cast<InlineExecutor*>(opts.executor.get()) != nullptr ? nullptr
                                                                              : opts.executor.get()),
      any_thread_(executor_ != nullptr && executor_->any_thread() && opts.max_pending_per_shard == 0) {}

void ShardTasks::execute_claimed(Node* node) noexcept { executor_->execute(Task(&shard_, node)); }

bool ShardTasks::dispatch(Node* node) noexcept {
  if (executor_ == nullptr) return false;
  // Relaxed: only the thread in the pass writes it (the worker, or the thread polling a
  // caller-driven shard: polls never overlap, and the loop's polling flag orders one after
  // another), and stop() reads it after joining the worker or waiting out the poll.
  bump(counters_.dispatched);
  executor_->execute(Task(&shard_, node));
  return true;
}

void ShardTasks::run(Node* node, moodycamel::ProducerToken* returned_token) noexcept {
  using Meta = PeriodicMeta;
  const std::uint64_t meta = callable_meta(node);
  const ShardHost* const outer = t_task_engine;
  t_task_engine = &host_;  // stop() from inside the callback is refused
  try {
    run_callable(node);
  } catch (...) {
    callback_threw();
  }
  t_task_engine = outer;
  std::uint64_t next_tick = 0;  // the tick of the next run; a one-shot wakes no one
  if (meta != 0) {
    if (Meta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay)) {
      // The next run is one period after this one ended: its tick goes back in `due`
      // (ShardWheel::rearm_returned). The node is this thread's until give_back() publishes it
      // (release; the shard's dequeue acquires). Release, as every write of `due` that
      // Timer::deadline() can race from another thread (see detail::store_due).
      const Nanos next = saturating_add(run_end(), Nanos(static_cast<Nanos::rep>(Meta::period(meta))));
      next_tick = ticks_.due(next);
      store_due(node, next_tick, std::memory_order_release);
    } else {
      // The next grid point, or a later one if the timer misfired: waking for the first is never
      // late. `due` is the run's tick, written by the shard before it handed the task over; a
      // fixed rate's period is a whole number of ticks.
      next_tick = std::min(node->due + ticks_.floor(Meta::period(meta)), ticks_.max_tick());
    }
  }
  inbox_.give_back(node, returned_token);
  if (meta != 0) inbox_.wake_for(next_tick);
  counters_.completed.fetch_add(1, std::memory_order_release);  // see ShardCounters::completed
}

void ShardTasks::wait_for_all(const std::function<std::uint64_t()>& claimed_elsewhere) const noexcept {
  // Acquire: pairs with run()'s release increment, so the returned nodes are all visible.
  while (counters_.completed.load(std::memory_order_acquire) !=
         counters_.dispatched.load(std::memory_order_relaxed) + claimed_elsewhere()) {
    executor_->run_while_stopping();  // tasks only this thread would run (see Executor)
    std::this_thread::yield();
  }
}

void ShardTasks::callback_threw() noexcept {
  counters_.callback_errors.fetch_add(1, std::memory_order_relaxed);
  host_.report_callback_error(std::current_exception());
}

}  // namespace tickwheel::detail
