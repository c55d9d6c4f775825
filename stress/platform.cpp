// stress/platform.cpp — reading the machine's facts from /proc and /sys, each one optional.
#include "platform.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "format.hpp"

namespace tickwheel::stress {
namespace {

constexpr unsigned kMaxCpu = 4095;
constexpr std::size_t kTopSources = 4;

// The whole file, or "" if it cannot be read.
std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(std::string s) {
  const auto not_space = [](unsigned char c) { return std::isspace(c) == 0; };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

// The value of `key=` on the kernel command line, "" if absent.
std::string cmdline_value(const std::string& cmdline, std::string_view key) {
  std::istringstream words(cmdline);
  std::string word;
  while (words >> word) {
    if (word == "--") break;  // what follows is init's, not the kernel's
    if (word.size() > key.size() && word.compare(0, key.size(), key) == 0 && word[key.size()] == '=') {
      return word.substr(key.size() + 1);
    }
  }
  return {};
}

// isolcpus takes flags before the list ("domain,managed_irq,2-3"): the CPU list is what parses.
std::vector<unsigned> cpus_of_isolcpus(const std::string& value) {
  std::string list;
  std::istringstream parts(value);
  std::string part;
  while (std::getline(parts, part, ',')) {
    if (!part.empty() && std::isdigit(static_cast<unsigned char>(part[0])) != 0) {
      list += (list.empty() ? "" : ",") + part;
    }
  }
  try {
    return parse_cpu_list(list);
  } catch (const std::invalid_argument&) {
    return {};
  }
}

// The number a file holds (leading white space skipped), or nothing.
std::optional<std::int64_t> read_integer(const std::string& path) {
  try {
    return std::stoll(read_file(path));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string cpu_path(unsigned cpu, const char* rest) {
  return format("/sys/devices/system/cpu/cpu%u%s", cpu, rest);
}

}  // namespace

std::vector<unsigned> parse_cpu_list(std::string_view text) {
  std::vector<unsigned> cpus;
  const auto bad = [&] { return std::invalid_argument("not a CPU list: '" + std::string(text) + "'"); };
  std::size_t i = 0;
  auto number = [&]() -> unsigned {
    const std::size_t from = i;
    unsigned v = 0;
    while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
      v = v * 10 + static_cast<unsigned>(text[i] - '0');
      if (v > kMaxCpu) throw bad();
      ++i;
    }
    if (i == from) throw bad();
    return v;
  };
  while (i < text.size()) {
    const unsigned lo = number();
    unsigned hi = lo;
    if (i < text.size() && text[i] == '-') {
      ++i;
      hi = number();
      if (hi < lo) throw bad();
    }
    for (unsigned c = lo; c <= hi; ++c) cpus.push_back(c);
    if (i < text.size()) {
      if (text[i] != ',' || i + 1 == text.size()) throw bad();
      ++i;
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<unsigned>& cpus) {
  if (cpus.empty()) return "none";
  std::vector<unsigned> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (std::size_t i = 0; i < sorted.size();) {
    std::size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    out += out.empty() ? format("%u", sorted[i]) : format(",%u", sorted[i]);
    if (j > i) out += format("-%u", sorted[j]);
    i = j + 1;
  }
  return out;
}

std::vector<unsigned> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<unsigned> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (unsigned c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

std::vector<unsigned> smt_siblings(unsigned cpu) {
  try {
    std::vector<unsigned> s =
        parse_cpu_list(trim(read_file(cpu_path(cpu, "/topology/thread_siblings_list"))));
    if (!s.empty()) return s;
  } catch (const std::invalid_argument&) {
  }
  return {cpu};
}

Platform read_platform(const std::vector<unsigned>& cpus) {
  Platform p;
  utsname u{};
  const std::string clocksource =
      trim(read_file("/sys/devices/system/clocksource/clocksource0/current_clocksource"));
  const std::string cmdline = read_file("/proc/cmdline");
  const std::string isolcpus = cmdline_value(cmdline, "isolcpus");
  try {
    p.isolated = parse_cpu_list(trim(read_file("/sys/devices/system/cpu/isolated")));
  } catch (const std::invalid_argument&) {
  }
  if (p.isolated.empty()) p.isolated = cpus_of_isolcpus(isolcpus);
  std::string governor;
  Json siblings = Json::array();
  for (const unsigned c : cpus) {
    const std::string g = trim(read_file(cpu_path(c, "/cpufreq/scaling_governor")));
    governor +=
        format("%scpu%u %s", governor.empty() ? "" : ", ", c, g.empty() ? "unknown (no cpufreq)" : g.c_str());
    siblings.push_back(format("cpu%u: %s", c, format_cpu_list(smt_siblings(c)).c_str()));
  }
  const std::string thp = read_file("/sys/kernel/mm/transparent_hugepage/enabled");
  const std::size_t open = thp.find('[');
  const std::size_t close = thp.find(']');
  const std::optional<std::int64_t> runtime = read_integer("/proc/sys/kernel/sched_rt_runtime_us");
  const std::optional<std::int64_t> period = read_integer("/proc/sys/kernel/sched_rt_period_us");
  p.rt_runtime_us = runtime.value_or(-1);
  p.rt_period_us = period.value_or(-1);
  p.rt_known = runtime && period;
  p.allowed = allowed_cpus();
  p.report = {
      {"kernel", uname(&u) == 0 ? std::string(u.release) + " " + u.version : "unknown"},
      {"clocksource", clocksource.empty() ? "unknown" : clocksource},
      {"isolcpus", isolcpus},
      {"nohz_full", cmdline_value(cmdline, "nohz_full")},
      {"rcu_nocbs", cmdline_value(cmdline, "rcu_nocbs")},
      {"isolated", format_cpu_list(p.isolated)},
      {"governor", governor.empty() ? "unknown" : governor},
      {"thp", open != std::string::npos && close > open ? thp.substr(open + 1, close - open - 1) : "unknown"},
      {"rt_runtime_us", p.rt_runtime_us},
      {"rt_period_us", p.rt_period_us},
      {"rt_known", p.rt_known},
      {"allowed_cpus", format_cpu_list(p.allowed)},
      {"smt_siblings", siblings},
      {"loadavg_start", -1.0},
      {"loadavg_end", -1.0}};
  return p;
}

Interrupts read_interrupts() {
  Interrupts irq;
  std::ifstream in("/proc/interrupts");
  std::string line;
  if (!in || !std::getline(in, line)) return irq;
  std::istringstream header(line);
  std::string col;
  while (header >> col) {
    if (col.rfind("CPU", 0) != 0) return irq;
    try {
      irq.columns.push_back(static_cast<unsigned>(std::stoul(col.substr(3))));
    } catch (const std::exception&) {
      return irq;
    }
  }
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string label;
    if (!(fields >> label) || label.empty() || label.back() != ':') continue;
    label.pop_back();
    Interrupts::Row row;
    for (std::size_t k = 0; k < irq.columns.size(); ++k) {
      std::uint64_t n = 0;
      if (!(fields >> n)) break;
      row.counts.push_back(n);
    }
    if (row.counts.size() != irq.columns.size()) continue;  // ERR:, MIS: carry one total only
    std::string rest;
    std::getline(fields, rest);
    rest = trim(rest);
    // The description is the last words: "IO-APIC 4-edge ttyS0" -> "ttyS0"; "Local timer
    // interrupts" is kept whole for the named (non-numeric) sources.
    const bool numbered = std::isdigit(static_cast<unsigned char>(label[0])) != 0;
    if (numbered && rest.find(' ') != std::string::npos) rest = rest.substr(rest.rfind(' ') + 1);
    row.name = rest.empty() ? label : format("%s (%s)", label.c_str(), rest.c_str());
    irq.rows.push_back(std::move(row));
  }
  irq.known = true;
  return irq;
}

Json interrupts_between(const Interrupts& before, const Interrupts& after, unsigned cpu) {
  Json out = {{"cpu", cpu}, {"known", false}, {"total", 0}, {"top", Json::object()}};
  if (!before.known || !after.known || before.columns != after.columns) return out;
  const auto col = std::find(after.columns.begin(), after.columns.end(), cpu);
  if (col == after.columns.end()) return out;
  const auto k = static_cast<std::size_t>(col - after.columns.begin());
  std::vector<std::pair<std::uint64_t, std::string>> took;
  std::uint64_t total = 0;
  for (const Interrupts::Row& row : after.rows) {
    std::uint64_t was = 0;
    for (const Interrupts::Row& old : before.rows) {
      if (old.name == row.name) was = old.counts[k];
    }
    const std::uint64_t d = row.counts[k] - std::min(row.counts[k], was);
    total += d;
    if (d != 0) took.emplace_back(d, row.name);
  }
  std::stable_sort(took.begin(), took.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  if (took.size() > kTopSources) took.resize(kTopSources);
  out["known"] = true;
  out["total"] = total;
  for (const auto& [n, name] : took) out["top"][name] = n;
  return out;
}

Json read_thread_switches(pid_t tid) {
  std::uint64_t voluntary = 0;
  std::uint64_t involuntary = 0;
  int last_cpu = -1;
  int found = 0;
  const std::string dir = format("/proc/self/task/%d", static_cast<int>(tid));
  std::istringstream status(tid > 0 ? read_file(dir + "/status") : std::string());
  std::string line;
  while (std::getline(status, line)) {
    unsigned long long v = 0;
    if (std::sscanf(line.c_str(), "voluntary_ctxt_switches: %llu", &v) == 1) {
      voluntary = v;
      ++found;
    } else if (std::sscanf(line.c_str(), "nonvoluntary_ctxt_switches: %llu", &v) == 1) {
      involuntary = v;
      ++found;
    }
  }
  // Field 39 of stat is the CPU the thread last ran on; the name (field 2) may hold spaces, so
  // count from the closing parenthesis.
  const std::string stat = tid > 0 ? read_file(dir + "/stat") : std::string();
  if (const std::size_t paren = stat.rfind(')'); paren != std::string::npos) {
    std::istringstream fields(stat.substr(paren + 1));
    std::string f;
    for (int field = 3; fields >> f && last_cpu < 0; ++field) {
      if (field == 39) last_cpu = std::atoi(f.c_str());
    }
  }
  return {{"known", found == 2},
          {"voluntary_switches", voluntary},
          {"involuntary_switches", involuntary},
          {"last_cpu", last_cpu}};
}

pid_t current_tid() noexcept { return static_cast<pid_t>(::syscall(SYS_gettid)); }

double read_loadavg() {
  double load = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = -1;
    std::fclose(f);
  }
  return load;
}

}  // namespace tickwheel::stress
