// stress/histogram.cpp — the cold half of Histogram (merging, differences, percentile look-up)
// and ConcurrentHistogram's snapshot.
#include "histogram.hpp"

#include <algorithm>
#include <cmath>

namespace tickwheel::stress {

void Histogram::merge(const Histogram& other) noexcept {
  for (std::size_t i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
  count_ += other.count_;
  sum_ += other.sum_;
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

Histogram Histogram::since(const Histogram& later, const Histogram& earlier) noexcept {
  Histogram d;
  std::size_t lowest = kBuckets;
  std::size_t highest = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    const std::uint64_t n = later.counts_[i] - std::min(later.counts_[i], earlier.counts_[i]);
    d.counts_[i] = n;
    d.count_ += n;
    if (n != 0) {
      lowest = std::min(lowest, i);
      highest = i;
    }
  }
  d.sum_ = later.sum_ - std::min(later.sum_, earlier.sum_);
  if (d.count_ != 0) {
    d.min_ = bucket_low(lowest);
    // The interval's largest value lies in its top bucket. `later.max_` narrows that when it falls
    // inside; a snapshot taken while a new maximum was being recorded (ConcurrentHistogram: bucket
    // first, max after) can hold the old maximum, below the bucket, which the clamp corrects.
    d.max_ = std::clamp(later.max_, bucket_low(highest), bucket_high(highest));
  }
  return d;
}

void ConcurrentHistogram::add_to(Histogram& out) const noexcept {
  for (std::size_t i = 0; i < Histogram::kBuckets; ++i) {
    const std::uint64_t n = counts_[i].load(std::memory_order_relaxed);
    out.counts_[i] += n;
    out.count_ += n;
  }
  out.sum_ += sum_.load(std::memory_order_relaxed);
  out.min_ = std::min(out.min_, min_.load(std::memory_order_relaxed));
  out.max_ = std::max(out.max_, max_.load(std::memory_order_relaxed));
}

std::uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  // The rank (1-based) of the value asked for: at least p % of the values are at or below it.
  const double exact = std::ceil(p / 100.0 * static_cast<double>(count_));
  const std::uint64_t rank = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(exact), 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(bucket_high(i), min(), max_);
  }
  return max_;  // unreachable: the counts add up to count_
}

}  // namespace tickwheel::stress
