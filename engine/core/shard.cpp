// engine/core/shard.cpp — the worker loop, the wake protocol, transfers, cancels and the node reserve.
#include "core/shard.hpp"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <ctime>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>

#include "platform/clock.hpp"
#include "tickwheel/detail/arith.hpp"
#include "platform/topology.hpp"

namespace tickwheel::detail {
namespace {

thread_local const ShardHost* t_task_engine = nullptr;
// Lets go of the shard the calling thread owns (t_owned_shard) when the thread exits: an owner that
// ends without release_shard() must not leave stop() waiting for it forever. Armed by Shard::own(),
// whose use of it registers the destructor.
struct ReleaseAtExit {
  bool armed = false;
  ReleaseAtExit() = default;
  ReleaseAtExit(const ReleaseAtExit&) = delete;
  ReleaseAtExit& operator=(const ReleaseAtExit&) = delete;
  ReleaseAtExit(ReleaseAtExit&&) = delete;
  ReleaseAtExit& operator=(ReleaseAtExit&&) = delete;
  ~ReleaseAtExit() {
    if (armed && t_owned_shard != nullptr) t_owned_shard->disown();
  }
};
thread_local ReleaseAtExit t_release_at_exit;

// The reserve of free nodes a shard keeps for other threads' schedules: refilled to its target
// whenever a pass finds it below half of it. The target starts at 1 Ki nodes (64 KiB of node
// memory per shard: a small process pays for what it uses, as the options promise when
// reserve_per_shard is 0) and doubles, up to kReserveMax (64 MiB), each time a pass finds the
// reserve emptied: producers then took nodes from their overflow pools, whose memory the shard
// keeps once those timers end, so without the growth every burst larger than the reserve would map
// overflow memory anew.
constexpr std::size_t kReserveStart = std::size_t{1} << 10;
constexpr std::size_t kReserveMax = std::size_t{1} << 20;
// Nodes, hand-offs or cancel records moved per queue call, through a buffer on the stack that is
// left uninitialised: the dequeue fills what is read, and zeroing 8 or 16 KiB would tax every pass.
constexpr std::size_t kBulk = 1024;
// Address space a new worker's first allocation may need for the allocator's per-thread state.
// jemalloc, when it is the process's allocator, crashes instead of failing if a thread's first
// allocation finds no address space left (measured: a worker started with under 2 MiB to spare
// above its stack took SIGSEGV inside mallocx). So start_worker() maps this much, inaccessible and
// uncommitted, before it creates the thread, and the thread unmaps it just before that first
// allocation: a start without the room fails cleanly, on the creating thread.
constexpr std::size_t kAllocatorHeadroom = std::size_t{4} << 20;

inline void cpu_relax() noexcept { __builtin_ia32_pause(); }

}  // namespace

const ShardHost* current_task_engine() noexcept { return t_task_engine; }

namespace {
Wakeup::Kind wakeup_kind(const EngineOptions& opts) noexcept {
  if (opts.threads == Threads::workers) return Wakeup::Kind::futex;
  return opts.wake_loop ? Wakeup::Kind::callback : Wakeup::Kind::eventfd;
}
}  // namespace

Shard::Shard(ShardHost& host, std::size_t index, unsigned cpu, const EngineOptions& opts, Nanos start)
    : host_(host),
      index_(index),
      wait_strategy_(opts.wait),
      transfer_cap_(opts.transfer_cap),
      max_pending_(opts.max_pending_per_shard),
      reserve_(opts.reserve_per_shard),
      lock_memory_(opts.lock_memory),
      hybrid_spin_(opts.hybrid_spin),
      pin_(opts.pin_workers),
      manual_(opts.threads == Threads::manual),
      own_clock_(opts.clock != nullptr),
      on_pass_(opts.on_pass),
      on_pass_context_(opts.on_pass_context),
      cpu_(cpu),
      ticks_(static_cast<std::uint64_t>(opts.tick.count())),
      executor_(dynamic_cast<InlineExecutor*>(opts.executor.get()) != nullptr ? nullptr
                                                                              : opts.executor.get()),
      any_thread_executor_(executor_ != nullptr && executor_->any_thread() && max_pending_ == 0),
      wheel_(WheelOptions{.tick = opts.tick, .start = start, .max_pending = 0},
             ShardPolicy{.claims = &claimed_, .shard = this}, arena_.id),
      reserve_target_(kReserveStart),
      wake_(wakeup_kind(opts), index, &opts.wake_loop) {
  pool_map_.shard = static_cast<std::uint32_t>(index);
  lane_.shard = this;
  lane_.index = index;
  lane_.pool = &wheel_.pool();
}

void Shard::aim_lane() noexcept {
  Shard* const own = t_current_shard != nullptr ? t_current_shard : t_owned_shard;
  t_own_lane = own != nullptr ? &own->lane_ : nullptr;
}

// ---- Any thread ----

bool Shard::hand_over(moodycamel::ProducerToken& token, Node* node, std::uint64_t due_tick) noexcept {
  // The enqueue publishes the node (release; the worker's dequeue acquires it). It allocates only
  // when the producer's block list must grow, which stops once it covers the peak backlog; if
  // that allocation fails nothing was handed over and the caller fails the schedule.
  if (!transfers_.enqueue(token, node)) return false;
  // The caller's load of stopped_ relies on the fence in here too (EngineCore::commit): one fence
  // per hand-off serves both pairings.
  wake_for(due_tick);
  return true;
}

void Shard::wake_for(std::uint64_t due_tick) noexcept {
  // A timer fires once its tick has ended, and a worker's plan is such an end (the wheel's
  // next_deadline()): a timer due within the tick the sleeper wakes for anyway, a due-now answer
  // among them, needs no signal. (A loop's plan may be any time: it then wakes by itself no later
  // than the timer's end, and its pass takes the node in.)
  wake_.wake_if_before(due_tick * ticks_.tick());
}

bool Shard::dispatch(Node* node) noexcept {
  if (executor_ == nullptr) return false;
  // Relaxed: only the thread in the pass writes it (the worker, or the thread polling a
  // caller-driven shard: polls never overlap, and polling_ orders one after another), and stop()
  // reads it after joining the worker or waiting out the poll.
  dispatched_.store(dispatched_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  executor_->execute(Task(this, node));
  return true;
}

void Shard::run_task(Node* node, moodycamel::ProducerToken* returned_token) noexcept {
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
      // (ShardWheel::rearm_returned). The node is this thread's until the enqueue below publishes
      // it (release; the worker's dequeue acquires). Release, as every write of `due` that
      // Timer::deadline() can race from another thread (see detail::store_due).
      const Nanos next =
          detail::saturating_add(run_end(), Nanos(static_cast<Nanos::rep>(Meta::period(meta))));
      next_tick = ticks_.due(next);
      store_due(node, next_tick, std::memory_order_release);
    } else {
      // The next grid point, or a later one if the timer misfired: waking for the first is never
      // late. `due` is the run's tick, written by the worker before it handed the task over; a
      // fixed rate's period is a whole number of ticks.
      next_tick = std::min(node->due + ticks_.floor(Meta::period(meta)), ticks_.max_tick());
    }
  }
  // An enqueue fails only when the queue cannot allocate; a node must not be lost, so try again
  // (without this thread's token, then with it) until memory is found.
  while (!(returned_token != nullptr ? returned_.enqueue(*returned_token, node) : returned_.enqueue(node))) {
    returned_token = nullptr;
    std::this_thread::yield();
  }
  if (meta != 0) wake_for(next_tick);
  completed_.fetch_add(1, std::memory_order_release);  // see completed_
}

void Shard::callback_threw() noexcept {
  callback_errors_.fetch_add(1, std::memory_order_relaxed);
  host_.report_callback_error(std::current_exception());
}

void Shard::wait_for_tasks(const std::function<std::uint64_t()>& claimed_elsewhere) const noexcept {
  // Acquire: pairs with run_task()'s release increment, so the returned nodes are all visible.
  while (completed_.load(std::memory_order_acquire) !=
         dispatched_.load(std::memory_order_relaxed) + claimed_elsewhere()) {
    executor_->run_while_stopping();  // tasks only this thread would run (see Executor)
    std::this_thread::yield();
  }
}

void Shard::drain_returned() noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t n = 0;
  while ((n = returned_.try_dequeue_bulk(nodes.data(), kBulk)) != 0) {
    for (std::size_t i = 0; i < n; ++i) {
      Node* node = nodes[i];
      if (callable_meta(node) == 0) {
        wheel_.release_node(node);  // a one-shot run destroyed its callable
      } else {
        wheel_.rearm_returned(node);
      }
    }
  }
}

void Shard::post_cancel(moodycamel::ProducerToken& token, Node* node, std::uint32_t cancelled_gen) noexcept {
  // Does not wake the worker (but for the caller's nudge, once per kNudgeEvery posts): most
  // timers are cancelled, and the node is harmless until the next pass (if its time comes
  // first, the worker's claim fails and it recycles the node then, which is also what happens
  // if this enqueue cannot allocate).
  cancels_.enqueue(token, CancelRecord{node, cancelled_gen});
}

bool Shard::post_move(MoveRecordCache& records, Node* node, std::uint32_t pending_gen,
                      std::uint64_t deadline_ns) noexcept {
  MoveRecord* const record = records.take();
  if (record == nullptr) return false;
  record->node = node;
  record->gen = pending_gen;
  record->deadline_ns = deadline_ns;
  // The post publishes the record (release; the drain's load acquires it), and with it what this
  // thread saw of the node: the hand-off's deadline among it, which move_here() may rewrite.
  moves_.post(record);
  // A timer moved earlier than the sleeper's plan must not wait for it: the producers' protocol
  // (a seq_cst fence, then the plan), as for a hand-off; the post's exchange comes before the
  // fence, so either the poster sees the plan or the sleeper sees moves_.waiting().
  wake_for(ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns))));
  return true;
}

void Shard::post_clear() noexcept {
  // Release: pairs with serve_clears()'s acquire load, so the pass that sees this request also sees
  // every hand-off enqueued before it (their producers' enqueues happened before this call).
  clears_posted_.fetch_add(1, std::memory_order_release);
  // Then the producers' protocol: the sleeper's nothing_waits() reads the counter after its fence.
  wake_.wake_if_sleeping();
}

void Shard::nudge() noexcept { wake_.nudge(); }

std::size_t Shard::take_nodes(Node** out, std::size_t n) noexcept {
  return free_nodes_.try_dequeue_bulk(out, n);
}

bool Shard::admit_limited() noexcept {
  // Holding a place = admitted - (claimed + cancels won). The ends are read first, with acquire:
  // each pairs with the release that counted it, after the timer's own admission, so this
  // fetch_add then comes after that admission too and the difference never counts an end without
  // its start. Ends counted meanwhile are missed: an overestimate, so the limit is never exceeded.
  const std::uint64_t ended =
      claimed_.load(std::memory_order_acquire) + freed_.load(std::memory_order_acquire);
  const std::uint64_t before = admitted_.fetch_add(1, std::memory_order_relaxed);
  if (before - std::min(before, ended) < max_pending_) return true;
  admitted_.fetch_sub(1, std::memory_order_relaxed);
  count_rejected();
  return false;
}

ShardStats Shard::stats(std::uint64_t claimed_elsewhere) const {
  ShardStats s;
  s.scheduled = scheduled_.load(std::memory_order_relaxed) + claimed_elsewhere;
  s.fired = fired_.load(std::memory_order_relaxed) + claimed_elsewhere;
  s.fired_at_schedule = claimed_elsewhere;
  s.cancelled = cancelled_.load(std::memory_order_relaxed);
  s.rearmed = rearmed_.load(std::memory_order_relaxed);
  s.skipped = skipped_.load(std::memory_order_relaxed);
  s.rescheduled = rescheduled_.load(std::memory_order_relaxed);
  s.clears = clears_.load(std::memory_order_relaxed);
  s.cleared = cleared_.load(std::memory_order_relaxed);
  s.rejected = rejected_.load(std::memory_order_relaxed);
  s.queue_depth = transfers_.size_approx();
  s.transfer_cap_hits = cap_hits_.load(std::memory_order_relaxed);
  s.passes = passes_.load(std::memory_order_relaxed);
  s.wakeups = wakeups_.load(std::memory_order_relaxed);
  s.callback_errors = callback_errors_.load(std::memory_order_relaxed);
  const std::uint64_t completed = completed_.load(std::memory_order_relaxed);
  const std::uint64_t dispatched = dispatched_.load(std::memory_order_relaxed) + claimed_elsewhere;
  s.executing = dispatched - std::min(dispatched, completed);  // two snapshots: never negative
  s.max_tick_lag_ns = max_lag_ns_.load(std::memory_order_relaxed);
  s.bound_cpu = bound_cpu_.load(std::memory_order_relaxed);
  if (ready()) s.binding = binding_.data();  // acquire in ready() pairs with the worker's release
  return s;
}

// ---- The worker thread ----

void Shard::start_worker() {
  if (thread_.joinable()) return;  // started by an earlier start() that failed on a later shard
  make_reserve_token();
  void* const headroom =
      ::mmap(nullptr, kAllocatorHeadroom, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (headroom == MAP_FAILED) throw std::bad_alloc();
  try {
    thread_ = std::thread([this, headroom] { run(headroom); });
  } catch (...) {
    ::munmap(headroom, kAllocatorHeadroom);
    throw;
  }
  // Until the thread has made its first allocation in the room given back, this thread maps
  // nothing (the next worker's stack would take that room: measured, a crash in one start of
  // ~100 under a tight limit).
  while (!warmed_.load(std::memory_order_acquire)) std::this_thread::yield();
}

void Shard::make_reserve_token() {
  if (reserve_token_) return;
  reserve_token_.emplace(free_nodes_);
  // moodycamel leaves a token invalid, rather than throwing, when it cannot allocate its producer.
  if (!reserve_token_->valid()) {
    reserve_token_.reset();
    throw std::bad_alloc();
  }
}

void Shard::request_stop() noexcept {
  // seq_cst, and seq_cst on polling_ here and in poll(): a poll that takes polling_ then reads
  // stopping_, so either it sees stopping_ and runs nothing, or this loop sees it polling and
  // waits for it to end. (For a worker, any order would do: it reads stopping_ each pass.)
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.signal();  // a worker, or an owner's loop asleep in its wait: its next poll() lets go
  if (manual_) {
    // A poll, or an owner on another thread until its next poll() or its own stop() (which lets
    // the shard go before it waits for the lifecycle mutex that this thread holds).
    while (polling_.load(std::memory_order_seq_cst)) std::this_thread::yield();
  }
}

void Shard::join() {
  if (thread_.joinable()) thread_.join();
}

void Shard::retire_own(Node* node) noexcept {
  free_place();
  // Release: pairs with own_cancels()'s acquire, as a producer's cancel count. Only the shard's
  // thread (its owner, one at a time) writes it.
  own_cancels_.store(own_cancels_.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  // A hand-off not taken in yet (scheduled from another thread, or before this thread owned the
  // shard) is not linked: adopt() finds it cancelled and recycles it, as for any cancel in transit.
  if (node->pprev == nullptr) return;
  wheel_.cancel_own(node);
}

void Shard::describe_binding() noexcept {
  if (!pin_) {
    (void)std::snprintf(binding_.data(), binding_.size(), "not pinned (pin_workers = false)");
    return;
  }
  const int error = host_.topology().bind_thread(cpu_);
  if (error == 0) {
    (void)std::snprintf(binding_.data(), binding_.size(), "bound to PU %u", cpu_);
    bound_cpu_.store(static_cast<int>(cpu_), std::memory_order_relaxed);
    return;
  }
  std::array<char, 128> why{};
  Topology::describe_bind_error(error, cpu_, why);
  (void)std::snprintf(binding_.data(), binding_.size(), "not bound: %s", why.data());
  try {
    host_.note_once(ShardHost::Notice::binding_refused,
                    "tickwheel: shard " + std::to_string(index_) + " runs unpinned: " + why.data());
  } catch (...) {
    // No memory for the notice (or the log threw): stats().binding still says why.
  }
}

void Shard::run(void* headroom) {
  ::munmap(headroom, kAllocatorHeadroom);
  {
    // The allocator's per-thread state, set up now, in the room just given back (see
    // kAllocatorHeadroom). Nothrow: if even this fails, the allocations that follow fail cleanly.
    const std::unique_ptr<char> first(new (std::nothrow) char);
  }
  warmed_.store(true, std::memory_order_release);  // see start_worker()
  t_current_shard = this;
  aim_lane();
  describe_binding();
  // The kernel's timer slack (50 us by default) would make every timed wake that much late.
  ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  prepare();  // first touch of the node memory happens here, on the pinned worker

  while (!stopping_.load(std::memory_order_acquire)) {
    pass(clock_now(), std::numeric_limits<std::size_t>::max());
    if (!cap_hit_) wait();
  }
  t_current_shard = nullptr;
  aim_lane();
}

void Shard::prepare() noexcept {
  if (reserve_ != 0) reserve_memory();
  top_up(reserve_target_);
  ready_.store(true, std::memory_order_release);
}

// The timers asked for plus the hand-out reserve that prepare() fills from the same pool next.
void Shard::reserve_memory() noexcept {
  const std::uint64_t nodes = std::uint64_t{reserve_} + reserve_target_;
  const int err = wheel_.reserve(nodes, lock_memory_);
  if (err == 0) return;
  try {
    host_.note_once(ShardHost::Notice::reserve_refused, "tickwheel: shard " + std::to_string(index_) + ": " +
                                                            wheel_.describe_refusal(nodes, err));
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory for the line, or the log hook threw
  }
}

void Shard::start_manual() {
  make_reserve_token();
  (void)std::snprintf(binding_.data(), binding_.size(), "caller-driven (no worker thread)");
  prepare();
}

std::size_t Shard::poll(Nanos now, std::size_t limit) {
  const bool owner = t_owned_shard == this;  // holds polling_ already, from own() until it lets go
  // walking_ and in_poll_pass_ are read only by the shard's owner: a walk from a callback is inside
  // a poll, caught by the first test; the owner's poll from a callback of another shard polled
  // inside this one's pass (t_current_shard is that other shard) by the second; any other
  // thread's poll is refused by polling_, which the owner or the outer poll holds.
  if (t_current_shard == this || (owner && (walking_ || in_poll_pass_)) ||
      (!owner && polling_.exchange(true, std::memory_order_seq_cst))) {
    throw std::logic_error("tickwheel::Engine::poll: shard " + std::to_string(index_) +
                           " is being polled by another thread, owned by one, or polled from one of its own "
                           "callbacks or from a for_each_pending() visitor; each shard must have one polling "
                           "thread at a time");
  }
  std::size_t ran = 0;
  if (!stopping_.load(std::memory_order_seq_cst)) {  // see request_stop()
    // Callbacks run on this thread: a schedule on this shard from one goes straight into the wheel,
    // and stop() from one is refused, as on a worker. (A callback may poll another engine.)
    Shard* const outer = t_current_shard;
    t_current_shard = this;
    aim_lane();
    in_poll_pass_ = true;
    ran = pass(now, limit);  // noexcept: the flags are restored
    in_poll_pass_ = false;
    t_current_shard = outer;
    aim_lane();
    planned_ns_ = wheel_.next_deadline();  // the tick lag of the next poll is measured against it
  }
  if (!owner) {
    // Release: the next poll, from whichever thread, sees this one's wheel.
    polling_.store(false, std::memory_order_release);
  } else if (stopping_.load(std::memory_order_seq_cst)) {
    disown();  // stop() waits for the owner to let go (it woke the owner's loop to get here)
  }
  return ran;
}

std::optional<Nanos> Shard::next_deadline(Nanos now) const noexcept {
  // Relaxed: a hint, as the sizes; the poll that follows drains with acquire.
  if (transfers_.size_approx() != 0 || returned_.size_approx() != 0 || moves_.waiting() ||
      clears_posted_.load(std::memory_order_relaxed) != clears_served_) {
    return now;
  }
  return wheel_.next_deadline();
}

std::size_t Shard::pass(Nanos now, std::size_t limit) noexcept {
  loop_now_ = std::max(loop_now_, now);
  // A load and a store, not an increment: this thread is the only writer (as every counter here).
  passes_.store(passes_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  const std::optional<Nanos> planned = planned_ns_;
  const std::uint64_t moves_before = on_pass_ != nullptr ? wheel_.stats().moved : 0;
  if (planned_ns_ && now > *planned_ns_) {
    const std::int64_t lag = (now - *planned_ns_).count();
    if (lag > max_lag_ns_.load(std::memory_order_relaxed)) max_lag_ns_.store(lag, std::memory_order_relaxed);
  }
  // Netty's order: cancels first (their nodes must not be transferred into the wheel as live
  // timers only to be unlinked again), then at most transfer_cap hand-offs, then what is due.
  const std::size_t cancels = drain_cancels();
  (void)drain_moves();  // before anything runs, as the cancels
  drain_returned();
  (void)serve_clears();  // after the periodic timers back from the executor are linked again
  const std::size_t moved = transfer(transfer_cap_);
  cap_hit_ = moved == transfer_cap_ && transfers_.size_approx() != 0;
  if (cap_hit_) cap_hits_.fetch_add(1, std::memory_order_relaxed);
  const std::uint64_t fired_before = wheel_.stats().fired;
  auto ran = [&] { return static_cast<std::size_t>(wheel_.stats().fired - fired_before); };
  for (;;) {
    try {
      wheel_.advance(now, limit - ran());
      break;
    } catch (...) {
      // The callback counts as fired; the wheel resumes the rest of the pass on the next call.
      callback_threw();
    }
  }
  refill();
  publish_stats();
  if (on_pass_ != nullptr) [[unlikely]] {
    const PassReport report{.shard = index_,
                            .planned = planned,
                            .start = now,
                            .end = clock_now(),
                            .cancels = cancels,
                            .transferred = moved,
                            .fired = ran(),
                            .moved = wheel_.stats().moved - moves_before};
    on_pass_(on_pass_context_, report);
  }
  return ran();
}

std::size_t Shard::drain_cancels() noexcept {
  std::array<CancelRecord, kBulk> records;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t n = 0;
  std::size_t taken = 0;
  while ((n = cancels_.try_dequeue_bulk(records.data(), kBulk)) != 0) {
    for (std::size_t i = 0; i < n; ++i) wheel_.retire(records[i].node, records[i].gen);
    taken += n;
  }
  return taken;
}

std::size_t Shard::drain_moves() noexcept {
  // Most passes find no move: one load of the queue's tail, shared with its producers.
  if (!moves_.waiting()) return 0;
  // A stale record (the timer fired, ran, was cancelled or its node reused) is dropped.
  return moves_.drain([this](const MoveRecord& r) { (void)move_here(r.node, r.gen, r.deadline_ns); });
}

std::size_t Shard::take_in_all() noexcept {
  // An output iterator that adopts each node the queue hands it, so that one bulk dequeue can take
  // any number of nodes without a buffer. moodycamel's bulk dequeue without a consumer token walks
  // the producers' sub-queues once, in list order, taking from each what it holds then.
  class AdoptInto {
   public:
    explicit AdoptInto(ShardWheel& wheel) noexcept : wheel_(&wheel) {}
    AdoptInto& operator*() noexcept { return *this; }
    AdoptInto& operator++() noexcept { return *this; }
    AdoptInto operator++(int) noexcept { return *this; }  // NOLINT(cert-dcl21-cpp): the queue's idiom
    AdoptInto& operator=(Node* node) noexcept {
      wheel_->adopt(node);
      return *this;
    }

   private:
    ShardWheel* wheel_;
  };
  return transfers_.try_dequeue_bulk(AdoptInto(wheel_), std::numeric_limits<std::size_t>::max());
}

bool Shard::serve_clears() noexcept {
  // Acquire: pairs with post_clear()'s release increment (see there). Relaxed would read the same
  // value; the acquire is what makes the hand-offs before the request visible to the sweep.
  const std::uint64_t posted = clears_posted_.load(std::memory_order_acquire);
  if (posted == clears_served_) [[likely]] {
    return false;
  }
  clears_served_ = posted;
  (void)clear_here();
  return true;
}

std::size_t Shard::transfer(std::size_t cap) noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  std::size_t moved = 0;
  while (moved < cap) {
    const std::size_t n = transfers_.try_dequeue_bulk(nodes.data(), std::min(kBulk, cap - moved));
    if (n == 0) break;
    for (std::size_t i = 0; i < n; ++i) wheel_.adopt(nodes[i]);
    moved += n;
  }
  return moved;
}

void Shard::refill() noexcept {
  const std::size_t have = free_nodes_.size_approx();
  if (have == 0 && reserve_target_ < kReserveMax) reserve_target_ *= 2;  // emptied since last pass
  if (have < reserve_target_ / 2) top_up(reserve_target_ - have);
}

void Shard::top_up(std::size_t want) noexcept {
  std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
  while (want != 0) {
    const std::size_t n = take_wheel_nodes(std::span(nodes).first(std::min(kBulk, want)));
    if (n == 0) break;
    if (!free_nodes_.enqueue_bulk(*reserve_token_, nodes.data(), n)) {
      for (std::size_t i = 0; i < n; ++i) wheel_.release_node(nodes[i]);  // the queue could not grow
      break;
    }
    want -= n;
  }
}

void Shard::publish_stats() noexcept {
  const WheelStats w = wheel_.stats();
  scheduled_.store(w.scheduled, std::memory_order_relaxed);
  fired_.store(w.fired, std::memory_order_relaxed);
  cancelled_.store(w.cancelled, std::memory_order_relaxed);
  rearmed_.store(w.rearmed, std::memory_order_relaxed);
  skipped_.store(w.skipped, std::memory_order_relaxed);
  rescheduled_.store(w.rescheduled, std::memory_order_relaxed);
}

void Shard::wait() {
  switch (wait_strategy_) {
    case WaitStrategy::spin:
      planned_ns_ = wheel_.next_deadline();  // the next pass's tick lag is measured against it
      cpu_relax();
      return;
    case WaitStrategy::hybrid: {
      // The spin is real time; what is due is the engine's clock's.
      const Nanos spin_end = saturating_add(monotonic_now(), hybrid_spin_);  // any spin is valid
      const std::optional<Nanos> next = wheel_.next_deadline();
      planned_ns_ = next;  // as for spin; sleep_until() sets it again if the spin runs out
      for (;;) {
        if ((next && clock_now() >= *next) || !nothing_waits()) {
          return;
        }
        if (monotonic_now() >= spin_end) break;
        cpu_relax();
      }
      sleep_until(next);
      return;
    }
    case WaitStrategy::sleep: sleep_until(wheel_.next_deadline()); return;
  }
}

void Shard::sleep_until(std::optional<Nanos> deadline) {
  planned_ns_ = deadline;
  if (deadline && *deadline <= clock_now()) return;
  const std::uint32_t seq = wake_.prepare(plan_of(deadline));
  // The deadline again, after prepare(): a clock_moved() whose signal that load did not see comes
  // after it, so makes the futex wait return at once; one it did see moved the clock before, so
  // this read sees the deadline reached. (With CLOCK_MONOTONIC this only skips a needless wait.)
  if (nothing_waits() && !(deadline && *deadline <= clock_now())) {
    // The futex times out on CLOCK_MONOTONIC: with a clock of the user's the worker sleeps until
    // woken, by a producer, or by Engine::clock_moved() from whoever moves that clock.
    wake_.wait(seq, own_clock_ ? std::nullopt : deadline);
    wakeups_.fetch_add(1, std::memory_order_relaxed);
  }
  wake_.finish();
}

std::uint64_t Shard::plan_of(const std::optional<Nanos>& until) noexcept {
  return until ? static_cast<std::uint64_t>(std::max<Nanos::rep>(until->count(), 0)) : Wakeup::kUntilWoken;
}

bool Shard::nothing_waits() const noexcept {
  // Nodes back from the executor count as work too: a periodic one is not in the wheel's plan
  // until it is re-armed.
  // Moves too: one earlier than the plan must be applied before the sleep (post_move() exchanges
  // the queue's tail before its fence, so either this load sees it or the poster sees the plan and
  // signals); one in flight, not linked yet, keeps the worker from sleeping until it is.
  // Relaxed: after prepare()'s fence; the drains acquire.
  // Clear requests too, by the same protocol (post_clear() bumps the counter before its fence).
  return transfers_.size_approx() == 0 && returned_.size_approx() == 0 && !moves_.waiting() &&
         clears_posted_.load(std::memory_order_relaxed) == clears_served_ &&
         !stopping_.load(std::memory_order_acquire);
}

bool Shard::prepare_wait(std::optional<Nanos> until) noexcept {
  (void)wake_.prepare(plan_of(until));
  if (nothing_waits()) return true;
  wake_.finish();
  return false;
}

void Shard::finish_wait() noexcept {
  wake_.finish();
  wakeups_.store(wakeups_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // see pass()
  loop_now_ = std::max(loop_now_, clock_now());  // the loop's time after its wait (see loop_now())
}

void Shard::own() {
  if (t_owned_shard == this) return;
  if (t_owned_shard != nullptr) {
    throw std::logic_error("tickwheel::Engine::own_shard: this thread owns shard " +
                           std::to_string(t_owned_shard->index_) +
                           " already; a thread owns one shard at a time");
  }
  if (polling_.exchange(true, std::memory_order_seq_cst)) {  // as poll() takes it
    throw std::logic_error("tickwheel::Engine::own_shard: shard " + std::to_string(index_) +
                           " is owned or being polled by another thread");
  }
  if (stopping_.load(std::memory_order_seq_cst)) {
    polling_.store(false, std::memory_order_release);
    throw std::logic_error("tickwheel::Engine::own_shard: the engine is stopped");
  }
  t_owned_shard = this;
  aim_lane();
  t_release_at_exit.armed = true;
  loop_now_ = std::max(loop_now_, clock_now());
}

std::size_t Shard::take_wheel_nodes(std::span<Node*> out) noexcept {
  const std::uint32_t before = wheel_.pool().touched();
  const std::size_t n = wheel_.take_free_nodes(out);
  stamp_since(before);  // fresh nodes come last, in index order (the free list is used up first)
  return n;
}

bool Shard::move_here(Node* node, std::uint32_t pending_gen, std::uint64_t deadline_ns) noexcept {
  // Acquire: pairs with a canceller's compare-and-swap, so that a cancel seen is seen whole; one
  // that comes after this load leaves the node linked, where its record or the fire path finds it.
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return false;
  const std::uint64_t due = ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns)));
  // The owner outside a pass may queue it, as the standalone wheel does; a pass, a walk's aftermath
  // or a posted record moves it at once.
  if (owned_here_outside_pass()) {
    wheel_.move_own(node, due);
  } else {
    wheel_.move(node, due);
  }
  return true;
}

std::optional<Nanos> Shard::deadline_of(Node* node, std::uint32_t pending_gen) const noexcept {
  // A seqlock's read, the generation word standing in for the sequence: `due` counts only if the
  // word holds the handle's pending value both before and after it is read.
  //
  // Acquire: pairs with a periodic timer's re-arm (ShardPolicy::rearm's compare-and-swap, whose
  // release comes after its write of the next run's `due`, WheelCore::rearm): so once the timer
  // is pending again `due` is the next run's, not the last one's. (What the schedule wrote reached
  // this thread with the Timer itself, which the caller passed on with its own ordering.) Any other
  // value (fired, cancelled, running, another lifetime, a fresh node): nullopt.
  if (node->gen.load(std::memory_order_acquire) != pending_gen) return std::nullopt;
  // Relaxed, through std::atomic_ref: every write this can race is atomic (detail::store_due).
  // Within the lifetime (a move, a re-arm) it reads the value before or after the write: both are
  // deadlines this timer had while it was asked, the answer engine.hpp promises.
  // A move the owner queued flags the due (ShardWheel::move_own): masked off, it is the new one.
  const std::uint64_t due = load_due(node) & ~ShardWheel::kMovingBit;
  // Acquire fence: pairs with the release of the write of `due` just read. If that write is of a
  // later lifetime of the node (the timer ended and the node was handed out again meanwhile: the
  // producer's store in EngineCore::commit, or any later one), the end of this timer came before
  // it, so the load below sees the word moved on, and the stale `due` is not answered.
  std::atomic_thread_fence(std::memory_order_acquire);
  // Relaxed: ordered by the fence above.
  if (node->gen.load(std::memory_order_relaxed) != pending_gen) return std::nullopt;
  // In ticks, linked or in transit (see Node::due); due <= the horizon: no overflow.
  return Nanos(static_cast<Nanos::rep>(due * ticks_.tick()));
}

std::size_t Shard::clear_here() noexcept {
  settle();
  const std::size_t cleared = wheel_.cancel_all();
  free_place(cleared);
  // Release: pairs with cleared()'s acquire, as direct_ does. Only this thread writes it.
  cleared_.store(cleared_.load(std::memory_order_relaxed) + cleared, std::memory_order_release);
  // Relaxed: a count for stats(), ordering nothing. Only this thread writes it.
  clears_.store(clears_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  publish_stats();
  return cleared;
}

void Shard::disown() noexcept {
  t_owned_shard = nullptr;
  aim_lane();
  // Release: whoever polls or stops next sees everything this owner did to the wheel.
  polling_.store(false, std::memory_order_release);
}

}  // namespace tickwheel::detail
