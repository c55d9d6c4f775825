// stress/hlog.hpp — the HdrHistogram interval log (format 1.3), so that HdrHistogram's own tools
// (HistogramLogProcessor, HistogramLogAnalyzer, hdrh in Python) read a run's histograms per second.
//
// Why it is cheap: Histogram's layout is exactly HdrHistogram's with 2 significant digits and a
// lowest discernible value of 1 (256 exact values, then 128 sub-buckets per power of two), so a
// Histogram is encoded by writing its counts as they are: HdrHistogram's V2 encoding (a 40-byte
// header, then the counts up to the maximum's bucket as ZigZag LEB128, a run of zeros as one
// negative count), compressed by zlib (zlib1g-dev) as HdrHistogram's own writer does, and base64.
//
// Values are nanoseconds; Interval_Max is written in milliseconds, as HdrHistogram's writer does
// with its default unit ratio of 10^6.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "histogram.hpp"

namespace tickwheel::stress {

class HlogWriter {
 public:
  // start_epoch_s: the run's start in seconds since the Unix epoch (the log's StartTime); the
  // intervals' timestamps are seconds since it.
  explicit HlogWriter(double start_epoch_s);
  // Appends one interval line: "Tag=tag," (none if tag is empty), start, length, max in ms, data.
  void interval(std::string_view tag, double start_s, double length_s, const Histogram& h);
  const std::string& text() const noexcept { return text_; }

 private:
  std::string text_;
};

}  // namespace tickwheel::stress
