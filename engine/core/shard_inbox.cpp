// engine/core/shard_inbox.cpp — the posting side of a shard's queues and its wake-ups.
#include "core/shard_inbox.hpp"

#include <new>
#include <thread>

namespace tickwheel::detail {

bool ShardInbox::hand_over(moodycamel::ProducerToken& token, Node* node, std::uint64_t due_tick) noexcept {
  // The enqueue publishes the node (release; the shard's dequeue acquires it). It allocates only
  // when the producer's block list must grow, which stops once it covers the peak backlog; if
  // that allocation fails nothing was handed over and the caller fails the schedule.
  if (!transfers_.enqueue(token, node)) return false;
  // The caller's load of stopped_ relies on the fence in here too (EngineCore::commit): one fence
  // per hand-off serves both pairings.
  wake_for(due_tick);
  return true;
}

void ShardInbox::post_cancel(moodycamel::ProducerToken& token, Node* node,
                             std::uint32_t cancelled_gen) noexcept {
  // Does not wake the shard (but for the caller's nudge, once per kNudgeEvery posts): most
  // timers are cancelled, and the node is harmless until the next pass (if its time comes
  // first, the shard's claim fails and it recycles the node then, which is also what happens
  // if this enqueue cannot allocate).
  cancels_.enqueue(token, CancelRecord{node, cancelled_gen});
}

bool ShardInbox::post_move(MoveRecordCache& records, Node* node, std::uint32_t pending_gen,
                           std::uint64_t deadline_ns) noexcept {
  MoveRecord* const record = records.take();
  if (record == nullptr) return false;
  record->node = node;
  record->gen = pending_gen;
  record->deadline_ns = deadline_ns;
  // The post publishes the record (release; the drain's load acquires it), and with it what this
  // thread saw of the node: the hand-off's deadline among it, which the shard's move may rewrite.
  moves_.post(record);
  // A timer moved earlier than the sleeper's plan must not wait for it: the producers' protocol
  // (a seq_cst fence, then the plan), as for a hand-off; the post's exchange comes before the
  // fence, so either the poster sees the plan or the sleeper sees moves_.waiting().
  wake_for(ticks_.due(Nanos(static_cast<Nanos::rep>(deadline_ns))));
  return true;
}

void ShardInbox::post_clear() noexcept {
  // Release: pairs with clear_requested()'s acquire load, so the pass that sees this request also
  // sees every hand-off enqueued before it (their producers' enqueues happened before this call).
  clears_posted_.fetch_add(1, std::memory_order_release);
  // Then the producers' protocol: the sleeper's work_waiting() reads the counter after its fence.
  wake_.wake_if_sleeping();
}

void ShardInbox::give_back(Node* node, moodycamel::ProducerToken* token) noexcept {
  // An enqueue fails only when the queue cannot allocate; a node must not be lost, so try again
  // (without this thread's token, then with it) until memory is found.
  while (!(token != nullptr ? returned_.enqueue(*token, node) : returned_.enqueue(node))) {
    token = nullptr;
    std::this_thread::yield();
  }
}

bool ShardInbox::work_waiting() const noexcept {
  // Nodes back from the executor count: a periodic one is not in the wheel's plan until it is
  // re-armed. Moves too: one earlier than the plan must be applied before the sleep (post_move()
  // exchanges the queue's tail before its fence, so either this load sees it or the poster sees the
  // plan and signals). Clear requests too, by the same protocol. Relaxed: after the wake-up's
  // fence; the drains acquire.
  return transfers_.size_approx() != 0 || returned_.size_approx() != 0 || moves_.waiting() ||
         clears_posted_.load(std::memory_order_relaxed) != clears_served_;
}

void ShardInbox::make_reserve_token() {
  if (reserve_token_) return;
  reserve_token_.emplace(free_nodes_);
  // moodycamel leaves a token invalid, rather than throwing, when it cannot allocate its producer.
  if (!reserve_token_->valid()) {
    reserve_token_.reset();
    throw std::bad_alloc();
  }
}

bool ShardInbox::clear_requested() noexcept {
  // Acquire: pairs with post_clear()'s release increment (see there). Relaxed would read the same
  // value; the acquire is what makes the hand-offs before the request visible to the sweep.
  const std::uint64_t posted = clears_posted_.load(std::memory_order_acquire);
  if (posted == clears_served_) [[likely]] {
    return false;
  }
  clears_served_ = posted;
  return true;
}

}  // namespace tickwheel::detail
