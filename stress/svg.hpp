// stress/svg.hpp — the lateness plot: a self-contained SVG (no script, no external font or file;
// generic font families only) drawn from the JSON report.
//
// Two panels, titled with the run's configuration:
//   - the lateness percentile curve: x is 1 / (1 - p) on a log axis, labelled 0%, 90%, 99%,
//     99.9%, ...; y is the lateness on a log axis. A flat curve is a tight distribution; the right
//     end is the maximum.
//   - lateness over time: the p99 and the maximum of each second's fires, log y.
// A dashed line marks one tick in both, since a lateness below a tick is the rounding the tick
// promises and one above it is the engine's (or the machine's) doing.
//
// The program draws its plot by parsing the JSON document it has just written, and --svg-from
// draws one from a JSON file through the same two calls, so a test can render a fixed report.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "json.hpp"

namespace tickwheel::stress {

struct Plot {
  std::string title;
  std::string config;   // the run's configuration line, wrapped under the title
  std::string summary;  // the headline percentiles
  double tick_ns = 0;
  struct Point {
    double percentile;  // 0 .. 100 (exclusive)
    double ns;
  };
  std::vector<Point> curve;
  struct Second {
    double t_s;
    double p99_ns;
    double max_ns;
  };
  std::vector<Second> seconds;
};

// Reads what the plot needs from a report written by report_json(); throws std::runtime_error
// naming a missing or mistyped member.
Plot plot_from_json(const JsonValue& report);

void write_svg(const Plot& plot, std::ostream& out);

}  // namespace tickwheel::stress
