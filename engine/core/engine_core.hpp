// engine/core/engine_core.hpp — what an Engine is made of: its options, the topology, the shards, the
// registry of producer threads, and the lifecycle (lazy start, stop). The schedule path, in order:
// Engine::submit (engine.hpp) -> EngineCore::acquire (a shard, admission, a node) -> the callable
// stored in the node -> EngineCore::commit (the deadline's tick, the generation) -> ShardInbox::hand_over
// (the queue, the wake-up; shard.cpp) -> the shard's next pass -> ShardWheel::adopt (shard_wheel.cpp).
#pragma once

#include <array>
#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/directory.hpp"
#include "core/producer.hpp"
#include "core/shard.hpp"
#include "core/shard_host.hpp"
#include "platform/clock.hpp"
#include "platform/topology.hpp"
#include "tickwheel/engine.hpp"

namespace tickwheel::detail {

class EngineCore final : public ShardHost {
 public:
  explicit EngineCore(EngineOptions opts);
  // Stops as stop() does. Inside one of this engine's callbacks, which ~Engine's contract forbids,
  // stop() throws, and the exception leaving the destructor terminates: the answer intended, since
  // the join that stop() would do there could never return.
  ~EngineCore() override;  // NOLINT(bugprone-exception-escape): only on that misuse, as said above
  EngineCore(const EngineCore&) = delete;
  EngineCore& operator=(const EngineCore&) = delete;
  EngineCore(EngineCore&&) = delete;
  EngineCore& operator=(EngineCore&&) = delete;

  // A callable with a destructor is being stored (Engine::note_destructor()): the teardown must look
  // for pending ones. Any thread; one store per engine, loads after that.
  void note_destructors() noexcept {
    if (!held_destructors_.load(std::memory_order_relaxed)) {
      held_destructors_.store(true, std::memory_order_relaxed);
    }
  }

  // ---- ShardHost ----
  Nanos now() const noexcept override { return opts_.clock != nullptr ? opts_.clock() : monotonic_now(); }
  void note_once(Notice kind, const std::string& message) override;
  void report_callback_error(std::exception_ptr error) noexcept override;
  // Workers only (they bind): a caller-driven engine may have loaded none (see the constructor).
  const Topology& topology() const noexcept override {
    assert(topology_.has_value());
    return *topology_;
  }
  moodycamel::ProducerToken* returned_token(std::size_t shard) noexcept override;
  // Frees the timer's place, counts the cancel, and, if the node is still linked (`linked`: it was
  // pending, not a periodic run), has it unlinked: a record on the shard's cancel queue, or after
  // stop() an unlink here.
  void on_cancel(Shard& shard, Node* node, std::uint32_t cancelled_gen, bool linked) noexcept override;
  NodeDirectory& directory() noexcept override { return directory_; }

  // ---- Timer's and Engine's calls on one timer or one shard (engine.hpp states the contracts) ----
  // Timer::reschedule* from a thread that posts it (the shard's own: Shard::reschedule_here).
  Moved reschedule(Shard& shard, Node* node, std::uint32_t pending_gen, Nanos when,
                   bool relative) noexcept override;
  // Timer::deadline: any thread (ShardWheel::deadline_of).
  static std::optional<Nanos> deadline(const Timer& timer) noexcept;
  Timer timer_from_raw(std::uint64_t raw) const noexcept;
  std::size_t clear(std::size_t index);
  // Engine::post_clear / post_clear_all: a request to the shard (ShardInbox::post_clear), or none.
  bool post_clear(std::size_t index);
  bool post_clear_all() noexcept;
  std::size_t for_each_pending(std::size_t index, void* context,
                               void (*each)(void* context, Timer timer, Nanos deadline));

  // ---- The schedule path (Engine::submit) ----
  // Starts the engine if need be, picks the shard (the calling thread's own in a callback, its home
  // shard, or `index`), admits the timer, takes a node. On failure the status says why and nothing
  // is held.
  Reservation acquire(std::size_t index) noexcept;
  // Sets the node's deadline and generation and hands it over. The reservation's parts as
  // arguments (see Engine::commit).
  Timer commit(Node* node, Shard* shard, ProducerState* producer, Nanos when, bool relative) noexcept;
  // The same for a reservation of the shard's own thread (no producer): straight into its wheel, a
  // relative deadline counted from the shard's loop time (no clock read: Shard::loop_now()).
  static std::uint32_t link_own(Node* node, Shard* shard, Nanos when, bool relative) noexcept {
    return shard->link_own(node, relative ? saturating_add(shard->loop_now(), when) : when);
  }

  // ---- Lifecycle ----
  // Starts the workers (or, caller-driven, the shards' reserves) not started yet. Throws
  // std::system_error or std::bad_alloc if one cannot be: those started keep running, and the
  // next start() starts the rest.
  void start();
  // What shut_down() does with the timers it hands back: reserve(context, most) first (it may
  // throw, and then nothing is handed back), then each(context, timer) once per timer.
  struct HandBack {
    void* context;
    void (*reserve)(void* context, std::size_t most);
    void (*each)(void* context, Timer timer) noexcept;
  };
  // Engine::stop(): stops and drains the shards, once; then, if `back` is given and the timers
  // were not handed back before, hands them back and returns how many. With `back` null (the
  // destructor) it allocates nothing and leaves the timers for the wheels to destroy.
  std::size_t shut_down(const HandBack* back);
  // shut_down()'s parts, under lifecycle_mutex_: the first stop() stops, joins and drains the
  // shards (letting the mutex go while executor tasks finish); then the timers are handed back.
  void stop_and_drain(std::unique_lock<std::mutex>& lock);
  std::size_t hand_back(const HandBack& back);
  std::size_t poll(std::size_t index, Nanos now, std::size_t limit);
  std::optional<Nanos> next_deadline(std::size_t index) const;
  int wakeup_fd(std::size_t index) const;
  bool prepare_wait(std::size_t index, std::optional<Nanos> until);
  void finish_wait(std::size_t index);
  void own_shard(std::size_t index);
  void clock_moved() noexcept;
  void release_shard(std::size_t index);
  // Engine::owned_shard(): the calling thread's shard of this engine, if it owns one.
  std::optional<std::size_t> owned_shard_index() const noexcept {
    const Shard* own = owned_shard();
    return own != nullptr && &own->host() == this ? std::optional<std::size_t>(own->index()) : std::nullopt;
  }
  // Engine::stopped(). Acquire: pairs with stop_and_drain()'s release, so that a caller that sees
  // true also finds its shard's lane shut (the other readers use only the flag's own value).
  bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

  EngineStats stats() const;
  std::size_t shard_count() const noexcept { return shards_.size(); }
  Nanos tick() const noexcept { return opts_.tick; }

 private:
  // What a relative deadline is placed from: the engine's clock, or an upper bound of
  // CLOCK_MONOTONIC that is cheaper to read (see DeadlineClock). Never to decide what is due.
  Nanos deadline_now() const noexcept {
    return opts_.clock != nullptr ? opts_.clock() : deadline_clock_.upper_now();
  }
  // The shard whose pass the calling thread is in (a worker, or a thread inside poll()) if it is
  // one of this engine's: a callback running inline.
  // Or the shard the calling thread owns (Engine::own_shard), if it is one of this engine's: its
  // schedules and cancels go straight into the wheel, as a callback's do.
  Shard* own_pass() const noexcept {
    if (Shard* running = running_pass()) return running;
    Shard* own = owned_shard();
    return own != nullptr && &own->host() == this ? own : nullptr;
  }
  // The first half of own_pass(): the shard whose pass the calling thread is in, if one of this
  // engine's (a callback running inline; stop() from it would wait for itself).
  Shard* running_pass() const noexcept {
    Shard* running = current_shard();
    return running != nullptr && &running->host() == this ? running : nullptr;
  }
  // A hand-off that found stopped_ set once it was in the queue: it stands if stop() drained it,
  // else it is taken back and fails with Status::stopped.
  Timer settle_late(const Reservation& r, std::uint32_t gen) noexcept;
  // Undoes a schedule that handed nothing over: destroys the callable, keeps the node, counts it.
  static Timer fail(const Reservation& r, Status why) noexcept;
  // A one-shot timer already due, on a shard whose worker sleeps past it and whose executor takes
  // tasks from any thread: claims it and hands it to the executor on this thread (true), unless
  // stop() has begun (false, nothing done: the caller hands it over as any other).
  bool claim_due(Node* node, Shard& shard, ProducerState::PerShard& mine, std::uint32_t gen) noexcept;
  // The tasks other threads handed to the shard's executor themselves (claim_due), as counted now.
  std::uint64_t claimed_elsewhere(const Shard& shard) const;
  // The shard `index`, if the calling thread is its own (see Shard::is_own_thread) and not inside a
  // for_each_pending() walk of it: else std::out_of_range or std::logic_error, naming `call` (and
  // ending, for another thread, with `hint`).
  Shard& own_thread_shard(std::size_t index, const char* call, const char* hint = "") const;
  // Whether a clear may be posted now: false once stopping (refused), and true without posting
  // anything (`post` false) before the first start, when no timer exists yet.
  bool may_post_clear(bool& post) const noexcept;
  // Checks the preconditions of poll() and the other caller-driven calls (named by `call`).
  Shard& polled_shard(std::size_t index, const char* call = "poll") const;
  // The shard's timers scheduled and not yet claimed to run nor cancelled (ShardStats::pending).
  std::uint64_t pending(const Shard& shard) const;

  EngineOptions opts_;
  const std::uint64_t uid_;
  const DeadlineClock deadline_clock_;
  const TickDivider ticks_;           // a deadline's tick, computed by the producer (see commit())
  std::optional<Topology> topology_;  // loaded where a mode needs it (see the constructor)

  // Before the shards and the producers, whose pools' nodes it maps (it reads none at teardown).
  NodeDirectory directory_;
  // Declared before the shards: their overflow pools hold nodes the wheels still link at teardown.
  // (Their tokens must die before the shards' queues: the destructor drops them first.)
  ProducerRegistry producers_;
  std::vector<std::unique_ptr<Shard>> shards_;
  bool has_executor_ = false;  // tasks may be out on executor threads; fixed at construction

  // start(), stop(), and after stop() cancels and late hand-offs: never the hot path.
  std::mutex lifecycle_mutex_;
  bool joined_ = false;       // stop() has joined and drained the shards; under lifecycle_mutex_
  bool handed_back_ = false;  // a stop() has handed the pending timers back; under lifecycle_mutex_
  // started_: acquire on the schedule path, release in start(), so a producer that sees it also
  // sees the workers' reserves. stopped_: see the Dekker pairing in commit() and stop().
  std::atomic<bool> started_{false};
  std::atomic<bool> stopped_{false};
  std::array<std::atomic<bool>, static_cast<std::size_t>(Notice::count)> noticed_{};
  // A callable with a destructor was stored (note_destructors()). Relaxed: only the destructor
  // reads it, and every schedule happens before the destructor by the caller's own ordering, as
  // for any call that races the end of an object's life.
  std::atomic<bool> held_destructors_{false};
};

}  // namespace tickwheel::detail
