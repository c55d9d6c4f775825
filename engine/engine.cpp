// engine/engine.cpp — Engine and Timer: validation, the producer registry, schedule (acquire and
// commit), cancel, lazy start, stop, stats.
#include "tickwheel/engine.hpp"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "clock.hpp"
#include "engine_core.hpp"
#include "tickwheel/detail/arith.hpp"

namespace tickwheel {
namespace detail {
namespace {

constexpr std::size_t kMaxShards = 4096;
constexpr std::size_t kMaxReserve = NodePool::kMaxNodes - 1;  // a shard's pool holds no more

std::atomic<std::uint64_t> g_next_engine_uid{1};
// Engines alive now, and whether the too-many-engines notice was given (once per process).
std::atomic<std::size_t> g_live_engines{0};
std::atomic<bool> g_warned_engines{false};

struct TlsEntry {
  std::uint64_t uid = 0;
  ProducerState* state = nullptr;
};
thread_local std::array<TlsEntry, 4> t_producers;
thread_local unsigned t_next_victim = 0;

// A number unique to each thread that ever registers, unlike std::thread::id, which the system
// reuses once a thread is joined: it tells a new thread taking over an exited thread's state from
// the same thread coming back after its table entry was evicted.
std::atomic<std::uint64_t> g_next_thread_serial{1};
std::uint64_t thread_serial() noexcept {
  thread_local const std::uint64_t serial = g_next_thread_serial.fetch_add(1, std::memory_order_relaxed);
  return serial;
}

// A node for a schedule on shard `index` from a thread that is not its worker: from the thread's
// cache for the shard, refilled in bulk from the shard's reserve, else from the thread's overflow
// pool. Null if the thread has no state (out of memory on its first use) or the pool cannot grow.
Node* take_node(ProducerState* state, Shard& shard, std::size_t index) noexcept {
  if (state == nullptr) return nullptr;
  ProducerState::PerShard& mine = state->shards[index];
  if (mine.cached == 0) mine.cached = shard.take_nodes(mine.cache.data(), mine.cache.size());
  Node* node = mine.cached != 0 ? mine.cache[--mine.cached] : state->overflow.acquire();
  // The next schedule's node was last written by the worker, on another core: start moving its
  // line here now, for writing, rather than stall on it then.
  if (mine.cached != 0) __builtin_prefetch(mine.cache[mine.cached - 1], 1);
  return node;
}

EngineOptions validated(EngineOptions opts) {
  if (opts.tick < Wheel::kMinTick || opts.tick > Wheel::kMaxTick) {
    throw std::invalid_argument("tickwheel::Engine: tick must be between 1us and 1h, got " +
                                std::to_string(opts.tick.count()) + "ns");
  }
  if (opts.transfer_cap == 0) {
    throw std::invalid_argument("tickwheel::Engine: transfer_cap must be at least 1, got 0");
  }
  if (opts.shards > kMaxShards) {
    throw std::invalid_argument("tickwheel::Engine: shards must be at most " + std::to_string(kMaxShards) +
                                ", got " + std::to_string(opts.shards));
  }
  if (opts.reserve_per_shard > kMaxReserve) {
    throw std::invalid_argument("tickwheel::Engine: reserve_per_shard must be at most 2^32 - 1 (" +
                                std::to_string(kMaxReserve) + "), got " +
                                std::to_string(opts.reserve_per_shard));
  }
  if (opts.max_pending_per_shard != 0 && opts.reserve_per_shard > opts.max_pending_per_shard) {
    throw std::invalid_argument(
        "tickwheel::Engine: reserve_per_shard must not exceed max_pending_per_shard (" +
        std::to_string(opts.max_pending_per_shard) + "), got " + std::to_string(opts.reserve_per_shard));
  }
  if (opts.lock_memory && opts.reserve_per_shard == 0) {
    throw std::invalid_argument(
        "tickwheel::Engine: lock_memory needs reserve_per_shard (it locks the reserve), got 0");
  }
  if (opts.hybrid_spin.count() < 0) {
    throw std::invalid_argument("tickwheel::Engine: hybrid_spin must not be negative, got " +
                                std::to_string(opts.hybrid_spin.count()) + "ns");
  }
  if (opts.clock != nullptr && opts.threads == Threads::workers) {
    throw std::invalid_argument(
        "tickwheel::Engine: a clock of one's own needs threads = Threads::manual (workers sleep on "
        "CLOCK_MONOTONIC)");
  }
  if (!opts.log) {
    opts.log = [](std::string_view line) {
      (void)std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  return opts;
}

}  // namespace

ProducerState::ProducerState(std::thread::id id, std::vector<std::unique_ptr<Shard>>& all,
                             std::size_t home_shard)
    : owner(id), home(home_shard), shards(all.size()) {
  for (std::size_t i = 0; i < all.size(); ++i) {
    shards[i].transfer = std::make_unique<moodycamel::ProducerToken>(all[i]->transfers());
    shards[i].cancel = std::make_unique<moodycamel::ProducerToken>(all[i]->cancels());
    shards[i].returned = std::make_unique<moodycamel::ProducerToken>(all[i]->returned());
  }
}

EngineCore::EngineCore(EngineOptions opts)
    : opts_(validated(std::move(opts))), uid_(g_next_engine_uid.fetch_add(1, std::memory_order_relaxed)) {
  const std::size_t cores = topology_.core_pus().size();
  const std::size_t n = opts_.shards != 0 ? opts_.shards : cores;
  const Nanos start = now();
  shards_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>(*this, i, opts_, start));
  has_executor_ = opts_.executor != nullptr && dynamic_cast<InlineExecutor*>(opts_.executor.get()) == nullptr;
  // Relaxed: a count, ordering nothing.
  const std::size_t alive = g_live_engines.fetch_add(1, std::memory_order_relaxed) + 1;
  if (opts_.warn_engines_above != 0 && alive > opts_.warn_engines_above &&
      !g_warned_engines.exchange(true, std::memory_order_relaxed)) {
    opts_.log("tickwheel: " + std::to_string(alive) + " engines alive at once (more than " +
              std::to_string(opts_.warn_engines_above) +
              "); each costs a thread per shard: share one engine per process");
  }
  if (opts_.threads == Threads::workers && opts_.pin_workers && opts_.cpus.empty() && n > cores) {
    note_once(Notice::more_shards_than_cores, "tickwheel: " + std::to_string(n) + " shards on " +
                                                  std::to_string(cores) +
                                                  " physical cores: some workers share a core");
  }
}

EngineCore::~EngineCore() {  // NOLINT(bugprone-exception-escape): see the declaration
  stop();
  for (auto& shard : shards_) shard->drain_cancels();  // cancels of timers stop() returned
  for (auto& p : producers_) {  // producer tokens must go before the queues they point into
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      p->shards[i].transfer.reset();
      p->shards[i].cancel.reset();
      p->shards[i].returned.reset();
    }
  }
  shards_.clear();  // the wheels destroy the callables of timers never run
  g_live_engines.fetch_sub(1, std::memory_order_relaxed);
}

unsigned EngineCore::cpu_for(std::size_t shard) const noexcept {
  if (!opts_.cpus.empty()) return opts_.cpus[shard % opts_.cpus.size()];
  return topology_.core_pus()[shard % topology_.core_pus().size()];
}

void EngineCore::note_once(Notice kind, const std::string& message) {
  if (noticed_[static_cast<std::size_t>(kind)].exchange(true, std::memory_order_relaxed)) return;
  opts_.log(message);
}

void EngineCore::report_callback_error(std::exception_ptr error) noexcept {
  try {
    if (opts_.on_callback_error) {
      opts_.on_callback_error(std::move(error));
    } else {
      note_once(Notice::callback_threw,
                "tickwheel: a timer callback threw; the exception was dropped (counted in "
                "stats().callback_errors; set EngineOptions::on_callback_error to see each one)");
    }
  } catch (...) {
    // The handler (or the log) threw: dropped, as documented; the callback's thread goes on.
  }
}

moodycamel::ProducerToken* EngineCore::returned_token(std::size_t shard) noexcept {
  ProducerState* state = producer();
  return state != nullptr ? state->shards[shard].returned.get() : nullptr;
}

bool EngineCore::is_own_worker(const Shard* shard) noexcept {
  return shard != nullptr && shard == current_shard();
}

bool EngineCore::in_own_pass() const noexcept {
  const Shard* own = current_shard();
  return own != nullptr && &own->core() == this;
}

ProducerState* EngineCore::producer() noexcept {
  for (const TlsEntry& e : t_producers) {
    if (e.uid == uid_) return e.state;
  }
  return register_producer();
}

ProducerState* EngineCore::register_producer() noexcept {
  try {
    std::lock_guard lock(registry_mutex_);
    const std::thread::id me = std::this_thread::get_id();
    const std::uint64_t serial = thread_serial();
    ProducerState* state = nullptr;
    for (auto& p : producers_) {
      if (p->owner == me) state = p.get();
    }
    if (state == nullptr) {
      const std::size_t home = next_home_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
      producers_.push_back(std::make_unique<ProducerState>(me, shards_, home));
      state = producers_.back().get();
    } else if (state->serial != serial) {
      // A new thread with an exited thread's id takes over its tokens and cached nodes, and gets
      // a shard of its own, round robin, as any new thread does.
      state->home = next_home_.fetch_add(1, std::memory_order_relaxed) % shards_.size();
    }
    state->serial = serial;
    t_producers[t_next_victim++ % t_producers.size()] = TlsEntry{uid_, state};
    return state;
  } catch (...) {
    return nullptr;  // out of memory on a thread's first use: the schedule fails with out_of_memory
  }
}

Status EngineCore::acquire(std::size_t index, Node*& node, Shard*& target) noexcept {
  if (!started_.load(std::memory_order_acquire) && !stopped_.load(std::memory_order_relaxed)) {
    try {
      start();
    } catch (...) {
      return Status::out_of_memory;  // the worker threads could not be created
    }
  }
  Shard* own = current_shard();
  if (own != nullptr && &own->core() != this) own = nullptr;
  ProducerState* state = nullptr;
  if (index == Engine::any_shard) {
    if (own != nullptr) {
      index = own->index();
    } else {
      state = producer();
      if (state == nullptr) return Status::out_of_memory;
      index = state->home;
    }
  } else if (index >= shards_.size()) {
    return Status::no_such_shard;
  }
  Shard& shard = *shards_[index];
  if (stopped_.load(std::memory_order_relaxed)) {
    shard.count_rejected();
    return Status::stopped;  // (one racing stop() is caught in commit())
  }
  if (!shard.admit()) return Status::max_pending_reached;
  target = &shard;
  if (own == &shard) {
    node = shard.own_node();
  } else {
    if (state == nullptr) state = producer();
    node = take_node(state, shard, index);
  }
  if (node == nullptr) {
    shard.unadmit();
    shard.count_rejected();
    return Status::out_of_memory;
  }
  return Status::ok;
}

Timer EngineCore::commit(Shard* shard, Node* node, Nanos when, bool relative) noexcept {
  const Nanos deadline = relative ? saturating_add(now(), when) : when;
  node->due = static_cast<std::uint64_t>(std::max<Nanos::rep>(deadline.count(), 0));  // ns; see adopt()
  const std::uint32_t gen = next_lifetime(node->gen.load(std::memory_order_relaxed));
  // Relaxed: the node reaches the worker through the hand-off queue (release/acquire), and other
  // threads through the Timer this returns, which the caller must pass on with its own ordering.
  node->gen.store(gen, std::memory_order_relaxed);
  if (is_own_worker(shard)) {
    shard->link_direct(node);  // a callback scheduling on its own shard: no queue
    return {shard, node, gen};
  }
  ProducerState* state = producer();  // registered by acquire(): a table hit
  ProducerState::PerShard& mine = state->shards[shard->index()];
  if (!shard->hand_over(*mine.transfer, node)) return fail(*state, shard, node, Status::out_of_memory);
  if (++mine.posted == ProducerState::kNudgeEvery) [[unlikely]] {
    mine.posted = 0;
    shard->nudge();
  }
  // hand_over() ended with a seq_cst fence after the enqueue, and stop() has one between its store
  // of stopped_ and its drain of the queues (Dekker): so if this load sees false, stop()'s drain
  // will see the node, and if it sees true the node may have come too late for the drain.
  if (stopped_.load(std::memory_order_relaxed)) [[unlikely]] {
    return settle_late(*state, shard, node, gen);
  }
  return {shard, node, gen};
}

Timer EngineCore::settle_late(ProducerState& state, Shard* shard, Node* node, std::uint32_t gen) noexcept {
  // stop() holds this mutex from its store of stopped_ until it has drained every queue, except
  // while it waits for executor tasks (which may be what is scheduling here). Under it the queues
  // are still. Not drained yet (that wait): the drain to come takes the node, and the schedule
  // stands, among the timers stop() returns. Drained: if the drain took the node, likewise; if
  // not, it is the one item in this thread's sub-queue (earlier ones were drained, or settled
  // here too): take it back and fail the schedule.
  // A callback on one of this engine's workers (or polling threads) must not take the mutex: stop()
  // holds it while it joins that very thread. The drain comes after the join, so the node stands.
  if (in_own_pass()) return {shard, node, gen};
  std::lock_guard lock(lifecycle_mutex_);
  if (!joined_) return {shard, node, gen};
  Node* back = nullptr;
  if (!shard->transfers().try_dequeue_from_producer(*state.shards[shard->index()].transfer, back)) {
    return {shard, node, gen};
  }
  assert(back == node);
  return fail(state, shard, back, Status::stopped);
}

Timer EngineCore::fail(ProducerState& state, Shard* shard, Node* node, Status why) noexcept {
  // Nothing was handed over: the timer never existed for anyone but this thread.
  destroy_callable(node);
  ProducerState::PerShard& mine = state.shards[shard->index()];
  if (mine.cached < mine.cache.size()) {
    mine.cache[mine.cached++] = node;
  } else {
    state.overflow.release(node);
  }
  shard->unadmit();
  shard->count_rejected();
  return Timer(why);
}

void EngineCore::post_cancel(Shard& shard, Node* node, std::uint32_t cancelled_gen) noexcept {
  // From a callback of this engine's own pass the worker is still alive, and stop() (holding the
  // mutex while it joins this thread) drains the queue after the join: post as usual.
  if (stopped_.load(std::memory_order_acquire) && !in_own_pass()) {
    // No worker will drain the queue any more. stop() holds this mutex until it has drained it,
    // so once we hold it the shard is ours: retire the node here, destroying its callable now.
    // (A handle stop() returned reaches this thread after stop() did, so it sees stopped_.)
    std::lock_guard lock(lifecycle_mutex_);
    if (joined_) {
      shard.retire_now(node, cancelled_gen);
      return;
    }
  }
  ProducerState* state = producer();
  if (state != nullptr) {
    ProducerState::PerShard& mine = state->shards[shard.index()];
    shard.post_cancel(*mine.cancel, node, cancelled_gen);
    if (++mine.posted == ProducerState::kNudgeEvery) [[unlikely]] {
      mine.posted = 0;
      shard.nudge();
    }
  }
  // With no state (out of memory on this thread's first use) the record is not posted; the node
  // stays linked, harmless, until its time comes: the worker's claim then fails and recycles it.
}

void EngineCore::start() {
  if (Shard* own = current_shard(); own != nullptr && &own->core() == this) return;  // running
  std::lock_guard lock(lifecycle_mutex_);
  if (started_.load(std::memory_order_relaxed) || stopped_.load(std::memory_order_relaxed)) return;
  if (opts_.threads == Threads::manual) {
    for (auto& shard : shards_) shard->start_manual();
    started_.store(true, std::memory_order_release);
    return;
  }
  for (auto& shard : shards_) shard->start_worker();
  for (auto& shard : shards_) {
    while (!shard->ready()) std::this_thread::yield();
  }
  started_.store(true, std::memory_order_release);
}

std::vector<Timer> EngineCore::stop() {
  if (in_own_pass() || current_task_engine() == this) {
    throw std::logic_error(
        "tickwheel::Engine::stop() called from inside one of its timer callbacks: it would join the "
        "thread it runs on, or wait for its own task; call it from another thread");
  }
  std::unique_lock lock(lifecycle_mutex_);
  if (stopped_.load(std::memory_order_relaxed)) return {};
  stopped_.store(true, std::memory_order_relaxed);
  // Dekker with commit(): a hand-off whose producer then reads stopped_ as false is seen by the
  // drains below; one that reads true is settled by its producer under this mutex (settle_late).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& shard : shards_) shard->request_stop();
  for (auto& shard : shards_) shard->join();
  if (has_executor_) {
    // Callbacks still running on executor threads may schedule or cancel: let them, then wait
    // them out. A hand-off that comes meanwhile stands (settle_late sees joined_ still false) and
    // a cancel is posted; the drains below take both.
    lock.unlock();
    for (auto& shard : shards_) shard->wait_for_tasks();
    lock.lock();
  }
  std::vector<Timer> unprocessed;
  for (auto& shard : shards_) {
    Shard* s = shard.get();
    s->drain_stopped([&](Node* node, std::uint32_t gen) { unprocessed.push_back(Timer(s, node, gen)); });
  }
  joined_ = true;  // from here cancels retire their nodes directly (post_cancel, under this mutex)
  return unprocessed;
}

Shard& EngineCore::polled_shard(std::size_t index) const {
  if (opts_.threads != Threads::manual) {
    throw std::logic_error(
        "tickwheel::Engine::poll: the engine has worker threads; poll() is for "
        "EngineOptions::threads = Threads::manual");
  }
  if (index >= shards_.size()) {
    throw std::out_of_range("tickwheel::Engine::poll: shard " + std::to_string(index) + " of " +
                            std::to_string(shards_.size()));
  }
  return *shards_[index];
}

std::size_t EngineCore::poll(std::size_t index, Nanos now, std::size_t limit) {
  Shard& shard = polled_shard(index);
  if (!started_.load(std::memory_order_acquire) && !stopped_.load(std::memory_order_relaxed)) start();
  return shard.poll(now, limit);
}

std::optional<Nanos> EngineCore::next_deadline(std::size_t index) const {
  return polled_shard(index).next_deadline(now());
}

EngineStats EngineCore::stats() const {
  EngineStats total;
  total.shards.reserve(shards_.size());
  for (const auto& shard : shards_) {
    ShardStats s = shard->stats();
    total.scheduled += s.scheduled;
    total.fired += s.fired;
    total.cancelled += s.cancelled;
    total.rearmed += s.rearmed;
    total.skipped += s.skipped;
    total.rejected += s.rejected;
    total.pending += s.pending;
    total.queue_depth += s.queue_depth;
    total.transfer_cap_hits += s.transfer_cap_hits;
    total.passes += s.passes;
    total.wakeups += s.wakeups;
    total.callback_errors += s.callback_errors;
    total.executing += s.executing;
    total.max_tick_lag_ns = std::max(total.max_tick_lag_ns, s.max_tick_lag_ns);
    total.shards.push_back(std::move(s));
  }
  return total;
}

}  // namespace detail

// ---- Engine ----

Engine::Engine(EngineOptions opts) : core_(std::make_unique<detail::EngineCore>(std::move(opts))) {}
Engine::~Engine() = default;

Status Engine::acquire(std::size_t shard, detail::Node*& node, detail::Shard*& target) noexcept {
  return core_->acquire(shard, node, target);
}

Timer Engine::commit(detail::Shard* target, detail::Node* node, Nanos when, bool relative) noexcept {
  return core_->commit(target, node, when, relative);
}

void Engine::start() { core_->start(); }
std::vector<Timer> Engine::stop() { return core_->stop(); }
EngineStats Engine::stats() const { return core_->stats(); }
std::size_t Engine::shard_count() const noexcept { return core_->shard_count(); }
std::size_t Engine::poll(std::size_t shard, std::size_t limit) {
  return core_->poll(shard, core_->now(), limit);
}
std::size_t Engine::poll(std::size_t shard, Nanos now, std::size_t limit) {
  return core_->poll(shard, now, limit);
}
std::optional<Nanos> Engine::next_deadline(std::size_t shard) const { return core_->next_deadline(shard); }
std::uint64_t Engine::periodic_meta(Nanos period, const PeriodicOptions& opts) const noexcept {
  return detail::periodic_meta(period, opts, core_->tick());
}
Nanos Engine::tick() const noexcept { return core_->tick(); }

// ---- Timer ----

bool Timer::cancel() noexcept {
  if (node_ == nullptr) return false;
  const std::uint32_t cancelled = gen_ - detail::kPending + detail::kCancelled;
  const std::uint32_t running = gen_ - detail::kPending + detail::kRunning;  // periodic only
  std::uint32_t expected = gen_;
  for (;;) {
    // acq_rel: pairs with the worker's claim (Wheel::claim) and, for a periodic timer, its re-arm
    // (Wheel::rearm) on the same word: exactly one of two racing compare-and-swaps succeeds, and
    // the loser sees the winner's state.
    if (node_->gen.compare_exchange_strong(expected, cancelled, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      if (expected == gen_) shard_->core().post_cancel(*shard_, node_, cancelled);
      // From running, there is nothing to unlink: the re-arm, refused, recycles the node.
      return true;
    }
    // A one-shot timer claimed, cancelled before, or reused: lost. A periodic timer running: try
    // running -> cancelled. Re-armed meanwhile (back to pending): try pending -> cancelled again.
    if (expected != gen_ && expected != running) return false;
  }
}

bool Timer::cancelled() const noexcept {
  // Acquire: pairs with the winning compare-and-swap.
  return node_ != nullptr &&
         node_->gen.load(std::memory_order_acquire) == gen_ - detail::kPending + detail::kCancelled;
}

bool Timer::expired() const noexcept {
  return node_ != nullptr &&
         node_->gen.load(std::memory_order_acquire) == gen_ - detail::kPending + detail::kFired;
}

std::size_t Timer::shard() const noexcept { return shard_ != nullptr ? shard_->index() : 0; }

}  // namespace tickwheel
