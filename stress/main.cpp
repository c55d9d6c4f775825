// stress/main.cpp — tickwheel-stress: the command line (CLI11) around the stress driver.
//
// Parses the options into an Options value (whose member initialisers are the defaults --help
// shows), runs the driver, prints the report on stdout (status lines go to stderr while it runs),
// optionally writes the JSON dump, and turns the accounting verdict into the exit status.
#include <CLI/CLI.hpp>

#include <cstdint>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>
#include <string>

#include "driver.hpp"
#include "options.hpp"
#include "report.hpp"

namespace {

constexpr int kExitRuleBroken = 1;
constexpr int kExitSetupFailed = 2;

}  // namespace

int main(int argc, char** argv) {
  using tickwheel::stress::Options;
  using tickwheel::stress::WaitMode;
  using tickwheel::stress::format_duration;

  Options o;
  CLI::App app{
      "tickwheel-stress: drives one tickwheel::Wheel against the real monotonic clock with a large\n"
      "population of timers, cancels a share of them while they are pending, and reports schedule\n"
      "and cancel throughput, lateness percentiles, tick lag, memory and exactly-once accounting.",
      "tickwheel-stress"};
  app.footer(
      "=VALUE after an option is its default. Durations take a unit: ns, us, ms, s, min or h\n"
      "(e.g. 100us, 20s).\n"
      "Status lines go to stderr once a second; the report goes to stdout.\n"
      "Exit status: 0 if every timer fired exactly once or was cancelled and no rule broke;\n"
      "1 if an accounting rule broke (each one is listed in the report); 2 if the wheel or the\n"
      "system refused the setup or the JSON file could not be written; CLI11's own codes for a\n"
      "malformed command line.");

  const std::map<std::string, std::int64_t> units{{"ns", 1},
                                                  {"us", 1'000},
                                                  {"ms", 1'000'000},
                                                  {"s", 1'000'000'000},
                                                  {"min", 60'000'000'000},
                                                  {"h", 3'600'000'000'000}};
  CLI::AsNumberWithUnit duration(
      units,
      CLI::AsNumberWithUnit::Options(CLI::AsNumberWithUnit::CASE_SENSITIVE |
                                     CLI::AsNumberWithUnit::UNIT_REQUIRED),
      "UNIT");
  duration.description("");  // the type name and the footer say it: DURATION, e.g. 100us
  constexpr std::int64_t kDay = 86'400'000'000'000;
  const auto up_to_a_day = CLI::Range(std::int64_t{0}, kDay).description("in [0ns, 24h]");

  app.add_option("--timers", o.timers, "Timers to schedule in the run")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{0xFFFF'FFFF}));
  app.add_option("--cancel-share", o.cancel_share,
                 "Probability that a timer is cancelled while pending, at a time uniform between "
                 "its schedule and its deadline")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--delay-min", o.delay_min_ns, "Shortest delay; delays are uniform in [min, max]")
      ->type_name("DURATION")
      ->transform(duration)
      ->check(up_to_a_day)
      ->default_str(format_duration(o.delay_min_ns));
  app.add_option("--delay-max", o.delay_max_ns,
                 "Longest delay; with all timers scheduled up front the run lasts about this long")
      ->type_name("DURATION")
      ->transform(duration)
      ->check(up_to_a_day)
      ->default_str(format_duration(o.delay_max_ns));
  app.add_option("--tick", o.tick_ns, "Wheel tick (resolution), from 1us to 1h")
      ->type_name("DURATION")
      ->transform(duration)
      ->default_str(format_duration(o.tick_ns));
  std::string wait_name(name_of(o.wait));
  app.add_option("--wait", wait_name,
                 "sleep: clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) until next_deadline() (or "
                 "the next paced schedule or status line) with timer slack set to 1 ns; "
                 "spin: busy-poll advance()")
      ->type_name("MODE")
      ->check(CLI::IsMember({std::string(name_of(WaitMode::sleep)),
                             std::string(name_of(WaitMode::spin))}))
      ->capture_default_str();
  app.add_option("--schedule-rate", o.schedule_rate,
                 "Timers scheduled per second; 0 = as fast as possible (all up front)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batch", o.batch,
                 "Most schedule or cancel calls made between two advance() passes, each batch "
                 "timed as a whole")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000}));
  app.add_option("--seed", o.seed, "Seeds the delays and the cancel picks (not the timing)")
      ->capture_default_str();
  app.add_option("--give-up", o.give_up_ns,
                 "Fail the run if timers are still pending this long after the last deadline")
      ->type_name("DURATION")
      ->transform(duration)
      ->check(up_to_a_day)
      ->default_str(format_duration(o.give_up_ns));
  app.add_option("--json", o.json_path, "Also write the report as JSON to this file (default: none)");
  app.add_flag("--quiet", o.quiet, "No status lines while running");

  try {
    app.parse(argc, argv);
    if (o.delay_min_ns > o.delay_max_ns) {
      throw CLI::ValidationError("--delay-min", format_duration(o.delay_min_ns) +
                                                    " is longer than --delay-max " +
                                                    format_duration(o.delay_max_ns));
    }
    o.wait = wait_name == name_of(WaitMode::spin) ? WaitMode::spin : WaitMode::sleep;
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  // Open the JSON file before the run, so a bad path fails at once rather than after it.
  std::ofstream file;
  if (!o.json_path.empty()) {
    file.open(o.json_path, std::ios::trunc);
    if (!file) {
      std::cerr << "tickwheel-stress: cannot open " << o.json_path << " for the JSON report\n";
      return kExitSetupFailed;
    }
  }

  try {
    const tickwheel::stress::Report report = tickwheel::stress::run_stress(o, std::cerr);
    tickwheel::stress::print_report(report, std::cout);
    if (file.is_open()) {
      tickwheel::stress::write_json(report, file);
      file.close();
      if (!file) {
        std::cerr << "tickwheel-stress: could not write the JSON report to " << o.json_path << '\n';
        return kExitSetupFailed;
      }
    }
    if (!report.ok()) {
      std::cerr << "tickwheel-stress: FAIL: " << report.failures.size()
                << " accounting rule(s) broken (listed in the report above)\n";
      return kExitRuleBroken;
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "tickwheel-stress: " << e.what() << '\n';
    return kExitSetupFailed;
  }
}
