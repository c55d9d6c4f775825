// engine/core/engine_core.cpp — EngineCore: validation, construction, the schedule path (acquire and
// commit), a won cancel's path, lazy start, stop and its hand-back, stats. The caller-driven
// loop's calls are in engine_loop.cpp.
#include "core/engine_core.hpp"

#include <algorithm>
#include <cassert>
#include <stdexcept>
#include <string>

#include "platform/log.hpp"
#include "tickwheel/detail/arith.hpp"

namespace tickwheel::detail {
namespace {

constexpr std::size_t kMaxShards = 4096;
constexpr std::size_t kMaxReserve = NodePool::kMaxNodes - 1;  // a shard's pool holds no more

std::atomic<std::uint64_t> g_next_engine_uid{1};
// Engines alive now, and whether the too-many-engines notice was given (once per process).
std::atomic<std::size_t> g_live_engines{0};
std::atomic<bool> g_warned_engines{false};
// The engine whose stop() is handing timers back on this thread, under its lifecycle mutex.
thread_local const EngineCore* t_handing_back = nullptr;

// The generation word this engine's nodes start from (NodeDirectory): its uid through splitmix64's
// finaliser, a multiple of 4. Uids are never reused, so neither another engine's raw values nor a
// destroyed one's start where this engine's do (see Engine::timer_from_raw()).
std::uint32_t first_generation(std::uint64_t uid) noexcept {
  std::uint64_t z = uid * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return static_cast<std::uint32_t>(z ^ (z >> 31U)) & ~3U;
}

EngineOptions validated(EngineOptions opts) {
  if (opts.tick < ShardWheel::kMinTick || opts.tick > ShardWheel::kMaxTick) {
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
  if (!opts.log) opts.log = &log_to_stderr;
  return opts;
}

}  // namespace

EngineCore::EngineCore(EngineOptions opts)
    : opts_(validated(std::move(opts))),
      uid_(g_next_engine_uid.fetch_add(1, std::memory_order_relaxed)),
      deadline_clock_(opts_.tick),
      ticks_(static_cast<std::uint64_t>(opts_.tick.count())),
      directory_(first_generation(uid_)),
      producers_(uid_, shards_) {
  // The topology only where a mode needs it: pinned workers to place and bind, or a shard per core
  // to count. Loading it costs milliseconds and megabytes of hwloc's memory that an engine with its
  // shard count given and nothing to pin (caller-driven, or unpinned workers) would carry for nothing.
  if ((opts_.threads == Threads::workers && opts_.pin_workers) || opts_.shards == 0) topology_.emplace();
  const std::size_t cores = topology_ ? topology_->core_pus().size() : 0;
  const std::size_t n = opts_.shards != 0 ? opts_.shards : cores;
  const Nanos start = now();
  if (start.count() < 0) {
    throw std::invalid_argument("tickwheel::Engine: EngineOptions::clock returned " +
                                std::to_string(start.count()) +
                                "ns; the engine's clock must not be negative (count from an epoch at or "
                                "before the engine's construction, as CLOCK_MONOTONIC does)");
  }
  shards_.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned pu = topology_ ? topology_->pu_for(i, opts_.cpus, Topology::From::first_core) : 0;
    shards_.push_back(std::make_unique<Shard>(*this, i, pu, opts_, start));
    shards_.back()->open_lane(this);
  }
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
  shut_down(nullptr);        // allocates nothing; what is pending stays linked, for the reads below
  for (auto& shard : shards_) shard->drain_cancels();  // cancels posted after the drain
  if (held_destructors_.load(std::memory_order_relaxed)) {
    // The callables of the timers never run, from every pool that serves each shard, each read in
    // address order: the shard's own, and each producer thread's overflow pool for it.
    for (std::size_t i = 0; i < shards_.size(); ++i) {
      Shard& shard = *shards_[i];
      ShardWheel& wheel = shard.wheel();
      wheel.destroy_callables_from(wheel.pool());
      producers_.for_each(
          [&](const ProducerState& p) { wheel.destroy_callables_from(p.shards[i].overflow); });
    }
  }
  producers_.drop_tokens();  // they point into the shards' queues
  shards_.clear();
  g_live_engines.fetch_sub(1, std::memory_order_relaxed);
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
  ProducerState* state = producers_.mine();
  return state != nullptr ? state->shards[shard].returned.get() : nullptr;
}

Reservation EngineCore::acquire(std::size_t index) noexcept {
  Shard* const own = own_pass();
  // The shard's own thread, scheduling on it: a node from its own wheel, no producer state. (It
  // exists only once the engine started: own_shard() and a pass both come after start().)
  if (own != nullptr && (index == Engine::kAnyShard || index == own->index())) [[likely]] {
    if (stopped_.load(std::memory_order_relaxed)) [[unlikely]] {  // relaxed: only the flag's value
      own->admission.count_rejected();
      return {.status = Status::stopped};
    }
    if (!own->admission.admit()) return {.status = Status::max_pending_reached};
    Node* const node = own->reserve.own_node();
    if (node == nullptr) [[unlikely]] {
      own->admission.unadmit();
      own->admission.count_rejected();
      return {.status = Status::out_of_memory};
    }
    return {.node = node, .shard = own, .producer = nullptr};
  }
  if (!started_.load(std::memory_order_acquire) && !stopped_.load(std::memory_order_relaxed)) {
    try {
      start();
    } catch (...) {
      return {.status = Status::out_of_memory};  // a worker thread could not be created
    }
  }
  if (index != Engine::kAnyShard && index >= shards_.size()) return {.status = Status::no_such_shard};
  ProducerState* const state = producers_.mine();
  if (state == nullptr) return {.status = Status::out_of_memory};
  if (index == Engine::kAnyShard) index = producers_.home(*state);
  Shard& shard = *shards_[index];
  if (stopped_.load(std::memory_order_relaxed)) {
    shard.admission.count_rejected();
    return {.status = Status::stopped};  // (one racing stop() is caught in commit())
  }
  if (!shard.admission.admit()) return {.status = Status::max_pending_reached};
  Node* const node = take_node(*state, shard);
  if (node == nullptr) {
    shard.admission.unadmit();
    shard.admission.count_rejected();
    return {.status = Status::out_of_memory};
  }
  return {.node = node, .shard = &shard, .producer = state};
}

Timer EngineCore::commit(Node* node, Shard* shard, ProducerState* producer, Nanos when,
                         bool relative) noexcept {
  assert(producer != nullptr);  // the shard's own thread links through link_own()
  const Nanos deadline = relative ? saturating_add(deadline_now(), when) : when;
  const std::uint32_t gen = next_lifetime(node->gen.load(std::memory_order_relaxed));
  // Relaxed: the node reaches the worker through the hand-off queue (release/acquire), and other
  // threads through the Timer this returns, which the caller must pass on with its own ordering.
  node->gen.store(gen, std::memory_order_relaxed);
  // The tick, by a multiplication (TickDivider), so that the worker links the node as it comes.
  // After the generation, and release: a Timer::deadline() on another thread that still holds a
  // handle of the node's last lifetime may read this `due`; its acquire fence then pairs with this
  // store, so its second load of the generation sees this lifetime's (or later), never the one it
  // holds, and it answers nullopt (see ShardWheel::deadline_of). A plain mov on x86-64.
  const std::uint64_t due = ticks_.due(deadline);
  store_due(node, due, std::memory_order_release);
  ProducerState::PerShard& mine = producer->shards[shard->index()];
  const Reservation r{.node = node, .shard = shard, .producer = producer};
  // Counted before the hand-off (whose enqueue releases it), so that no claim of the timer can be
  // seen without it; fail() takes it back. Relaxed: see ProducerState::PerShard.
  mine.scheduled.store(mine.scheduled.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  // Due already (its tick over by the clock), for a worker that would have to be woken for it: the
  // executor gets it from here. schedule_every() commits relative deadlines, so `relative` alone
  // keeps periodic timers out; the tag says so too.
  if (!relative && shard->tasks.skips_worker(due) && (node->thunk & kPeriodicTag) == 0 &&
      Nanos(static_cast<Nanos::rep>(due * ticks_.tick())) <= now() && claim_due(node, *shard, mine, gen)) {
    return {shard, node, gen};
  }
  if (!shard->inbox.hand_over(*mine.transfer, node, due)) return fail(r, Status::out_of_memory);
  ProducerState::posted_to(*shard, mine);
  // hand_over() ended with a seq_cst fence after the enqueue, and stop() has one between its store
  // of stopped_ and its drain of the queues (Dekker): so if this load sees false, stop()'s drain
  // will see the node, and if it sees true the node may have come too late for the drain.
  if (stopped_.load(std::memory_order_relaxed)) [[unlikely]] {
    return settle_late(r, gen);
  }
  return {shard, node, gen};
}

bool EngineCore::claim_due(Node* node, Shard& shard, ProducerState::PerShard& mine,
                           std::uint32_t gen) noexcept {
  // Counted before stopped_ is read, with a seq_cst fence between (Dekker with stop_and_drain(),
  // whose wait for the tasks sums these counts after its own fence): either stop() counts this task
  // and waits for it, or this sees stopped_ and takes the count back. Release: an end for
  // pending(), whose acquire load then sees this thread's count of the schedule too.
  const std::uint64_t before = mine.dispatched.load(std::memory_order_relaxed);
  mine.dispatched.store(before + 1, std::memory_order_release);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (stopped_.load(std::memory_order_relaxed)) [[unlikely]] {
    mine.dispatched.store(before, std::memory_order_relaxed);
    return false;
  }
  // Claimed, as the worker's fire claims: cancel() now fails and expired() holds. Relaxed: the
  // executor's queue publishes it, with the callable, to the thread that runs the task, and the
  // caller passes the Timer on with its own ordering.
  node->gen.store(in_state(gen, kFired), std::memory_order_relaxed);
  shard.tasks.execute_claimed(node);
  // Counts as a post: the worker, asleep, is nudged now and then to take the returned nodes back.
  ProducerState::posted_to(shard, mine);
  return true;
}

std::uint64_t EngineCore::claimed_elsewhere(const Shard& shard) const {
  std::uint64_t n = 0;
  // Relaxed: the callers order their reads themselves (pending() reads the ends with acquire;
  // stop_and_drain() after its fence, see claim_due()).
  producers_.for_each([&](const ProducerState& p) {
    n += p.shards[shard.index()].dispatched.load(std::memory_order_relaxed);
  });
  return n;
}

Timer EngineCore::settle_late(const Reservation& r, std::uint32_t gen) noexcept {
  // stop() holds this mutex from its store of stopped_ until it has drained every queue, except
  // while it waits for executor tasks (which may be what is scheduling here). Under it the queues
  // are still. Not drained yet (that wait): the drain to come takes the node, and the schedule
  // stands, among the timers stop() returns. Drained: if the drain took the node, likewise; if
  // not, it is the one item in this thread's sub-queue (earlier ones were drained, or settled
  // here too): take it back and fail the schedule.
  // A callback on one of this engine's workers (or polling threads) must not take the mutex: stop()
  // holds it while it joins that very thread. The drain comes after the join, so the node stands.
  if (own_pass() != nullptr) return {r.shard, r.node, gen};
  std::lock_guard lock(lifecycle_mutex_);
  if (!joined_) return {r.shard, r.node, gen};
  Node* back = nullptr;
  if (!r.shard->inbox.transfers().try_dequeue_from_producer(*r.producer->shards[r.shard->index()].transfer,
                                                            back)) {
    return {r.shard, r.node, gen};
  }
  assert(back == r.node);
  return fail(r, Status::stopped);
}

Timer EngineCore::fail(const Reservation& r, Status why) noexcept {
  // Nothing was handed over: the timer never existed for anyone but this thread.
  destroy_callable(r.node);
  ProducerState::PerShard& mine = r.producer->shards[r.shard->index()];
  mine.scheduled.store(mine.scheduled.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  if (mine.cached < mine.cache.size()) {
    mine.cache[mine.cached++] = r.node;
  } else {
    mine.overflow.release(r.node);
  }
  r.shard->admission.unadmit();
  r.shard->admission.count_rejected();
  return Timer(why);
}

void EngineCore::on_cancel(Shard& shard, Node* node, std::uint32_t cancelled_gen, bool linked) noexcept {
  if (linked && shard.owned_here_outside_pass()) {
    shard.retire_owner_cancel(node);  // the owner's wheel: counted and unlinked now, no queue
    return;
  }
  shard.admission.free_place();
  ProducerState* state = producers_.mine();
  if (state != nullptr) {
    std::atomic<std::uint64_t>& cancels = state->shards[shard.index()].cancels;
    // Release: pairs with stats()' acquire load (see there).
    cancels.store(cancels.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  } else {
    shard.admission.count_orphan_cancel();
  }
  if (!linked) return;  // a periodic run cancelled: its re-arm, refused, recycles the node
  // From a callback of this engine's own pass the worker is still alive, and stop() (holding the
  // mutex while it joins this thread) drains the queue after the join: post as usual. So does a
  // cancel from stop()'s own hand-back visitor, which runs under the mutex while it walks the
  // wheels: the record waits in the queue for the destructor.
  if (stopped_.load(std::memory_order_acquire) && own_pass() == nullptr && t_handing_back != this) {
    // No worker will drain the queue any more. stop() holds this mutex until it has drained it,
    // so once we hold it the shard is ours: retire the node here, destroying its callable now.
    // (A handle stop() returned reaches this thread after stop() did, so it sees stopped_.)
    std::lock_guard lock(lifecycle_mutex_);
    if (joined_) {
      shard.wheel().retire(node, cancelled_gen);
      shard.publish_stats();
      return;
    }
  }
  if (state != nullptr) {
    ProducerState::PerShard& mine = state->shards[shard.index()];
    shard.inbox.post_cancel(*mine.cancel, node, cancelled_gen);
    ProducerState::posted_to(shard, mine);
  }
  // With no state (out of memory on this thread's first use) the record is not posted; the node
  // stays linked, harmless, until its time comes: the worker's claim then fails and recycles it.
}

Moved EngineCore::reschedule(Shard& shard, Node* node, std::uint32_t pending_gen, Nanos when,
                             bool relative) noexcept {
  constexpr Moved kRefused(Moved::Outcome::refused);
  assert(!shard.can_move_at_once());  // Timer::reschedule took that case to Shard::reschedule_here()
  // Acquire: as Timer::is_pending(), pairs with the compare-and-swap that moved the word on (a claim,
  // a cancel). Only the pending value moves: a periodic timer running its callback is refused, as
  // by Wheel::reschedule().
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return kRefused;
  const Nanos deadline = relative ? saturating_add(deadline_now(), when) : when;
  const std::uint64_t ns = move_deadline_ns(deadline);
  // After stop() began no pass will apply a record, and nothing runs any more: refused. (A record
  // posted while stop() drains is applied by the drain or by the destructor's, or found stale.)
  // Relaxed: only the flag's own value is used.
  if (stopped_.load(std::memory_order_relaxed)) return kRefused;
  ProducerState* const state = producers_.mine();
  if (state == nullptr) return kRefused;  // out of memory on this thread's first use: nothing posted
  ProducerState::PerShard& mine = state->shards[shard.index()];
  if (!shard.inbox.post_move(mine.moves, node, pending_gen, ns)) return kRefused;
  ProducerState::posted_to(shard, mine);
  return Moved(Moved::Outcome::posted);
}

std::optional<Nanos> EngineCore::deadline(const Timer& timer) noexcept {
  if (timer.node_ == nullptr) return std::nullopt;
  return timer.shard_->wheel().deadline_of(timer.node_, timer.gen_);
}

Timer EngineCore::timer_from_raw(std::uint64_t raw) const noexcept {
  const auto gen = static_cast<std::uint32_t>(raw >> 32);
  const auto locator = static_cast<std::uint32_t>(raw);
  // Only a pending value is a handle's (raw() of any other Timer is 0), so gen 0 (an empty raw) is
  // refused here, as is any locator that names no node handed out.
  if ((gen & 3) != kPending) return {};
  const std::optional<NodeDirectory::Found> found = directory_.find(locator);
  if (!found || found->shard >= shards_.size()) return {};
  return {shards_[found->shard].get(), found->node, gen};
}

Shard& EngineCore::own_thread_shard(std::size_t index, const char* call, const char* hint) const {
  if (index >= shards_.size()) {
    throw std::out_of_range(std::string("tickwheel::Engine::") + call + ": shard " + std::to_string(index) +
                            " of " + std::to_string(shards_.size()));
  }
  Shard& shard = *shards_[index];
  if (!shard.is_own_thread()) {
    throw std::logic_error(std::string("tickwheel::Engine::") + call + ": shard " + std::to_string(index) +
                           " is not the calling thread's: call it from a callback on that shard, or from the "
                           "thread that owns it (Engine::own_shard)" +
                           hint);
  }
  if (shard.walking()) {
    throw std::logic_error(std::string("tickwheel::Engine::") + call +
                           ": called from inside a for_each_pending() "
                           "visitor of shard " +
                           std::to_string(index) + ", whose walk must not change the shard");
  }
  return shard;
}

std::size_t EngineCore::clear(std::size_t index) {
  return own_thread_shard(index, "clear", "; from any other thread, post_clear() posts the clear to it")
      .clear_here();
}

bool EngineCore::may_post_clear(bool& post) const noexcept {
  // Relaxed: only the flag's own value is used. A request that reads false here while stop() sets
  // it is served by stop()'s drain if that sees the request (Shard::drain_stopped), else never:
  // the timers are then handed back, as engine.hpp says.
  if (stopped_.load(std::memory_order_relaxed)) return false;
  // Acquire: pairs with start()'s release. Before the first start no schedule has succeeded (each
  // starts the engine first), so there is nothing to clear, and a request left waiting for the
  // first pass would cancel timers scheduled after this call. A start racing this call: its
  // timers are concurrent with it, which engine.hpp lets go either way.
  post = started_.load(std::memory_order_acquire);
  return true;
}

bool EngineCore::post_clear(std::size_t index) {
  if (index >= shards_.size()) {
    throw std::out_of_range("tickwheel::Engine::post_clear: shard " + std::to_string(index) + " of " +
                            std::to_string(shards_.size()));
  }
  bool post = false;
  if (!may_post_clear(post)) return false;
  if (post) shards_[index]->inbox.post_clear();
  return true;
}

bool EngineCore::post_clear_all() noexcept {
  bool post = false;
  if (!may_post_clear(post)) return false;
  if (post) {
    for (auto& shard : shards_) shard->inbox.post_clear();
  }
  return true;
}

std::size_t EngineCore::for_each_pending(std::size_t index, void* context,
                                         void (*each)(void* context, Timer timer, Nanos deadline)) {
  return own_thread_shard(index, "for_each_pending").walk_here([&](Timer timer, Nanos deadline) {
    each(context, timer, deadline);
  });
}

void EngineCore::start() {
  if (own_pass() != nullptr) return;  // running
  std::lock_guard lock(lifecycle_mutex_);
  if (started_.load(std::memory_order_relaxed) || stopped_.load(std::memory_order_relaxed)) return;
  // Each start below may throw: the shards started so far stay started, and the next start()
  // (every schedule tries one) starts only the rest.
  if (opts_.threads == Threads::manual) {
    for (auto& shard : shards_) shard->loop.start();
    started_.store(true, std::memory_order_release);
    return;
  }
  for (auto& shard : shards_) shard->worker.start();
  for (auto& shard : shards_) {
    while (!shard->worker.ready()) std::this_thread::yield();
  }
  started_.store(true, std::memory_order_release);
}

std::size_t EngineCore::shut_down(const HandBack* back) {
  // The owner of a shard may stop the engine outside a pass; from inside one, or from a task or the
  // hand-back, it would wait for itself, and from a walk of its shard the drain would change the
  // lists under the walk.
  Shard* const owned = own_pass();
  if (running_pass() != nullptr || (owned != nullptr && owned->walking()) || current_task_engine() == this ||
      t_handing_back == this) {
    throw std::logic_error(
        "tickwheel::Engine::stop() called from inside one of its timer callbacks (or its own "
        "hand-back visitor, or a for_each_pending() visitor): it would join the thread it runs on, "
        "or wait for itself; call it from another thread");
  }
  // The owner lets its shard go before it takes the mutex: a stop() on another thread may hold the
  // mutex while it waits for this owner to let go (Shard::request_stop).
  if (owned != nullptr) owned->loop.disown();
  std::unique_lock lock(lifecycle_mutex_);
  if (!stopped_.load(std::memory_order_relaxed)) {
    stop_and_drain(lock);
  } else {
    // Another stop() waits for executor tasks, without the mutex: wait with it (so this one, too,
    // returns once every task has run), running meanwhile the tasks only this thread would run
    // (a loop's own lane), which that stop() may be waiting for.
    while (has_executor_ && !joined_) {
      lock.unlock();
      opts_.executor->run_while_stopping();
      std::this_thread::yield();
      lock.lock();
    }
    // Handed back already; or (with no executor) the stop() that set stopped_ threw before its drain.
    if (!joined_ || handed_back_) return 0;
  }
  return back != nullptr ? hand_back(*back) : 0;
}

void EngineCore::stop_and_drain(std::unique_lock<std::mutex>& lock) {
  // The owners' inline schedules take the checked path from here on. Shut before stopped_ is set,
  // whose release store pairs with stopped()'s acquire: a thread that sees the engine stopped then
  // finds its lane shut, and its schedule refused.
  for (auto& shard : shards_) shard->shut_lane();
  stopped_.store(true, std::memory_order_release);
  // Dekker with commit(): a hand-off whose producer then reads stopped_ as false is seen by the
  // drains below; one that reads true is settled by its producer under this mutex (settle_late).
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (auto& shard : shards_) shard->request_stop();
  for (auto& shard : shards_) shard->worker.join();
  if (has_executor_) {
    // Callbacks still running on executor threads may schedule or cancel: let them, then wait
    // them out. A hand-off that comes meanwhile stands (settle_late sees joined_ still false) and
    // a cancel is posted; the drains below take both.
    lock.unlock();
    for (auto& shard : shards_) shard->tasks.wait_for_all([&] { return claimed_elsewhere(*shard); });
    lock.lock();
  }
  for (auto& shard : shards_) shard->drain_stopped();
  joined_ = true;  // from here cancels retire their nodes directly (on_cancel, under this mutex)
}

std::size_t EngineCore::hand_back(const HandBack& back) {
  std::size_t most = 0;
  for (const auto& shard : shards_) most += shard->wheel().pending_count();  // at least as many as handed
  back.reserve(back.context, most);  // may throw: then nothing is handed back yet, nor lost
  std::size_t handed = 0;
  t_handing_back = this;
  for (auto& shard : shards_) {
    // After drain_stopped(): each timer still pending in the wheel (a periodic one between its
    // runs). Under the lifecycle lock: a cancel from `each` is posted, not retired (see
    // on_cancel()), so the walk's lists stay as they are.
    Shard* const s = shard.get();
    s->wheel().for_each_pending_node([&](Node* node) noexcept {
      back.each(back.context, Timer(s, node, node->gen.load(std::memory_order_relaxed)));
      ++handed;
    });
  }
  t_handing_back = nullptr;
  handed_back_ = true;
  return handed;
}

std::uint64_t EngineCore::pending(const Shard& shard) const {
  // Scheduled less ended, each counted where it happens: schedules by their producers (before the
  // hand-off) or by the worker (direct), claims by the worker (or by a producer: claim_due()),
  // cancels by their cancellers. The ends are read first, with acquire, each pairing with the
  // release that counted it after its timer's schedule was counted; so every end read has its start
  // read too, and the difference is never negative. Ends counted while this reads are missed: a
  // snapshot, exact when still.
  const std::size_t i = shard.index();
  std::uint64_t ended = shard.counters.ended() + shard.admission.orphan_cancels();
  producers_.for_each([&](const ProducerState& p) {
    ended += p.shards[i].cancels.load(std::memory_order_acquire) +
             p.shards[i].dispatched.load(std::memory_order_acquire);
  });
  std::uint64_t started = shard.counters.started();
  producers_.for_each(
      [&](const ProducerState& p) { started += p.shards[i].scheduled.load(std::memory_order_relaxed); });
  return started - std::min(started, ended);
}

EngineStats EngineCore::stats() const {
  EngineStats total;
  total.shards.reserve(shards_.size());
  for (const auto& shard : shards_) {
    ShardStats s = shard->stats(claimed_elsewhere(*shard));
    s.pending = pending(*shard);
    total += s;
    total.shards.push_back(std::move(s));
  }
  return total;
}

}  // namespace tickwheel::detail
