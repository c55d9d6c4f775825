// stress/placement.cpp — the placement plan, its warnings, and the calls that apply it.
#include "placement.hpp"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "format.hpp"

namespace tickwheel::stress {
namespace {

bool contains(const std::vector<unsigned>& v, unsigned c) {
  return std::find(v.begin(), v.end(), c) != v.end();
}

std::vector<unsigned> minus(const std::vector<unsigned>& a, const std::vector<unsigned>& b) {
  std::vector<unsigned> out;
  for (const unsigned c : a) {
    if (!contains(b, c)) out.push_back(c);
  }
  return out;
}

std::string errno_text(int err) {
  char buf[128];
  // The GNU strerror_r returns the text (maybe not in buf).
  return strerror_r(err, buf, sizeof buf);
}

// One CPU per physical core: the lowest of its siblings among `cpus`.
std::vector<unsigned> first_of_each_core(const std::vector<unsigned>& cpus) {
  std::vector<unsigned> firsts;
  std::vector<unsigned> seen;
  for (const unsigned c : cpus) {
    if (contains(seen, c)) continue;
    const std::vector<unsigned> sib = smt_siblings(c);
    seen.insert(seen.end(), sib.begin(), sib.end());
    firsts.push_back(c);
  }
  return firsts;
}

// One PU per physical core, from the highest-numbered allowed CPU down, `n` of them (wrapping when
// there are fewer cores than n, as the engine does with EngineOptions::cpus).
std::vector<unsigned> pick_workers(const std::vector<unsigned>& allowed, std::size_t n) {
  std::vector<unsigned> firsts = first_of_each_core(allowed);
  std::reverse(firsts.begin(), firsts.end());
  std::vector<unsigned> out;
  for (std::size_t i = 0; i < n && !firsts.empty(); ++i) out.push_back(firsts[i % firsts.size()]);
  return out;
}

// What the run cannot measure, with this plan: threads that outnumber their CPUs, shared cores,
// spinners the kernel still interrupts or throttles.
void warn_about_the_plan(Placement& p, const Options& o, std::size_t shards, unsigned producers,
                         const Platform& platform) {
  const bool spin = o.wait == WaitStrategy::spin;
  const std::vector<unsigned>& allowed = platform.allowed;
  const unsigned cancellers = o.cancellers;
  const std::size_t pool = o.executor == ExecutorKind::pool ? o.pool_threads : 0;
  const std::size_t busy = shards + producers + cancellers + pool + (o.control && spin ? 1 : 0);
  // The CPUs the run's threads may use: the workers' and the load threads' when both are placed,
  // else every allowed CPU.
  std::vector<unsigned> used = p.workers;
  used.insert(used.end(), p.load.begin(), p.load.end());
  if (p.workers.empty() || p.load.empty()) used.insert(used.end(), allowed.begin(), allowed.end());
  std::sort(used.begin(), used.end());
  const auto cpus = static_cast<std::size_t>(std::unique(used.begin(), used.end()) - used.begin());
  if (busy > cpus) {
    p.warnings.push_back(format(
        "OVERSUBSCRIBED: %zu threads that may all want a CPU at once (%zu %s, %u producer%s, %u "
        "canceller%s%s%s) "
        "on %zu CPU%s: a thread that waits for a CPU is late, so the tail measures the OS scheduler, not the "
        "engine",
        busy, shards,
        o.threads == Threads::manual ? (shards == 1 ? "polling thread" : "polling threads")
                                     : (shards == 1 ? "worker" : "workers"),
        producers, producers == 1 ? "" : "s", cancellers, cancellers == 1 ? "" : "s",
        pool != 0 ? format(", %zu pool threads", pool).c_str() : "",
        o.control && spin ? ", a spinning control" : "", cpus, cpus == 1 ? "" : "s"));
  }
  if (!p.workers.empty() && p.load.empty()) {
    p.warnings.push_back(
        "load threads (producers, cancellers) are not kept off the workers' CPUs (no CPU is left for "
        "them): they preempt the workers");
  }
  for (const unsigned w : p.workers) {
    const std::vector<unsigned> sib = smt_siblings(w);
    for (const unsigned s : sib) {
      if (contains(p.load, s)) {
        p.warnings.push_back(format(
            "worker CPU %u shares its core (SMT siblings %s) with the load threads' CPU %u: they compete "
            "for the core",
            w, format_cpu_list(sib).c_str(), s));
        break;
      }
    }
    if (spin && !contains(platform.isolated, w)) {
      p.warnings.push_back(format(
          "spinning worker on CPU %u, which is not isolated (isolcpus/nohz_full): the scheduler tick and "
          "other tasks still interrupt it",
          w));
    }
  }
  std::vector<unsigned> sorted = p.workers;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    p.warnings.push_back("two workers share a CPU: each waits for the other");
  }
  if (o.control && spin && p.control >= 0 && contains(p.workers, static_cast<unsigned>(p.control))) {
    p.warnings.push_back(
        format("the spinning control thread shares CPU %d with a spinning worker: both get half the CPU, in "
               "scheduler slices, so neither figure means much",
               p.control));
  }
  if (o.rt_priority > 0 && spin && platform.rt_known && platform.rt_runtime_us >= 0 &&
      platform.rt_runtime_us < platform.rt_period_us) {
    p.warnings.push_back(format(
        "SCHED_FIFO spinners under RT throttling (sched_rt_runtime_us %lld of %lld): the kernel stops them "
        "for %lld us every period",
        static_cast<long long>(platform.rt_runtime_us), static_cast<long long>(platform.rt_period_us),
        static_cast<long long>(platform.rt_period_us - platform.rt_runtime_us)));
  }
}

}  // namespace

std::size_t core_count(const std::vector<unsigned>& cpus) { return first_of_each_core(cpus).size(); }

Placement plan_placement(const Options& o, std::size_t shards, unsigned producers, const Platform& platform) {
  Placement p;
  const std::vector<unsigned>& allowed = platform.allowed;
  if (!o.worker_cpus.empty()) {
    p.workers = parse_cpu_list(o.worker_cpus);
  } else if (o.pin) {
    p.workers = pick_workers(allowed, shards);
  }
  if (!o.producer_cpus.empty()) {
    p.load = parse_cpu_list(o.producer_cpus);
  } else if (!p.workers.empty()) {
    // Away from the workers' cores, SMT siblings included, when that leaves any CPU.
    std::vector<unsigned> worker_cores;
    for (const unsigned w : p.workers) {
      const std::vector<unsigned> sib = smt_siblings(w);
      worker_cores.insert(worker_cores.end(), sib.begin(), sib.end());
    }
    p.load = minus(allowed, worker_cores);
  }
  const bool spin = o.wait == WaitStrategy::spin;
  if (o.control_cpu >= 0) {
    p.control = o.control_cpu;
  } else if (!spin && !p.workers.empty()) {
    p.control = static_cast<int>(p.workers.front());
  } else if (spin) {
    std::vector<unsigned> free = minus(minus(allowed, p.workers), p.load);
    if (free.empty()) free = minus(allowed, p.workers);
    if (!free.empty()) p.control = static_cast<int>(free.back());
  }

  warn_about_the_plan(p, o, shards, producers, platform);
  return p;
}

std::string bind_thread(pthread_t thread, const std::vector<unsigned>& cpus) {
  if (cpus.empty()) return {};
  cpu_set_t set;
  CPU_ZERO(&set);
  for (const unsigned c : cpus) {
    if (c >= CPU_SETSIZE) return "CPU " + std::to_string(c) + " is beyond CPU_SETSIZE";
    CPU_SET(c, &set);
  }
  const int err = pthread_setaffinity_np(thread, sizeof set, &set);
  return err == 0 ? std::string() : errno_text(err) + " (CPUs " + format_cpu_list(cpus) + ")";
}

void set_fifo(pid_t tid, int priority, const std::string& who) {
  sched_param param{};
  param.sched_priority = priority;
  if (sched_setscheduler(tid, SCHED_FIFO, &param) != 0) {
    const int err = errno;
    throw std::runtime_error("--rt-priority " + std::to_string(priority) + ": SCHED_FIFO refused for " + who +
                             ": " + errno_text(err) +
                             (err == EPERM ? " (needs root, CAP_SYS_NICE or an RLIMIT_RTPRIO of at least " +
                                                 std::to_string(priority) + ")"
                                           : std::string()));
  }
}

// By system call, not the C library's wrapper: AddressSanitizer intercepts mlockall and makes it
// succeed without locking anything (as engine/wheel/memory.cpp says of mlock), so a refusal would pass
// unnoticed in exactly the build that tests it.
void lock_memory() {
  if (::syscall(SYS_mlockall, MCL_CURRENT | MCL_FUTURE) != 0) {
    const int err = errno;
    throw std::runtime_error(
        "--mlock: mlockall refused: " + errno_text(err) +
        (err == EPERM || err == ENOMEM
             ? std::string(" (needs CAP_IPC_LOCK or an RLIMIT_MEMLOCK above the process's size)")
             : std::string()));
  }
}

}  // namespace tickwheel::stress
