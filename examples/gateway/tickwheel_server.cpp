// examples/gateway/tickwheel_server.cpp — the reference gateway on tickwheel::Engine: a
// non-blocking epoll TCP server on 127.0.0.1 (the protocol is in common.hpp), 1..N loop threads,
// each with its own SO_REUSEPORT listener, its connections and its shard of the engine.
//
// Two ways to run the timers (--mode):
//   manual   caller-driven (Threads::manual): each loop is a tickwheel::EpollLoop on its shard: it
//            owns the shard (own_shard), so its schedules and cancels go straight into the wheel,
//            and each run_once() sleeps in epoll until the next deadline, timed in nanoseconds,
//            or until woken by another thread's earlier hand-off, handles the turn's events, then
//            polls the shard, so an answer read in its timeout's tick is answered (--wait ns, the
//            default). --wait ms is the comparison's control: the same protocol written out by hand
//            (run_ms), its sleep rounded up to epoll_wait's milliseconds, which costs up to a
//            millisecond past each tick when the tick is shorter (docs/gateway.md says what the
//            comparison showed).
//   workers  engine worker threads time the shards (one per loop, unpinned) and hand each fired
//            timer to a LoopExecutor whose lane i is loop i: the loop drains the lane when its fd
//            is readable, so every callback still runs on the loop that owns its connection.
//
// Per request: a timeout timer (the client's timeout_us) scheduled at an absolute deadline on the
// loop's shard, and the request forwarded to the simulated upstream thread (common.hpp), which
// answers after a random service time, or never (--drop). The answer comes back across threads as a
// due-now timer on the loop's shard (schedule_at_on: a hand-off that wakes a sleeping loop); the
// loop then cancels the timeout and replies, or, if the timeout fired first, drops the answer. The
// timeout's callback replies with an error. Per connection: an idle timeout, moved on every message
// (Timer::reschedule on the shard the loop owns; cancel + schedule in workers mode, see
// on_request), that closes the connection.
//
// Every callback checks its timer's rule (common.hpp: Counts) and records its lateness against the
// engine's clock: fire time - deadline, and fire time - the deadline rounded up to the tick ("past
// the tick": what the engine adds beyond the rounding its tick promises).
//
// Stops on SIGINT or SIGTERM, or after --max-seconds, and writes its report (--json). Exit status:
// 0, or 1 if a timer rule was broken.
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"
#include "tickwheel/engine.hpp"
#include "tickwheel/epoll_loop.hpp"
#include "tickwheel/executor.hpp"

namespace gateway {
namespace {

struct Options : ServerOptions {
  std::string mode = "manual";
  std::string wait = "ns";
  std::int64_t tick_us = 1000;
};

// Tags of the loop's own fds in the epoll set, above every connection's (gen << 32 | slot) but
// for the top one, EpollLoop's (kWakeData), which its run_once() keeps to itself.
constexpr std::uint64_t kListen = tickwheel::EpollLoop::kWakeData - 1;
constexpr std::uint64_t kWakeup = kListen - 1;  // --wait ms only: run_ms() registers it itself
constexpr std::uint64_t kLane = kListen - 2;
constexpr std::uint64_t kStop = kListen - 3;
constexpr int kEvents = 256;

class Server;

class Loop {
 public:
  Loop(Server& server, std::size_t index, int listen_fd);
  ~Loop();
  Loop(const Loop&) = delete;
  Loop& operator=(const Loop&) = delete;

  void start() {
    thread_ = std::thread([this] { run(); });
  }
  void stop() {
    const std::uint64_t one = 1;
    (void)::write(stop_fd_, &one, sizeof one);
    if (thread_.joinable()) thread_.join();
  }
  // Timer callbacks, on this loop's thread. Their lambdas hold a Loop* and two or three 32-bit
  // values: at most 24 bytes, the engine's limit, so nothing is allocated per timer.
  void on_timeout(std::uint32_t slot, std::uint32_t gen);
  void on_answer(std::uint32_t slot, std::uint32_t gen);
  void on_idle(std::uint32_t slot, std::uint32_t gen, std::uint32_t seq);

  const Counts& counts() const { return counts_; }
  const Histogram& lateness() const { return lateness_; }
  const Histogram& past_tick() const { return past_tick_; }
  const Histogram& idle_lateness() const { return idle_lateness_; }

 private:
  struct Conn {
    int fd = -1;
    bool open = false;
    bool writing = false;  // EPOLLOUT is on: `out` holds what the socket would not take
    std::uint32_t idle_seq = 0;
    tickwheel::Timer idle;
    Nanos idle_deadline{0};
    FrameReader frames;
    std::string out;
  };
  struct Request {
    std::uint32_t conn = 0;
    std::uint32_t conn_gen = 0;
    std::uint64_t id = 0;
    Nanos deadline{0};
    tickwheel::Timer timer;
  };

  void run();
  void run_ms();
  void dispatch(const epoll_event& ev);
  void accept_all();
  void read_conn(std::uint32_t slot);
  void flush(std::uint32_t slot);
  void on_request(std::uint32_t slot, const Frame& f, Nanos t);
  void arm_idle(std::uint32_t slot, Nanos t);
  void reply(std::uint32_t conn, std::uint32_t conn_gen, std::uint64_t id, std::uint32_t status);
  void close_conn(std::uint32_t slot);
  Nanos tick_ceil(Nanos t) const { return Nanos((t.count() + tick_ - 1) / tick_ * tick_); }

  Server& server_;
  tickwheel::Engine& engine_;
  const std::size_t index_;
  const int listen_fd_;
  const std::int64_t tick_;
  int ep_ = -1;
  int stop_fd_ = -1;
  bool stopping_ = false;
  bool warned_fds_ = false;
  ServiceTime service_;
  Pool<Conn> conns_;
  Pool<Request> requests_;
  std::vector<char> scratch_ = std::vector<char>(64 * 1024);
  std::array<epoll_event, kEvents> events_{};
  Counts counts_;
  Histogram lateness_, past_tick_, idle_lateness_;
  std::thread thread_;
};

class Server {
 public:
  explicit Server(const Options& o) : opts(o), engine(engine_options(o, tasks)), upstream(this) {}

  static tickwheel::EngineOptions engine_options(const Options& o,
                                                 std::shared_ptr<tickwheel::LoopExecutor>& tasks) {
    tickwheel::EngineOptions e;
    e.shards = o.loops;
    e.tick = std::chrono::microseconds(o.tick_us);
    e.pin_workers = false;  // the loops and the Asio baseline are not pinned either
    if (o.mode == "manual") {
      e.threads = tickwheel::Threads::manual;
    } else {
      tasks = std::make_shared<tickwheel::LoopExecutor>(o.loops);
      e.executor = tasks;
    }
    return e;
  }
  bool manual() const { return opts.mode == "manual"; }
  void deliver(const Ask& a);  // the upstream's answer (Upstream)

  const Options opts;
  std::shared_ptr<tickwheel::LoopExecutor> tasks;  // workers mode; before engine (see engine_options)
  tickwheel::Engine engine;
  std::vector<std::unique_ptr<Loop>> loops;
  Upstream<Server> upstream;
  CpuSinceFirstConnection cpu;
};

// On the upstream's thread: the answer goes back to the loop as a timer due at once on its shard, a
// cross-thread hand-off that wakes the loop if it sleeps (manual) or its shard's worker (workers).
// Refused only once the engine is stopping: the answer is dropped, as a dead upstream's would be.
void Server::deliver(const Ask& a) {
  (void)engine.schedule_at_on(a.loop, Nanos(0), [loop = loops[a.loop].get(), slot = a.slot, gen = a.gen] {
    loop->on_answer(slot, gen);
  });
}

Loop::Loop(Server& server, std::size_t index, int listen_fd)
    : server_(server),
      engine_(server.engine),
      index_(index),
      listen_fd_(listen_fd),
      tick_(std::chrono::microseconds(server.opts.tick_us) / Nanos(1)),
      service_(server.opts.service_mean_us, server.opts.drop, server.opts.seed * 1000 + index) {
  ep_ = ::epoll_create1(EPOLL_CLOEXEC);
  stop_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep_ < 0 || stop_fd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll/eventfd");
  const auto add = [this](int fd, std::uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev) != 0)
      throw std::system_error(errno, std::generic_category(), "epoll_ctl");
  };
  add(listen_fd_, kListen);
  add(stop_fd_, kStop);
  if (server.manual() && server.opts.wait == "ms") add(engine_.wakeup_fd(index_), kWakeup);
  if (!server.manual()) add(server.tasks->fd(index_), kLane);
}

Loop::~Loop() {
  for (std::size_t i = 0; i < conns_.size(); ++i) {
    if (conns_[static_cast<std::uint32_t>(i)].value.open)
      ::close(conns_[static_cast<std::uint32_t>(i)].value.fd);
  }
  ::close(listen_fd_);
  ::close(stop_fd_);
  ::close(ep_);
}

void Loop::run() {
  if (!server_.manual()) {  // the workers time the timers; fired ones come through the lane
    while (!stopping_) {
      const int n = ::epoll_wait(ep_, events_.data(), kEvents, -1);
      for (int i = 0; i < n; ++i) dispatch(events_[static_cast<std::size_t>(i)]);
    }
  } else if (server_.opts.wait == "ns") {
    tickwheel::EpollLoop loop(engine_, index_, {.epoll_fd = ep_, .max_events = kEvents});
    while (!stopping_ && !engine_.stopped()) {
      (void)loop.run_once(
          [this](const epoll_event& ev) { dispatch(ev); });  // the turn's I/O, then its timeouts
    }
  } else {
    run_ms();
  }
}

// --wait ms, the control of the ns/ms comparison: EpollLoop's protocol written out, its sleep in
// epoll_wait's whole milliseconds, rounded up so as never to wake before the deadline (a 100 us
// tick's wait becomes a millisecond).
void Loop::run_ms() {
  (void)::prctl(PR_SET_TIMERSLACK, 1UL);  // as EpollLoop: no 50 us slack on a timed wait
  engine_.own_shard(index_);
  while (!stopping_ && !engine_.stopped()) {
    (void)engine_.poll(index_);
    const std::optional<Nanos> until = engine_.next_deadline(index_);
    int n = 0;
    if (engine_.prepare_wait(index_, until)) {
      int timeout = -1;
      if (until) {
        const auto ms =
            std::chrono::ceil<std::chrono::milliseconds>(std::max(*until - engine_.now(), Nanos(0)));
        timeout = static_cast<int>(std::min<std::int64_t>(ms.count(), 60'000));
      }
      n = ::epoll_wait(ep_, events_.data(), kEvents, timeout);
      engine_.finish_wait(index_);
    } else {
      n = ::epoll_wait(ep_, events_.data(), kEvents, 0);  // hand-offs wait: look, don't sleep
    }
    for (int i = 0; i < n; ++i) dispatch(events_[static_cast<std::size_t>(i)]);
  }
}

void Loop::dispatch(const epoll_event& ev) {
  switch (ev.data.u64) {
    case kListen: accept_all(); return;
    case kWakeup: return;  // finish_wait() drained it; the next poll() takes the hand-offs
    case kLane: (void)server_.tasks->drain(index_); return;
    case kStop: stopping_ = true; return;
    default: break;
  }
  const auto slot = static_cast<std::uint32_t>(ev.data.u64);
  const auto gen = static_cast<std::uint32_t>(ev.data.u64 >> 32);
  if (conns_[slot].gen != gen || !conns_[slot].value.open) return;  // closed earlier in this batch
  if ((ev.events & EPOLLOUT) != 0) flush(slot);
  if ((ev.events & (EPOLLIN | EPOLLHUP | EPOLLERR)) != 0 && conns_[slot].value.open) read_conn(slot);
}

void Loop::accept_all() {
  for (;;) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {  // EAGAIN; or out of descriptors, said once (the client's connect then times out)
      if ((errno == EMFILE || errno == ENFILE) && !warned_fds_) {
        warned_fds_ = true;
        std::fprintf(stderr,
                     "tickwheel-gateway: accept: out of file descriptors (raise RLIMIT_NOFILE: ulimit -n)\n");
      }
      return;
    }
    server_.cpu.first_connection();
    set_nodelay(fd);
    const std::uint32_t slot = conns_.take();
    auto& e = conns_[slot];
    e.value.fd = fd;
    e.value.open = true;
    e.value.writing = false;
    e.value.frames.reset();
    e.value.out.clear();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = (std::uint64_t{e.gen} << 32) | slot;
    (void)::epoll_ctl(ep_, EPOLL_CTL_ADD, fd, &ev);
    ++counts_.connections;
    arm_idle(slot, now());
  }
}

void Loop::arm_idle(std::uint32_t slot, Nanos t) {
  auto& e = conns_[slot];
  Conn& c = e.value;
  c.idle_deadline = t + std::chrono::milliseconds(server_.opts.idle_ms);
  c.idle = engine_.schedule_at_on(index_, c.idle_deadline,
                                  [this, slot, gen = e.gen, seq = ++c.idle_seq] { on_idle(slot, gen, seq); });
  if (!c.idle) ++counts_.schedule_failed;
}

void Loop::read_conn(std::uint32_t slot) {
  Conn& c = conns_[slot].value;
  const ssize_t n = ::read(c.fd, scratch_.data(), scratch_.size());
  if (n <= 0) {
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    close_conn(slot);  // end of stream or an error
    return;
  }
  const Nanos t = now();
  c.frames.feed(scratch_.data(), static_cast<std::size_t>(n), [&](const Frame& f) {
    on_request(slot, f, t);
    return c.open;
  });
}

void Loop::on_request(std::uint32_t slot, const Frame& f, Nanos t) {
  ++counts_.requests;
  auto& ce = conns_[slot];
  // The idle timeout moves. Caller-driven, this loop owns the shard, so Timer::reschedule() moves
  // it at once, keeping its handle and callable (false: it already fired, and its callback closes
  // the connection). With workers this thread is not the shard's, and a move from another thread
  // is applied at the worker's next pass, after a fire due first; so there it is cancel +
  // schedule, where a lost cancel means the idle timer was claimed (its task waits in the lane)
  // and will close the connection.
  Conn& c = ce.value;
  if (server_.manual()) {
    const Nanos deadline = t + std::chrono::milliseconds(server_.opts.idle_ms);
    if (c.idle.reschedule(deadline)) {
      c.idle_deadline = deadline;
      ++counts_.idle_rearms;
    }
  } else if (c.idle.cancel()) {
    ++counts_.idle_rearms;
    arm_idle(slot, t);
  }
  const std::uint32_t r = requests_.take();
  auto& re = requests_[r];
  Request& q = re.value;
  q.conn = slot;
  q.conn_gen = ce.gen;
  q.id = f.id;
  q.deadline = t + std::chrono::microseconds(f.value);
  q.timer = engine_.schedule_at_on(index_, q.deadline, [this, r, gen = re.gen] { on_timeout(r, gen); });
  if (!q.timer) {  // refused (the engine is stopping): answer with the error at once
    ++counts_.schedule_failed;
    reply(q.conn, q.conn_gen, q.id, kTimedOut);
    requests_.give_back(r, Ended::cancelled);
    return;
  }
  const Nanos service = service_.draw();
  if (service >= Nanos(0)) {
    server_.upstream.submit(
        {.loop = static_cast<std::uint32_t>(index_), .slot = r, .gen = re.gen, .answer_at = t + service});
  }
}

void Loop::on_answer(std::uint32_t slot, std::uint32_t gen) {
  auto& re = requests_[slot];
  if (re.gen != gen) {  // the timeout fired and replied first
    ++counts_.late_answers;
    return;
  }
  if (!re.value.timer.cancel()) {  // the timeout was claimed (workers mode): its callback replies
    ++counts_.late_answers;
    return;
  }
  ++counts_.answered;
  reply(re.value.conn, re.value.conn_gen, re.value.id, kAnswered);
  requests_.give_back(slot, Ended::cancelled);
}

void Loop::on_timeout(std::uint32_t slot, std::uint32_t gen) {
  const Nanos t = now();
  auto& re = requests_[slot];
  if (re.gen != gen) {
    count_stale<Request>(re, gen, counts_);
    return;
  }
  const Nanos deadline = re.value.deadline;
  if (t < deadline) ++counts_.early;
  lateness_.record((t - deadline).count());
  past_tick_.record((t - tick_ceil(deadline)).count());
  ++counts_.timed_out;
  reply(re.value.conn, re.value.conn_gen, re.value.id, kTimedOut);
  requests_.give_back(slot, Ended::fired);
}

void Loop::on_idle(std::uint32_t slot, std::uint32_t gen, std::uint32_t seq) {
  const Nanos t = now();
  auto& ce = conns_[slot];
  if (ce.gen != gen) {
    count_stale<Conn>(ce, gen, counts_);
    return;
  }
  Conn& c = ce.value;
  if (seq != c.idle_seq) {  // an idle timer whose cancel won, then moved: it must never run
    ++counts_.after_cancel;
    return;
  }
  if (t < c.idle_deadline) ++counts_.early;
  idle_lateness_.record((t - c.idle_deadline).count());
  c.idle = tickwheel::Timer();
  if (c.open) {
    ++counts_.idle_closed;
    close_conn(slot);  // gives the record back: its idle timer is resolved
  } else {
    conns_.give_back(slot, Ended::fired);  // closed by the client; this fire was claimed before
  }
}

void Loop::reply(std::uint32_t conn, std::uint32_t conn_gen, std::uint64_t id, std::uint32_t status) {
  auto& ce = conns_[conn];
  if (ce.gen != conn_gen || !ce.value.open) return;  // the client is gone
  Conn& c = ce.value;
  std::array<char, kFrame> buf{};
  encode({.id = id, .value = status}, buf.data());
  if (c.writing) {
    c.out.append(buf.data(), kFrame);
    return;
  }
  const ssize_t n = ::send(c.fd, buf.data(), kFrame, MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(kFrame)) return;
  if (n < 0 && errno != EAGAIN) {
    close_conn(conn);
    return;
  }
  const std::size_t sent = n > 0 ? static_cast<std::size_t>(n) : 0;
  c.out.append(buf.data() + sent, kFrame - sent);
  c.writing = true;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = (std::uint64_t{ce.gen} << 32) | conn;
  (void)::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
}

void Loop::flush(std::uint32_t slot) {
  auto& ce = conns_[slot];
  Conn& c = ce.value;
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno != EAGAIN) close_conn(slot);
      return;
    }
    c.out.erase(0, static_cast<std::size_t>(n));
  }
  c.writing = false;
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = (std::uint64_t{ce.gen} << 32) | slot;
  (void)::epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
}

// Closes the socket; the record goes back once its idle timer is resolved: now if the cancel
// wins (or the idle timer is what closes it), else when the claimed fire runs (on_idle).
void Loop::close_conn(std::uint32_t slot) {
  Conn& c = conns_[slot].value;
  if (!c.open) return;
  ::close(c.fd);  // also leaves the epoll set
  c.open = false;
  c.fd = -1;
  c.out.clear();
  if (!c.idle) {  // the idle timer fired: that is what closes it
    conns_.give_back(slot, Ended::fired);
  } else if (c.idle.cancel()) {
    c.idle = tickwheel::Timer();
    conns_.give_back(slot, Ended::cancelled);
  }
}

int run(const Options& o) {
  const std::uint64_t fds = raise_fd_limit(1 << 20);
  Server server(o);
  const int first = listen_on(o.port);
  const std::uint16_t port = bound_port(first);
  for (std::size_t i = 0; i < o.loops; ++i) {
    server.loops.push_back(std::make_unique<Loop>(server, i, i == 0 ? first : listen_on(port)));
  }
  for (auto& loop : server.loops) loop->start();
  std::printf("port %u fds %llu\n", port, static_cast<unsigned long long>(fds));
  std::fflush(stdout);

  wait_for_stop(o.max_seconds);
  const Usage end = usage_now();

  // The upstream first (no more answers), then the engine (workers mode: the loops still drain the
  // tasks it waits for; manual: it wakes each owner and waits for it to let go), then the loops.
  server.upstream.stop();
  const std::size_t pending = server.engine.stop().size();
  const tickwheel::EngineStats stats = server.engine.stats();
  for (auto& loop : server.loops) loop->stop();

  ServerReport r;
  r.impl = "tickwheel";
  r.mode = o.mode;
  r.wait = o.mode == "manual" ? o.wait : "-";
  r.tick_ns = std::chrono::microseconds(o.tick_us) / Nanos(1);
  r.loops = o.loops;
  for (const auto& loop : server.loops) {
    r.add_loop(loop->counts(), loop->lateness(), loop->idle_lateness(), &loop->past_tick());
  }
  r.set_usage(server.cpu, end);
  r.pending_at_stop = pending;
  r.passes = stats.passes;
  r.wakeups = stats.wakeups;
  return finish(r, o.json);
}

}  // namespace
}  // namespace gateway

int main(int argc, char** argv) {
  gateway::Options o;
  CLI::App app{"tickwheel-gateway: the reference gateway on tickwheel::Engine (examples/gateway/)"};
  gateway::add_server_options(app, o, "loop threads, each with its listener and its shard");
  app.add_option("--mode", o.mode, "manual (caller-driven loops) or workers (engine workers + LoopExecutor)")
      ->check(CLI::IsMember({"manual", "workers"}));
  app.add_option("--wait", o.wait,
                 "manual mode: time the loop's sleep in ns (epoll_pwait2) or ms (epoll_wait)")
      ->check(CLI::IsMember({"ns", "ms"}));
  app.add_option("--tick-us", o.tick_us, "the engine's tick in microseconds")
      ->check(CLI::Range(1, 1'000'000));
  CLI11_PARSE(app, argc, argv);

  gateway::block_stop_signals();
  return gateway::run_or_report("tickwheel-gateway", [&] { return gateway::run(o); });
}
