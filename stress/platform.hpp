// stress/platform.hpp — what the machine is: the facts a latency engineer reads before trusting a
// jitter figure, taken from /proc and /sys (the kernel, its clock source, the CPUs kept apart on
// its command line, the frequency governor, transparent huge pages, SMT siblings, RT throttling,
// the load), the interrupts each CPU takes during a run, and the context switches of each thread.
//
// Any of these files may be missing (a container, a VM without cpufreq): a fact that cannot be read
// is "unknown" (or -1, or marked not known), never an error. Nothing here is on a measured path:
// the driver reads these before the run starts and after its last sample.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tickwheel::stress {

using Json = nlohmann::ordered_json;

// "0-3,8,10-11" -> {0, 1, 2, 3, 8, 10, 11}; "" -> {}. Throws std::invalid_argument naming the text
// for anything else (a letter, a reversed range, a number over 4095).
std::vector<unsigned> parse_cpu_list(std::string_view text);
// The inverse, with ranges folded: {0, 1, 2, 5} -> "0-2,5"; {} -> "none".
std::string format_cpu_list(const std::vector<unsigned>& cpus);

// The CPUs this process may run on (sched_getaffinity), in ascending order.
std::vector<unsigned> allowed_cpus();

// The machine's static facts, read once before the run: those the placement plan weighs, and all
// of them as the report's platform section (`report`: kernel, clocksource, isolcpus, nohz_full,
// rcu_nocbs, isolated, governor per CPU of interest, thp, rt_runtime_us, rt_period_us, rt_known,
// allowed_cpus, smt_siblings per CPU of interest; loadavg_start and loadavg_end -1 until set).
struct Platform {
  std::vector<unsigned> isolated;   // /sys/devices/system/cpu/isolated, else isolcpus' CPUs
  std::int64_t rt_runtime_us = -1;  // /proc/sys/kernel/sched_rt_runtime_us; -1 = no throttling
  std::int64_t rt_period_us = -1;
  bool rt_known = false;
  std::vector<unsigned> allowed;  // CPUs this process may use
  Json report;
};

// Reads the facts; `cpus` are the CPUs whose governor and siblings to report (the workers' and the
// control thread's). Never throws for a missing file.
Platform read_platform(const std::vector<unsigned>& cpus);

// The SMT siblings of a CPU (itself included), or {cpu} if the topology cannot be read.
std::vector<unsigned> smt_siblings(unsigned cpu);

// One reading of /proc/interrupts: per source, its count on each CPU column.
struct Interrupts {
  std::vector<unsigned> columns;  // the CPU of each column
  struct Row {
    std::string name;  // "LOC (Local timer interrupts)", "26 (ttyS0)"
    std::vector<std::uint64_t> counts;
  };
  std::vector<Row> rows;
  bool known = false;
};
Interrupts read_interrupts();

// What one CPU took between two readings: {cpu, known, total, top}, top its largest sources (at
// most 4, largest first, name: count).
Json interrupts_between(const Interrupts& before, const Interrupts& after, unsigned cpu);

// A thread's context switches since it started, from /proc/self/task/<tid>/status, and the CPU it
// last ran on (/proc/self/task/<tid>/stat): {known, voluntary_switches, involuntary_switches,
// last_cpu}; known is false when the thread is gone or unreadable.
Json read_thread_switches(pid_t tid);

// The calling thread's kernel thread id.
pid_t current_tid() noexcept;

// The 1-minute load average, or -1 if /proc/loadavg cannot be read.
double read_loadavg();

}  // namespace tickwheel::stress
