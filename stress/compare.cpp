// stress/compare.cpp — the side-by-side text and the two-run plot.
#include "compare.hpp"

#include <array>
#include <cmath>
#include <exception>
#include <fstream>
#include <sstream>
#include <string_view>
#include <utility>

#include "format.hpp"
#include "json.hpp"
#include "svg.hpp"

namespace tickwheel::stress {
namespace {

constexpr std::array<std::string_view, 7> kKeys{"p50", "p90", "p99", "p99_9", "p99_99", "max", "mean"};

JsonValue load(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse_json(text.str());
}

// "     12.3      45.6    +33.3   3.71x"
std::string row(double a, double b, double scale) {
  // A ratio only between two positive figures (a difference of percentiles may be negative).
  const bool ratio = a > 0 && b >= 0;
  return format("%12.1f %12.1f %+12.1f %8s", a / scale, b / scale, (b - a) / scale,
                ratio ? format("%.2fx", b / a).c_str() : "-");
}

void histogram_rows(std::string& s, const std::string& title, const JsonValue& a, const JsonValue& b) {
  s += title + " (us)\n";
  for (const std::string_view key : kKeys) {
    s += format("  %-8.*s", static_cast<int>(key.size()), key.data()) +
         row(a.at(key).number(), b.at(key).number(), 1e3) + "\n";
  }
}

// Every scalar member of two objects whose values differ, "key: a | b".
void differences(std::string& s, const std::string& section, const JsonValue& a, const JsonValue& b) {
  const auto text = [](const JsonValue& v) -> std::string {
    switch (v.kind()) {
      case JsonValue::Kind::string: return v.string();
      case JsonValue::Kind::number: return format("%g", v.number());
      case JsonValue::Kind::boolean: return v.boolean() ? "true" : "false";
      case JsonValue::Kind::null: return "null";
      case JsonValue::Kind::array: {
        std::string out;
        for (const JsonValue& e : v.array())
          out += (out.empty() ? "" : "; ") +
                 (e.kind() == JsonValue::Kind::string ? e.string() : std::string("..."));
        return "[" + out + "]";
      }
      case JsonValue::Kind::object: return "{...}";
    }
    return "?";
  };
  for (const auto& [key, va] : a.members()) {
    // Nested objects and per-thread arrays differ in every run; the lists that describe the machine
    // (SMT siblings, warnings) are compared whole.
    if (va.kind() == JsonValue::Kind::object) continue;
    if (va.kind() == JsonValue::Kind::array && key != "smt_siblings" && key != "warnings") continue;
    const JsonValue* vb = b.find(key);
    const std::string ta = text(va);
    const std::string tb = vb != nullptr ? text(*vb) : std::string("(absent)");
    const bool always = key == "loadavg_start" || key == "loadavg_end";  // the load is context
    if (ta != tb || always)
      s += format("  %s.%s: %s | %s\n", section.c_str(), key.c_str(), ta.c_str(), tb.c_str());
  }
}

std::string compare_text(const JsonValue& a, const JsonValue& b, const std::string& a_path,
                         const std::string& b_path) {
  std::string s;
  s += "compare     A " + a_path + "\n            B " + b_path + "\n";
  s += "A           " + a.at("config").string() + "\n";
  s += "B           " + b.at("config").string() + "\n";
  s += format("%-10s %12s %12s %12s %8s\n", "", "A", "B", "B - A", "B / A");
  const JsonValue& fa = a.at("fire");
  const JsonValue& fb = b.at("fire");
  histogram_rows(s, "lateness, callback start - deadline, every fire", fa.at("lateness_ns"),
                 fb.at("lateness_ns"));
  histogram_rows(s, "past the tick, every fire", fa.at("lateness_past_tick_ns"),
                 fb.at("lateness_past_tick_ns"));
  histogram_rows(s, "tick probes, every shard", a.at("tick_lag").at("lag_ns"), b.at("tick_lag").at("lag_ns"));
  // Reports written before the on_pass hook have no passes section: the rows only when both have it.
  if (const JsonValue* pa = a.find("passes"), *pb = b.find("passes"); pa != nullptr && pb != nullptr) {
    histogram_rows(s, "every pass's tick lag, every shard", pa->at("tick_lag_ns"), pb->at("tick_lag_ns"));
  }
  const bool controls = a.at("control").at("ran").boolean() && b.at("control").at("ran").boolean();
  if (controls) {
    histogram_rows(s, "control thread (the platform's floor)", a.at("control").at("lateness_ns"),
                   b.at("control").at("lateness_ns"));
    s += "tick probe - control (us): what the engine adds above the platform\n";
    const auto& ra = a.at("floor").array();
    const auto& rb = b.at("floor").array();
    for (std::size_t i = 0; i < ra.size() && i < rb.size(); ++i) {
      s +=
          format("  %-8s", ra[i].at("percentile").string().c_str()) +
          row(ra[i].at("probe_minus_control_ns").number(), rb[i].at("probe_minus_control_ns").number(), 1e3) +
          "\n";
    }
  } else {
    s += "control thread: not run in both, no floor to compare\n";
  }
  s += "throughput (per second)\n";
  for (const auto& [section, label] : std::array<std::pair<const char*, const char*>, 3>{
           {{"schedule", "schedule"}, {"cancel", "cancel"}, {"fire", "fire"}}}) {
    s += format("  %-8s", label) +
         row(a.at(section).at("per_second").number() * 1e3, b.at(section).at("per_second").number() * 1e3,
             1e3) +
         "\n";
  }
  s += format("accounting  A %s, B %s\n", a.at("ok").boolean() ? "PASS" : "FAIL",
              b.at("ok").boolean() ? "PASS" : "FAIL");
  s += "differences (A | B)\n";
  std::string diff;
  differences(diff, "options", a.at("options"), b.at("options"));
  differences(diff, "platform", a.at("platform"), b.at("platform"));
  differences(diff, "placement", a.at("placement"), b.at("placement"));
  s += diff.empty() ? "  none\n" : diff;
  for (const auto& [name, r] :
       std::array<std::pair<const char*, const JsonValue*>, 2>{{{"A", &a}, {"B", &b}}}) {
    for (const JsonValue& w : r->at("placement").at("warnings").array()) {
      s += std::string("WARNING     ") + name + ": " + w.string() + "\n";
    }
  }
  return s;
}

}  // namespace

int compare_reports(const std::string& a_path, const std::string& b_path, const std::string& svg_path,
                    std::ostream& out, std::ostream& err) {
  try {
    const JsonValue a = load(a_path);
    const JsonValue b = load(b_path);
    const std::string text = compare_text(a, b, a_path, b_path);
    if (!svg_path.empty()) {
      std::ofstream svg(svg_path, std::ios::trunc);
      write_svg(compare_plot(a, b, a_path, b_path), svg);
      svg.close();
      if (!svg) throw std::runtime_error("could not write the SVG plot to " + svg_path);
    }
    out << text;
    if (!svg_path.empty()) out << "files       SVG: " << svg_path << "\n";
    out << std::flush;
    return 0;
  } catch (const std::exception& e) {
    err << "tickwheel-stress: --compare: " << e.what() << '\n';
    return 2;
  }
}

}  // namespace tickwheel::stress
