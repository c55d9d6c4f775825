// stress/svg.hpp — the lateness plot: a self-contained SVG (no script, no external font or file;
// generic font families only) drawn from the JSON report.
//
// Three panels, titled with the run's configuration:
//   - the lateness percentile curve: x is 1 / (1 - p) on a log axis, labelled 0%, 90%, 99%,
//     99.9%, ...; y is the lateness on a log axis. A flat curve is a tight distribution; the right
//     end is the maximum.
//   - lateness over time: the p99 and the maximum of each second's fires, and the p99 of the
//     control thread's wake-ups, log y.
//   - tick lag: the percentile curve of every pass's tick lag (all shards, from the engine's
//     on_pass hook: a pass's start behind the wake-up it planned) and of each shard's tick probe,
//     beside the control thread's (the platform's floor, dashed): the gap between them is what the
//     engine adds.
// A dashed grey line marks one tick in each, since a lateness below a tick is the rounding the tick
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
    double x;  // a percentile (0 .. 100, exclusive) or a time in seconds
    double ns;
  };
  struct Line {
    std::string name;  // the legend
    std::string colour;
    bool dashed = false;
    std::vector<Point> points;
  };
  std::vector<Line> lateness;  // percentile curves of the lateness panel
  std::vector<Line> seconds;   // per-second lines of the time panel (x: seconds)
  std::vector<Line> tick_lag;  // percentile curves of the tick-lag panel: passes, probes, the control
};

// Reads what the plot needs from a report written by report_json(); throws std::runtime_error
// naming a missing or mistyped member.
Plot plot_from_json(const JsonValue& report);
// Two reports in one plot (--compare): both lateness curves, both runs' p99 per second, both runs'
// passes, tick probes and control threads; a and b name them in the legends.
Plot compare_plot(const JsonValue& a, const JsonValue& b, const std::string& a_name,
                  const std::string& b_name);

void write_svg(const Plot& plot, std::ostream& out);

}  // namespace tickwheel::stress
