// tickwheel/executor.hpp — where an Engine's fired callbacks run.
//
// By default a shard's worker runs each due callback itself, in its pass (no hand-off: the
// cheapest path, and the right one for short callbacks). With EngineOptions::executor set, the
// worker claims each due timer exactly as before (it counts as fired, and cancel() from then on
// returns false) and hands it to the executor as a Task instead; the executor runs it on a thread
// of its choosing and the node goes back to its shard, where a periodic timer is re-armed. A slow
// callback then holds up its executor thread, not the tick. (A one-shot timer already due when
// another thread schedules it may be claimed and handed over by that thread: Executor::any_thread.)
//
// Costs: a hand-off per fired timer (the executor's queue), and the node's return to its shard
// (one lock-free enqueue; a periodic timer whose next run is earlier than the worker's planned
// wake-up also wakes the worker, as a schedule would). No allocation in steady state.
//
// Guarantees, whatever the executor:
//   - each fired timer's callback runs exactly once (Task::run), a periodic timer's runs never
//     overlap (the next run is linked only once the previous one has returned), and whatever the
//     thread that scheduled a timer did before schedule*() is visible to the callback;
//   - a callback that throws is caught inside Task::run(), counted in ShardStats::callback_errors
//     and passed to EngineOptions::on_callback_error: no executor thread ever sees the exception;
//   - Engine::stop() waits until every task handed to the executor has run (so an executor must
//     run every task it is given, eventually), then returns the periodic timers among them as
//     pending, like the rest.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

namespace tickwheel {
namespace detail {
class Shard;
class ShardTasks;
struct Node;
}  // namespace detail

// One fired timer, handed to an Executor. Sixteen bytes and trivially copyable, so it fits the
// small-object buffer of a std::function or of any event loop's post() without allocating.
class Task {
 public:
  Task() = default;

  // Runs the timer's callback on the calling thread, catching whatever it throws, then gives the
  // node back to its shard. Must be called exactly once per Task the engine handed out (never for
  // a default one): calling it twice, or never, is undefined (never also makes stop() wait
  // forever). Any thread. Cost: the callback, plus one lock-free enqueue.
  void run() noexcept;
  explicit operator bool() const noexcept { return node_ != nullptr; }
  // The shard the timer belongs to (0 for a default Task): where an executor that serves shards
  // from their own loops routes it (LoopExecutor). Any thread; two loads.
  std::size_t shard() const noexcept;

 private:
  friend class detail::ShardTasks;
  Task(detail::Shard* shard, detail::Node* node) noexcept : shard_(shard), node_(node) {}

  detail::Shard* shard_ = nullptr;
  detail::Node* node_ = nullptr;
};

// Where fired callbacks run. execute() is called on a shard's worker thread (or, in caller-driven
// mode, on the thread in Engine::poll), once per fired timer, in firing order per shard; it must
// arrange for task.run() to be called exactly once, on any thread, and return quickly: the worker
// waits for it. The hand-off must order execute() before run() (any queue or mutex does). It must
// not throw (it is noexcept: an exception would terminate) and should not block.
//
// An executor whose execute() any number of threads may call at once says so (any_thread()). A
// one-shot timer that another thread schedules at a deadline already past (its tick over; a due-now
// answer, schedule_at(Nanos(0), fn)) while the shard's worker sleeps past it is then claimed and
// handed to execute() on the scheduling thread, instead of waking the worker to fire it: one
// hand-off instead of two, and no wake-up. Such a task keeps every guarantee above but the order:
// it is not in firing order with the worker's.
class Executor {
 public:
  virtual ~Executor() = default;
  virtual void execute(Task task) noexcept = 0;
  // Whether execute() may be called from any thread, concurrently (see above). Default: false, so
  // that an executor written for one calling thread at a time keeps it.
  virtual bool any_thread() const noexcept { return false; }
  // Called by Engine::stop() on the stopping thread, again and again while it waits for the tasks
  // it handed out to return, and on the thread of every other stop() that waits with it. An
  // executor whose tasks would run on that very thread (an event loop that calls stop() from inside
  // itself) runs them here, or stop() would wait forever; it may run only tasks that thread would
  // have run. Must not block. Default: nothing.
  virtual void run_while_stopping() noexcept {}
};

// Runs the task at once, on the calling thread. Equivalent to no executor, which is what an engine
// given one treats it as: the worker runs its callbacks itself, with no hand-off at all.
class InlineExecutor final : public Executor {
 public:
  void execute(Task task) noexcept override { task.run(); }
};

struct ThreadPoolOptions {
  std::size_t threads = 1;  // 1 .. 1024
  // Bind each pool thread to one processing unit (hwloc): thread i to cpus[i % size], or, with
  // cpus empty, to the physical cores in reverse order (the last core first), since an Engine's
  // workers take cores from the first one up. Where binding is refused the thread runs unbound
  // and the log says so once; never fatal.
  bool pin = false;
  std::vector<unsigned> cpus{};
  std::function<void(std::string_view)> log{};  // default: standard error
};

// A fixed pool of threads fed by one lock-free queue (moodycamel's blocking ConcurrentQueue: an
// idle thread sleeps on a semaphore, so an idle pool costs nothing). Tasks run in roughly the
// order they came; with more than one thread, two tasks may run at once and finish in any order.
// If the queue cannot grow (out of memory), execute() runs the task on the calling thread
// instead: nothing is dropped.
class ThreadPoolExecutor final : public Executor {
 public:
  // Starts the threads (binding them if asked). Throws std::invalid_argument for threads == 0 or
  // more than 1024, naming the value, and std::system_error if a thread cannot be started.
  explicit ThreadPoolExecutor(ThreadPoolOptions opts = {});
  // Runs every task still queued, then joins the threads. Must not be called from a pool thread.
  ~ThreadPoolExecutor() override;
  ThreadPoolExecutor(const ThreadPoolExecutor&) = delete;
  ThreadPoolExecutor& operator=(const ThreadPoolExecutor&) = delete;

  // Queues the task for a pool thread. Lock-free; allocates only while the queue grows to its peak
  // depth (its first use from each thread included). Any thread.
  void execute(Task task) noexcept override;
  bool any_thread() const noexcept override { return true; }

  std::size_t thread_count() const noexcept;
  // For each pool thread, the OS index of the processing unit it is bound to, or -1. Any thread;
  // complete once the constructor has returned.
  std::vector<int> bound_cpus() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// An executor for event loops: one queue and one eventfd per lane, a lane per loop. A fired
// timer's task goes to lane task.shard() % lanes; the loop serving that lane adds fd(lane) to its
// epoll set and, when it is readable, runs the lane's tasks with drain(lane), on its own thread. So
// with one lane per shard and one loop per shard (caller-driven, the loop owning its shard; or
// worker threads timing, loops running the callbacks) every callback runs on the loop that owns
// its shard, never on another thread. Engine::stop() called from one of those loops runs that
// loop's queued tasks itself (run_while_stopping), so it cannot wait forever on its own queue; and
// a stop() from another loop meanwhile waits with it, running its own lane's tasks, so every loop
// may call stop() and each returns once every lane's tasks have run.
//
// Costs: execute() is a lock-free enqueue plus, when the lane was drained since its last signal,
// one eventfd write (so a burst of fires costs one system call, not one each); drain() one eventfd
// read, then a dequeue per task. A lane's queue allocates only while it grows to its peak depth;
// the tasks waiting are counted in Engine::stats().executing, and queued(lane) per lane. If a queue
// cannot grow (out of memory) execute() runs the task on the calling thread: nothing is dropped.
class LoopExecutor final : public Executor {
 public:
  // Throws std::invalid_argument for lanes == 0 or more than 4096, naming the value, and
  // std::system_error if an eventfd cannot be made.
  explicit LoopExecutor(std::size_t lanes);
  // Runs nothing: tasks still queued are lost, so destroy it only after the engine (whose stop()
  // waits for every task it handed out), as an engine's shared_ptr to it ensures.
  ~LoopExecutor() override;
  LoopExecutor(const LoopExecutor&) = delete;
  LoopExecutor& operator=(const LoopExecutor&) = delete;

  // Queues the task on its lane and makes the lane's fd readable. Any thread (a worker, the thread
  // in Engine::poll, or one scheduling a timer already due). Lock-free.
  void execute(Task task) noexcept override;
  bool any_thread() const noexcept override { return true; }
  // Runs up to `limit` of the lane's tasks on the calling thread, oldest first, and returns how
  // many. Clears fd(lane) first; if it leaves tasks behind (the limit), makes it readable again.
  // The lane's loop thread only, one thread at a time per lane; that thread is then the one
  // run_while_stopping() runs the lane's tasks on. Throws std::out_of_range for a bad lane.
  std::size_t drain(std::size_t lane, std::size_t limit = ~std::size_t{0});
  // The lane's eventfd (non-blocking, close-on-exec; owned by the executor): readable while
  // tasks wait that drain() has not yet been called for. Throws std::out_of_range for a bad lane.
  int fd(std::size_t lane) const;
  // Tasks waiting in the lane (approximate, a snapshot). Any thread.
  std::size_t queued(std::size_t lane) const;
  std::size_t lane_count() const noexcept;
  // Runs the queued tasks of every lane the calling thread drained last (see drain()).
  void run_while_stopping() noexcept override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tickwheel
