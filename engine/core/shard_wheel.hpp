// engine/core/shard_wheel.hpp — an Engine shard's wheel: the wheel's core (WheelCore, engine/
// wheel_impl.hpp) with the shard's policy, plus the hooks through which the shard feeds it timers
// other threads prepared. The standalone Wheel has none of this in its header or on its hot path.
//
// What differs from the standalone wheel, all of it here:
//   claim    other threads cancel the shard's timers, so a due node is claimed by compare-and-swap
//            and the cancel that wins first keeps it from running (ShardPolicy::claim);
//   run      with an executor, a claimed node is handed to it instead of run in the pass, and
//            comes back through the shard's returned queue (rearm_returned());
//   re-arm   a periodic timer's re-arm is a compare-and-swap too, so a cancel during its run wins;
//            an inline fixed-delay run ends at the engine's clock, not the pass's now;
//   feed     nodes come prepared by producers (adopt()), cancels as records (retire()), and free
//            nodes leave in bulk for the producers' caches (take_free_nodes()).
// Every call here is for the thread in the shard's pass: its worker, or the thread that polls or
// owns a caller-driven shard (and the stopping thread once the worker is joined).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "tickwheel/detail/wheel_core.hpp"

namespace tickwheel::detail {

class Shard;

// The shard's policy (see detail::PlainPolicy for the points a policy decides).
struct ShardPolicy {
  static constexpr bool kShared = true;

  std::atomic<std::uint64_t>* claims = nullptr;  // the shard's count of one-shot claims
  Shard* shard = nullptr;

  bool claim(Node* node, std::uint32_t gen, std::uint32_t state) const noexcept {
    std::uint32_t expected = gen;
    // acq_rel: pairs with the canceller's compare-and-swap (Timer::cancel), so the loser of the
    // race sees the winner's state. The callable itself reached this thread through the hand-off
    // queue.
    if ((gen & 3) != kPending ||
        !node->gen.compare_exchange_strong(expected, in_state(gen, state), std::memory_order_acq_rel,
                                           std::memory_order_relaxed)) {
      return false;
    }
    if (state == kFired) {
      // Release, before the callback starts: the shard's admission and pending count read it from
      // other threads with acquire (Admission::admit, EngineCore::pending). Only this thread writes it.
      claims->store(claims->load(std::memory_order_relaxed) + 1, std::memory_order_release);
    }
    return true;
  }
  static bool rearm(Node* node, std::uint32_t running) noexcept {
    std::uint32_t expected = running;
    // acq_rel: pairs with a canceller's compare-and-swap running -> cancelled, as claim() does with
    // pending -> cancelled; exactly one of the two wins.
    return node->gen.compare_exchange_strong(expected, pending_of_running(running), std::memory_order_acq_rel,
                                             std::memory_order_relaxed);
  }
  bool dispatch(Node* node) const noexcept;      // the shard's executor, if it has one
  Nanos run_end(Nanos pass_now) const noexcept;  // the engine's clock
};

class ShardWheel final : public WheelCore<ShardPolicy> {
 public:
  // Node memory from jemalloc arena `arena` (see detail/memory.hpp).
  ShardWheel(WheelOptions opts, ShardPolicy policy, unsigned arena) : WheelCore(opts, policy) {
    pool_.use_arena(arena);
  }
  // The engine's teardown, once its threads are joined, for each pool whose nodes serve this shard
  // (the wheel's own, and each producer's overflow pool for it, which between them hold every node
  // linked here): destroys the callables of the pool's nodes still linked, in address order. The
  // wheel's own destructor destroys none (it never sets held_destructors_).
  void destroy_callables_from(const NodePool& pool) noexcept {
    finish_unlinks();
    destroy_linked_in(pool);
  }

  // Links a node a producer prepared (callable, pending gen, `due` in ticks) and handed over;
  // recycles it instead if it was cancelled in transit. A periodic node's fixed-rate grid starts at
  // that tick.
  void adopt(Node* node) noexcept;
  // A node from the pool for the shard's own thread to schedule (see ShardReserve::own_node()); null if
  // the pool cannot grow.
  Node* acquire_node() noexcept { return pool_.acquire(); }
  // Links a node the shard's own thread prepared (callable, pending gen, `due` in ticks) and
  // scheduled itself: adopt() without the test for a cancel in transit, since there was none.
  void link_new(Node* node) noexcept {
    link(node, slot_for(node->due));
    add_pending();
  }
  // The rest of a cancel the shard's owner won outside a pass (its compare-and-swap made the node
  // cancelled): as Wheel::cancel() after its mark, the callable destroyed and the unlink done at
  // once or queued with the standalone wheel's batch (I10: linked means pending), which every walk, pass and
  // next_deadline() flushes first. Precondition: the node is linked, outside a pass.
  void cancel_own(Node* node) noexcept { (void)cancel_marked(node); }
  // Unlinks and recycles a node another thread cancelled, if it is still that lifetime and still
  // linked; returns whether it did. A periodic node cancelled while it ran is unlinked: the fire
  // path, whose re-arm the cancel refused, recycles it, and this is a no-op.
  bool retire(Node* node, std::uint32_t cancelled_gen) noexcept;
  // A periodic node an executor ran and gave back (running, or cancelled during the run): placed
  // for its next run, or recycled. `due` holds the run's tick (fixed rate) or the tick of the next
  // run, which the executor's thread computed when the run ended (fixed delay).
  void rearm_returned(Node* node) noexcept;
  // A one-shot node an executor ran (its callable destroyed by the run): back to the pool.
  void release_node(Node* node) noexcept { pool_.release(node); }
  // Fills `out` with nodes from the pool for producers to prepare (growing it if need be); returns
  // how many it could hand out, from the front.
  std::size_t take_free_nodes(std::span<Node*> out) noexcept;
  // Calls fn(node) for every node that holds a pending timer (a periodic one between its runs).
  // O(pending) plus one test per 64 slots. What fn throws leaves the walk and the wheel as it is.
  template <class Fn>
  void for_each_pending_node(Fn&& fn) const {
    finish_unlinks();  // the owner's queued cancels and moves: each node where it belongs first
    visit_pending(fn);
  }
  // Moves a pending timer to tick `due` (as TickDivider::due gives it), keeping its node: the
  // standalone Wheel's reschedule() by node instead of by TimerId, since an Engine's nodes come
  // from several pools and a pool index names none of them. The same placement: only the deadline
  // changes within the unit it is linked in while the wheel is caught up; otherwise it is
  // unlinked and linked where a schedule would put it (a periodic timer as its re-arm would, so
  // that it never runs twice in one pass), then the wheel catches up if that emptied what a pass
  // cut short had left waiting. Nothing is queued (the shard's wheel queues no unlinks, I11). A
  // node not linked yet (a hand-off not taken in) only takes the new tick. Precondition: the
  // node holds a pending timer of this shard.
  void move(Node* node, std::uint64_t due) noexcept;
  // move() for the shard's owner outside a pass, as Wheel::reschedule() makes it: in place where
  // it can be; else, with the wheel caught up, queued with the standalone wheel's batch (flagged
  // kMovingBit in its due until every walk, pass and next_deadline() flushes the queue first, I11),
  // so that the neighbours' misses overlap with the owner's next calls; else at once.
  void move_own(Node* node, std::uint64_t due) noexcept;
  // The bit a due carries while its node waits in the move queue (move_own()): a reader on another
  // thread masks it off (deadline_of()).
  static constexpr std::uint64_t kMovingBit = kMoving;
  // The deadline of a timer whose node holds pending generation `pending_gen`, rounded up to the
  // tick as the wheel runs it; nullopt if the node holds another value (see there), at either of
  // the two loads of the generation that bracket the read of `due`. O(1), three loads. Any thread:
  // it reads the node and the wheel's tick, which never changes.
  std::optional<Nanos> deadline_of(Node* node, std::uint32_t pending_gen) const noexcept;
  // Cancels every pending timer linked here, each by compare-and-swap against cancels from other
  // threads (one wins), and retires it, and also every node found cancelled whose record has not
  // come yet (that record then finds it gone). Returns how many this call cancelled. The walk
  // reads each successor before it retires a node, so it is safe inside a pass too (a callback's
  // clear: the fire loop re-reads each head it takes).
  std::size_t cancel_all() noexcept;
  // The node pool, for the engine's directory of nodes (directory.hpp).
  const NodePool& pool() const noexcept { return pool_; }
  NodePool& pool() noexcept { return pool_; }  // for the owner's lane (detail/own_lane.hpp)
  // Sets a flag for its scope (see WheelCore::ScopedFlag).
  using ScopedFlag = WheelCore::ScopedFlag;
  // Maps and first-touches node memory for `nodes` timers (see NodePool::reserve): 0, or the errno.
  [[nodiscard]] int reserve(std::uint64_t nodes, bool lock) noexcept {
    commit_slots();
    return pool_.reserve(nodes, lock);
  }
  std::string describe_refusal(std::uint64_t nodes, int error) const {
    return pool_.describe_refusal(nodes, error);
  }
};

// Compiled once, in engine/core/shard_wheel.cpp.
extern template class WheelCore<ShardPolicy>;

}  // namespace tickwheel::detail
