// engine/exec/executor.cpp — Task::run, and the thread-pool executor.
#include "tickwheel/executor.hpp"

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <stdexcept>
#include <string>
#include <thread>

#include "core/shard.hpp"
#include "core/shard_host.hpp"
#include "platform/log.hpp"
#include "platform/topology.hpp"

namespace tickwheel {

void Task::run() noexcept { shard_->tasks.run(node_, shard_->host().returned_token(shard_->index())); }

std::size_t Task::shard() const noexcept { return shard_ != nullptr ? shard_->index() : 0; }

namespace {
constexpr std::size_t kMaxPoolThreads = 1024;
}  // namespace

struct ThreadPoolExecutor::Impl {
  explicit Impl(ThreadPoolOptions o) : opts(std::move(o)), bound(opts.threads) {
    for (auto& cpu : bound) cpu.store(-1, std::memory_order_relaxed);
    if (!opts.log) opts.log = &detail::log_to_stderr;
  }

  // The PU pool thread i binds to (see ThreadPoolOptions::pin).
  unsigned cpu_for(std::size_t i) const {
    return topology.pu_for(i, opts.cpus, detail::Topology::From::last_core);
  }

  void run(std::size_t i) {
    if (opts.pin) {
      const unsigned cpu = cpu_for(i);
      if (std::string why = topology.bind_this_thread(cpu); why.empty()) {
        bound[i].store(static_cast<int>(cpu), std::memory_order_relaxed);
      } else if (!warned.exchange(true, std::memory_order_relaxed)) {
        // Relaxed: a once-only flag; the log hook orders nothing.
        opts.log("tickwheel: thread-pool thread " + std::to_string(i) + " runs unbound: " + why);
      }
    }
    ready.fetch_add(1, std::memory_order_release);  // pairs with the constructor's acquire
    Task task;
    for (;;) {
      queue.wait_dequeue(task);
      if (!task) return;  // the destructor's stop marker: one per thread
      task.run();
    }
  }

  ThreadPoolOptions opts;
  detail::Topology topology;
  moodycamel::BlockingConcurrentQueue<Task> queue;
  std::vector<std::atomic<int>> bound;  // written by each thread as it binds, before `ready`
  std::atomic<std::size_t> ready{0};
  std::atomic<bool> warned{false};
  std::vector<std::thread> threads;
};

ThreadPoolExecutor::ThreadPoolExecutor(ThreadPoolOptions opts) {
  if (opts.threads == 0 || opts.threads > kMaxPoolThreads) {
    throw std::invalid_argument("tickwheel::ThreadPoolExecutor: threads must be between 1 and " +
                                std::to_string(kMaxPoolThreads) + ", got " + std::to_string(opts.threads));
  }
  impl_ = std::make_unique<Impl>(std::move(opts));
  Impl& impl = *impl_;
  impl.threads.reserve(impl.opts.threads);
  try {
    for (std::size_t i = 0; i < impl.opts.threads; ++i) {
      impl.threads.emplace_back([&impl, i] { impl.run(i); });
    }
  } catch (...) {
    for (std::size_t i = 0; i < impl.threads.size(); ++i) impl.queue.enqueue(Task());
    for (auto& t : impl.threads) t.join();
    throw;
  }
  // Every thread has bound (or failed to) before the constructor returns, so bound_cpus() is
  // complete and the first task finds its thread where it asked to be.
  while (impl.ready.load(std::memory_order_acquire) != impl.threads.size()) std::this_thread::yield();
}

ThreadPoolExecutor::~ThreadPoolExecutor() {
  // A default Task is the stop marker. Enqueue can fail only for want of memory: then wait a
  // little and try again, since a thread that never sees its marker would never be joined.
  for (std::size_t i = 0; i < impl_->threads.size(); ++i) {
    while (!impl_->queue.enqueue(Task())) std::this_thread::yield();
  }
  for (auto& t : impl_->threads) t.join();
  // A queue with several producers keeps no order among them, so tasks queued before the markers
  // may still be there: they run here, on the destroying thread. No producer is left (executing
  // while the pool is destroyed is the caller's race), so try_dequeue finds them all.
  Task task;
  while (impl_->queue.try_dequeue(task)) {
    if (task) task.run();
  }
}

void ThreadPoolExecutor::execute(Task task) noexcept {
  if (!impl_->queue.enqueue(task)) task.run();  // no memory for the queue: run it here, drop nothing
}

std::size_t ThreadPoolExecutor::thread_count() const noexcept { return impl_->threads.size(); }

std::vector<int> ThreadPoolExecutor::bound_cpus() const {
  std::vector<int> out;
  out.reserve(impl_->bound.size());
  for (const auto& cpu : impl_->bound) out.push_back(cpu.load(std::memory_order_relaxed));
  return out;
}

}  // namespace tickwheel
