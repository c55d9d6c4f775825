// tests/stress_histogram_test.cpp — the stress harness's Histogram (stress/histogram.hpp), against
// exact answers computed from the sorted samples: the bucket layout is contiguous and covers every
// value; values below 256 are exact; every percentile is at or above the true one and within 1/128
// of it; count, min, max and mean are exact; merging two halves gives the same histogram as
// recording everything in one; a ConcurrentHistogram's snapshot equals a Histogram fed the same
// values; since() of two snapshots holds exactly the values recorded in between, with its min and
// max within their buckets. Deterministic (fixed seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "stress/histogram.hpp"

namespace {

using tickwheel::stress::ConcurrentHistogram;
using tickwheel::stress::Histogram;

TEST(StressHistogram, BucketsTileTheWholeRange) {
  // Consecutive buckets tile [0, 2^64) with no gap or overlap.
  EXPECT_EQ(Histogram::bucket_low(0), 0U);
  for (std::size_t i = 1; i < Histogram::kBuckets; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(Histogram::bucket_low(i), Histogram::bucket_high(i - 1) + 1) << "buckets are contiguous";
    // Width at most 1/128 of the bucket's lowest value, above the exact range.
    const std::uint64_t width = Histogram::bucket_high(i) - Histogram::bucket_low(i) + 1;
    if (i >= 2 * Histogram::kSubBuckets) {
      EXPECT_LE(width * Histogram::kSubBuckets, Histogram::bucket_low(i)) << "bucket width <= 1/128";
    } else {
      EXPECT_EQ(width, 1U) << "values below 256 are exact";
    }
  }
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{255}, std::uint64_t{256},
                          std::uint64_t{1'000'000'007}, std::numeric_limits<std::uint64_t>::max()}) {
    const std::size_t i = Histogram::index_of(v);
    EXPECT_LE(Histogram::bucket_low(i), v) << "value in its bucket " << i;
    EXPECT_LE(v, Histogram::bucket_high(i)) << "value in its bucket " << i;
  }
}

TEST(StressHistogram, ExactFiguresAndBoundedPercentilesAlsoWhenMerged) {
  std::mt19937_64 rng(12345);
  // Log-uniform values from 1 ns to ~1 s, plus exact small ones: every layout region is used.
  std::uniform_real_distribution<double> exponent(0.0, 30.0);
  std::vector<std::uint64_t> values;
  for (int i = 0; i < 200'000; ++i) {
    values.push_back(static_cast<std::uint64_t>(std::exp2(exponent(rng))));
  }
  for (std::uint64_t v = 0; v < 300; ++v) values.push_back(v);

  auto all = std::make_unique<Histogram>();
  auto first = std::make_unique<Histogram>();
  auto second = std::make_unique<Histogram>();
  long double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    all->record(values[i]);
    (i % 2 == 0 ? *first : *second).record(values[i]);
    sum += static_cast<long double>(values[i]);
  }
  first->merge(*second);

  std::vector<std::uint64_t> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(all->count(), sorted.size());
  EXPECT_EQ(all->min(), sorted.front());
  EXPECT_EQ(all->max(), sorted.back());
  const double mean = static_cast<double>(sum / static_cast<long double>(sorted.size()));
  EXPECT_LE(std::abs(all->mean() - mean), 1e-9 * mean);

  for (double p : {0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    SCOPED_TRACE(p);
    const auto rank = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size()))));
    const std::uint64_t exact = sorted[rank - 1];
    const std::uint64_t got = all->percentile(p);
    EXPECT_GE(got, exact) << "percentile never below the true value";
    EXPECT_LE(got - exact, exact / Histogram::kSubBuckets) << "percentile within 1/128";
    EXPECT_EQ(first->percentile(p), got) << "merged halves give the same percentile";
  }
  // Merged halves give the same count, min, max and mean.
  EXPECT_EQ(first->count(), all->count());
  EXPECT_EQ(first->min(), all->min());
  EXPECT_EQ(first->max(), all->max());
  EXPECT_EQ(first->mean(), all->mean());
}

TEST(StressHistogram, EmptyReportsZeros) {
  const Histogram empty;
  EXPECT_EQ(empty.count(), 0U);
  EXPECT_EQ(empty.percentile(50), 0U);
  EXPECT_EQ(empty.max(), 0U);
  EXPECT_EQ(empty.min(), 0U);
}

TEST(StressHistogram, ConcurrentSnapshotAndSince) {
  std::mt19937_64 rng(777);
  std::uniform_real_distribution<double> exponent(0.0, 24.0);
  auto plain = std::make_unique<Histogram>();
  auto live = std::make_unique<ConcurrentHistogram>();
  auto first_half = std::make_unique<Histogram>();
  std::vector<std::uint64_t> second_values;
  for (int i = 0; i < 100'000; ++i) {
    const auto v = static_cast<std::uint64_t>(std::exp2(exponent(rng)));
    plain->record(v);
    live->record(v);
    if (i == 49'999) live->add_to(*first_half);
    if (i >= 50'000) second_values.push_back(v);
  }
  auto snapshot = std::make_unique<Histogram>();
  live->add_to(*snapshot);
  EXPECT_EQ(snapshot->count(), plain->count());
  EXPECT_EQ(live->count(), plain->count());
  EXPECT_EQ(snapshot->min(), plain->min());
  EXPECT_EQ(snapshot->max(), plain->max());
  EXPECT_EQ(snapshot->mean(), plain->mean());
  for (double p : {0.0, 50.0, 99.0, 99.99, 100.0}) {
    EXPECT_EQ(snapshot->percentile(p), plain->percentile(p)) << "snapshot percentile " << p;
  }

  // since(): exactly the second half's values, bucket for bucket.
  const Histogram between = Histogram::since(*snapshot, *first_half);
  auto second = std::make_unique<Histogram>();
  for (const std::uint64_t v : second_values) second->record(v);
  EXPECT_EQ(between.count(), second->count());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    EXPECT_EQ(between.percentile(p), second->percentile(p)) << "since() percentile " << p;
  }
  const std::uint64_t lo = *std::min_element(second_values.begin(), second_values.end());
  const std::uint64_t hi = *std::max_element(second_values.begin(), second_values.end());
  EXPECT_EQ(Histogram::index_of(between.min()), Histogram::index_of(lo))
      << "since() min in the lowest bucket";
  EXPECT_EQ(Histogram::index_of(between.max()), Histogram::index_of(hi))
      << "since() max in the highest bucket";
  EXPECT_GE(between.max(), hi) << "since() max not below the true one";
  const Histogram nothing = Histogram::since(*snapshot, *snapshot);
  EXPECT_EQ(nothing.count(), 0U) << "since() of equal snapshots is empty";
  EXPECT_EQ(nothing.max(), 0U) << "since() of equal snapshots is empty";
}

}  // namespace
