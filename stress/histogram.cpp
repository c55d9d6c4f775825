// stress/histogram.cpp — the cold half of Histogram: merging and percentile look-up.
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

std::uint64_t Histogram::percentile(double p) const noexcept {
  if (count_ == 0) return 0;
  p = std::clamp(p, 0.0, 100.0);
  // The rank (1-based) of the value asked for: at least p % of the values are at or below it.
  const double exact = std::ceil(p / 100.0 * static_cast<double>(count_));
  const std::uint64_t rank =
      std::clamp<std::uint64_t>(static_cast<std::uint64_t>(exact), 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::clamp(bucket_high(i), min(), max_);
  }
  return max_;  // unreachable: the counts add up to count_
}

}  // namespace tickwheel::stress
