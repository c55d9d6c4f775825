// stress/compare.hpp — `tickwheel-stress --compare A.json B.json`: two runs side by side, the way a
// latency engineer compares a build, a kernel setting or a placement before and after.
//
// Prints, for each run and their difference: the lateness percentiles (every fire, past the tick),
// the tick probes, the control thread and what the engine adds above it; throughput (schedules,
// cancels and fires per second); the accounting verdicts; every platform and option field whose
// value differs; and each run's placement warnings. With an SVG path it draws both runs in one plot
// (svg.hpp, compare_plot()). Reads reports written by this version's report_json(); a report that
// lacks a field is refused with the field's name.
#pragma once

#include <ostream>
#include <string>

namespace tickwheel::stress {

// Returns the exit status: 0, or 2 if a report cannot be read or written (the reason on `err`).
int compare_reports(const std::string& a_path, const std::string& b_path, const std::string& svg_path,
                    std::ostream& out, std::ostream& err);

}  // namespace tickwheel::stress
