// stress/histogram_check.cpp — self-test of the stress Histogram, run by CTest.
//
// Checks, against exact answers computed from the sorted samples: the bucket layout is contiguous
// and covers every value; values below 256 are exact; every percentile is at or above the true one
// and within 1/128 of it; count, min, max and mean are exact; merging two halves gives the same
// histogram as recording everything in one; a ConcurrentHistogram's snapshot equals a Histogram fed
// the same values; since() of two snapshots holds exactly the values recorded in between, with its
// min and max within their buckets. Deterministic (fixed seed); prints what failed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "histogram.hpp"

namespace {

using tickwheel::stress::Histogram;

int failures = 0;

void expect(bool ok, const char* what, std::uint64_t a = 0, std::uint64_t b = 0) {
  if (ok) return;
  ++failures;
  std::printf("FAIL: %s (%llu vs %llu)\n", what, static_cast<unsigned long long>(a),
              static_cast<unsigned long long>(b));
}

void check_layout() {
  // Consecutive buckets tile [0, 2^64) with no gap or overlap.
  expect(Histogram::bucket_low(0) == 0, "bucket 0 starts at 0");
  for (std::size_t i = 1; i < Histogram::kBuckets; ++i) {
    expect(Histogram::bucket_low(i) == Histogram::bucket_high(i - 1) + 1, "buckets are contiguous", i,
           Histogram::bucket_low(i));
    // Width at most 1/128 of the bucket's lowest value, above the exact range.
    const std::uint64_t width = Histogram::bucket_high(i) - Histogram::bucket_low(i) + 1;
    if (i >= 2 * Histogram::kSubBuckets) {
      expect(width * Histogram::kSubBuckets <= Histogram::bucket_low(i), "bucket width <= 1/128", i, width);
    } else {
      expect(width == 1, "values below 256 are exact", i, width);
    }
  }
  for (std::uint64_t v : {std::uint64_t{0}, std::uint64_t{255}, std::uint64_t{256},
                          std::uint64_t{1'000'000'007}, std::numeric_limits<std::uint64_t>::max()}) {
    const std::size_t i = Histogram::index_of(v);
    expect(Histogram::bucket_low(i) <= v && v <= Histogram::bucket_high(i), "value in its bucket", v, i);
  }
}

void check_percentiles() {
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
  expect(all->count() == sorted.size(), "count", all->count(), sorted.size());
  expect(all->min() == sorted.front(), "min", all->min(), sorted.front());
  expect(all->max() == sorted.back(), "max", all->max(), sorted.back());
  const double mean = static_cast<double>(sum / static_cast<long double>(sorted.size()));
  expect(std::abs(all->mean() - mean) <= 1e-9 * mean, "mean");

  for (double p : {0.0, 1.0, 10.0, 50.0, 90.0, 99.0, 99.9, 99.99, 100.0}) {
    const auto rank = std::max<std::size_t>(
        1, static_cast<std::size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size()))));
    const std::uint64_t exact = sorted[rank - 1];
    const std::uint64_t got = all->percentile(p);
    expect(got >= exact, "percentile never below the true value", got, exact);
    expect(got - exact <= exact / Histogram::kSubBuckets, "percentile within 1/128", got, exact);
    expect(first->percentile(p) == got, "merged halves give the same percentile", first->percentile(p), got);
  }
  expect(first->count() == all->count() && first->min() == all->min() && first->max() == all->max() &&
             first->mean() == all->mean(),
         "merged halves give the same count, min, max and mean");

  const Histogram empty;
  expect(empty.count() == 0 && empty.percentile(50) == 0 && empty.max() == 0 && empty.min() == 0,
         "an empty histogram reports zeros");
}

void check_concurrent_and_since() {
  std::mt19937_64 rng(777);
  std::uniform_real_distribution<double> exponent(0.0, 24.0);
  auto plain = std::make_unique<Histogram>();
  auto live = std::make_unique<tickwheel::stress::ConcurrentHistogram>();
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
  expect(snapshot->count() == plain->count() && live->count() == plain->count(), "snapshot count",
         snapshot->count(), plain->count());
  expect(snapshot->min() == plain->min() && snapshot->max() == plain->max(), "snapshot min and max");
  expect(snapshot->mean() == plain->mean(), "snapshot mean");
  for (double p : {0.0, 50.0, 99.0, 99.99, 100.0}) {
    expect(snapshot->percentile(p) == plain->percentile(p), "snapshot percentile", snapshot->percentile(p),
           plain->percentile(p));
  }

  // since(): exactly the second half's values, bucket for bucket.
  const Histogram between = Histogram::since(*snapshot, *first_half);
  auto second = std::make_unique<Histogram>();
  for (const std::uint64_t v : second_values) second->record(v);
  expect(between.count() == second->count(), "since() count", between.count(), second->count());
  for (double p : {1.0, 50.0, 90.0, 99.0, 99.9}) {
    expect(between.percentile(p) == second->percentile(p), "since() percentile", between.percentile(p),
           second->percentile(p));
  }
  const std::uint64_t lo = *std::min_element(second_values.begin(), second_values.end());
  const std::uint64_t hi = *std::max_element(second_values.begin(), second_values.end());
  expect(Histogram::index_of(between.min()) == Histogram::index_of(lo), "since() min in the lowest bucket",
         between.min(), lo);
  expect(Histogram::index_of(between.max()) == Histogram::index_of(hi) && between.max() >= hi,
         "since() max in the highest bucket, not below it", between.max(), hi);
  const Histogram nothing = Histogram::since(*snapshot, *snapshot);
  expect(nothing.count() == 0 && nothing.max() == 0, "since() of equal snapshots is empty");
}

}  // namespace

int main() {
  check_layout();
  check_percentiles();
  check_concurrent_and_since();
  if (failures != 0) {
    std::printf("histogram_check: %d failure(s)\n", failures);
    return 1;
  }
  std::printf("histogram_check: OK\n");
  return 0;
}
