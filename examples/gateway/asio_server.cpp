// examples/gateway/asio_server.cpp — the gateway's baseline: the same server as
// tickwheel_server.cpp, written the way an Asio user would, on Boost.Asio (header-only) and its
// steady_timer. Same protocol (common.hpp), same simulated upstream, same checks and report.
//
// 1..N loops, each an io_context run by one thread, with its own SO_REUSEPORT acceptor. Per
// request: a steady_timer (one per request record, reused) set to the absolute deadline, and
// async_wait; the upstream's answer is post()ed to the loop's io_context, where timer.cancel()
// returning 1 means the cancel won (the handler then completes with operation_aborted), 0 that the
// timeout already expired and its handler, queued, replies. Per connection: an idle steady_timer,
// moved on every message by expires_at() (which cancels the pending wait: that handler completes
// with operation_aborted) and a new async_wait.
//
// The timer rules are checked as tickwheel's are: a handler that completes without error after
// its cancel won, or twice for one wait, or before the expiry it waited for (steady_clock, the same
// CLOCK_MONOTONIC), is a violation. Asio's deadlines are exact (its epoll reactor times them with a
// timerfd), so there is no tick and no "past the tick".
//
// Built twice: tickwheel-gateway-asio as above, and tickwheel-gateway-asio-tickwheel
// (GATEWAY_TICKWHEEL_TIMER) with tickwheel::asio::timer in place of steady_timer: the program an
// Asio user gets by swapping the type. The #if blocks below are all that differs: the type, the
// engine and the driver per loop (the construction), and the report's tick and past-the-tick
// lateness (the measurement; the tickwheel timer fires once the deadline's tick has ended).
//
// Stops on SIGINT or SIGTERM, or after --max-seconds, and writes its report (--json).
#include <sys/prctl.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <boost/asio.hpp>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

#if GATEWAY_TICKWHEEL_TIMER
#include <tickwheel/asio.hpp>
#endif

namespace gateway {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using ReusePort = asio::detail::socket_option::boolean<SOL_SOCKET, SO_REUSEPORT>;

#if GATEWAY_TICKWHEEL_TIMER
using Timer = tickwheel::asio::timer;
struct Options : ServerOptions {
  std::int64_t tick_us = 1000;
};
#else
using Timer = asio::steady_timer;
using Options = ServerOptions;
#endif

class Server;

class Loop {
 public:
  Loop(Server& server, std::size_t index, std::uint16_t port);
  void start() {
#if GATEWAY_TICKWHEEL_TIMER
    driver_.start();
#endif
    accept();
    thread_ = std::thread([this] {
      (void)::prctl(PR_SET_TIMERSLACK, 1UL);  // as tickwheel's loops; timerfd waits take no slack anyway
      io_.run();
    });
  }
  void stop() {
    io_.stop();
    if (thread_.joinable()) thread_.join();
  }
  std::uint16_t port() const { return acceptor_.local_endpoint().port(); }
  asio::io_context& io() { return io_; }
  void on_answer(std::uint32_t slot, std::uint32_t gen);

  Counts counts;
  Histogram lateness, idle_lateness;
#if GATEWAY_TICKWHEEL_TIMER
  Histogram past_tick;
  Nanos tick_ceil(Nanos t) const;  // t rounded up to the engine's tick
#endif

 private:
  struct Conn {
    explicit Conn(asio::io_context& io) : socket(io), idle(io) {}
    tcp::socket socket;
    Timer idle;
    bool open = false;
    bool writing = false;
    bool released = false;       // given back: a later release_conn_if_done() must not again
    std::uint32_t idle_seq = 0;  // the wait in progress; an older one's success is a violation...
    std::uint32_t lost_seq = 0;  // ...unless expires_at() could not cancel it (it had expired)
    std::uint32_t waits = 0;     // idle waits whose handler has not completed
    Nanos idle_deadline{0};
    FrameReader frames;
    std::string out, sending;
  };
  struct Request {
    explicit Request(asio::io_context& io) : timer(io) {}
    Timer timer;
    std::uint32_t conn = 0, conn_gen = 0;
    std::uint64_t id = 0;
    Nanos deadline{0};
    bool cancel_won = false;
    bool replied = false;
    bool waiting = false;  // the wait's handler has not completed
  };
  // Records whose asio objects are built once and reused, with the same generation scheme as
  // common.hpp's Pool (a steady_timer cannot live in a default-constructed Pool entry).
  template <class T>
  struct Records {
    struct Entry {
      std::unique_ptr<T> value;
      std::uint32_t gen = 1;
    };
    std::deque<Entry> entries;
    std::deque<std::uint32_t> free;
    std::uint32_t take(asio::io_context& io) {
      if (!free.empty()) {
        const std::uint32_t i = free.front();
        free.pop_front();
        return i;
      }
      entries.push_back({std::make_unique<T>(io), 1});
      return static_cast<std::uint32_t>(entries.size() - 1);
    }
    void give_back(std::uint32_t i) {
      ++entries[i].gen;
      free.push_back(i);
    }
  };

  void accept();
  void read(std::uint32_t slot);
  void on_request(std::uint32_t slot, const Frame& f, Nanos t);
  void arm_idle(std::uint32_t slot, Nanos t);
  void on_idle(std::uint32_t slot, std::uint32_t gen, std::uint32_t seq, const boost::system::error_code& ec);
  void on_timeout(std::uint32_t slot, std::uint32_t gen, const boost::system::error_code& ec);
  void reply(std::uint32_t conn, std::uint32_t conn_gen, std::uint64_t id, std::uint32_t status);
  void write(std::uint32_t slot);
  void close_conn(std::uint32_t slot);
  void release_conn_if_done(std::uint32_t slot);
  void release_request_if_done(std::uint32_t slot);

  Server& server_;
  const std::size_t index_;
  asio::io_context io_{1};
#if GATEWAY_TICKWHEEL_TIMER
  tickwheel::asio::ShardDriver driver_;  // before the records: their timers go first
#endif
  tcp::acceptor acceptor_;
  ServiceTime service_;
  bool warned_fds_ = false;
  Records<Conn> conns_;
  Records<Request> requests_;
  std::vector<char> scratch_ = std::vector<char>(64 * 1024);
  std::thread thread_;
};

class Server {
 public:
  explicit Server(const Options& o) : opts(o), upstream(this) {}
  void deliver(const Ask& a);  // the upstream's answer (Upstream)
  const Options opts;
#if GATEWAY_TICKWHEEL_TIMER
  // A caller-driven shard per loop, owned by the loop's driver; declared before the loops.
  tickwheel::Engine engine{tickwheel::EngineOptions{.shards = opts.loops,
                                                    .tick = std::chrono::microseconds(opts.tick_us),
                                                    .threads = tickwheel::Threads::manual}};
#endif
  std::vector<std::unique_ptr<Loop>> loops;
  Upstream<Server> upstream;
  CpuSinceFirstConnection cpu;
};

#if GATEWAY_TICKWHEEL_TIMER
Nanos Loop::tick_ceil(Nanos t) const {
  const std::int64_t tick = std::chrono::microseconds(server_.opts.tick_us) / Nanos(1);
  return Nanos((t.count() + tick - 1) / tick * tick);
}
#endif

// On the upstream's thread: the answer is post()ed to the loop that owns the request.
void Server::deliver(const Ask& a) {
  Loop* loop = loops[a.loop].get();
  asio::post(loop->io(), [loop, slot = a.slot, gen = a.gen] { loop->on_answer(slot, gen); });
}

Loop::Loop(Server& server, std::size_t index, std::uint16_t port)
    : server_(server),
      index_(index),
#if GATEWAY_TICKWHEEL_TIMER
      driver_(io_, server.engine, index),
#endif
      acceptor_(io_),
      service_(server.opts.service_mean_us, server.opts.drop, server.opts.seed * 1000 + index) {
  const tcp::endpoint at_loopback(asio::ip::address_v4::loopback(), port);
  acceptor_.open(at_loopback.protocol());
  acceptor_.set_option(tcp::acceptor::reuse_address(true));
  acceptor_.set_option(ReusePort(true));
  acceptor_.bind(at_loopback);
  acceptor_.listen(4096);
}

void Loop::accept() {
  acceptor_.async_accept([this](const boost::system::error_code& ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::no_descriptors && !warned_fds_) {
        warned_fds_ = true;
        std::fprintf(
            stderr,
            "tickwheel-gateway-asio: accept: out of file descriptors (raise RLIMIT_NOFILE: ulimit -n)\n");
      }
      if (ec != asio::error::operation_aborted) accept();
      return;
    }
    server_.cpu.first_connection();
    socket.set_option(tcp::no_delay(true));
    const std::uint32_t slot = conns_.take(io_);
    Conn& c = *conns_.entries[slot].value;
    c.socket = std::move(socket);
    c.socket.non_blocking(true);
    c.open = true;
    c.released = false;
    c.writing = false;
    c.frames.reset();
    c.out.clear();
    ++counts.connections;
    arm_idle(slot, now());
    read(slot);
    accept();
  });
}

void Loop::arm_idle(std::uint32_t slot, Nanos t) {
  Conn& c = *conns_.entries[slot].value;
  c.idle_deadline = t + std::chrono::milliseconds(server_.opts.idle_ms);
  // Cancels the wait in progress, if any; 0 cancelled with a wait in flight means it had already
  // expired and its handler, queued, will close the connection (tickwheel: a lost cancel).
  if (c.idle.expires_at(at(c.idle_deadline)) == 0 && c.waits > 0) c.lost_seq = c.idle_seq;
  ++c.waits;
  c.idle.async_wait([this, slot, gen = conns_.entries[slot].gen, seq = ++c.idle_seq](
                        const boost::system::error_code& ec) { on_idle(slot, gen, seq, ec); });
}

// Reactor style, as the tickwheel server reads: wait until readable, then one non-blocking read
// into the loop's scratch buffer, so that a connection holds 16 bytes of partial frame, not a
// read buffer of its own.
void Loop::read(std::uint32_t slot) {
  Conn& c = *conns_.entries[slot].value;
  c.socket.async_wait(tcp::socket::wait_read,
                      [this, slot, gen = conns_.entries[slot].gen](const boost::system::error_code& ec) {
                        if (conns_.entries[slot].gen != gen) return;
                        Conn& c = *conns_.entries[slot].value;
                        if (ec || !c.open) {
                          close_conn(slot);
                          return;
                        }
                        boost::system::error_code rec;
                        const std::size_t size = c.socket.read_some(asio::buffer(scratch_), rec);
                        if (rec == asio::error::would_block) {
                          read(slot);
                          return;
                        }
                        if (rec) {  // end of stream or an error
                          close_conn(slot);
                          return;
                        }
                        const Nanos t = now();
                        c.frames.feed(scratch_.data(), size, [&](const Frame& f) {
                          on_request(slot, f, t);
                          return c.open;
                        });
                        if (!c.open) return;
                        read(slot);
                      });
}

void Loop::on_request(std::uint32_t slot, const Frame& f, Nanos t) {
  ++counts.requests;
  ++counts.idle_rearms;
  arm_idle(slot, t);
  const std::uint32_t r = requests_.take(io_);
  Request& q = *requests_.entries[r].value;
  const std::uint32_t gen = requests_.entries[r].gen;
  q.conn = slot;
  q.conn_gen = conns_.entries[slot].gen;
  q.id = f.id;
  q.deadline = t + std::chrono::microseconds(f.value);
  q.cancel_won = false;
  q.replied = false;
  q.waiting = true;
  q.timer.expires_at(at(q.deadline));
  q.timer.async_wait([this, r, gen](const boost::system::error_code& ec) { on_timeout(r, gen, ec); });
  const Nanos service = service_.draw();
  if (service >= Nanos(0)) {
    server_.upstream.submit(
        {.loop = static_cast<std::uint32_t>(index_), .slot = r, .gen = gen, .answer_at = t + service});
  }
}

void Loop::on_answer(std::uint32_t slot, std::uint32_t gen) {
  if (requests_.entries[slot].gen != gen) {
    ++counts.late_answers;
    return;
  }
  Request& q = *requests_.entries[slot].value;
  if (q.replied || q.timer.cancel() == 0) {  // expired: the queued handler replies (or did)
    ++counts.late_answers;
    return;
  }
  q.cancel_won = true;
  q.replied = true;
  ++counts.answered;
  reply(q.conn, q.conn_gen, q.id, kAnswered);
  // The record goes back when the aborted handler completes (it still refers to the timer).
}

void Loop::on_timeout(std::uint32_t slot, std::uint32_t gen, const boost::system::error_code& ec) {
  const Nanos t = now();
  if (requests_.entries[slot].gen != gen) {  // a second completion of a wait already done
    ++counts.twice;
    return;
  }
  Request& q = *requests_.entries[slot].value;
  q.waiting = false;
  if (ec == asio::error::operation_aborted) {
    release_request_if_done(slot);
    return;
  }
  if (q.cancel_won) {
    ++counts.after_cancel;
  } else {
    if (t < q.deadline) ++counts.early;
    lateness.record((t - q.deadline).count());
#if GATEWAY_TICKWHEEL_TIMER
    past_tick.record((t - tick_ceil(q.deadline)).count());
#endif
    ++counts.timed_out;
    q.replied = true;
    reply(q.conn, q.conn_gen, q.id, kTimedOut);
  }
  release_request_if_done(slot);
}

void Loop::release_request_if_done(std::uint32_t slot) {
  const Request& q = *requests_.entries[slot].value;
  if (!q.waiting && q.replied) requests_.give_back(slot);
}

void Loop::on_idle(std::uint32_t slot, std::uint32_t gen, std::uint32_t seq,
                   const boost::system::error_code& ec) {
  const Nanos t = now();
  if (conns_.entries[slot].gen != gen) {
    ++counts.twice;
    return;
  }
  Conn& c = *conns_.entries[slot].value;
  --c.waits;
  if (ec == asio::error::operation_aborted) {
    release_conn_if_done(slot);
    return;
  }
  if (seq != c.idle_seq && seq != c.lost_seq) {  // moved by expires_at(), whose cancel won
    ++counts.after_cancel;
    release_conn_if_done(slot);
    return;
  }
  if (seq == c.idle_seq) {
    if (t < c.idle_deadline) ++counts.early;
    idle_lateness.record((t - c.idle_deadline).count());
  }
  if (c.open) {
    ++counts.idle_closed;
    close_conn(slot);  // releases the record if nothing else refers to it
    return;
  }
  release_conn_if_done(slot);
}

void Loop::reply(std::uint32_t conn, std::uint32_t conn_gen, std::uint64_t id, std::uint32_t status) {
  if (conns_.entries[conn].gen != conn_gen) return;
  Conn& c = *conns_.entries[conn].value;
  if (!c.open) return;
  std::array<char, kFrame> buf{};
  encode({.id = id, .value = status}, buf.data());
  c.out.append(buf.data(), kFrame);
  if (!c.writing) write(conn);
}

void Loop::write(std::uint32_t slot) {
  Conn& c = *conns_.entries[slot].value;
  c.writing = true;
  c.sending.swap(c.out);
  c.out.clear();
  asio::async_write(
      c.socket, asio::buffer(c.sending),
      [this, slot, gen = conns_.entries[slot].gen](const boost::system::error_code& ec, std::size_t) {
        if (conns_.entries[slot].gen != gen) return;
        Conn& c = *conns_.entries[slot].value;
        c.writing = false;
        if (ec || !c.open) {
          close_conn(slot);
          release_conn_if_done(slot);
          return;
        }
        if (!c.out.empty()) write(slot);
      });
}

void Loop::close_conn(std::uint32_t slot) {
  Conn& c = *conns_.entries[slot].value;
  if (!c.open) return;
  c.open = false;
  boost::system::error_code ignored;
  c.socket.close(ignored);  // its read and write complete with operation_aborted
  c.idle.cancel();
  release_conn_if_done(slot);
}

// The record goes back once the socket is closed and no idle wait and no write refers to it (an
// idle wait is always in flight while the connection is open, so this happens in a handler). A
// read handler of the closed socket that completes later finds the generation moved on.
void Loop::release_conn_if_done(std::uint32_t slot) {
  Conn& c = *conns_.entries[slot].value;
  if (c.open || c.waits > 0 || c.writing || c.released) return;
  c.released = true;
  conns_.give_back(slot);
}

int run(const Options& o) {
  (void)raise_fd_limit(1 << 20);
  Server server(o);
  server.loops.push_back(std::make_unique<Loop>(server, 0, o.port));
  const std::uint16_t port = server.loops[0]->port();
  for (std::size_t i = 1; i < o.loops; ++i) server.loops.push_back(std::make_unique<Loop>(server, i, port));
  for (auto& loop : server.loops) loop->start();
  std::printf("port %u\n", port);
  std::fflush(stdout);

  wait_for_stop(o.max_seconds);
  const Usage end = usage_now();
  server.upstream.stop();
#if GATEWAY_TICKWHEEL_TIMER
  // Each loop's driver lets its shard go at its next turn, which stop() wakes and waits for.
  const std::size_t pending = server.engine.stop().size();
  const tickwheel::EngineStats stats = server.engine.stats();
#endif
  for (auto& loop : server.loops) loop->stop();

  ServerReport r;
  r.wait = "-";
  r.loops = o.loops;
#if GATEWAY_TICKWHEEL_TIMER
  r.impl = "tickwheel";
  r.mode = "asio-tickwheel";
  r.tick_ns = std::chrono::microseconds(o.tick_us) / Nanos(1);
  for (const auto& loop : server.loops) {
    r.add_loop(loop->counts, loop->lateness, loop->idle_lateness, &loop->past_tick);
  }
  r.pending_at_stop = pending;
  r.passes = stats.passes;
  r.wakeups = stats.wakeups;
#else
  r.impl = "asio";
  r.mode = "asio";
  for (const auto& loop : server.loops) r.add_loop(loop->counts, loop->lateness, loop->idle_lateness);
#endif
  r.set_usage(server.cpu, end);
  return finish(r, o.json);
}

}  // namespace
}  // namespace gateway

int main(int argc, char** argv) {
  gateway::Options o;
#if GATEWAY_TICKWHEEL_TIMER
  const char* const program = "tickwheel-gateway-asio-tickwheel";
  CLI::App app{
      "tickwheel-gateway-asio-tickwheel: the Asio gateway with tickwheel::asio::timer for "
      "steady_timer (examples/gateway/)"};
  gateway::add_server_options(app, o, "loop threads, each an io_context with its acceptor and shard");
  app.add_option("--tick-us", o.tick_us, "the engine's tick in microseconds")
      ->check(CLI::Range(1, 1'000'000));
#else
  const char* const program = "tickwheel-gateway-asio";
  CLI::App app{
      "tickwheel-gateway-asio: the reference gateway on Boost.Asio's steady_timer (examples/gateway/)"};
  gateway::add_server_options(app, o, "loop threads, each an io_context with its acceptor");
#endif
  CLI11_PARSE(app, argc, argv);
  gateway::block_stop_signals();
  return gateway::run_or_report(program, [&] { return gateway::run(o); });
}
