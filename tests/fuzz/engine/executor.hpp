// tests/fuzz/engine/executor.hpp — the target's own executor. It queues each Task and runs none
// until an operation (or a callback) says so, so a run is reproducible and tasks run late, out of
// order and nested. stop() waits for every task handed over, spinning on the calling thread, so the
// queue must run before or while it waits: an input byte picks either running it on the fuzz thread
// first (callbacks act as usual), or on a helper thread while stop() waits (callbacks take no
// action then, since what they saw would depend on how far stop() had got; the helper touches the
// model only inside callbacks, all of which finish before stop() can return). A poll hands tasks
// over; with any_thread(), so may a schedule_at() outside any poll (the due path, see
// due_path.hpp), and nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "engine/model.hpp"
#include "fuzz_support.hpp"
#include "tickwheel/executor.hpp"

namespace tickwheel::fuzz::engine {

class QueueExecutor final : public Executor {
 public:
  // any_thread() as the input chose: true lets a schedule_at() from the fuzz thread hand a due
  // timer over itself. `polls` are the model's polls in progress.
  QueueExecutor(const std::vector<PollCtx>& polls, bool any_thread) noexcept
      : polls_(polls), any_thread_(any_thread) {}

  void execute(Task task) noexcept override {
    check(static_cast<bool>(task), "execute() was given an empty task");
    if (polls_.empty()) {
      // Outside a poll only the due path hands tasks over, from inside the schedule itself;
      // ScheduleOps::record() checks that it did so exactly when the model says.
      check(due_window, "execute() was called outside poll() and outside a schedule_at()");
      ++due_handed;
    }
    tasks.push_back(task);
    ++handed;
  }
  bool any_thread() const noexcept override { return any_thread_; }

  // Runs one task, noting how many polls were in progress at its start (Callbacks::on_task checks
  // that a callback runs inside a task).
  void run(Task t) {
    task_polls.push_back(polls_.size());
    t.run();
    task_polls.pop_back();
  }

  // Runs every queued task, the oldest first, and those they queue.
  void run_all() {
    while (!tasks.empty()) {
      const Task t = tasks.front();
      tasks.pop_front();
      run(t);
    }
  }

  // Runs queued tasks as the input says: a few or all, the oldest first or picked anywhere.
  void run_as_told(Bytes& in) {
    const std::uint8_t how = in.u8();
    std::size_t n = (how & 0x80) != 0 ? tasks.size() : 1 + (how & 3);
    while (n-- != 0 && !tasks.empty()) {
      const std::size_t i = (how & 0x40) != 0 ? in.u8() % tasks.size() : 0;
      const Task t = tasks[i];
      tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(i));
      run(t);
    }
  }

  std::deque<Task> tasks;
  std::uint64_t handed = 0;             // execute() calls so far
  bool due_window = false;              // inside a schedule that may take the due path: execute() may come
  std::uint64_t due_handed = 0;         // execute() calls in that window
  std::vector<std::size_t> task_polls;  // the tasks running, innermost last: polls in progress at their start

 private:
  const std::vector<PollCtx>& polls_;
  const bool any_thread_;
};

}  // namespace tickwheel::fuzz::engine
