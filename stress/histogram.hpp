// stress/histogram.hpp — a fixed-size, log-linear (HDR-style) histogram of nanosecond values: exact
// below 256, above that a percentile never below the true value and at most 1/128 above it; no
// allocation, no lock. Layout and precision: docs/stress.md, "The histogram".
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>

namespace tickwheel::stress {

class Histogram {
 public:
  static constexpr unsigned kSubBucketBits = 7;
  static constexpr std::uint64_t kSubBuckets = std::uint64_t{1} << kSubBucketBits;  // 128
  // Indices [0, 2 * kSubBuckets) are exact values; each further power of two adds kSubBuckets.
  static constexpr std::size_t kBuckets = (64 - kSubBucketBits - 1 + 2) * kSubBuckets;  // 7424

  // Records one value. O(1), no allocation, no branch on the layout.
  void record(std::uint64_t ns) noexcept {
    ++counts_[index_of(ns)];
    ++count_;
    sum_ += ns;
    min_ = ns < min_ ? ns : min_;
    max_ = ns > max_ ? ns : max_;
  }

  // Adds every value recorded in `other` to this one. Exact: the layouts are identical.
  void merge(const Histogram& other) noexcept;

  // What `later` holds beyond `earlier`, a snapshot of the same histogram taken before it: the
  // values recorded in between. Counts are exact; min() and max() are the bounds of the lowest and
  // highest buckets that grew (so within 1/128 of the true ones), max() narrowed to later.max()
  // where that falls inside its bucket.
  static Histogram since(const Histogram& later, const Histogram& earlier) noexcept;

  // The smallest recorded value v such that at least p % of the values are <= v, rounded up to the
  // top of its bucket (so never below the true percentile, at most 1/128 above it) and clamped to
  // [min(), max()]. p is clamped to [0, 100]; percentile(100) == max(). 0 when empty.
  std::uint64_t percentile(double p) const noexcept;

  std::uint64_t count() const noexcept { return count_; }
  // The count of one bucket (index < kBuckets), for encoders of the layout (hlog.hpp).
  std::uint64_t count_at(std::size_t index) const noexcept { return counts_[index]; }
  std::uint64_t min() const noexcept { return count_ == 0 ? 0 : min_; }
  std::uint64_t max() const noexcept { return max_; }
  double mean() const noexcept {
    return count_ == 0 ? 0.0 : static_cast<double>(sum_) / static_cast<double>(count_);
  }

  // Layout, public for the self-test: the bucket a value goes to, and the range a bucket holds.
  static constexpr std::size_t index_of(std::uint64_t v) noexcept {
    // shift = 0 for v < 256, else bit_width(v) - 8, so (v >> shift) is in [128, 256).
    const unsigned width = static_cast<unsigned>(std::bit_width(v));
    const unsigned shift = (width > kSubBucketBits + 1 ? width : kSubBucketBits + 1) - (kSubBucketBits + 1);
    return (std::size_t{shift} << kSubBucketBits) + static_cast<std::size_t>(v >> shift);
  }
  static constexpr std::uint64_t bucket_low(std::size_t index) noexcept {
    const unsigned shift = bucket_shift(index);
    return static_cast<std::uint64_t>(index - (std::size_t{shift} << kSubBucketBits)) << shift;
  }
  static constexpr std::uint64_t bucket_high(std::size_t index) noexcept {
    return bucket_low(index) + ((std::uint64_t{1} << bucket_shift(index)) - 1);
  }

 private:
  static constexpr unsigned bucket_shift(std::size_t index) noexcept {
    const std::size_t top = index >> kSubBucketBits;
    return static_cast<unsigned>(top > 0 ? top - 1 : 0);
  }

  friend class ConcurrentHistogram;

  std::array<std::uint64_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;
  std::uint64_t min_ = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t max_ = 0;
};

// The Histogram layout with one writer thread and any number of reader threads. Each field is an
// atomic written only by the writer, with a relaxed load and a relaxed store (no read-modify-write:
// there is no other writer to lose an update to), which on x86-64 compiles to the same plain moves
// as Histogram::record(). Readers take a snapshot with add_to(); a record() running at the same
// moment may show in some fields and not yet in others, so a snapshot is off by at most the records
// in flight, and exact once the writer has been joined.
class ConcurrentHistogram {
 public:
  // The writer thread only.
  void record(std::uint64_t ns) noexcept {
    bump(counts_[Histogram::index_of(ns)], 1);
    bump(count_, 1);
    bump(sum_, ns);
    if (ns < min_.load(std::memory_order_relaxed)) min_.store(ns, std::memory_order_relaxed);
    if (ns > max_.load(std::memory_order_relaxed)) max_.store(ns, std::memory_order_relaxed);
  }

  // Any thread: adds what has been recorded so far to `out`. The count is taken from the buckets
  // read, so that out's percentiles stay consistent with its own buckets.
  void add_to(Histogram& out) const noexcept;

  std::uint64_t count() const noexcept { return count_.load(std::memory_order_relaxed); }
  // The values recorded, summed: a total where each value is a count (a pass's fires).
  std::uint64_t sum() const noexcept { return sum_.load(std::memory_order_relaxed); }

 private:
  static void bump(std::atomic<std::uint64_t>& field, std::uint64_t by) noexcept {
    field.store(field.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }

  std::array<std::atomic<std::uint64_t>, Histogram::kBuckets> counts_{};
  std::atomic<std::uint64_t> count_{0};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::uint64_t> min_{std::numeric_limits<std::uint64_t>::max()};
  std::atomic<std::uint64_t> max_{0};
};

static_assert(Histogram::index_of(0) == 0 && Histogram::index_of(255) == 255);
static_assert(Histogram::index_of(256) == 256 && Histogram::index_of(257) == 256);
static_assert(Histogram::index_of(std::numeric_limits<std::uint64_t>::max()) == Histogram::kBuckets - 1);
static_assert(Histogram::bucket_high(Histogram::kBuckets - 1) == std::numeric_limits<std::uint64_t>::max());
static_assert(Histogram::bucket_low(Histogram::index_of(1000)) <= 1000 &&
              Histogram::bucket_high(Histogram::index_of(1000)) >= 1000);

}  // namespace tickwheel::stress
