// tickwheel/detail/wheel_core.hpp — the hierarchical timing wheel's machinery: its state and its
// policies; its inline hot path is in wheel_hot_path.hpp, included at the end. Users include
// tickwheel/wheel.hpp and use Wheel; an Engine's shard derives from WheelCore with a policy of its
// own. The invariants I1..I11 named here are stated and argued beside the out-of-line members,
// which the library compiles (see docs/DESIGN.md, "Invariants").
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <type_traits>

#include "tickwheel/detail/arith.hpp"
#include "tickwheel/detail/memory.hpp"
#include "tickwheel/detail/node.hpp"
#include "tickwheel/detail/pool.hpp"
#include "tickwheel/status.hpp"
#include "tickwheel/wheel_types.hpp"

namespace tickwheel::detail {
class ShardWheel;

// The schedule word of a periodic timer (see PeriodicMeta), or 0 for a period schedule_every()
// refuses: period <= 0 or > 2^60 - 1 ns, or fixed rate and not a whole number of ticks.
std::uint64_t periodic_meta(Nanos period, const PeriodicOptions& opts, Nanos tick) noexcept;

// How a wheel claims a due node, runs it and re-arms it: the one thing the standalone wheel and an
// Engine's shard do differently. The wheel's code (out of line, in the library) is the same for both and
// calls its policy at these points; the policy is a compile-time parameter, so the standalone
// wheel pays for no test of the Engine's needs on its hot path. This is the standalone wheel's:
// one thread owns every node, so a claim and a re-arm are plain stores (relaxed: no other thread
// reads them), and every run is inline. The Engine's shard wheel claims by
// compare-and-swap against cancels from other threads and may hand runs to an executor.
struct PlainPolicy {
  // Others may cancel this wheel's nodes from other threads; the wheel then counts the cancels its
  // claims and re-arms lose. Never, here.
  static constexpr bool kShared = false;
  // Takes a due node whose generation the wheel loaded as `gen` from pending to `state` (kFired for
  // a one-shot timer, kRunning for a periodic one); false if a cancel took it first.
  static bool claim(Node* node, std::uint32_t gen, std::uint32_t state) noexcept {
    assert((gen & 3) == kPending);
    node->gen.store(in_state(gen, state), std::memory_order_relaxed);
    return true;
  }
  // Takes a periodic node whose run ended from `running` back to pending (the same lifetime, so its
  // id stays valid); false if a cancel took it during the run. Here only cancel() from inside the
  // callback can have, and that cancel counted itself.
  static bool rearm(Node* node, std::uint32_t running) noexcept {
    if (node->gen.load(std::memory_order_relaxed) != running) return false;
    node->gen.store(pending_of_running(running), std::memory_order_relaxed);
    return true;
  }
  // Hands a claimed node to another thread to run instead of running it in the pass: never here.
  static constexpr bool dispatch(Node* /*node*/) noexcept { return false; }
  // When an inline run of a fixed-delay timer ended: the now of the advance() that ran it, since a
  // standalone wheel never reads a clock.
  static constexpr Nanos run_end(Nanos pass_now) noexcept { return pass_now; }
};

template <class Policy>
class WheelCore {
 public:
  static constexpr unsigned kLevelBits = 8;              // each level is 256x coarser
  static constexpr unsigned kSlotBits = kLevelBits + 1;  // 512 slots: two revolutions
  static constexpr unsigned kSlots = 1U << kSlotBits;
  static constexpr unsigned kLevels = 7;
  static constexpr unsigned kWays = 8;  // sub-lists per slot
  // The most timers of one upper-level slot whose deadlines next_deadline() reads.
  static constexpr unsigned kDeadlineScan = 8;
  static constexpr Nanos kMinTick = std::chrono::microseconds(1);
  static constexpr Nanos kMaxTick = std::chrono::hours(1);

  // The calls' contracts are Wheel's (tickwheel/wheel.hpp); an Engine's shard adds its own.
  explicit WheelCore(WheelOptions opts = {}, Policy policy = {});
  ~WheelCore();
  WheelCore(const WheelCore&) = delete;
  WheelCore& operator=(const WheelCore&) = delete;

  template <class F>
  [[nodiscard]] TimerId schedule_at(Nanos deadline, F&& fn) noexcept {
    check_callable<F>();
    if (is_null_callable(fn)) return TimerId::failure(Status::null_callback);
    Node* node = acquire_node();
    if (node == nullptr) return TimerId::failure(acquire_failure());
    note_destructor<F>();
    store_callable(node, std::forward<F>(fn));
    return commit(node, deadline);
  }
  template <class F>
  [[nodiscard]] TimerId schedule_after(Nanos delay, F&& fn) noexcept {
    return schedule_at(saturating_add(now_, delay), std::forward<F>(fn));
  }
  template <class F>
  [[nodiscard]] TimerId schedule_every(Nanos period, F&& fn, PeriodicOptions opts = {}) noexcept {
    check_periodic_callable<F>();
    if (is_null_callable(fn)) return TimerId::failure(Status::null_callback);
    const std::uint64_t meta = periodic_meta(period, opts, tick_);
    if (meta == 0) return TimerId::failure(Status::bad_period);
    Node* node = acquire_node();
    if (node == nullptr) return TimerId::failure(acquire_failure());
    note_destructor<F>();
    store_periodic_callable(node, meta, std::forward<F>(fn));
    const Nanos delay = opts.initial_delay.value_or(period);
    return commit(node, saturating_add(now_, delay > Nanos(0) ? delay : Nanos(0)));
  }
  bool cancel(TimerId id) noexcept;
  void prefetch(TimerId id) const noexcept {
    if (id.index_ < pool_.touched()) prefetch_node(pool_.at(id.index_));
  }
  bool reschedule(TimerId id, Nanos deadline) noexcept;
  bool reschedule_after(TimerId id, Nanos delay) noexcept {
    return reschedule(id, saturating_add(now_, delay));
  }
  bool is_pending(TimerId id) const noexcept;
  std::optional<Nanos> deadline(TimerId id) const noexcept;
  std::optional<Nanos> remaining(TimerId id) const noexcept;
  std::size_t clear() noexcept;
  template <class Visit>
  requires std::invocable<Visit&, TimerId, Nanos>
  void for_each_pending(Visit&& visit) const {
    finish_unlinks();  // so that no queued unlink can change a list under the walk
    const ScopedFlag visiting(visiting_);
    visit_pending([&](const Node* node) {
      visit(TimerId(node->index, node->gen.load(std::memory_order_relaxed)),
            Nanos(static_cast<Nanos::rep>(node->due) * tick_.count()));
    });
  }
  std::size_t advance(Nanos now, std::size_t limit = std::numeric_limits<std::size_t>::max());
  std::optional<Nanos> next_deadline() const noexcept;
  std::size_t pending_count() const noexcept { return pending_; }
  Nanos now() const noexcept { return now_; }
  Nanos tick() const noexcept { return tick_; }
  Nanos horizon() const noexcept { return Nanos(static_cast<Nanos::rep>(ticks_.max_tick()) * tick_.count()); }
  WheelStats stats() const noexcept;

 private:
  // Everything below is the wheel's own (its out-of-line members, in the library). The Engine's
  // shard wheel derives from the core with its own policy and adds, through this
  // friendship, the hooks its queues need; nothing of it is on the standalone wheel's path.
  friend class ShardWheel;

  static constexpr unsigned kWheelSlots = kLevels * kSlots;
  static constexpr unsigned kDueSlot = kWheelSlots;        // due by the current call, for the next one
  static constexpr unsigned kLateSlot = kWheelSlots + 1;   // due slot contents being run, ahead of the batch
  static constexpr unsigned kBatchSlot = kWheelSlots + 2;  // the timers of tick cur_ being run
  static constexpr unsigned kAllSlots = kWheelSlots + 3;
  static constexpr unsigned kUnlinkBatch = 32;
  // From this many pending timers on, links spread over all kWays sub-lists (way_mask_).
  static constexpr std::size_t kSpreadFrom = 2048;
  // The fewest nodes the look-ahead cascade moves in one call while a slot holds more (plan_pace()):
  // at 8 nodes of about 60 instructions each a paced call stays well under a microsecond, and a
  // slot of a few dozen timers is not moved one node per call, each call paying the levels' scan.
  static constexpr std::uint64_t kPaceBatch = 8;
  // Set in a node's due while a move reschedule() queued is pending (I11: a queued move). A due
  // in ticks is below 2^54 (horizon() at the smallest tick), so the bit is free.
  static constexpr std::uint64_t kMoving = std::uint64_t{1} << 63;
  static_assert(static_cast<std::uint64_t>(std::numeric_limits<Nanos::rep>::max() / kMinTick.count()) <
                    kMoving,
                "no tick a wheel can reach has the kMoving bit");
  static constexpr unsigned kWordsPerLevel = kSlots / 64;
  static constexpr unsigned kBitmapWords = (kAllSlots + 63) / 64;
  static_assert(kSlots % 64 == 0, "each level's occupancy is a whole number of bitmap words");
  static_assert(kBitmapWords <= 64, "one bit of nonempty_words_ per bitmap word");
  static_assert(kWordsPerLevel <= 8 && kLevels * kWordsPerLevel <= 64, "a level's words are one byte of it");
  static_assert(std::uint64_t{kSlots} << (kLevelBits * (kLevels - 1)) >=
                    (std::uint64_t{1} << 63) / kMinTick.count(),
                "the top level must reach the last tick a Nanos can hold at the smallest tick");

  struct alignas(kCacheLine) Slot {
    std::array<Node*, kWays> head;
  };
  static_assert(sizeof(Slot) == kCacheLine, "one slot is one cache line of sub-list heads");
  // The slot array's size: a link whose offset from the array's start (head_offset()) is below it
  // is a slot's head, any other a node's `next`.
  static constexpr std::uintptr_t kSlotBytes = sizeof(Slot) * kAllSlots;

  // Sets a flag for its scope, and clears it however the scope is left: visiting_ for a
  // for_each_pending() walk (debug builds catch a visitor that changes the wheel under it), and the
  // Engine shard's walking flag.
  class ScopedFlag {
   public:
    explicit ScopedFlag(bool& flag) noexcept : flag_(flag) { flag = true; }
    ScopedFlag(const ScopedFlag&) = delete;
    ScopedFlag& operator=(const ScopedFlag&) = delete;
    ~ScopedFlag() { flag_ = false; }

   private:
    bool& flag_;
  };

  // A pass's scope, however it is left: in_advance_ set (a nested advance() is refused), and no
  // cancel() queues its unlink, since the pass walks the lists and they must be exact whenever a
  // callback returns.
  class PassScope {
   public:
    explicit PassScope(WheelCore& wheel) noexcept : wheel_(wheel) {
      wheel.in_advance_ = true;
      wheel.queue_unlinks_from_ = std::numeric_limits<std::size_t>::max();
    }
    PassScope(const PassScope&) = delete;
    PassScope& operator=(const PassScope&) = delete;
    ~PassScope() {
      wheel_.in_advance_ = false;
      wheel_.queue_unlinks_from_ = wheel_.cancel_batch_from_;
    }

   private:
    WheelCore& wheel_;
  };

  // Calls fn(node) for every linked node whose state is pending: the occupied slots only, found
  // from the bitmap, each sub-list in turn.
  template <class Fn>
  void visit_pending(Fn&& fn) const {
    for (unsigned w = 0; w < kBitmapWords; ++w) {
      for (std::uint64_t bits = occupied_[w]; bits != 0; bits &= bits - 1) {
        const unsigned s = w * 64 + static_cast<unsigned>(std::countr_zero(bits));
        for (Node* node : (*slots_)[s].head) {
          for (; node != nullptr; node = node->next) {
            if ((node->gen.load(std::memory_order_relaxed) & 3) == kPending) fn(node);
          }
        }
      }
    }
  }

  // Destroys the callable of every node of `pool` linked in this wheel, reading the pool in address
  // order, which the prefetchers follow, where the lists meet their nodes at random (a DRAM miss
  // each with millions pending). Precondition: no unlink or move queued, so that a node is linked
  // iff its pprev is set, and no node of `pool` is linked in another wheel.
  void destroy_linked_in(const NodePool& pool) const noexcept;

  Node* acquire_node() noexcept;
  Status acquire_failure() const noexcept;
  // Remembers that a callable with a destructor was stored, for the destructor of a standalone
  // wheel; nothing at all for the usual callable, a lambda of pointers and integers.
  template <class F>
  void note_destructor() noexcept {
    if constexpr (!std::is_trivially_destructible_v<std::decay_t<F>>) held_destructors_ = true;
  }
  Node* pending_node(TimerId id) const noexcept;
  bool cancel_running(Node* node, std::uint32_t pending_gen) noexcept;
  bool cancel_marked(Node* node) noexcept;
  bool finish_cancel(Node* node) noexcept;
  // Queues a move of a linked node to `due` (I11: a queued move): flagged in its due, moved by flush_moves().
  // Precondition: the wheel caught up (cur_ == target_), outside a pass.
  void queue_move(Node* node, std::uint32_t gen, std::uint64_t due) noexcept;
  // Out of line (never inlined), so that cancel() itself makes no call and GCC gives it no
  // prologue: every instruction of a cancel at a million timers is one more in the window the core
  // overlaps its node's DRAM miss with (with the flush inlined, every cancel saved and restored
  // two registers).
  [[gnu::noinline]] bool cancel_slow(Node* node) noexcept;
  [[gnu::noinline]] bool flush_and_queue(Node* node) noexcept;
  // Queues a cancelled node's unlink, done with up to 31 others by flush_unlinks(), its neighbours
  // fetched meanwhile. Precondition: cur_ == target_ outside a pass, and the queue has room.
  void queue_unlink(Node* node) noexcept {
    assert(cur_ == target_ && !in_advance_ && unlink_queued_ < kUnlinkBatch);
    // The next advance() finishes the queue (I9: no event before). Zeroed by the first unlink queued only:
    // nothing raises no_event_before_ before the queue is flushed, and two stores fewer a cancel leave more
    // room in the store buffer while the node's miss holds everything after it.
    if (unlink_queued_ == 0) set_no_event_before(0);
    unlink_queue_[unlink_queued_++] = node;
    prefetch_neighbours(node);
    assert(no_event_before_ == 0);
  }
  void finish_unlinks() const noexcept;
  bool in_place(std::uint64_t old_due, std::uint64_t due) const noexcept;
  TimerId commit(Node* node, Nanos deadline) noexcept;
  std::uint64_t due_tick(Nanos deadline) const noexcept;
  unsigned wheel_level(std::uint64_t due) const noexcept;
  unsigned wheel_slot(std::uint64_t due) const noexcept;
  unsigned upper_slot(std::uint64_t due) const noexcept;
  void push(Node* node, unsigned slot) noexcept;
  void link(Node* node, unsigned slot) noexcept;
  void unlink(Node* node) noexcept;
  Node* pop_head(unsigned slot, unsigned way) noexcept;
  unsigned ways_in_use(unsigned slot) const noexcept;
  void note_way_empty(unsigned slot, unsigned way) noexcept;
  // Every bit set if `node` is a node, none if it is null: a mask where a branch on whether a list
  // goes on would mispredict (unlink(), move_down()).
  static std::uintptr_t if_node(const Node* node) noexcept {
    return std::uintptr_t{0} - static_cast<std::uintptr_t>(node != nullptr);
  }
  // Where to write the back link (`pprev`) of `next`, the node after one taken out of a list:
  // next's own, or spare_link_ if there is none (has_next = if_node(next)). Chosen by mask: GCC
  // turns a ?: here back into the branch it is there to avoid.
  Node*** back_link_of(Node* next, std::uintptr_t has_next) noexcept {
    const std::uintptr_t own = reinterpret_cast<std::uintptr_t>(next) + offsetof(Node, pprev);
    const auto spare = reinterpret_cast<std::uintptr_t>(&spare_link_);
    // NOLINTNEXTLINE(performance-no-int-to-ptr): one of the two addresses, chosen by the mask
    return reinterpret_cast<Node***>((own & has_next) | (spare & ~has_next));
  }
  std::uintptr_t head_offset(Node* const* link) const noexcept;
  bool is_slot_head(Node* const* link) const noexcept;
  bool occupied(unsigned slot) const noexcept;
  void set_occupied(unsigned slot) noexcept {
    occupied_[slot / 64] |= std::uint64_t{1} << (slot % 64);
    nonempty_words_ |= std::uint64_t{1} << (slot / 64);
  }
  void clear_occupied(unsigned slot) noexcept {
    std::uint64_t& word = occupied_[slot / 64];
    word &= ~(std::uint64_t{1} << (slot % 64));
    if (word == 0) nonempty_words_ &= ~(std::uint64_t{1} << (slot / 64));
  }
  std::uint64_t move_down(unsigned slot, std::uint64_t max_nodes) noexcept;
  void splice(unsigned from, unsigned to) noexcept;
  void merge(unsigned from, unsigned to) noexcept;
  void flush_unlinks() noexcept;
  void flush_moves() noexcept;
  std::size_t clear_slot(unsigned slot) noexcept;
  std::size_t fire(unsigned slot, std::size_t budget);
  std::size_t fire_periodic(Node* node, std::uint64_t meta);
  std::uint64_t next_run(std::uint64_t meta, std::uint64_t due, Nanos ran_until) const noexcept;
  std::uint64_t first_grid_point_after_now(std::uint64_t due, std::uint64_t period) const noexcept;
  void rearm(Node* node, std::uint32_t running, std::uint64_t next) noexcept;
  std::size_t pass(std::uint64_t target, std::size_t limit);
  bool pass_stays_in_unit(std::uint64_t target, std::size_t limit) const noexcept;
  [[gnu::always_inline]] std::size_t pass_in_unit(std::uint64_t target);
  std::size_t step(std::uint64_t target, std::size_t budget);
  std::uint64_t pace(std::uint64_t target, unsigned top) noexcept;
  void cascade_at(std::uint64_t t, unsigned top) noexcept;
  unsigned top_level() const noexcept;
  std::uint64_t next_level0_tick() const noexcept;
  bool level_empty(unsigned level) const noexcept;
  bool current_units_empty(unsigned top) const noexcept;
  bool summary_exact() const noexcept;
  bool quiet_until(std::uint64_t target) const noexcept;
  std::uint64_t no_event_before() const noexcept;
  void set_no_event_before(std::uint64_t tick) noexcept {
    no_event_before_ = tick;
    // Below 2^64: no_event_before() is at most the level-1 unit after cur_'s, cur_ <= max_tick().
    no_event_before_ns_ = tick * ticks_.tick();
  }
  void catch_up() noexcept;
  // Commits every page of the slot arrays now, for a reserve's promise of no page fault on a
  // schedule: every byte written with the value it holds, so that the heads already linked stay as
  // they are, and so that a sanitizer's shadow of the arrays, mapped as lazily, is committed too.
  // Start-up paths only: a write per byte of the arrays.
  void commit_slots() noexcept {
    for (volatile unsigned char& byte : std::span<volatile unsigned char>(
             reinterpret_cast<volatile unsigned char*>(arrays_.get()), sizeof(SlotArrays))) {
      byte = byte;
    }
  }
  // Counts a timer linked by a schedule (or an Engine's hand-off); the first time the count
  // reaches kSpreadFrom, links start spreading over every sub-list (way_mask_).
  void add_pending() noexcept {
    if (++pending_ == kSpreadFrom) way_mask_ = kWays - 1;
  }
  // The slot of unit `unit` (a due shifted down to the level's granularity) at `level`.
  static constexpr unsigned slot_of(unsigned level, std::uint64_t unit) noexcept {
    return level * kSlots + static_cast<unsigned>(unit & (kSlots - 1));
  }
  // Whether a node due at `due` counts as due already, so that it waits in the due slot (I3: the due slot):
  // at or before cur_, or, while inline advance() calls left cur_ behind now_'s tick, at or before that tick
  // (I1: the tick in process). The second test is a multiplication, made only for a due before
  // lag_window_end_: every later tick is after now_'s too.
  bool due_now(std::uint64_t due) const noexcept {
    return due <= cur_ ||
           (due < lag_window_end_ && due * ticks_.tick() <= static_cast<std::uint64_t>(now_.count()));
  }
  // Whether inline advance() calls left cur_ behind now_'s tick (I1: the tick in process).
  bool lags_now() const noexcept {
    return (cur_ + 1) * ticks_.tick() <= static_cast<std::uint64_t>(now_.count());
  }
  // The slot a node due at `due` is linked into outside a periodic re-arm: the due slot if it is
  // due already, else the wheel slot that holds it. A node beyond level 0 while cur_ lags behind
  // now_'s tick (I1: the tick in process) first brings cur_ up to it, so that it lands where it would had the
  // inline advance() calls moved cur_, and a timer less than 512 ticks ahead of now_ is in level 0, where
  // next_deadline() is exact: a multiplication for such a link, a division once per lag.
  unsigned slot_for(std::uint64_t due) noexcept {
    if (due_now(due)) return kDueSlot;
    if (due - cur_ < kSlots) return slot_of(0, due);
    if (lags_now()) {
      catch_up();
      return wheel_slot(due);
    }
    return upper_slot(due);
  }
  // The slot a moved (rescheduled) node goes to: where a schedule links it (slot_for()), except
  // that a periodic timer is linked as its re-arm is: due by this call's now means the next call,
  // so it never runs twice in one call (I3: the due slot). The two differ only while cur_ lags behind target_
  // (inside advance(), or after a pass cut short).
  unsigned move_slot(const Node* node, std::uint64_t due) noexcept {
    if (cur_ != target_ && callable_meta(node) != 0) {
      return due <= target_ ? kDueSlot : wheel_slot(due);
    }
    return slot_for(due);
  }
  // Sets no_event_before_ exactly, and lag_window_end_ with it: where advance_slow() and clear() leave the
  // wheel (I9: no event before).
  void settle_no_event_before() noexcept {
    set_no_event_before(no_event_before());
    lag_window_end_ = no_event_before_;
  }
  std::size_t advance_slow(Nanos now, std::size_t limit);
  void quiet_advance(std::uint64_t target) noexcept;
  void plan_pace(unsigned top) noexcept;
  bool lookahead_occupied(unsigned top) const noexcept;
  std::uint64_t next_event_tick(unsigned top, bool dues = false) const noexcept;
  std::uint64_t earliest_due(unsigned slot, std::uint64_t start) const noexcept;
  using LevelWords = std::span<const std::uint64_t, kWordsPerLevel>;  // one level's occupancy bits
  LevelWords level_words(unsigned level) const noexcept;
  static unsigned find_from(LevelWords words, unsigned start) noexcept;
  template <class Fn>
  void for_each_upcoming_slot(Fn&& fn) const noexcept;
  void prefetch_upcoming(bool successors) const noexcept;

  // All fields: the owning thread only.
  Nanos tick_;
  Nanos now_;
  std::uint64_t cur_ = 0;          // the tick being processed; every timer due before it has run
  std::uint64_t target_ = 0;       // the tick of the last advance()'s now: cur_ <= target_
  std::size_t max_pending_;        // the effective limit: WheelOptions::max_pending, or the pool's
  std::size_t cancel_batch_from_;  // WheelOptions::cancel_batch_from, resolved
  // The population from which cancel() queues the unlink of a node that is not first in its
  // sub-list: cancel_batch_from_, or never during a pass (PassScope), so that one compare says both.
  std::size_t queue_unlinks_from_;
  std::size_t pending_ = 0;
  // The sub-lists a link spreads over, less one: 0 (sub-list 0 only) until the wheel first holds
  // kSpreadFrom timers (or was built with a reserve of that many), kWays - 1 from then on. Eight
  // sub-lists a slot are there to overlap a walk's cache misses; a few thousand timers are in
  // cache, and spread over eight sub-lists of a few hundred slots they leave most sub-lists
  // empty, so every link and unlink would branch at random on whether its sub-list was or
  // becomes empty. Never narrowed again: a wheel that once held many timers keeps spreading.
  unsigned way_mask_ = 0;
  // Takes the write of a back link that has no node to go to (back_link_of()); never read.
  Node** spare_link_ = nullptr;
  bool in_advance_ = false;
  // A callable with a destructor may be pending, so the destructor must find the pending nodes. A
  // standalone wheel sets it when schedule_at() or schedule_every() first stores one; an Engine's
  // shard wheel never does: its nodes come from several pools, which the engine's teardown reads
  // (ShardWheel::destroy_callables_from()).
  bool held_destructors_ = false;
  [[no_unique_address]] Policy policy_;  // see PlainPolicy
  TickDivider ticks_;  // tick_ as a divisor, for every deadline's tick; max_tick(): horizon() in ticks
  mutable bool visiting_ = false;  // inside for_each_pending(): see ScopedFlag
  // The slot heads and their counts, in one mapping of their own (map_zeroed()): a page of
  // it is committed when a link first writes there, so a wheel whose timers fall in a few levels
  // (a 1 ms wheel's first two minutes are levels 0 and 1) holds those levels' pages and none of
  // the rest. Committed whole by a reserve (commit_slots()), which promises no page fault.
  struct SlotArrays {
    std::array<Slot, kAllSlots> heads;
    std::array<std::uint32_t, kAllSlots> count;
  };
  struct UnmapSlots {
    void operator()(SlotArrays* arrays) const noexcept { unmap_zeroed(arrays, sizeof(SlotArrays)); }
  };
  std::unique_ptr<SlotArrays, UnmapSlots> arrays_;
  std::array<Slot, kAllSlots>* slots_ = nullptr;        // arrays_->heads: one cache line per slot
  std::array<std::uint64_t, kBitmapWords> occupied_{};  // bit s set <=> slot s has a node
  // Bit w set <=> occupied_[w] != 0: a level's emptiness and the top level in one load and a bit
  // scan, instead of a walk of 8 words per level several times a pass (I6: the summary word).
  std::uint64_t nonempty_words_ = 0;
  // A lower bound of the next tick at which something happens in the wheel levels (I7: the next event), so
  // that an advance() with nothing to do skips the level scans (quiet_until()).
  std::uint64_t next_event_ = 0;
  // The tick from which the look-ahead cascade (pace()) has a batch to move from an upper level's
  // look-ahead slot (the one of the unit after cur_'s), UINT64_MAX if none is occupied (I8: the pace mark);
  // so a quiet advance() that stays short of it and crosses no unit boundary looks at no level.
  std::uint64_t pace_at_ = ~std::uint64_t{0};
  // The tick up to which the look-ahead cascade has moved its share: the target of the last pace().
  std::uint64_t paced_ = 0;
  // The tick below which advance() has nothing to do but move time on (I9: no event before), and its first
  // nanosecond, no_event_before_ * tick: the inline advance() compares a now with it, no division.
  std::uint64_t no_event_before_ = 0;
  std::uint64_t no_event_before_ns_ = 0;
  // The no_event_before_ that advance_slow() last set, which links do not lower; 0 during a pass or a
  // step. Inline advance() calls since then stayed below it, so now_'s tick is below it too.
  std::uint64_t lag_window_end_ = 0;
  // Nodes linked into each slot since it was empty, less those moved out: an upper bound that
  // paces the look-ahead cascade.
  std::array<std::uint32_t, kAllSlots>* count_ = nullptr;  // arrays_->count
  NodePool pool_;
  WheelStats stats_;
  unsigned unlink_queued_ = 0;
  std::array<Node*, kUnlinkBatch> unlink_queue_{};  // cancelled nodes still linked, see flush_unlinks()
  unsigned moves_queued_ = 0;
  std::array<Node*, kUnlinkBatch> move_queue_{};        // rescheduled nodes to move, see flush_moves()
  std::array<std::uint32_t, kUnlinkBatch> move_gen_{};  // the pending generation each was queued with
  // Bit w of ways_[s] set <=> sub-list w of slot s is non-empty (I5: sub-list bits): a walk, and an unlink
  // that empties a sub-list, learn which sub-lists are in use from one byte instead of eight heads. Last, so
  // that the fields every call touches stay together.
  std::array<std::uint8_t, kAllSlots> ways_{};
};

}  // namespace tickwheel::detail

#include "tickwheel/detail/wheel_hot_path.hpp"  // IWYU pragma: export

namespace tickwheel::detail {
// The standalone wheel's code is compiled once, in the library.
extern template class WheelCore<PlainPolicy>;
}  // namespace tickwheel::detail
