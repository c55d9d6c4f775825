// stress/calendar.hpp — a producer's agenda: when to cancel or reschedule each of its timers, and
// when to look at a slot again to re-arm it. One per producer thread, touched by that thread only.
//
// Why not a binary heap: a producer holds one event per slot it owns, up to 10M and more, and does
// one push and one pop per schedule; a heap's O(log n) cache misses per operation would make the
// harness, not the engine, the bottleneck. This is a calendar queue: a ring of kBuckets buckets of
// kWidth ns each, an occupancy bitmap to find the next non-empty one, and a side list for events
// beyond one revolution, refiled into the ring each time the cursor starts a new revolution. Push
// and pop are O(1) amortised. Resolution is kWidth: an event runs once its whole bucket lies in the
// past, so up to kWidth after its time; for a cancel (whose time is random anyway) or a re-arm
// check that is harmless.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

namespace tickwheel::stress {

enum class EventKind : std::uint32_t {
  cancel,      // cancel the slot's timer now (or hand the cancel to a canceller thread)
  check,       // look at the slot: re-arm it if its timer fired or was cancelled, else look again later
  reschedule,  // push the slot's timer back (an idle timeout reset, see workload.hpp)
};

struct Event {
  std::int64_t t;  // steady_clock ns
  std::uint32_t slot;
  std::uint32_t tag;  // seq << 2 | kind (a seq has 29 bits, see workload.hpp)
  std::uint32_t seq() const noexcept { return tag >> 2; }
  EventKind kind() const noexcept { return static_cast<EventKind>(tag & 3); }
  static Event make(std::int64_t t, std::uint32_t slot, std::uint32_t seq, EventKind kind) noexcept {
    return Event{t, slot, seq << 2 | static_cast<std::uint32_t>(kind)};
  }
};

class Calendar {
 public:
  static constexpr std::int64_t kWidth = 100'000;                // 100 us per bucket
  static constexpr std::size_t kBuckets = std::size_t{1} << 16;  // 6.5 s per revolution
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

  explicit Calendar(std::int64_t now)
      : buckets_(std::make_unique<std::vector<Event>[]>(kBuckets)),
        cursor_(static_cast<std::uint64_t>(now / kWidth)) {}

  // An event at or before the bucket being processed goes into that bucket (it is due at once).
  void push(const Event& e) {
    const std::uint64_t b = std::max(bucket_of(e.t), cursor_);
    if (b >= cursor_ + kBuckets) {
      grow_and_push(far_, e);
    } else {
      const std::size_t i = b & (kBuckets - 1);
      grow_and_push(buckets_[i], e);
      bits_[i / 64] |= std::uint64_t{1} << (i % 64);
    }
    ++size_;
  }

  // Calls fn(event) for the events of every bucket that lies wholly before `now`, oldest first,
  // starting no new bucket once `limit` events have run. fn may push (an event it pushes into the
  // bucket being run, being due, runs in this call too). Returns how many ran.
  template <class Fn>
  std::size_t run_due(std::int64_t now, std::size_t limit, Fn&& fn) {
    const std::uint64_t through = bucket_of(now);  // buckets before it are wholly past
    std::size_t ran = 0;
    while (cursor_ < through && ran < limit) {
      const std::size_t i = cursor_ & (kBuckets - 1);
      std::vector<Event>& bucket = buckets_[i];
      // By index, and the event copied out: fn may push into this very bucket (a due event),
      // which may move its storage; what it pushes runs in this loop too.
      for (std::size_t k = 0; k < bucket.size(); ++k) {
        const Event e = bucket[k];
        fn(e);
      }
      ran += bucket.size();
      size_ -= bucket.size();
      bucket.clear();
      // A bucket keeps its storage for the next revolution, unless a burst made it large: then it
      // is released, so that the calendar's memory follows the events it holds, not its history.
      if (bucket.capacity() > kKeepCapacity) {
        held_ -= bucket.capacity();
        std::vector<Event>().swap(bucket);
      }
      bits_[i / 64] &= ~(std::uint64_t{1} << (i % 64));
      ++cursor_;
      if ((cursor_ & (kBuckets - 1)) == 0) refile_far();
    }
    return ran;
  }

  // When run_due() next has work: the end of the first non-empty bucket, the start of the next
  // revolution if only far events are left, kNever if there are none.
  std::int64_t next_due() const noexcept {
    if (size_ == 0) return kNever;
    const std::size_t start = cursor_ & (kBuckets - 1);
    // Scan the bitmap from the cursor to the end of the ring, then from its start: only buckets
    // of this revolution window are ever set.
    for (std::size_t pass = 0; pass < 2; ++pass) {
      const std::size_t from = pass == 0 ? start : 0;
      const std::size_t to = pass == 0 ? kBuckets : start;
      for (std::size_t w = from / 64; w * 64 < to; ++w) {
        std::uint64_t word = bits_[w];
        if (w == from / 64) word &= ~std::uint64_t{0} << (from % 64);
        if (word == 0) continue;
        const std::size_t i = w * 64 + static_cast<std::size_t>(std::countr_zero(word));
        if (i >= to) break;
        const std::uint64_t b = cursor_ + ((i - start) & (kBuckets - 1));
        return static_cast<std::int64_t>(b + 1) * kWidth;
      }
    }
    const std::uint64_t next_revolution = (cursor_ / kBuckets + 1) * kBuckets;
    return static_cast<std::int64_t>(next_revolution) * kWidth;
  }

  std::size_t size() const noexcept { return size_; }
  // Bytes of event storage the calendar holds (vector capacities), which follow the population.
  std::size_t bytes() const noexcept { return held_ * sizeof(Event); }

 private:
  // Events a bucket keeps room for once run. A population of 10M spread over seconds puts a few
  // hundred in a bucket; only bursts and retry waves go past this.
  static constexpr std::size_t kKeepCapacity = 1024;

  static std::uint64_t bucket_of(std::int64_t t) noexcept {
    return t <= 0 ? 0 : static_cast<std::uint64_t>(t / kWidth);
  }
  void grow_and_push(std::vector<Event>& v, const Event& e) {
    const std::size_t before = v.capacity();
    v.push_back(e);
    held_ += v.capacity() - before;
  }
  // At the start of a revolution: far events now inside the window go into their buckets.
  void refile_far() {
    if (far_.empty()) return;
    std::vector<Event> far;
    far.swap(far_);
    held_ -= far.capacity();
    size_ -= far.size();
    for (const Event& e : far) push(e);
  }

  std::unique_ptr<std::vector<Event>[]> buckets_;
  std::uint64_t bits_[kBuckets / 64] = {};  // bit i set <=> bucket i may hold events
  std::vector<Event> far_;                  // events one revolution or more ahead of the cursor
  std::uint64_t cursor_;                    // absolute number of the first bucket not yet run
  std::size_t size_ = 0;
  std::size_t held_ = 0;  // capacity of every bucket and far_, in events
};

}  // namespace tickwheel::stress
