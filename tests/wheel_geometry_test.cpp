// The Wheel's geometry: the level table in the comment of include/tickwheel/wheel.hpp is
// recomputed from Wheel::kLevelBits / kSlots / kLevels, so the table and the code cannot drift.
// The header is read at run time (its path comes from CMake as TICKWHEEL_WHEEL_HEADER); each row
// `//   L   granularity   holds-less-than   <at 1 ms>   <at 1 us>` must say 2^(kLevelBits*L) and
// kSlots * 2^(kLevelBits*L), and the two human-readable spans must round to the same values. Also
// the deadline -> tick arithmetic every schedule does (detail::TickDivider), against plain division.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tickwheel/detail/arith.hpp"
#include "tickwheel/wheel.hpp"

#ifndef TICKWHEEL_WHEEL_HEADER
#error "TICKWHEEL_WHEEL_HEADER must name include/tickwheel/wheel.hpp"
#endif

namespace tickwheel::test {
namespace {

struct Row {
  std::string line;
  std::uint64_t level = 0;
  std::uint64_t granularity = 0;
  std::uint64_t holds = 0;
  std::string at_ms;  // e.g. "8.2 s"
  std::string at_us;  // e.g. "8.2 ms"
};

bool parse_u64(const std::string& s, std::uint64_t& out) {
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::stoull(s);
  return true;
}

// The table rows: comment lines whose first three words are integers.
std::vector<Row> read_table() {
  std::ifstream in(TICKWHEEL_WHEEL_HEADER);
  EXPECT_TRUE(in.good()) << "cannot open " << TICKWHEEL_WHEEL_HEADER;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("//", 0) != 0) continue;
    std::istringstream words(line.substr(2));
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    Row r;
    if (w.size() < 3 || !parse_u64(w[0], r.level) || !parse_u64(w[1], r.granularity) ||
        !parse_u64(w[2], r.holds)) {
      continue;
    }
    r.line = line;
    // The rest is two spans, each "<number> [k|M] <unit>": split at the run of 2+ spaces.
    std::size_t pos = 2;
    for (int k = 0; k < 3 && pos != std::string::npos; ++k) {
      pos = line.find_first_not_of(' ', pos);
      if (pos != std::string::npos) pos = line.find(' ', pos);
    }
    const std::string rest = pos == std::string::npos ? std::string() : line.substr(pos);
    std::vector<std::string> cols;
    std::string cur;
    int spaces = 0;
    for (char c : rest) {
      if (c == ' ') {
        ++spaces;
        continue;
      }
      if (spaces >= 2 && !cur.empty()) {
        cols.push_back(cur);
        cur.clear();
      } else if (spaces == 1 && !cur.empty()) {
        cur += ' ';
      }
      spaces = 0;
      cur += c;
    }
    if (!cur.empty()) cols.push_back(cur);
    if (cols.size() == 2) {
      r.at_ms = cols[0];
      r.at_us = cols[1];
    }
    rows.push_back(r);
  }
  return rows;
}

std::uint64_t granularity(std::uint64_t level) { return std::uint64_t{1} << (Wheel::kLevelBits * level); }

TEST(WheelGeometry, HeaderTableMatchesTheConstants) {
  static_assert(Wheel::kSlots == 1u << Wheel::kSlotBits);
  const std::vector<Row> rows = read_table();
  ASSERT_EQ(rows.size(), Wheel::kLevels) << "the table must have exactly kLevels rows";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    SCOPED_TRACE(r.line);
    EXPECT_EQ(r.level, i);
    EXPECT_EQ(r.granularity, granularity(r.level))
        << "granularity of level " << r.level << " is 2^(kLevelBits * L)";
    EXPECT_EQ(r.holds, std::uint64_t{Wheel::kSlots} * granularity(r.level))
        << "level " << r.level << " holds less than kSlots * 2^(kLevelBits * L) ticks ahead";
  }
}

// A span like "8.2 s", "17.8 k years" or "0.52 s", in seconds, with the precision it was printed
// with (half a unit of its last digit).
struct Span {
  double seconds = 0;
  double half_ulp_seconds = 0;
};

std::optional<Span> parse_span(const std::string& text) {
  std::istringstream in(text);
  std::string num, unit, unit2;
  in >> num >> unit;
  if (!(in >> unit2)) unit2.clear();
  double mult = 1;
  if (!unit2.empty()) {
    if (unit == "k") {
      mult = 1e3;
    } else if (unit == "M") {
      mult = 1e6;
    } else {
      return std::nullopt;
    }
    unit = unit2;
  }
  double unit_s = 0;
  if (unit == "us")
    unit_s = 1e-6;
  else if (unit == "ms")
    unit_s = 1e-3;
  else if (unit == "s")
    unit_s = 1;
  else if (unit == "min")
    unit_s = 60;
  else if (unit == "h")
    unit_s = 3600;
  else if (unit == "days")
    unit_s = 86400;
  else if (unit == "years")
    unit_s = 365.25 * 86400;
  else
    return std::nullopt;
  const std::size_t dot = num.find('.');
  const int decimals = dot == std::string::npos ? 0 : static_cast<int>(num.size() - dot - 1);
  Span s;
  s.seconds = std::stod(num) * mult * unit_s;
  s.half_ulp_seconds = 0.5 * std::pow(10.0, -decimals) * mult * unit_s;
  return s;
}

TEST(WheelGeometry, HumanReadableSpansRoundCorrectly) {
  const std::vector<Row> rows = read_table();
  ASSERT_EQ(rows.size(), Wheel::kLevels);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.line);
    const double ticks = static_cast<double>(std::uint64_t{Wheel::kSlots} * granularity(r.level));
    const struct {
      const std::string& text;
      double tick_s;
    } cols[] = {{r.at_ms, 1e-3}, {r.at_us, 1e-6}};
    for (const auto& c : cols) {
      const std::optional<Span> span = parse_span(c.text);
      ASSERT_TRUE(span.has_value()) << "cannot read the span '" << c.text << "'";
      const double actual = ticks * c.tick_s;
      // Half a unit of the last printed digit, plus 0.1% for the length of a year (365 or 365.25 d).
      EXPECT_LE(std::fabs(span->seconds - actual), span->half_ulp_seconds + 1e-3 * actual)
          << "'" << c.text << "' vs " << actual << " s";
    }
  }
}

TEST(WheelGeometry, SmallestTickReachesPastTheEndOfNanos) {
  // "With the smallest legal tick (1 us) the top level reaches past the last nanosecond a Nanos
  // can hold": kSlots * 2^(kLevelBits * (kLevels-1)) ticks of kMinTick exceed Nanos::max().
  const long double top_reach_ns = static_cast<long double>(Wheel::kSlots) *
                                   static_cast<long double>(granularity(Wheel::kLevels - 1)) *
                                   static_cast<long double>(Wheel::kMinTick.count());
  EXPECT_GT(top_reach_ns, static_cast<long double>(Nanos::max().count()));
  // And one level fewer would not.
  EXPECT_LT(top_reach_ns / static_cast<long double>(granularity(1)),
            static_cast<long double>(Nanos::max().count()));
}

// TickDivider's multiply-and-correct quotient equals the divide, floor and rounded-up, at the legal
// ticks' ends, awkward ticks between, and values at multiples of the tick, just off them, near 0 and
// near the end of Nanos, plus a fixed-seed sample across the whole range.
TEST(TickDivider, MatchesDivisionForEveryKindOfTickAndValue) {
  constexpr std::uint64_t kMax = static_cast<std::uint64_t>(Nanos::max().count());
  const std::vector<std::uint64_t> ticks = {
      1000, 1001, 1024, 4095, 999'983, 1'000'000, 1U << 20U, 123'456'789, 3'600'000'000'000};
  std::mt19937_64 rng(20261125);
  for (const std::uint64_t tick : ticks) {
    const detail::TickDivider d(tick);
    ASSERT_EQ(d.max_tick(), kMax / tick);
    const auto check = [&](std::uint64_t n) {
      ASSERT_EQ(d.floor(n), n / tick) << "n=" << n << " tick=" << tick;
      const std::uint64_t ceil = n / tick + (n % tick != 0 ? 1 : 0);
      ASSERT_EQ(d.due(Nanos(static_cast<Nanos::rep>(n))), std::min(ceil, kMax / tick))
          << "n=" << n << " tick=" << tick;
    };
    for (std::uint64_t k = 0; k < 2000; ++k) {
      check(k);
      check(k * tick);
      check(k * tick + 1);
      if (k != 0) check(k * tick - 1);
      check(kMax - k);
    }
    for (int i = 0; i < 200'000; ++i) {
      const std::uint64_t n = rng() >> 1U;  // < 2^63
      check(n);
      check(n >> (rng() % 63));
    }
  }
  const detail::TickDivider d(1000);
  EXPECT_EQ(d.due(Nanos(0)), 0U);
  EXPECT_EQ(d.due(Nanos(-5)), 0U);
  EXPECT_EQ(d.due(Nanos::min()), 0U);
}

}  // namespace
}  // namespace tickwheel::test
