// stress/svg.cpp — reading the plot's data from the JSON report, and drawing it.
#include "svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string_view>

#include "format.hpp"

namespace tickwheel::stress {

namespace {

constexpr double kWidth = 1000;
constexpr double kHeight = 820;
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

void polyline(std::string& s, const std::vector<std::pair<double, double>>& xy, const char* colour) {
  if (xy.empty()) return;
  s += format("<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.8\" points=\"", colour);
  for (const auto& [x, y] : xy) s += format("%.1f,%.1f ", x, y);
  s += "\"/>\n";
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

void curve_panel(std::string& s, const Plot& plot, double top, double height) {
  std::vector<double> values;
  for (const Plot::Point& pt : plot.curve) values.push_back(pt.ns);
  const auto [lo, hi] = decades(values);
  Panel p{top, height, lo, hi};
  frame(s, p, "Lateness by percentile (callback start - deadline)", "percentile (log of 1 / (1 - p))");
  double x_max = 1;
  for (const Plot::Point& pt : plot.curve) x_max = std::max(x_max, 1.0 / (1.0 - pt.percentile / 100.0));
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
  tick_line(s, p, plot.tick_ns);
  std::vector<std::pair<double, double>> xy;
  for (const Plot::Point& pt : plot.curve) xy.emplace_back(x_of(pt.percentile), p.y(pt.ns));
  polyline(s, xy, "#1f5fa8");
  for (const auto& [x, y] : xy)
    s += format("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2\" fill=\"#1f5fa8\"/>\n", x, y);
  if (plot.curve.empty()) {
    s += format("<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\">no fires</text>\n",
                p.left + p.width / 2, p.top + p.height / 2);
  }
}

void time_panel(std::string& s, const Plot& plot, double top, double height) {
  std::vector<double> values;
  double t_max = 1;
  for (const Plot::Second& sec : plot.seconds) {
    values.push_back(sec.p99_ns);
    values.push_back(sec.max_ns);
    t_max = std::max(t_max, sec.t_s);
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
  std::vector<std::pair<double, double>> p99;
  std::vector<std::pair<double, double>> max;
  for (const Plot::Second& sec : plot.seconds) {
    p99.emplace_back(x_of(sec.t_s), p.y(sec.p99_ns));
    max.emplace_back(x_of(sec.t_s), p.y(sec.max_ns));
  }
  polyline(s, max, "#c0392b");
  polyline(s, p99, "#1f5fa8");
  const double lx = p.left + 12;
  const double ly = p.top + 16;
  s += format(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#c0392b\" stroke-width=\"2\"/>"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">max of the second</text>\n",
      lx, ly, lx + 24, ly, lx + 30, ly + 4);
  s += format(
      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1f5fa8\" stroke-width=\"2\"/>"
      "<text x=\"%.1f\" y=\"%.1f\" font-size=\"11\">p99 of the second</text>\n",
      lx, ly + 16, lx + 24, ly + 16, lx + 30, ly + 20);
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
  for (const JsonValue& pt : fire.at("lateness_curve").array()) {
    plot.curve.push_back(Plot::Point{pt.at("percentile").number(), pt.at("ns").number()});
  }
  for (const JsonValue& sec : report.at("series").array()) {
    plot.seconds.push_back(Plot::Second{sec.at("t_s").number(), sec.at("lateness_p99_ns").number(),
                                        sec.at("lateness_max_ns").number()});
  }
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
  curve_panel(s, plot, 140, 270);
  time_panel(s, plot, 500, 250);
  s += "</svg>\n";
  out << s;
}

}  // namespace tickwheel::stress
