// engine/core/shard_wheel.cpp — an Engine shard's wheel, compiled: WheelCore with the shard's policy
// (engine/wheel/wheel_impl.hpp is the code), and the hooks of engine/core/shard_wheel.hpp.
#include "core/shard_wheel.hpp"

#include <cassert>

#include "core/shard.hpp"
#include "wheel/wheel_impl.hpp"

namespace tickwheel {
namespace detail {

bool ShardPolicy::dispatch(Node* node) const noexcept { return shard->tasks.dispatch(node); }

Nanos ShardPolicy::run_end(Nanos /*pass_now*/) const noexcept { return shard->tasks.run_end(); }

void ShardWheel::adopt(Node* node) noexcept {
  // Acquire: pairs with a canceller's compare-and-swap, so a node cancelled in transit is seen so.
  if ((node->gen.load(std::memory_order_acquire) & 3) != kPending) {
    // Cancelled while in the hand-off queue: its cancel record finds it unlinked and skips it.
    destroy_callable(node);
    pool_.release(node);
    ++stats_.cancelled;
    return;
  }
  assert(node->due <= ticks_.max_tick());
  link(node, slot_for(node->due));
  add_pending();
}

bool ShardWheel::retire(Node* node, std::uint32_t cancelled_gen) noexcept {
  // Still that lifetime, still linked: ours to unlink. Otherwise a walk or adopt() recycled it.
  if (node->pprev == nullptr || node->gen.load(std::memory_order_relaxed) != cancelled_gen) return false;
  unlink(node);
  destroy_callable(node);
  pool_.release(node);
  --pending_;
  ++stats_.cancelled;
  return true;
}

void ShardWheel::rearm_returned(Node* node) noexcept {
  const std::uint64_t meta = callable_meta(node);
  assert(meta != 0);
  catch_up();  // the misfire decision below reads target_: now_'s tick, not an older one (I1: the tick in
               // process)
  // Running, or cancelled during the run (running - 1): either way the running value is the
  // lifetime's multiple of four, which rearm() expects. A returned node is unlinked (I10: linked means
  // pending).
  const std::uint32_t gen = node->gen.load(std::memory_order_relaxed);
  const std::uint32_t running = (gen & 3) == 0 ? gen : gen + 1;
  assert(node->pprev == nullptr && ((gen & 3) == 0 || (gen & 3) == kCancelled));
  const bool delay = PeriodicMeta::cadence(meta) == static_cast<unsigned>(Cadence::fixed_delay);
  // Fixed delay: `due` is the next run's tick already. Fixed rate: the run's tick, and next_run()
  // reads no end of the run.
  rearm(node, running, delay ? node->due : next_run(meta, node->due, Nanos(0)));
}

void ShardWheel::move(Node* node, std::uint64_t due) noexcept {
  ++stats_.rescheduled;
  // Each write of `due` here is release, as every write of it that Timer::deadline() can race from
  // another thread (see detail::store_due): a reader racing the move gets the old or the new one.
  if ((node->due & kMoving) !=
      0) {  // queued by move_own() (I11: a queued move): it moves once, to its latest due
    store_due(node, due | kMoving, std::memory_order_release);
    return;
  }
  if (node->pprev == nullptr) {  // pending and not linked: a hand-off not taken in yet
    store_due(node, due, std::memory_order_release);
    return;
  }
  if (in_place(node->due, due)) {
    store_due(node, due, std::memory_order_release);
    ++stats_.rescheduled_in_place;
    return;
  }
  unlink(node);
  store_due(node, due, std::memory_order_release);
  link(node, move_slot(node, due));
  if (cur_ != target_ && !in_advance_ && !occupied(kBatchSlot) && !occupied(kLateSlot) &&
      !occupied(kDueSlot)) {
    step(target_, 0);
  }
}

void ShardWheel::move_own(Node* node, std::uint64_t due) noexcept {
  if ((node->due & kMoving) != 0 || node->pprev == nullptr || in_place(node->due, due) || cur_ != target_ ||
      in_advance_) {
    move(node, due);
    return;
  }
  ++stats_.rescheduled;
  // The flag in its due is masked off by a reader on another thread (ShardWheel::deadline_of).
  queue_move(node, node->gen.load(std::memory_order_relaxed), due);
}

std::size_t ShardWheel::cancel_all() noexcept {
  flush_unlinks();  // the owner's queued cancels (cancel_own()): their nodes are cancelled already
  std::size_t cleared = 0;
  for (unsigned word = 0; word < kBitmapWords; ++word) {
    for (std::uint64_t bits = occupied_[word]; bits != 0; bits &= bits - 1) {
      const unsigned slot = word * 64 + static_cast<unsigned>(std::countr_zero(bits));
      for (unsigned way = 0; way < kWays; ++way) {
        Node* node = (*slots_)[slot].head[way];
        while (node != nullptr) {
          Node* const next = node->next;
          std::uint32_t gen = node->gen.load(std::memory_order_acquire);
          // acq_rel: as Timer::cancel(), pairs with a racing canceller's compare-and-swap: one wins.
          if ((gen & 3) == kPending &&
              node->gen.compare_exchange_strong(gen, in_state(gen, kCancelled), std::memory_order_acq_rel,
                                                std::memory_order_acquire)) {
            gen = in_state(gen, kCancelled);
            ++cleared;
          }
          if ((gen & 3) == kCancelled) retire(node, gen);
          node = next;
        }
      }
    }
  }
  return cleared;
}

std::size_t ShardWheel::take_free_nodes(std::span<Node*> out) noexcept {
  std::size_t got = 0;
  for (Node*& slot : out) {
    Node* node = pool_.acquire();
    if (node == nullptr) break;
    slot = node;
    ++got;
  }
  return got;
}

std::optional<Nanos> ShardWheel::deadline_of(Node* node, std::uint32_t pending_gen) const noexcept {
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
  const std::uint64_t due = load_due(node) & ~kMovingBit;
  // Acquire fence: pairs with the release of the write of `due` just read. If that write is of a
  // later lifetime of the node (the timer ended and the node was handed out again meanwhile: the
  // producer's store in EngineCore::commit, or any later one), the end of this timer came before
  // it, so the load below sees the word moved on, and the stale `due` is not answered.
  std::atomic_thread_fence(std::memory_order_acquire);
  // Relaxed: ordered by the fence above.
  if (node->gen.load(std::memory_order_relaxed) != pending_gen) return std::nullopt;
  // In ticks, linked or in transit (see Node::due); due <= the horizon: no overflow.
  return Nanos(static_cast<Nanos::rep>(due) * tick_.count());
}

}  // namespace detail

template class detail::WheelCore<detail::ShardPolicy>;

}  // namespace tickwheel
