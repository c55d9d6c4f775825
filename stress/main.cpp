// stress/main.cpp — tickwheel-stress: the command line around the driver, and the files.
//
// Runs the stress test (or, with --svg-from, only renders a plot from a JSON report; with --compare,
// only compares two reports), writes the JSON report, has stress/plot.py print the text report on
// stdout and draw the SVG plot from it (the status line goes to stderr while it runs), says where
// the files went, and turns the accounting verdict into the exit status.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "driver.hpp"
#include "options.hpp"
#include "report.hpp"

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

// Runs stress/plot.py with `args` (see there), on this process's stdout and stderr; returns its
// exit status, or kExitSetupFailed if it could not be started.
int run_plot(std::vector<std::string> args) {
  args.insert(args.begin(), TICKWHEEL_STRESS_PLOT);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::cout << std::flush;
  pid_t pid = 0;
  if (const int err = posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ); err != 0) {
    std::cerr << "tickwheel-stress: cannot run " << argv[0] << ": " << std::strerror(err) << '\n';
    return kExitSetupFailed;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : kExitSetupFailed;
}

// A temporary copy of the JSON report, for plot.py when no --json file was written.
std::string temporary_json(const std::string& json) {
  std::string path = (std::filesystem::temp_directory_path() / "tickwheel-stress-XXXXXX.json").string();
  const int fd = mkstemps(path.data(), 5);
  if (fd < 0) throw std::runtime_error("cannot create a temporary file for the plot's JSON");
  close(fd);
  std::ofstream(path, std::ios::trunc) << json;
  return path;
}

// The text report on stdout and the plot, both drawn by stress/plot.py from the JSON report: the
// --json file when it was written, else a temporary copy. False when the text could not be printed
// or a plot asked for (--svg given) could not be drawn; `plotted` says whether the SVG was written.
bool print_and_plot(const Options& o, const std::string& json, bool json_written, bool& plotted) {
  constexpr int kNoMatplotlib = 3;  // plot.py: the text printed, no plot
  const std::string from = json_written ? o.json_path : temporary_json(json);
  std::vector<std::string> args{"stress", from, "--text"};
  if (!o.svg_path.empty()) args.insert(args.end(), {"--svg", o.svg_path});
  const int status = run_plot(args);
  if (!json_written) std::filesystem::remove(from);
  plotted = status == 0 && !o.svg_path.empty();
  if (status == 0) return true;
  if (status != kNoMatplotlib) {
    std::cerr << "tickwheel-stress: no text report: stress/plot.py failed (above)\n";
    return false;
  }
  std::cerr << "tickwheel-stress: no SVG plot"
            << (o.svg_required ? "\n" : " (the default one: not an error)\n");
  return !o.svg_required;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tickwheel::stress;
  const CommandLine cl = parse_command_line(argc, argv);
  if (cl.exit_code >= 0) return cl.exit_code;
  const Options& o = cl.options;

  try {
    if (!o.compare.empty()) {
      std::vector<std::string> args{"compare", o.compare[0], o.compare[1]};
      if (!o.svg_path.empty()) args.insert(args.end(), {"--svg", o.svg_path});
      return run_plot(args) == 0 ? 0 : kExitSetupFailed;
    }
    if (!o.svg_from.empty())
      return run_plot({"stress", o.svg_from, "--svg", o.svg_path}) == 0 ? 0 : kExitSetupFailed;

    std::ofstream json_file;
    std::ofstream hlog_file;
    if (!open_output(json_file, o.json_path, "JSON report") ||
        !open_output(hlog_file, o.hlog_path, "HdrHistogram log")) {
      return kExitSetupFailed;
    }

    const Report report = run_stress(o, std::cerr, isatty(STDERR_FILENO) != 0);
    const std::string json = report_json(report);
    bool written = true;
    if (json_file.is_open()) {
      json_file << json;
      written = finish_output(json_file, o.json_path, "JSON report");
    }
    bool plotted = false;
    written = print_and_plot(o, json, json_file.is_open() && written, plotted) && written;
    if (hlog_file.is_open()) {
      hlog_file << report.hlog;
      written = finish_output(hlog_file, o.hlog_path, "HdrHistogram log") && written;
    }
    std::cout << "files       JSON: " << (o.json_path.empty() ? "none" : absolute(o.json_path))
              << "; SVG: " << (plotted ? absolute(o.svg_path) : "none")
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
