// stress/main.cpp — tickwheel-stress: the command line around the driver, and the files.
//
// Runs the stress test (or, with --svg-from, only renders a plot from a JSON report; with --compare,
// only compares two reports, see compare.hpp), prints the
// report on stdout (the status line goes to stderr while it runs), writes the JSON report and the
// SVG plot (the plot is drawn from the JSON, see svg.hpp), says where they went, and turns the
// accounting verdict into the exit status.
#include <unistd.h>

#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "compare.hpp"
#include "driver.hpp"
#include "json.hpp"
#include "options.hpp"
#include "report.hpp"
#include "svg.hpp"

namespace {

constexpr int kExitRuleBroken = 1;
constexpr int kExitSetupFailed = 2;

using tickwheel::stress::Options;

std::string absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::absolute(path, ec);
  return ec ? path : p.string();
}

// Opens each output before the run, so that a bad path fails at once rather than after it.
bool open_output(std::ofstream& file, const std::string& path, const char* what) {
  if (path.empty()) return true;
  file.open(path, std::ios::trunc);
  if (!file) std::cerr << "tickwheel-stress: cannot open " << path << " for the " << what << '\n';
  return static_cast<bool>(file);
}

bool finish_output(std::ofstream& file, const std::string& path, const char* what) {
  file.close();
  if (!file) std::cerr << "tickwheel-stress: could not write the " << what << " to " << path << '\n';
  return static_cast<bool>(file);
}

int render_only(const Options& o) {
  if (o.svg_path.empty()) {
    std::cerr << "tickwheel-stress: --svg-from needs --svg FILE to write to\n";
    return kExitSetupFailed;
  }
  std::ifstream in(o.svg_from);
  std::stringstream text;
  text << in.rdbuf();
  std::ofstream svg;
  if (!in || !open_output(svg, o.svg_path, "SVG plot")) return kExitSetupFailed;
  try {
    write_svg(plot_from_json(tickwheel::stress::parse_json(text.str())), svg);
  } catch (const std::exception& e) {
    std::cerr << "tickwheel-stress: " << o.svg_from << ": " << e.what() << '\n';
    return kExitSetupFailed;
  }
  if (!finish_output(svg, o.svg_path, "SVG plot")) return kExitSetupFailed;
  std::cout << "SVG: " << absolute(o.svg_path) << " (from " << o.svg_from << ")\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tickwheel::stress;
  const CommandLine cl = parse_command_line(argc, argv);
  if (cl.exit_code >= 0) return cl.exit_code;
  const Options& o = cl.options;

  try {
    if (!o.compare.empty())
      return compare_reports(o.compare[0], o.compare[1], o.svg_path, std::cout, std::cerr);
    if (!o.svg_from.empty()) return render_only(o);

    std::ofstream json_file;
    std::ofstream svg_file;
    std::ofstream hlog_file;
    if (!open_output(json_file, o.json_path, "JSON report") ||
        !open_output(svg_file, o.svg_path, "SVG plot") ||
        !open_output(hlog_file, o.hlog_path, "HdrHistogram log")) {
      return kExitSetupFailed;
    }

    const Report report = run_stress(o, std::cerr, isatty(STDERR_FILENO) != 0);
    print_report(report, std::cout);

    const std::string json = report_json(report);
    bool written = true;
    if (json_file.is_open()) {
      json_file << json;
      written = finish_output(json_file, o.json_path, "JSON report") && written;
    }
    if (svg_file.is_open()) {
      write_svg(plot_from_json(parse_json(json)), svg_file);
      written = finish_output(svg_file, o.svg_path, "SVG plot") && written;
    }
    if (hlog_file.is_open()) {
      hlog_file << report.hlog;
      written = finish_output(hlog_file, o.hlog_path, "HdrHistogram log") && written;
    }
    std::cout << "files       JSON: " << (o.json_path.empty() ? "none" : absolute(o.json_path))
              << "; SVG: " << (o.svg_path.empty() ? "none" : absolute(o.svg_path))
              << "; HdrHistogram log: " << (o.hlog_path.empty() ? "none" : absolute(o.hlog_path)) << '\n';

    if (!report.ok()) {
      std::cerr << "tickwheel-stress: FAIL: " << report.failures.size()
                << " accounting rule(s) broken (listed in the report above)\n";
      return kExitRuleBroken;
    }
    return written ? 0 : kExitSetupFailed;
  } catch (const std::exception& e) {
    std::cerr << "tickwheel-stress: " << e.what() << '\n';
    return kExitSetupFailed;
  }
}
