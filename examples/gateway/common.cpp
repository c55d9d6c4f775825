// examples/gateway/common.cpp — the out-of-line half of common.hpp: the histogram's curve, the
// reports' JSON, getrusage, the socket helpers and the server report.
#include "common.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <ctime>

#include <cerrno>
#include <charconv>
#include <cmath>
#include <fstream>
#include <iostream>
#include <string>
#include <system_error>

namespace gateway {

std::vector<std::pair<double, std::uint64_t>> Histogram::curve() const {
  std::vector<std::pair<double, std::uint64_t>> points;
  if (count() == 0) return points;
  for (int p = 0; p < 90; p += 10) points.emplace_back(p, quantile(std::max(p, 1) / 100.0));
  // 90, 99, 99.9, ... while a sample lies beyond.
  for (double tail = 0.1; tail * static_cast<double>(count()) >= 1.0; tail /= 10) {
    points.emplace_back(100.0 * (1.0 - tail), quantile(1.0 - tail));
  }
  points.emplace_back(100.0, max());
  return points;
}

nlohmann::ordered_json histogram_json(const Histogram& h) {
  return {{"count", h.count()},         {"p50_ns", h.quantile(0.5)},
          {"p99_ns", h.quantile(0.99)}, {"p999_ns", h.quantile(0.999)},
          {"max_ns", h.max()},          {"below_zero", h.negative()},
          {"curve", h.curve()}};
}

Usage usage_now() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  const auto secs = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
  Usage u{.cpu_s = secs(ru.ru_utime) + secs(ru.ru_stime), .max_rss_kb = 0};
  // The peak RSS from /proc (VmHWM), not ru_maxrss: Linux keeps ru_maxrss across execve, so a
  // server started by a bigger process (the Python runner) would report its parent's peak.
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) {
      u.max_rss_kb = std::stoll(line.substr(6));
      break;
    }
  }
  return u;
}

void CpuSinceFirstConnection::first_connection() {
  if (!seen_.exchange(true)) {
    std::lock_guard lock(mutex_);
    start_ = usage_now();
  }
}

double CpuSinceFirstConnection::cpu_s(const Usage& end) {
  std::lock_guard lock(mutex_);
  return end.cpu_s - (seen_ ? start_.cpu_s : 0.0);
}

Counts& Counts::operator+=(const Counts& o) {
  requests += o.requests;
  answered += o.answered;
  timed_out += o.timed_out;
  late_answers += o.late_answers;
  connections += o.connections;
  idle_closed += o.idle_closed;
  idle_rearms += o.idle_rearms;
  after_cancel += o.after_cancel;
  twice += o.twice;
  early += o.early;
  schedule_failed += o.schedule_failed;
  return *this;
}

static void fail(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

int listen_on(std::uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) fail("socket");
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) fail("SO_REUSEPORT");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);  // loopback only
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind 127.0.0.1");
  if (::listen(fd, 4096) != 0) fail("listen");
  return fd;
}

std::uint16_t bound_port(int fd) {
  sockaddr_in addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
  return ntohs(addr.sin_port);
}

void set_nonblocking(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) != 0) fail("fcntl O_NONBLOCK");
}

void set_nodelay(int fd) {
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

std::uint64_t raise_fd_limit(std::uint64_t want) {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < want) {
    rl.rlim_cur = std::min<rlim_t>(want, rl.rlim_max);
    (void)::setrlimit(RLIMIT_NOFILE, &rl);
    (void)::getrlimit(RLIMIT_NOFILE, &rl);
  }
  return rl.rlim_cur;
}

void ServerReport::add_loop(const Counts& c, const Histogram& loop_lateness,
                            const Histogram& loop_idle_lateness, const Histogram* loop_past_tick) {
  counts += c;
  lateness.merge(loop_lateness);
  if (loop_past_tick != nullptr) past_tick.merge(*loop_past_tick);
  idle_lateness.merge(loop_idle_lateness);
}

void ServerReport::set_usage(CpuSinceFirstConnection& cpu, const Usage& end) {
  cpu_s = cpu.cpu_s(end);
  max_rss_kb = end.max_rss_kb;
}

void write_report(std::ostream& out, const ServerReport& r) {
  const Counts& c = r.counts;
  nlohmann::ordered_json j = {
      {"impl", r.impl},
      {"mode", r.mode},
      {"wait", r.wait},
      {"tick_ns", r.tick_ns},
      {"loops", r.loops},
      {"counts",
       {{"requests", c.requests},
        {"answered", c.answered},
        {"timed_out", c.timed_out},
        {"late_answers", c.late_answers},
        {"connections", c.connections},
        {"idle_closed", c.idle_closed},
        {"idle_rearms", c.idle_rearms},
        {"schedule_failed", c.schedule_failed}}},
      {"violations", {{"fired_after_cancel", c.after_cancel}, {"fired_twice", c.twice}, {"early", c.early}}},
      {"lateness", histogram_json(r.lateness)}};
  if (r.impl == "tickwheel") j["past_tick"] = histogram_json(r.past_tick);
  j["idle_lateness"] = histogram_json(r.idle_lateness);
  j.update({{"cpu_s", r.cpu_s},
            {"max_rss_kb", r.max_rss_kb},
            {"pending_at_stop", r.pending_at_stop},
            {"passes", r.passes},
            {"wakeups", r.wakeups}});
  out << j.dump(2) << '\n';
}

int finish(const ServerReport& r, const std::string& json) {
  if (!json.empty()) {
    std::ofstream out(json);
    write_report(out, r);
  } else {
    write_report(std::cout, r);
  }
  const Counts& c = r.counts;
  return c.after_cancel + c.twice + c.early == 0 ? 0 : 1;
}

void add_server_options(CLI::App& app, ServerOptions& o, const std::string& loops_help) {
  app.add_option("--port", o.port, "TCP port on 127.0.0.1 (0: any; printed on standard output)");
  app.add_option("--loops", o.loops, loops_help)->check(CLI::Range(1, 64));
  app.add_option("--idle-ms", o.idle_ms, "idle timeout of a connection")->check(CLI::Range(1, 3'600'000));
  app.add_option("--service-us", o.service_mean_us, "the upstream's mean service time (exponential)")
      ->check(CLI::Range(1.0, 1e7));
  app.add_option("--drop", o.drop, "share of requests the upstream never answers")
      ->check(CLI::Range(0.0, 1.0));
  app.add_option("--seed", o.seed, "seed of the service times");
  app.add_option("--max-seconds", o.max_seconds, "stop by itself after this long")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_option("--json", o.json, "where to write the report (default: standard output)");
}

namespace {
sigset_t stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}
}  // namespace

void block_stop_signals() {
  const sigset_t set = stop_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void wait_for_stop(double max_seconds) {
  const sigset_t set = stop_signals();
  timespec limit{};
  limit.tv_sec = static_cast<time_t>(max_seconds);
  while (::sigtimedwait(&set, nullptr, &limit) < 0 && errno == EINTR) {
  }
}

int run_or_report(const char* program, const std::function<int()>& run) {
  try {
    return run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 2;
  }
}

}  // namespace gateway
