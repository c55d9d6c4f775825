// engine/core/move_queue.hpp — the queue that carries Timer::reschedule() requests from other threads to
// a shard, in the order they were made.
//
// Why not a moodycamel queue, as the hand-offs and cancels use: its producers each fill a sub-queue
// of their own, and the consumer takes the sub-queues in no particular order, so two moves of one
// timer posted by two threads, one after the other returned, could be applied in the opposite order
// and the earlier one would win. Hand-offs and cancels do not care (each names a different timer
// lifetime, or ends it), moves do: the last reschedule to return must win.
//
// The design is an intrusive many-producer, single-consumer list (Vyukov's): a producer links its
// record in with one exchange on the tail, so the records form one order, that of the exchanges,
// which agrees with the order of the calls whenever one returned before the other began. The
// consumer walks from its head. A producer between its exchange and its link holds back the records
// after it (never loses them): the consumer sees waiting() and looks again at its next pass.
//
// Records come from a cache per producer thread and shard (MoveRecordCache): the consumer gives each
// back once it has moved past it, through a stack that only the cache's thread empties (all at
// once, so no ABA), so a record is reused without allocation once the cache holds as many as the
// thread ever had in flight at once.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "tickwheel/detail/node.hpp"

namespace tickwheel::detail {

class MoveRecordCache;

// A deadline as a move carries it: nanoseconds on the engine's clock, a negative one as 0 (due at once).
inline std::uint64_t move_deadline_ns(std::chrono::nanoseconds deadline) noexcept {
  return static_cast<std::uint64_t>(std::max<std::chrono::nanoseconds::rep>(deadline.count(), 0));
}

// One posted move: the node, the pending generation the timer had when it was asked, and the new
// deadline in nanoseconds (see Shard::move_here).
struct MoveRecord {
  std::atomic<MoveRecord*> next{nullptr};  // the record posted after this one
  MoveRecord* spare = nullptr;             // link in its cache's lists of records to reuse
  MoveRecordCache* home = nullptr;         // where it goes back to; null for a queue's own stub
  Node* node = nullptr;
  std::uint64_t deadline_ns = 0;
  std::uint32_t gen = 0;
};

// A producer thread's records for one shard. take() by that thread only; give_back() by the
// shard's thread. Records are made a block at a time and reused oldest first, so that the shard's
// walk of a burst of moves reads consecutive memory.
class MoveRecordCache {
 public:
  MoveRecordCache() = default;
  ~MoveRecordCache() {
    while (blocks_ != nullptr) {
      delete std::exchange(blocks_, blocks_->next);  // NOLINT(cppcoreguidelines-owning-memory)
    }
  }
  MoveRecordCache(const MoveRecordCache&) = delete;
  MoveRecordCache& operator=(const MoveRecordCache&) = delete;
  MoveRecordCache(MoveRecordCache&&) = delete;
  MoveRecordCache& operator=(MoveRecordCache&&) = delete;

  // A record given back, else one of a new block (an allocation, only while this thread's moves in
  // flight grow to their peak); null if none can be had.
  MoveRecord* take() noexcept {
    if (local_ == nullptr) {
      // Acquire: pairs with give_back()'s release, so the shard's last reads of each record taken
      // back come before this thread writes it again. The stack holds the last given back first:
      // reversed, the oldest is reused first.
      for (MoveRecord* r = given_back_.exchange(nullptr, std::memory_order_acquire); r != nullptr;) {
        local_ = std::exchange(r, std::exchange(r->spare, local_));
      }
    }
    if (local_ == nullptr && !grow()) return nullptr;
    return std::exchange(local_, local_->spare);
  }

  void give_back(MoveRecord* record) noexcept {
    MoveRecord* top = given_back_.load(std::memory_order_relaxed);
    do {
      record->spare = top;
      // Release: see take(). A retry means another push, or take() emptying the stack, came first.
    } while (!given_back_.compare_exchange_weak(top, record, std::memory_order_release,
                                                std::memory_order_relaxed));
  }

 private:
  static constexpr std::size_t kBlock = 32;
  struct Block {
    std::array<MoveRecord, kBlock> records;
    Block* next = nullptr;
  };
  // A new block's records, in address order, on local_. False if there is no memory for one.
  bool grow() noexcept {
    auto* block = new (std::nothrow) Block();  // NOLINT(cppcoreguidelines-owning-memory): in blocks_
    if (block == nullptr) return false;
    block->next = std::exchange(blocks_, block);
    for (std::size_t i = kBlock; i-- != 0;) {
      block->records[i].home = this;
      block->records[i].spare = std::exchange(local_, &block->records[i]);
    }
    return true;
  }

  MoveRecord* local_ = nullptr;  // records to reuse, oldest first (the producer's)
  Block* blocks_ = nullptr;      // every block this cache made, to delete (the producer's)
  alignas(kCacheLine) std::atomic<MoveRecord*> given_back_{nullptr};
};

class MoveQueue {
 public:
  MoveQueue() = default;
  ~MoveQueue() = default;
  MoveQueue(const MoveQueue&) = delete;
  MoveQueue& operator=(const MoveQueue&) = delete;
  MoveQueue(MoveQueue&&) = delete;
  MoveQueue& operator=(MoveQueue&&) = delete;

  // Appends a filled record. Any thread; one exchange and one store, no lock, never fails.
  void post(MoveRecord* record) noexcept {
    record->next.store(nullptr, std::memory_order_relaxed);
    // acq_rel: release, so that the producer that gets this record as its `prev` writes its `next`
    // after the reset above; acquire, likewise for the record this call gets as `prev`.
    MoveRecord* prev = tail_.exchange(record, std::memory_order_acq_rel);
    // Release: pairs with drain()'s acquire load, which then sees the record's fields.
    prev->next.store(record, std::memory_order_release);
  }

  // Calls apply(record) for every record linked after the head, in the order posted, and gives
  // each one back once the walk is past it (the last one stays as the head: a producer may still
  // link after it). Returns how many. The consumer only.
  template <class Apply>
  std::size_t drain(Apply&& apply) noexcept {
    std::size_t taken = 0;
    for (MoveRecord* next = nullptr; (next = head_->next.load(std::memory_order_acquire)) != nullptr;
         ++taken) {
      apply(static_cast<const MoveRecord&>(*next));
      MoveRecord* const done = std::exchange(head_, next);
      if (done->home != nullptr) done->home->give_back(done);
    }
    return taken;
  }

  // Whether a record was posted that no drain has taken: linked, or in flight (its producer between
  // its exchange and its link). The consumer only. Acquire: a load, ordering nothing by itself; a
  // caller that must not miss a post orders it with a fence (see ShardInbox::work_waiting()).
  bool waiting() const noexcept { return tail_.load(std::memory_order_acquire) != head_; }

 private:
  // Producers' line: every post exchanges it.
  alignas(kCacheLine) std::atomic<MoveRecord*> tail_{&stub_};
  // The consumer's line.
  alignas(kCacheLine) MoveRecord* head_ = &stub_;
  MoveRecord stub_;
};

}  // namespace tickwheel::detail
