// bench/heap_baseline.hpp — the baseline the benchmarks measure tickwheel against: an indexed
// binary min-heap timer queue, written the way a careful user would write it without us.
//
// Why this is the baseline
//   An array-backed binary heap ordered by deadline, with each timer remembering its position in
//   the heap so that cancel is O(log n), is what Boost.Asio (detail/timer_queue.hpp), libevent
//   (minheap-internal.h), the JDK's ScheduledThreadPoolExecutor and most hand-written event loops
//   use. It is the structure a timing wheel replaces, so it is the thing to beat.
//
// What makes the comparison fair (the baseline is given every advantage the wheel has):
//   - Timers are pooled: they live in segments that double as the pool grows, are recycled through
//     an intrusive LIFO free list (the most recently freed timer is the one most likely in cache),
//     and are never freed while the queue lives. No malloc per timer in steady state.
//   - The callable is stored inline in 24 bytes behind one function pointer, exactly like the
//     wheel's node, with the same compile-time limits.
//   - The heap array holds {deadline, timer*} pairs (16 bytes), so a sift compares deadlines
//     without chasing pointers; it touches a timer only to update its heap position, which is the
//     inherent cost of an indexed heap (Asio and libevent do the same).
//   - Arrays come from the function the wheel's pool uses: below 2 MiB the C allocator, from
//     2 MiB mapped huge-page aligned and advised for transparent huge pages, so a difference in the
//     results is the data structure, not the TLB or the page faults.
//   - Handles carry a generation, so a stale cancel is a false return, as with TimerId.
//   - reserve(n) pre-sizes and first-touches the pool and the heap array, as WheelOptions::reserve
//     does the wheel's pool, so a fresh queue can be compared with and without one on both sides.
//
// Costs: schedule O(log n) worst case, O(1) expected for random deadlines (a new leaf rises about
// 1.6 levels on average); cancel and reschedule O(log n); advance O(k log n) for k fired, and each
// level of a pop's sift moves one entry and writes one timer, which is where a big heap spends its
// time.
// Not thread safe; benchmark use only.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>
#include <utility>

#include "tickwheel/detail/memory.hpp"
#include "tickwheel/detail/node.hpp"

namespace tickwheel_bench {

// Memory for the baseline's arrays, from the function the wheel's pool takes its segments from
// (tickwheel/detail/memory.hpp): below 2 MiB the C allocator, from 2 MiB a private anonymous
// mapping aligned to 2 MiB and advised MADV_HUGEPAGE.
class HugePageMemory {
 public:
  static void* allocate(std::size_t bytes) {
    void* p = tickwheel::detail::map_memory(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }

  static void deallocate(void* p, std::size_t bytes) noexcept {
    if (p != nullptr) tickwheel::detail::unmap_memory(p, bytes);
  }
};

class HeapTimerQueue {
 public:
  using Nanos = std::chrono::nanoseconds;
  static constexpr std::size_t kInlineCallableBytes = 24;  // the wheel's node stores as much

  // Eight bytes: the timer's pool index and the generation of its lifetime. Tests false when it
  // names no timer.
  class Handle {
   public:
    constexpr Handle() noexcept = default;
    constexpr explicit operator bool() const noexcept { return gen_ != 0; }
    friend constexpr bool operator==(Handle, Handle) noexcept = default;

   private:
    friend class HeapTimerQueue;
    constexpr Handle(std::uint32_t index, std::uint32_t gen) noexcept : index_(index), gen_(gen) {}
    std::uint32_t index_ = 0;
    std::uint32_t gen_ = 0;
  };

  HeapTimerQueue() = default;
  HeapTimerQueue(const HeapTimerQueue&) = delete;
  HeapTimerQueue& operator=(const HeapTimerQueue&) = delete;

  // Destroys the callables of pending timers without running them; frees all memory.
  ~HeapTimerQueue() {
    for (std::size_t i = 0; i < size_; ++i) heap_[i].timer->thunk(heap_[i].timer->storage, false);
    HugePageMemory::deallocate(heap_, capacity_ * sizeof(Entry));
    for (unsigned seg = 0; seg < segments_; ++seg) {
      HugePageMemory::deallocate(segment_[seg], segment_timers(seg) * sizeof(Timer));
    }
  }

  // Schedules fn() to run in the first advance(now) with now >= deadline. O(log n), O(1) expected
  // for random deadlines. Allocates only while the pool or the heap array grows.
  template <class F>
  [[nodiscard]] Handle schedule_at(Nanos deadline, F&& fn) {
    using Fn = std::decay_t<F>;
    static_assert(std::is_invocable_v<Fn&>, "the callback must be callable as fn()");
    static_assert(sizeof(Fn) <= kInlineCallableBytes && alignof(Fn) <= 8,
                  "the callback must fit in 24 bytes with at most 8-byte alignment");
    static_assert(std::is_nothrow_constructible_v<Fn, F&&> && std::is_nothrow_destructible_v<Fn>);
    if (size_ == capacity_) grow_heap();
    Timer* t = acquire();
    ::new (static_cast<void*>(t->storage)) Fn(std::forward<F>(fn));
    t->thunk = &thunk_for<Fn>;
    // The handle is built from registers, not re-read from the timer: an 8-byte reload of
    // {gen, index} soon after the 4-byte store of gen can stall on store forwarding.
    const std::uint32_t gen = t->gen + 1;  // even (free) -> odd (live)
    const std::uint32_t index = t->index;
    t->gen = gen;
    sift_up(size_++, Entry{deadline.count(), t});
    return Handle(index, gen);
  }

  // True iff the timer was pending and now never runs; false for a default handle, a fired or
  // cancelled timer, or a handle whose timer slot now holds another timer. O(log n).
  bool cancel(Handle h) noexcept {
    if (h.index_ >= touched_) return false;
    Timer* t = at(h.index_);
    if (t->gen != h.gen_ || (h.gen_ & 1) == 0) return false;
    remove_at(t->heap_pos);
    t->thunk(t->storage, false);
    release(t);
    return true;
  }

  // The Wheel's prefetch() hint, for the same loop: loads the timer's pooled line, the first a
  // cancel or reschedule of h waits for (its heap entry's position is in that line).
  void prefetch(Handle h) const noexcept {
    if (h.index_ < touched_) tickwheel::detail::prefetch_node(at(h.index_));
  }

  // Moves a pending timer to a new deadline, keeping its handle and its callable: the indexed
  // heap's decrease-key or increase-key (what Boost.Asio's expires_at() on a pending timer would
  // be without its cancel, and libevent's event_add() on a pending event does). True iff the timer
  // was pending. O(log n); O(1) when the new deadline keeps its place.
  bool reschedule(Handle h, Nanos deadline) noexcept {
    if (h.index_ >= touched_) return false;
    Timer* t = at(h.index_);
    if (t->gen != h.gen_ || (h.gen_ & 1) == 0) return false;
    const std::size_t pos = t->heap_pos;
    const Entry e{deadline.count(), t};
    if (pos > 0 && e.deadline < heap_[(pos - 1) / 2].deadline) {
      sift_up(pos, e);
    } else {
      sift_down(pos, e);
    }
    return true;
  }

  // Runs every timer with deadline <= now, earliest first. Callbacks may schedule and cancel.
  // Returns how many ran. O(k log n).
  std::size_t advance(Nanos now) {
    std::size_t ran = 0;
    while (size_ != 0 && heap_[0].deadline <= now.count()) {
      Timer* t = heap_[0].timer;
      remove_at(0);
      t->gen += 1;  // odd -> even: cancel() of this timer is now false
      ++ran;
      struct Release {
        HeapTimerQueue* q;
        Timer* t;
        ~Release() { q->release_fired(t); }
      } release{this, t};
      t->thunk(t->storage, true);  // runs, then destroys the callable (even if the call throws)
    }
    return ran;
  }

  // Makes room for n timers now, as WheelOptions::reserve does for the wheel: maps the pool's
  // segments and the heap array for n and first-touches them (commit_memory), so that the first n
  // schedules neither fault nor grow anything, the heap array's copy on growth included. Before the
  // first schedule only.
  void reserve(std::size_t n) {
    while (mapped_ < n) add_segment();
    for (unsigned seg = 0; seg < segments_ && segment_start(seg) < n; ++seg) {
      const std::size_t count = std::min(segment_timers(seg), n - segment_start(seg));
      tickwheel::detail::commit_memory(segment_[seg], count * sizeof(Timer), false);
    }
    reserved_ = std::max(reserved_, n);
    std::size_t cap = kFirstHeapCapacity;
    while (cap < n) cap *= 2;
    if (cap > capacity_) resize_heap(cap);
    tickwheel::detail::commit_memory(heap_, capacity_ * sizeof(Entry), false);
  }

  std::size_t pending_count() const noexcept { return size_; }

  // Memory held for timers: every pooled timer ever handed out (or reserved) plus the heap array's
  // capacity.
  std::size_t bytes() const noexcept {
    return std::max<std::size_t>(touched_, reserved_) * sizeof(Timer) + capacity_ * sizeof(Entry);
  }

 private:
  using Thunk = void (*)(void* storage, bool invoke);

  struct Timer {
    std::uint32_t heap_pos;  // position in heap_ while pending; next free index while free
    std::uint32_t gen;       // odd while pending; never 0 once handed out
    std::uint32_t index;     // fixed pool index
    Thunk thunk;
    alignas(8) std::byte storage[kInlineCallableBytes];
  };
  static_assert(sizeof(Timer) == 48);

  struct Entry {
    std::int64_t deadline;  // nanoseconds
    Timer* timer;
  };
  static_assert(sizeof(Entry) == 16);

  static constexpr unsigned kFirstSegmentBits = 12;  // segment 0 holds 4096 timers
  static constexpr unsigned kMaxSegments = 21;       // 2^32 timers in all
  static constexpr std::uint32_t kNoFree = 0xFFFFFFFFu;
  static constexpr std::size_t kFirstHeapCapacity = 1024;  // entries; the array doubles from there

  template <class Fn>
  static void thunk_for(void* storage, bool invoke) {
    Fn* fn = std::launder(static_cast<Fn*>(storage));
    struct Destroy {
      Fn* fn;
      ~Destroy() { fn->~Fn(); }
    } destroy{fn};
    if (invoke) (*fn)();
  }

  static constexpr unsigned segment_of(std::uint32_t index) noexcept {
    return static_cast<unsigned>(std::bit_width(index >> kFirstSegmentBits));
  }
  static constexpr std::uint32_t segment_start(unsigned seg) noexcept {
    return seg == 0 ? 0 : (std::uint32_t{1} << (kFirstSegmentBits + seg - 1));
  }
  static constexpr std::size_t segment_timers(unsigned seg) noexcept {
    return seg == 0 ? (std::size_t{1} << kFirstSegmentBits)
                    : (std::size_t{1} << (kFirstSegmentBits + seg - 1));
  }

  Timer* at(std::uint32_t index) const noexcept {
    const unsigned seg = segment_of(index);
    return segment_[seg] + (index - segment_start(seg));
  }

  Timer* acquire() {
    if (free_ != kNoFree) {
      Timer* t = at(free_);
      free_ = t->heap_pos;
      return t;
    }
    if (touched_ == mapped_) add_segment();
    Timer* t = at(touched_);
    t->gen = 0;
    t->index = touched_++;
    return t;
  }

  void release(Timer* t) noexcept {
    t->gen += 1;  // odd -> even
    release_fired(t);
  }
  void release_fired(Timer* t) noexcept {
    t->heap_pos = free_;
    free_ = t->index;
  }

  void add_segment() {
    const unsigned seg = segments_;
    const std::size_t bytes = segment_timers(seg) * sizeof(Timer);
    segment_[seg] = static_cast<Timer*>(HugePageMemory::allocate(bytes));
    mapped_ += static_cast<std::uint32_t>(segment_timers(seg));
    ++segments_;
  }

  void grow_heap() { resize_heap(capacity_ == 0 ? kFirstHeapCapacity : capacity_ * 2); }

  void resize_heap(std::size_t cap) {
    auto* fresh = static_cast<Entry*>(HugePageMemory::allocate(cap * sizeof(Entry)));
    for (std::size_t i = 0; i < size_; ++i) fresh[i] = heap_[i];
    HugePageMemory::deallocate(heap_, capacity_ * sizeof(Entry));
    heap_ = fresh;
    capacity_ = cap;
  }

  void place(std::size_t pos, Entry e) noexcept {
    heap_[pos] = e;
    e.timer->heap_pos = static_cast<std::uint32_t>(pos);
  }

  // Moves the hole at `pos` up until `e` fits, then puts `e` there.
  void sift_up(std::size_t pos, Entry e) noexcept {
    while (pos > 0) {
      const std::size_t parent = (pos - 1) / 2;
      if (heap_[parent].deadline <= e.deadline) break;
      place(pos, heap_[parent]);
      pos = parent;
    }
    place(pos, e);
  }

  // Moves the hole at `pos` down until `e` fits, then puts `e` there.
  void sift_down(std::size_t pos, Entry e) noexcept {
    for (;;) {
      std::size_t child = 2 * pos + 1;
      if (child >= size_) break;
      if (child + 1 < size_ && heap_[child + 1].deadline < heap_[child].deadline) ++child;
      if (e.deadline <= heap_[child].deadline) break;
      place(pos, heap_[child]);
      pos = child;
    }
    place(pos, e);
  }

  // Removes the entry at `pos`: the last entry fills the hole and sifts whichever way it must.
  void remove_at(std::size_t pos) noexcept {
    const Entry last = heap_[--size_];
    if (pos == size_) return;
    if (pos > 0 && last.deadline < heap_[(pos - 1) / 2].deadline) {
      sift_up(pos, last);
    } else {
      sift_down(pos, last);
    }
  }

  Entry* heap_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::uint32_t free_ = kNoFree;  // head of the free list (a pool index)
  std::uint32_t touched_ = 0;     // timers ever handed out
  std::uint32_t mapped_ = 0;      // timers in allocated segments
  std::size_t reserved_ = 0;      // timers whose memory reserve() touched
  unsigned segments_ = 0;
  std::array<Timer*, kMaxSegments> segment_{};
};

}  // namespace tickwheel_bench
