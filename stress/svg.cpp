// stress/svg.cpp — reading the plot's data from the JSON report, and drawing it.
#include "svg.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "format.hpp"

namespace tickwheel::stress {

namespace {

constexpr double kWidth = 1000;
constexpr double kHeight = 1120;
constexpr double kLeft = 90;              // room for the y labels
constexpr double kRight = 60;             // room for the last percentile label
constexpr std::size_t kConfigLine = 150;  // characters per line of the configuration

std::string escape(std::string_view s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

// "1ns", "10us", "100ms", "1s": the label of a power of ten of nanoseconds.
std::string decade_label(int decade) {
  static constexpr const char* kUnits[] = {"ns", "us", "ms", "s"};
  const int unit = std::clamp(decade / 3, 0, 3);
  const double v = std::pow(10.0, decade - 3 * unit);
  return format("%g%s", v, kUnits[unit]);
}

// The label of x = 10^k on the percentile axis: the percentile p with 1 / (1 - p) = 10^k.
std::string percentile_label(int k) {
  if (k == 0) return "0%";
  return format("%.*f%%", std::max(0, k - 2), 100.0 * (1.0 - std::pow(10.0, -k)));
}

std::string time_label(double ns) {
  if (ns >= 1e9) return format("%.3g s", ns / 1e9);
  if (ns >= 1e6) return format("%.3g ms", ns / 1e6);
  if (ns >= 1e3) return format("%.3g us", ns / 1e3);
  return format("%.3g ns", ns);
}

// Splits the configuration line at ", " or " | " so that no line is much longer than `width`.
std::vector<std::string> wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t next = text.find_first_of(",|", i);
    next = next == std::string::npos ? text.size() : next + 1;
    const std::string piece = text.substr(i, next - i);
    if (!line.empty() && line.size() + piece.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += line.empty() && !piece.empty() && piece[0] == ' ' ? piece.substr(1) : piece;
    i = next;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

// A panel with a log y axis of lateness in ns, from 10^lo to 10^hi.
struct Panel {
  double top;
  double height;
  int lo;
  int hi;
  double left = kLeft;
  double width = kWidth - kLeft - kRight;

  double y(double ns) const {
    const double d = std::log10(std::max(ns, std::pow(10.0, lo)));
    return top + height - (d - lo) / (hi - lo) * height;
  }
};

// The decades a set of lateness values needs: at least one, from the lowest non-zero to the top.
std::pair<int, int> decades(const std::vector<double>& values) {
  double lo = 0;
  double hi = 0;
  for (const double v : values) {
    if (v <= 0) continue;
    lo = lo == 0 ? v : std::min(lo, v);
    hi = std::max(hi, v);
  }
  if (hi == 0) return {2, 6};  // nothing recorded: 100 ns .. 1 ms, an empty frame
  int a = static_cast<int>(std::floor(std::log10(lo)));
  int b = static_cast<int>(std::ceil(std::log10(hi)));
  if (b <= a) b = a + 1;
  return {a, b};
}

void frame(std::string& s, const Panel& p, const std::string& title, const std::string& x_name) {
  s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">%s</text>\n", p.left,
              p.top - 10, escape(title).c_str());
  for (int d = p.lo; d <= p.hi; ++d) {
    const double y = p.y(std::pow(10.0, d));
    s += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", p.left, y,
                p.left + p.width, y);
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"end\">%s</text>\n", p.left - 6,
                y + 4, decade_label(d).c_str());
  }
  s += format(
      "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
      "stroke=\"#333333\"/>\n",
      p.left, p.top, p.width, p.height);
  s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\">%s</text>\n",
              p.left + p.width / 2, p.top + p.height + 36, escape(x_name).c_str());
  s += format(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 %.1f %.1f)\">lateness (log)</text>\n",
      24.0, p.top + p.height / 2, 24.0, p.top + p.height / 2);
}

void tick_line(std::string& s, const Panel& p, double tick_ns) {
  if (tick_ns <= 0 || tick_ns < std::pow(10.0, p.lo) || tick_ns > std::pow(10.0, p.hi)) return;
  const double y = p.y(tick_ns);
  s += format(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#888888\" "
      "stroke-dasharray=\"6 4\"/>\n",
      p.left, y, p.left + p.width, y);
  s += format(
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#666666\" text-anchor=\"end\">"
      "tick %s</text>\n",
      p.left + p.width - 4, y - 4, escape(time_label(tick_ns)).c_str());
}

void polyline(std::string& s, const std::vector<std::pair<double, double>>& xy, const std::string& colour,
              bool dashed) {
  if (xy.empty()) return;
  s += format("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\"%s points=\"", colour.c_str(),
              dashed ? " stroke-dasharray=\"5 3\"" : "");
  for (const auto& [x, y] : xy) s += format("%.1f,%.1f ", x, y);
  s += "\"/>\n";
}

void legend(std::string& s, const Panel& p, const std::vector<Plot::Line>& lines) {
  double y = p.top + 16;
  for (const Plot::Line& line : lines) {
    const double x = p.left + 12;
    s += format(
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"2\"%s/>"
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">%s</text>\n",
        x, y, x + 24, y, line.colour.c_str(), line.dashed ? " stroke-dasharray=\"5 3\"" : "", x + 30, y + 4,
        escape(line.name).c_str());
    y += 16;
  }
}

// A nice step for a linear axis of `span` units: 1, 2 or 5 times a power of ten, about 10 steps.
double linear_step(double span) {
  const double raw = std::max(span, 1e-9) / 10;
  const double base = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0}) {
    if (m * base >= raw) return m * base;
  }
  return 10 * base;
}

// Percentile curves on a log-log panel (lateness, or tick lag).
void percentile_panel(std::string& s, const std::vector<Plot::Line>& lines, double tick_ns, double top,
                      double height, const std::string& title) {
  std::vector<double> values;
  double x_max = 1;
  for (const Plot::Line& line : lines) {
    for (const Plot::Point& pt : line.points) {
      values.push_back(pt.ns);
      x_max = std::max(x_max, 1.0 / (1.0 - pt.x / 100.0));
    }
  }
  const auto [lo, hi] = decades(values);
  Panel p{top, height, lo, hi};
  frame(s, p, title, "percentile (log of 1 / (1 - p))");
  const int decades_x = std::max(1, static_cast<int>(std::ceil(std::log10(x_max) - 1e-9)));
  auto x_of = [&](double percentile) {
    return p.left + std::log10(1.0 / (1.0 - percentile / 100.0)) / decades_x * p.width;
  };
  for (int k = 0; k <= decades_x; ++k) {
    const double x = p.left + static_cast<double>(k) / decades_x * p.width;
    s += format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n", x, p.top, x,
                p.top + p.height);
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%s</text>\n", x,
                p.top + p.height + 16, percentile_label(k).c_str());
  }
  tick_line(s, p, tick_ns);
  bool any = false;
  for (const Plot::Line& line : lines) {
    std::vector<std::pair<double, double>> xy;
    for (const Plot::Point& pt : line.points) xy.emplace_back(x_of(pt.x), p.y(pt.ns));
    polyline(s, xy, line.colour, line.dashed);
    for (const auto& [x, y] : xy) {
      s += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"%s\"/>\n", x, y, line.colour.c_str());
    }
    any = any || !xy.empty();
  }
  if (!any) {
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">no samples</text>\n",
                p.left + p.width / 2, p.top + p.height / 2);
  }
  legend(s, p, lines);
}

void time_panel(std::string& s, const Plot& plot, double top, double height) {
  std::vector<double> values;
  double t_max = 1;
  for (const Plot::Line& line : plot.seconds) {
    for (const Plot::Point& pt : line.points) {
      values.push_back(pt.ns);
      t_max = std::max(t_max, pt.x);
    }
  }
  const auto [lo, hi] = decades(values);
  Panel p{top, height, lo, hi};
  frame(s, p, "Lateness over time, per second", "seconds since the producers started");
  const double step = linear_step(t_max);
  auto x_of = [&](double t) { return p.left + t / t_max * p.width; };
  for (double t = 0; t <= t_max + 1e-9; t += step) {
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" text-anchor=\"middle\">%g</text>\n", x_of(t),
                p.top + p.height + 16, t);
  }
  tick_line(s, p, plot.tick_ns);
  for (const Plot::Line& line : plot.seconds) {
    std::vector<std::pair<double, double>> xy;
    for (const Plot::Point& pt : line.points) xy.emplace_back(x_of(pt.x), p.y(pt.ns));
    polyline(s, xy, line.colour, line.dashed);
  }
  legend(s, p, plot.seconds);
}

// The points of a percentile curve written by report.cpp's curve_json().
std::vector<Plot::Point> curve_of(const JsonValue& curve) {
  std::vector<Plot::Point> points;
  for (const JsonValue& pt : curve.array())
    points.push_back(Plot::Point{pt.at("percentile").number(), pt.at("ns").number()});
  return points;
}

// One per-second member of the series, as a line.
std::vector<Plot::Point> per_second(const JsonValue& report, std::string_view key) {
  std::vector<Plot::Point> points;
  for (const JsonValue& sec : report.at("series").array())
    points.push_back(Plot::Point{sec.at("t_s").number(), sec.at(key).number()});
  return points;
}

constexpr std::array<const char*, 6> kShardColours{"#2e8b57", "#8e44ad", "#d35400",
                                                   "#16a085", "#7f8c8d", "#b7950b"};

// The tick-lag panel's lines of one report: every pass of every shard (from the engine's on_pass
// hook; a report written before the hook existed has none), the probes of each shard (at most six,
// then the rest together) and the control thread, prefixed with `who` when two reports share the
// panel (then in `colour`, the passes in `light`).
void lag_lines(std::vector<Plot::Line>& out, const JsonValue& report, const std::string& who,
               const char* colour, const char* light) {
  if (const JsonValue* passes = report.find("passes"); passes != nullptr) {
    out.push_back(Plot::Line{who + "every pass, every shard: start - planned wake-up",
                             light != nullptr ? light : "#1f5fa8", false, curve_of(passes->at("curve"))});
  }
  const JsonValue& lag = report.at("tick_lag");
  const std::vector<JsonValue>& shards = lag.at("shards").array();
  if (colour == nullptr && shards.size() <= kShardColours.size()) {
    for (std::size_t i = 0; i < shards.size(); ++i) {
      out.push_back(Plot::Line{format("tick probe, shard %zu", i), kShardColours[i], false,
                               curve_of(shards[i].at("curve"))});
    }
  } else {
    out.push_back(Plot::Line{who + "tick probes, every shard", colour != nullptr ? colour : "#2e8b57", false,
                             curve_of(lag.at("curve"))});
  }
  const JsonValue& control = report.at("control");
  if (control.at("ran").boolean()) {
    out.push_back(Plot::Line{who + "control thread (the platform's floor)",
                             colour != nullptr ? colour : "#555555", true, curve_of(control.at("curve"))});
  }
}

}  // namespace

Plot plot_from_json(const JsonValue& report) {
  Plot plot;
  const JsonValue& fire = report.at("fire");
  const JsonValue& lateness = fire.at("lateness_ns");
  plot.title = format("tickwheel-stress: lateness of %.0f fires (%s)", fire.at("count").number(),
                      report.at("ok").boolean() ? "accounting PASS" : "accounting FAIL");
  plot.config = report.at("config").string();
  plot.summary =
      "p50 " + time_label(lateness.at("p50").number()) + ", p99 " + time_label(lateness.at("p99").number()) +
      ", p99.9 " + time_label(lateness.at("p99_9").number()) + ", p99.99 " +
      time_label(lateness.at("p99_99").number()) + ", max " + time_label(lateness.at("max").number()) +
      format(", over %.1f s", report.at("run").at("seconds").number());
  plot.tick_ns = report.at("options").at("tick_ns").number();
  plot.lateness.push_back(Plot::Line{"every fire: callback start - deadline", "#1f5fa8", false,
                                     curve_of(fire.at("lateness_curve"))});
  plot.seconds.push_back(
      Plot::Line{"max of the second", "#c0392b", false, per_second(report, "lateness_max_ns")});
  plot.seconds.push_back(
      Plot::Line{"p99 of the second", "#1f5fa8", false, per_second(report, "lateness_p99_ns")});
  if (report.at("control").at("ran").boolean()) {
    plot.seconds.push_back(Plot::Line{"control thread p99 of the second", "#555555", true,
                                      per_second(report, "control_p99_ns")});
  }
  lag_lines(plot.tick_lag, report, "", nullptr, nullptr);
  return plot;
}

Plot compare_plot(const JsonValue& a, const JsonValue& b, const std::string& a_name,
                  const std::string& b_name) {
  Plot plot;
  plot.title = "tickwheel-stress: A " + a_name + " against B " + b_name;
  plot.config = "A: " + a.at("config").string() + " | B: " + b.at("config").string();
  const auto p99 = [](const JsonValue& r) {
    return time_label(r.at("fire").at("lateness_ns").at("p99").number());
  };
  plot.summary = "lateness p99: A " + p99(a) + ", B " + p99(b);
  plot.tick_ns = a.at("options").at("tick_ns").number();
  plot.lateness.push_back(
      Plot::Line{"A: every fire", "#1f5fa8", false, curve_of(a.at("fire").at("lateness_curve"))});
  plot.lateness.push_back(
      Plot::Line{"B: every fire", "#c0392b", false, curve_of(b.at("fire").at("lateness_curve"))});
  plot.seconds.push_back(
      Plot::Line{"A: p99 of the second", "#1f5fa8", false, per_second(a, "lateness_p99_ns")});
  plot.seconds.push_back(
      Plot::Line{"B: p99 of the second", "#c0392b", false, per_second(b, "lateness_p99_ns")});
  lag_lines(plot.tick_lag, a, "A: ", "#1f5fa8", "#85c1e9");
  lag_lines(plot.tick_lag, b, "B: ", "#c0392b", "#f1948a");
  return plot;
}

void write_svg(const Plot& plot, std::ostream& out) {
  std::string s;
  s += format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
      "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\">\n",
      kWidth, kHeight, kWidth, kHeight);
  s += "<title>" + escape(plot.title) + "</title>\n";
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += format("<text x=\"%.1f\" y=\"26\" font-size=\"18\" font-weight=\"bold\">%s</text>\n", kLeft - 60,
              escape(plot.title).c_str());
  double y = 44;
  for (const std::string& line : wrap(plot.config, kConfigLine)) {
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\" fill=\"#444444\">%s</text>\n", kLeft - 60, y,
                escape(line).c_str());
    y += 14;
  }
  s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"12\">%s</text>\n", kLeft - 60, y + 4,
              escape(plot.summary).c_str());
  percentile_panel(s, plot.lateness, plot.tick_ns, 140, 260,
                   "Lateness by percentile (callback start - deadline)");
  time_panel(s, plot, 470, 220);
  percentile_panel(
      s, plot.tick_lag, plot.tick_ns, 760, 280,
      "Tick lag by percentile: every pass and the tick probes against the control thread (the floor)");
  s += "</svg>\n";
  out << s;
}

}  // namespace tickwheel::stress
