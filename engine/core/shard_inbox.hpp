// engine/core/shard_inbox.hpp — what other threads send a shard, and how they wake it: the lock-free
// queues of hand-offs, cancels, moves, returned nodes and clear requests, the reserve of free nodes
// producers take from, and the wake-up protocol (wakeup.hpp) that tells a sleeping shard its plan
// has changed.
//
// Threads: the posting side (hand_over, post_*, take_nodes, give_back, the wake calls) is any
// thread's; the taking side (take_*, drain_*, fill_reserve, clear_requested) is the shard's own
// thread's: its worker, the thread in its poll, or the stopping thread once the worker is joined.
// The taking side calls back into the shard's wheel through the function it is given, so the inbox
// never touches a wheel itself.
#pragma once

#include <concurrentqueue/concurrentqueue.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <utility>

#include "core/move_queue.hpp"
#include "core/wakeup.hpp"
#include "tickwheel/detail/arith.hpp"
#include "tickwheel/detail/node.hpp"

namespace tickwheel::detail {

struct CancelRecord {
  Node* node;
  std::uint32_t gen;  // the node's generation after the winning cancel (state kCancelled)
};

class ShardInbox {
 public:
  // Nodes, hand-offs or cancel records moved per queue call, through a buffer on the stack that is
  // left uninitialised: the dequeue fills what is read, and zeroing 8 or 16 KiB would tax every pass.
  static constexpr std::size_t kBulk = 1024;

  // `tick_ns` is the engine's tick: a wake-up is needed only for work due before the end of the
  // tick the sleeper plans to wake at.
  ShardInbox(Wakeup::Kind kind, std::size_t index, const std::function<void(std::size_t)>* callback,
             std::uint64_t tick_ns)
      : wake_(kind, index, callback), ticks_(tick_ns) {}

  // ---- Any thread. ----
  // Hands a prepared node, due at tick `due_tick`, to the shard; wakes it iff that tick ends before
  // its planned wake-up. False, with nothing handed over, if the queue could not allocate room.
  [[nodiscard]] bool hand_over(moodycamel::ProducerToken& token, Node* node, std::uint64_t due_tick) noexcept;
  // Posts a cancel the caller won. Wakes no one: see the definition.
  void post_cancel(moodycamel::ProducerToken& token, Node* node, std::uint32_t cancelled_gen) noexcept;
  // Posts a move of a timer that held pending generation `pending_gen` to deadline_ns (a record from
  // `records`), waking the sleeper iff that is before its plan. False, with nothing posted, if no
  // record could be had (no memory).
  [[nodiscard]] bool post_move(MoveRecordCache& records, Node* node, std::uint32_t pending_gen,
                               std::uint64_t deadline_ns) noexcept;
  // Asks the shard to clear itself at its next pass, and wakes the sleeper whatever its plan.
  void post_clear() noexcept;
  // A node an executor's thread ran, given back. Never loses the node: retries until the queue
  // finds memory. `token` is the calling thread's for this queue, or null.
  void give_back(Node* node, moodycamel::ProducerToken* token) noexcept;
  // After posting work due at tick `due_tick`: signals the sleeper iff that tick ends before its
  // plan. A timer fires once its tick has ended, and a worker's plan is such an end (the wheel's
  // next_deadline()): a timer due within the tick the sleeper wakes for anyway, a due-now answer
  // among them, needs no signal. (A loop's plan may be any time: it then wakes by itself no later
  // than the timer's end, and its pass takes the node in.)
  void wake_for(std::uint64_t due_tick) noexcept { wake_.wake_if_before(due_tick * ticks_.tick()); }
  // The shard's own thread linked or moved a timer to tick `due_tick` while its loop's wait is
  // announced (Wakeup::wake_self_if_before): signals the loop iff that tick ends before its plan.
  void wake_self_for(std::uint64_t due_tick) noexcept { wake_.wake_self_if_before(due_tick * ticks_.tick()); }
  // Up to n free nodes from the reserve; 0 if it is empty right now.
  std::size_t take_nodes(Node** out, std::size_t n) noexcept { return free_nodes_.try_dequeue_bulk(out, n); }
  moodycamel::ConcurrentQueue<Node*>& transfers() noexcept { return transfers_; }
  moodycamel::ConcurrentQueue<CancelRecord>& cancels() noexcept { return cancels_; }
  moodycamel::ConcurrentQueue<Node*>& returned() noexcept { return returned_; }
  std::size_t queue_depth() const noexcept { return transfers_.size_approx(); }
  // Whether a move was posted and not yet drained: one load of the move queue's tail, which its
  // producers share (MoveQueue::waiting()).
  bool moves_waiting() const noexcept { return moves_.waiting(); }
  // The sleeper's wake-up: the futex, eventfd or callback (wakeup.hpp).
  Wakeup& wake() noexcept { return wake_; }
  const Wakeup& wake() const noexcept { return wake_; }

  // ---- The shard's own thread. ----
  // Whether anything waits to be taken in that the wheel's plan does not show: a hand-off, a
  // returned node, a move, an unserved clear. A hint (relaxed); the drains acquire.
  bool work_waiting() const noexcept;
  // The token for the reserve's queue, of which this thread is the only producer. Throws
  // std::bad_alloc, with nothing changed, if it cannot be had.
  void make_reserve_token();
  // Whether a clear was posted since the last one this returned true for.
  bool clear_requested() noexcept;
  // Each drains its queue through `fn`, returning how many records it took.
  template <class Fn>
  std::size_t drain_cancels(Fn&& fn) noexcept {
    std::array<CancelRecord, kBulk> records;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
    std::size_t n = 0;
    std::size_t taken = 0;
    while ((n = cancels_.try_dequeue_bulk(records.data(), kBulk)) != 0) {
      for (std::size_t i = 0; i < n; ++i) fn(records[i]);
      taken += n;
    }
    return taken;
  }
  template <class Fn>
  std::size_t drain_moves(Fn&& fn) noexcept {
    if (!moves_waiting()) return 0;  // most passes find none
    return moves_.drain(std::forward<Fn>(fn));
  }
  template <class Fn>
  void drain_returned(Fn&& fn) noexcept {
    std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
    std::size_t n = 0;
    while ((n = returned_.try_dequeue_bulk(nodes.data(), kBulk)) != 0) {
      for (std::size_t i = 0; i < n; ++i) fn(nodes[i]);
    }
  }
  // At most `cap` hand-offs, each through adopt(node).
  template <class Adopt>
  std::size_t take_handoffs(std::size_t cap, Adopt&& adopt) noexcept {
    std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
    std::size_t moved = 0;
    while (moved < cap) {
      const std::size_t n = transfers_.try_dequeue_bulk(nodes.data(), std::min(kBulk, cap - moved));
      if (n == 0) break;
      for (std::size_t i = 0; i < n; ++i) adopt(nodes[i]);
      moved += n;
    }
    return moved;
  }
  // Every hand-off waiting, not capped: each producer's sub-queue once, as far as it holds when the
  // sweep reaches it. Every hand-off whose enqueue happened before the call is taken, and producers
  // that keep scheduling cannot hold the caller (as a loop until the queue is found empty could).
  template <class Adopt>
  std::size_t take_all_handoffs(Adopt&& adopt) noexcept {
    // An output iterator that adopts each node the queue hands it, so that one bulk dequeue can take
    // any number of nodes without a buffer. moodycamel's bulk dequeue without a consumer token walks
    // the producers' sub-queues once, in list order, taking from each what it holds then.
    struct AdoptEach {
      Adopt* adopt;
      AdoptEach& operator*() noexcept { return *this; }
      AdoptEach& operator++() noexcept { return *this; }
      AdoptEach operator++(int) noexcept { return *this; }  // NOLINT(cert-dcl21-cpp): the queue's idiom
      AdoptEach& operator=(Node* node) noexcept {
        (*adopt)(node);
        return *this;
      }
    };
    return transfers_.try_dequeue_bulk(AdoptEach{&adopt}, std::numeric_limits<std::size_t>::max());
  }
  // Moves up to `want` free nodes, each from take(span) (which fills a span and returns how many it
  // filled), into the reserve; a node the queue cannot take goes back through release(node).
  template <class Take, class Release>
  void fill_reserve(std::size_t want, Take&& take, Release&& release) noexcept {
    std::array<Node*, kBulk> nodes;  // NOLINT(cppcoreguidelines-pro-type-member-init): see kBulk
    while (want != 0) {
      const std::size_t n = take(std::span(nodes).first(std::min(kBulk, want)));
      if (n == 0) break;
      if (!free_nodes_.enqueue_bulk(*reserve_token_, nodes.data(), n)) {
        for (std::size_t i = 0; i < n; ++i) release(nodes[i]);  // the queue could not grow
        break;
      }
      want -= n;
    }
  }
  std::size_t reserve_size() const noexcept { return free_nodes_.size_approx(); }

 private:
  moodycamel::ConcurrentQueue<Node*> transfers_;
  moodycamel::ConcurrentQueue<CancelRecord> cancels_;
  moodycamel::ConcurrentQueue<Node*> free_nodes_;
  moodycamel::ConcurrentQueue<Node*> returned_;  // nodes back from the executor
  MoveQueue moves_;  // Timer::reschedule() from other threads, in the order asked (move_queue.hpp)
  // The wake-up protocol with producers: its plan and signal words are on lines of their own.
  Wakeup wake_;
  const TickDivider ticks_;  // the engine's tick
  // Clear requests posted (post_clear(); release increment), compared by each pass (acquire) with
  // clears_served_: one load a pass. A line apart: written rarely, by other threads, read by every
  // pass.
  alignas(kCacheLine) std::atomic<std::uint64_t> clears_posted_{0};
  std::uint64_t clears_served_ = 0;  // the shard's thread: the value of clears_posted_ last served
  // The shard's thread: its token for free_nodes_, whose only producer it is. Declared after the
  // queues so that it is destroyed before them.
  std::optional<moodycamel::ProducerToken> reserve_token_;
};

}  // namespace tickwheel::detail
