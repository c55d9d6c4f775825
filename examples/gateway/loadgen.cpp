// examples/gateway/loadgen.cpp — the gateway's load generator and reply checker: opens C
// connections to a gateway on 127.0.0.1 (either server: the protocol is common.hpp's), sends
// requests at a set aggregate rate for a bounded time, round robin over the connections, and checks
// that every request gets exactly one reply, on its own connection: an answer or a timeout error,
// none missing, none twice, none unknown.
//
// Besides them, --probes connections send one request and then nothing: the server must close each
// one by its idle timeout (the server checks the idle timer's deadline; this side checks that the
// close comes, and not before the idle time). A regular connection the server closes is counted as
// closed_early: the run's rate keeps every one of them busy well within the idle timeout.
//
// One thread, one epoll set. Sends are paced against the clock in bursts at most --batch-us apart;
// after the sending time it waits for the last replies (at most the timeout plus --grace-ms) and for
// the probes' close, then closes everything and writes its report (--json, or standard output).
// Bounded: it never sends more than rate x seconds requests and never runs longer than the
// sending time plus the timeout, the idle timeout and twice the grace. Exit status 0 iff every
// check held; 2 if it could not connect.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "common.hpp"

namespace gateway {
namespace {

struct Options {
  std::uint16_t port = 0;
  std::size_t connections = 100;
  double rate = 2000;  // requests per second, all connections together
  double seconds = 10;
  std::uint32_t timeout_us = 5000;
  std::int64_t idle_ms = 2000;  // the server's idle timeout, for the probes' check
  std::size_t probes = 0;       // 0: one per hundred connections, at least one
  std::int64_t batch_us = 500;
  std::int64_t grace_ms = 2000;
  std::string json;
};

enum State : std::uint8_t { kNone, kOutstanding, kGotAnswer, kGotTimeout };

struct Conn {
  int fd = -1;
  bool probe = false;
  bool closed = false;
  FrameReader frames;
  std::string out;  // what the socket would not take
  Nanos last_sent{0};
  Nanos closed_at{0};
};

class Load {
 public:
  explicit Load(const Options& o)
      : o_(o),
        total_(static_cast<std::uint64_t>(std::ceil(o.rate * o.seconds))),
        probes_(o.probes != 0 ? o.probes : std::max<std::size_t>(1, o.connections / 100)) {
    state_.assign(total_ + probes_, kNone);
    conn_of_.assign(total_ + probes_, 0);
    sent_at_.assign(total_ + probes_, Nanos(0));
  }

  int run();

 private:
  void connect_all();
  void send(std::uint32_t conn, std::uint64_t id, Nanos t);
  void on_readable(std::uint32_t conn);
  void on_reply(std::uint32_t conn, const Frame& f, Nanos t);
  void flush(std::uint32_t conn);
  int wait(Nanos for_at_most);
  void report(std::ostream& out, double send_seconds);

  const Options o_;
  const std::uint64_t total_;
  const std::size_t probes_;
  std::vector<Conn> conns_;  // the regular connections, then the probes
  std::vector<std::uint8_t> state_;
  std::vector<std::uint32_t> conn_of_;
  std::vector<Nanos> sent_at_;
  int ep_ = -1;
  std::vector<char> scratch_ = std::vector<char>(64 * 1024);
  std::array<epoll_event, 256> events_{};
  std::uint64_t sent_ = 0, outstanding_ = 0, answered_ = 0, timed_out_ = 0;
  std::uint64_t duplicates_ = 0, unknown_ = 0, wrong_conn_ = 0, closed_early_ = 0, reply_lost_ = 0;
  std::size_t probes_closed_ = 0, probes_closed_early_ = 0;
  double probe_min_close_ms_ = 0;
  Histogram answer_latency_, timeout_latency_;
};

void Load::connect_all() {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(o_.port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const std::size_t n = o_.connections + probes_;
  conns_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::system_error(
          errno, std::generic_category(),
          "connect 127.0.0.1:" + std::to_string(o_.port) + " (connection " + std::to_string(i) + ")");
    }
    set_nonblocking(fd);
    set_nodelay(fd);
    conns_[i].fd = fd;
    conns_[i].probe = i >= o_.connections;
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = i;
    (void)::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
  }
}

void Load::send(std::uint32_t conn, std::uint64_t id, Nanos t) {
  Conn& c = conns_[conn];
  std::array<char, kFrame> buf{};
  encode({.id = id, .value = o_.timeout_us}, buf.data());
  state_[id] = kOutstanding;
  conn_of_[id] = conn;
  sent_at_[id] = t;
  ++outstanding_;
  c.last_sent = t;
  if (!c.out.empty()) {
    c.out.append(buf.data(), kFrame);
    return;
  }
  const ssize_t n = ::send(c.fd, buf.data(), kFrame, MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(kFrame)) return;
  if (n < 0 && errno != EAGAIN) return;  // the server closed it: counted when the close is read
  const std::size_t done = n > 0 ? static_cast<std::size_t>(n) : 0;
  c.out.append(buf.data() + done, kFrame - done);
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = conn;
  (void)::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
}

void Load::flush(std::uint32_t conn) {
  Conn& c = conns_[conn];
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) return;
    c.out.erase(0, static_cast<std::size_t>(n));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = conn;
  (void)::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
}

void Load::on_readable(std::uint32_t conn) {
  Conn& c = conns_[conn];
  const ssize_t n = ::read(c.fd, scratch_.data(), scratch_.size());
  const Nanos t = now();
  if (n <= 0) {
    if (n < 0 && errno == EAGAIN) return;
    c.closed = true;
    c.closed_at = t;
    (void)::epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    if (!c.probe) {
      ++closed_early_;
      return;
    }
    ++probes_closed_;
    const double ms = std::chrono::duration<double, std::milli>(t - c.last_sent).count();
    if (ms < static_cast<double>(o_.idle_ms)) ++probes_closed_early_;
    probe_min_close_ms_ = probes_closed_ == 1 ? ms : std::min(probe_min_close_ms_, ms);
    return;
  }
  c.frames.feed(scratch_.data(), static_cast<std::size_t>(n), [&](const Frame& f) {
    on_reply(conn, f, t);
    return true;
  });
}

void Load::on_reply(std::uint32_t conn, const Frame& f, Nanos t) {
  if (f.id >= state_.size() || state_[f.id] == kNone) {
    ++unknown_;
    return;
  }
  if (state_[f.id] != kOutstanding) {
    ++duplicates_;
    return;
  }
  if (conn_of_[f.id] != conn) {
    ++wrong_conn_;
    return;
  }
  --outstanding_;
  const std::int64_t latency = (t - sent_at_[f.id]).count();
  if (f.value == kAnswered) {
    state_[f.id] = kGotAnswer;
    ++answered_;
    answer_latency_.record(latency);
  } else {
    state_[f.id] = kGotTimeout;
    ++timed_out_;
    timeout_latency_.record(latency);
  }
}

int Load::wait(Nanos for_at_most) {
  timespec ts{};
  const Nanos d = std::max(for_at_most, Nanos(0));
  ts.tv_sec = static_cast<time_t>(d.count() / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(d.count() % 1'000'000'000);
  const int n = ::epoll_pwait2(ep_, events_.data(), static_cast<int>(events_.size()), &ts, nullptr);
  for (int i = 0; i < n; ++i) {
    const auto conn = static_cast<std::uint32_t>(events_[static_cast<std::size_t>(i)].data.u64);
    if ((events_[static_cast<std::size_t>(i)].events & EPOLLOUT) != 0) flush(conn);
    if ((events_[static_cast<std::size_t>(i)].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 &&
        !conns_[conn].closed) {
      on_readable(conn);
    }
  }
  return n;
}

int Load::run() {
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  connect_all();
  const Nanos start = now();
  // The probes' one request each, first; then the regular ones, paced.
  for (std::size_t p = 0; p < probes_; ++p)
    send(static_cast<std::uint32_t>(o_.connections + p), total_ + p, start);
  const Nanos send_for = std::chrono::duration_cast<Nanos>(std::chrono::duration<double>(o_.seconds));
  const Nanos batch = std::chrono::microseconds(o_.batch_us);
  std::uint64_t next = 0;  // the next regular request's id; it goes to connection id % C
  for (;;) {
    const Nanos t = now();
    const Nanos elapsed = t - start;
    const auto due = std::min<std::uint64_t>(
        total_, static_cast<std::uint64_t>(std::chrono::duration<double>(elapsed).count() * o_.rate));
    for (; next < due; ++next) {
      const auto conn = static_cast<std::uint32_t>(next % o_.connections);
      if (!conns_[conn].closed) send(conn, next, t);
    }
    if (next >= total_ || elapsed >= send_for) break;
    (void)wait(batch);
  }
  const Nanos send_end = now();
  sent_ = next;
  // The last replies, then the probes' close.
  const Nanos replies_by =
      send_end + std::chrono::microseconds(o_.timeout_us) + std::chrono::milliseconds(o_.grace_ms);
  while (outstanding_ > 0 && now() < replies_by) (void)wait(std::chrono::milliseconds(10));
  const Nanos probes_by = start + std::chrono::milliseconds(o_.idle_ms + o_.grace_ms);
  while (probes_closed_ < probes_ && now() < std::max(probes_by, replies_by))
    (void)wait(std::chrono::milliseconds(10));
  for (Conn& c : conns_) ::close(c.fd);
  ::close(ep_);
  // Outstanding requests of connections the server closed are counted as closed_early, not missing.
  for (std::uint64_t id = 0; id < state_.size(); ++id) {
    if (state_[id] == kOutstanding && !conns_[conn_of_[id]].closed) ++reply_lost_;
  }

  const double send_seconds = std::chrono::duration<double>(send_end - start).count();
  if (!o_.json.empty()) {
    std::ofstream out(o_.json);
    report(out, send_seconds);
  } else {
    report(std::cout, send_seconds);
  }
  const bool ok = reply_lost_ == 0 && duplicates_ == 0 && unknown_ == 0 && wrong_conn_ == 0 &&
                  closed_early_ == 0 && probes_closed_ == probes_ && probes_closed_early_ == 0;
  return ok ? 0 : 1;
}

void Load::report(std::ostream& out, double send_seconds) {
  const nlohmann::ordered_json j = {
      {"connections", o_.connections},
      {"rate", o_.rate},
      {"seconds", send_seconds},
      {"timeout_us", o_.timeout_us},
      {"sent", sent_ + probes_},
      {"answered", answered_},
      {"timed_out", timed_out_},
      {"replies_per_s", static_cast<double>(answered_ + timed_out_) / std::max(send_seconds, 1e-9)},
      {"violations",
       {{"missing", reply_lost_},
        {"duplicates", duplicates_},
        {"unknown", unknown_},
        {"wrong_connection", wrong_conn_},
        {"closed_early", closed_early_},
        {"probes_not_closed", probes_ - probes_closed_},
        {"probes_closed_before_idle", probes_closed_early_}}},
      {"probes", probes_},
      {"probe_min_close_ms", probe_min_close_ms_},
      {"answer_latency", histogram_json(answer_latency_)},
      {"timeout_latency", histogram_json(timeout_latency_)}};
  out << j.dump(2) << '\n';
}

}  // namespace
}  // namespace gateway

int main(int argc, char** argv) {
  gateway::Options o;
  CLI::App app{"tickwheel-gateway-load: drives a gateway (examples/gateway/) and checks every reply"};
  app.add_option("--port", o.port, "the gateway's port on 127.0.0.1")->required();
  app.add_option("--connections", o.connections, "regular connections")->check(CLI::Range(1, 1'000'000));
  app.add_option("--rate", o.rate, "requests per second, all connections together")
      ->check(CLI::Range(1.0, 1e7));
  app.add_option("--seconds", o.seconds, "how long to send")->check(CLI::Range(0.1, 3600.0));
  app.add_option("--timeout-us", o.timeout_us, "each request's timeout, sent with it")
      ->check(CLI::Range(1, 60'000'000));
  app.add_option("--idle-ms", o.idle_ms, "the server's idle timeout (the probes' check)")
      ->check(CLI::Range(1, 3'600'000));
  app.add_option("--probes", o.probes, "idle probe connections (0: connections / 100, at least 1)");
  app.add_option("--batch-us", o.batch_us, "at most this long between two bursts of sends")
      ->check(CLI::Range(10, 100'000));
  app.add_option("--grace-ms", o.grace_ms, "how long past its due time a reply or a close may come")
      ->check(CLI::Range(1, 600'000));
  app.add_option("--json", o.json, "where to write the report (default: standard output)");
  CLI11_PARSE(app, argc, argv);
  const std::uint64_t want = o.connections + o.probes + o.connections / 100 + 64;
  const std::uint64_t have = gateway::raise_fd_limit(want);
  if (have < want) {
    std::fprintf(
        stderr,
        "tickwheel-gateway-load: %zu connections need %llu descriptors, but RLIMIT_NOFILE's hard limit "
        "allows %llu (raise it: ulimit -Hn, or /etc/security/limits.conf)\n",
        o.connections, static_cast<unsigned long long>(want), static_cast<unsigned long long>(have));
    return 2;
  }
  return gateway::run_or_report("tickwheel-gateway-load", [&] { return gateway::Load(o).run(); });
}
