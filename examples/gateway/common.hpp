// examples/gateway/common.hpp — what the reference gateway's three programs share: the wire format,
// the clock, a lateness histogram, its JSON, the request and connection bookkeeping that
// checks every timer's rule, the simulated upstream, and the socket helpers.
//
// The gateway (docs/gateway.md) is a TCP server on 127.0.0.1 that forwards each
// request to a simulated upstream and answers the client when the upstream answers, or with an
// error when the request's timeout fires first; connections idle for too long are closed. Two
// servers speak the same protocol: tickwheel_server.cpp (caller-driven loops that own their shards,
// or engine workers handing fired timers to the loops through a LoopExecutor) and asio_server.cpp
// (Boost.Asio's steady_timer), both driven and checked by loadgen.cpp.
//
// The protocol: fixed 16-byte frames, little-endian, both ways.
//   request  { u64 id; u32 timeout_us; u32 reserved }   the client picks the id and the timeout
//   reply    { u64 id; u32 status;     u32 reserved }   status: 0 the upstream's answer, 1 timed out
// Every request gets exactly one reply; loadgen.cpp checks it.
#pragma once

#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "stress/histogram.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <ostream>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace gateway {

using Nanos = std::chrono::nanoseconds;

// ---- The wire format ----

inline constexpr std::size_t kFrame = 16;
inline constexpr std::uint32_t kAnswered = 0;
inline constexpr std::uint32_t kTimedOut = 1;

struct Frame {
  std::uint64_t id = 0;
  std::uint32_t value = 0;  // a request's timeout in microseconds, a reply's status
};

inline void encode(const Frame& f, char* out) {
  std::memcpy(out, &f.id, 8);
  std::memcpy(out + 8, &f.value, 4);
  std::memset(out + 12, 0, 4);
}
inline Frame decode(const char* in) {
  Frame f;
  std::memcpy(&f.id, in, 8);
  std::memcpy(&f.value, in + 8, 4);
  return f;
}
static_assert(std::endian::native == std::endian::little, "the frames are written in memory order");

// Cuts a connection's byte stream into frames: a read may end inside a frame, whose start waits
// here for the next read.
class FrameReader {
 public:
  // Calls on_frame(frame) for each frame the `size` bytes at `data` complete, in order, while it
  // returns true (false: the connection closed; the rest is dropped). Keeps what is left of a frame.
  template <class OnFrame>
  void feed(const char* data, std::size_t size, OnFrame&& on_frame) {
    std::size_t at = 0;
    if (have_ > 0) {  // complete the frame a previous read cut
      at = std::min(kFrame - have_, size);
      std::memcpy(part_.data() + have_, data, at);
      have_ += at;
      if (have_ < kFrame) return;
      have_ = 0;
      if (!on_frame(decode(part_.data()))) return;
    }
    for (; at + kFrame <= size; at += kFrame) {
      if (!on_frame(decode(data + at))) return;
    }
    have_ = size - at;
    std::memcpy(part_.data(), data + at, have_);
  }
  void reset() { have_ = 0; }  // a new connection

 private:
  std::array<char, kFrame> part_{};
  std::size_t have_ = 0;  // bytes of a partial frame in part_
};

// ---- The clock ----

// CLOCK_MONOTONIC, the clock of both std::chrono::steady_clock and tickwheel's Engine by default,
// in nanoseconds: one time base for deadlines, fire times and the engine.
inline Nanos now() { return std::chrono::steady_clock::now().time_since_epoch(); }
// Asio's timers take time points.
inline std::chrono::steady_clock::time_point at(Nanos t) { return std::chrono::steady_clock::time_point(t); }

// ---- A lateness histogram ----

// Lateness in nanoseconds, in the stress harness's histogram (stress/histogram.hpp: HdrHistogram's
// layout at two significant digits, a percentile reported as the top of its bucket), with the
// values below zero (a fire before its deadline, a clock step) counted apart and recorded as 0.
class Histogram {
 public:
  void record(std::int64_t ns) {
    if (ns < 0) ++negative_;
    h_.record(static_cast<std::uint64_t>(std::max<std::int64_t>(ns, 0)));
  }
  void merge(const Histogram& o) {
    h_.merge(o.h_);
    negative_ += o.negative_;
  }
  std::uint64_t count() const { return h_.count(); }
  std::uint64_t negative() const { return negative_; }  // values below 0, recorded as 0
  std::uint64_t max() const { return h_.max(); }
  // The value at quantile q (0 < q <= 1): the top of its bucket, never above the maximum.
  std::uint64_t quantile(double q) const { return h_.percentile(q * 100.0); }
  // {percentile, value} at 0, 10, ..., 90, 99, 99.9, ... up to the last recorded value: a curve.
  std::vector<std::pair<double, std::uint64_t>> curve() const;

 private:
  tickwheel::stress::Histogram h_;
  std::uint64_t negative_ = 0;
};

// ---- The reports' JSON (nlohmann-json) ----

// {"count", "p50_ns", "p99_ns", "p999_ns", "max_ns", "below_zero", "curve": [[pct, ns], ...]}
nlohmann::ordered_json histogram_json(const Histogram& h);

// ---- CPU and memory of this process ----

struct Usage {
  double cpu_s = 0;             // user + system, every thread of the process
  std::int64_t max_rss_kb = 0;  // the process's peak resident set (VmHWM)
};
Usage usage_now();

// The process's CPU time from the first accepted connection on, so that a server's start-up is not
// charged to the load. first_connection(): any loop thread, at each accept (the first one reads
// the usage); cpu_s(): after the run.
class CpuSinceFirstConnection {
 public:
  void first_connection();
  // `end`'s CPU time less the first connection's (all of it if none came).
  double cpu_s(const Usage& end);

 private:
  std::atomic<bool> seen_{false};
  std::mutex mutex_;
  Usage start_;  // guarded by mutex_
};

// ---- Timer correctness, checked on the thread that owns the timers ----

// What a server counts. The three violations must stay 0: a callback that ran after cancel()
// returned true for it, one that ran twice, one that ran before its deadline (the engine's clock).
struct Counts {
  std::uint64_t requests = 0;         // request frames received
  std::uint64_t answered = 0;         // replied with the upstream's answer (the timeout cancelled)
  std::uint64_t timed_out = 0;        // replied with a timeout error (the timeout fired)
  std::uint64_t late_answers = 0;     // upstream answers that came after the timeout had fired
  std::uint64_t connections = 0;      // accepted
  std::uint64_t idle_closed = 0;      // closed by their idle timeout
  std::uint64_t idle_rearms = 0;      // idle timeouts moved by a message
  std::uint64_t after_cancel = 0;     // violation: a callback after a winning cancel
  std::uint64_t twice = 0;            // violation: a timer that fired twice
  std::uint64_t early = 0;            // violation: a callback before its deadline
  std::uint64_t schedule_failed = 0;  // a schedule refused (must stay 0 in a run)
  Counts& operator+=(const Counts& o);
};

// A pool of records, each stamped with a generation that is bumped when the record is given back,
// so that a callback carrying (index, generation) can tell its own record from a later one. Freed
// records are reused oldest first (a FIFO), so a stale callback finds a new generation, and each
// record remembers how its previous generation ended: a late callback is then classified.
enum class Ended : std::uint8_t { none, cancelled, fired };

template <class T>
class Pool {
 public:
  struct Entry {
    T value{};
    std::uint32_t gen = 1;
    std::uint32_t prev_gen = 0;
    Ended prev_end = Ended::none;
  };
  // A free record (value reset to T{} by the caller as needed) and its index.
  std::uint32_t take() {
    if (!free_.empty()) {
      const std::uint32_t i = free_.front();
      free_.pop_front();
      return i;
    }
    entries_.emplace_back();
    return static_cast<std::uint32_t>(entries_.size() - 1);
  }
  void give_back(std::uint32_t i, Ended how) {
    Entry& e = entries_[i];
    e.prev_gen = e.gen;
    e.prev_end = how;
    ++e.gen;
    free_.push_back(i);
  }
  Entry& operator[](std::uint32_t i) { return entries_[i]; }
  std::size_t size() const { return entries_.size(); }
  std::size_t in_use() const { return entries_.size() - free_.size(); }

 private:
  std::deque<Entry> entries_;  // a deque: references stay valid as it grows
  std::deque<std::uint32_t> free_;
};

// A callback that found its record's generation moved on: it ran after its timer's life ended.
// Counted as after_cancel if that life ended by a winning cancel, as twice if by a fire.
template <class T>
void count_stale(const typename Pool<T>::Entry& e, std::uint32_t gen, Counts& c) {
  if (e.prev_gen == gen && e.prev_end == Ended::fired) {
    ++c.twice;
  } else {
    ++c.after_cancel;
  }
}

// ---- The simulated upstream ----

// A thread that answers each request after its service time, or never: a delay line. The loop
// that forwards a request draws the service time (exponential, a configured mean) and whether it
// is dropped, and hands the upstream the time to answer at; the upstream sleeps until the earliest
// answer and delivers it through its server's deliver(ask), on its own thread: a cross-thread
// hand-off back to the loop that owns the request (tickwheel: a due-now timer on the loop's shard,
// which wakes the loop if it sleeps; Asio: post() to the loop's io_context). A submit wakes the
// upstream only when its answer is due before the upstream's planned wake-up.
struct Ask {
  std::uint32_t loop = 0;
  std::uint32_t slot = 0;
  std::uint32_t gen = 0;
  Nanos answer_at{0};
  bool operator>(const Ask& o) const { return answer_at > o.answer_at; }
};

class ServiceTime {
 public:
  ServiceTime(double mean_us, double drop, std::uint64_t seed)
      : exp_(1.0 / mean_us), drop_(drop), rng_(seed) {}
  // The answer's delay, or a negative value for a request the upstream never answers.
  Nanos draw() {
    if (drop_ > 0 && unit_(rng_) < drop_) return Nanos(-1);
    return Nanos(static_cast<std::int64_t>(exp_(rng_) * 1000.0));
  }

 private:
  std::exponential_distribution<double> exp_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  double drop_;
  std::mt19937_64 rng_;
};

template <class Server>
class Upstream {
 public:
  explicit Upstream(Server* server) : server_(server) {
    thread_ = std::thread([this] { run(); });
  }
  ~Upstream() { stop(); }
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  // Any thread.
  void submit(const Ask& ask) {
    bool wake = false;
    {
      std::lock_guard lock(mutex_);
      heap_.push(ask);
      wake = ask.answer_at < planned_;
    }
    if (wake) cv_.notify_one();
  }
  void stop() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_one();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    std::vector<Ask> due;
    std::unique_lock lock(mutex_);
    while (!stopping_) {
      const Nanos t = now();
      while (!heap_.empty() && heap_.top().answer_at <= t) {
        due.push_back(heap_.top());
        heap_.pop();
      }
      if (!due.empty()) {
        lock.unlock();
        for (const Ask& a : due) server_->deliver(a);
        due.clear();
        lock.lock();
        continue;
      }
      planned_ = heap_.empty() ? Nanos::max() : heap_.top().answer_at;
      if (heap_.empty()) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, at(planned_));
      }
      planned_ = Nanos(0);  // awake: submits need not notify
    }
  }

  Server* const server_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::priority_queue<Ask, std::vector<Ask>, std::greater<>> heap_;  // guarded by mutex_
  Nanos planned_{0};                                                 // guarded by mutex_
  bool stopping_ = false;                                            // guarded by mutex_
  std::thread thread_;
};

// ---- Sockets ----

// A non-blocking listening socket on 127.0.0.1:port with SO_REUSEPORT, so that each loop has its
// own and the kernel spreads connections over them. Throws std::system_error.
int listen_on(std::uint16_t port);
std::uint16_t bound_port(int fd);
void set_nonblocking(int fd);
void set_nodelay(int fd);
// Raises RLIMIT_NOFILE's soft limit to `want` (at most the hard limit); returns the limit now in
// force, so the caller can say when it is short.
std::uint64_t raise_fd_limit(std::uint64_t want);

// ---- The server report (both servers write it; tools/run.sh gateway reads it) ----

struct ServerReport {
  std::string impl;  // "tickwheel" or "asio"
  std::string mode;  // "manual", "workers" or "asio"
  std::string wait;  // how a caller-driven loop times its sleep: "ns" (epoll_pwait2) or "ms"
  std::int64_t tick_ns = 0;
  std::size_t loops = 0;
  Counts counts;
  Histogram lateness;   // request timeouts: fire time - deadline
  Histogram past_tick;  // request timeouts: fire time - the deadline rounded up to the tick
  Histogram idle_lateness;
  double cpu_s = 0;  // from the first connection to the stop signal
  std::int64_t max_rss_kb = 0;
  std::uint64_t pending_at_stop = 0;
  std::uint64_t passes = 0;   // tickwheel: the engine's passes (polls, or worker passes)
  std::uint64_t wakeups = 0;  // tickwheel: returns from a blocking wait (the loops', or the workers')

  // Adds one loop's counts and histograms (past_tick: tickwheel's loops only).
  void add_loop(const Counts& c, const Histogram& loop_lateness, const Histogram& loop_idle_lateness,
                const Histogram* loop_past_tick = nullptr);
  // Sets cpu_s (from the first connection to `end`) and max_rss_kb.
  void set_usage(CpuSinceFirstConnection& cpu, const Usage& end);
};
void write_report(std::ostream& out, const ServerReport& r);
// Writes the report to `json` (standard output if empty) and returns the server's exit status: 0,
// or 1 if a timer broke its rule (after a winning cancel, twice, or early).
int finish(const ServerReport& r, const std::string& json);

// ---- What both servers take on the command line, and how they stop ----

struct ServerOptions {
  std::uint16_t port = 0;  // 0: any; the port is printed on standard output
  std::size_t loops = 1;
  std::int64_t idle_ms = 2000;
  double service_mean_us = 1000;
  double drop = 0.05;
  std::uint64_t seed = 1;
  double max_seconds = 600;
  std::string json;
};
// The options above, on `app` (the loops' help text is the server's own).
void add_server_options(CLI::App& app, ServerOptions& o, const std::string& loops_help);
// Blocks SIGINT and SIGTERM on the calling thread, before any other thread starts, so that every
// thread inherits the mask and the main thread alone takes them (wait_for_stop()).
void block_stop_signals();
// Returns on SIGINT or SIGTERM, or after `max_seconds`.
void wait_for_stop(double max_seconds);
// How each of the three programs ends: run()'s exit status, or 2 with "program: what" on standard
// error if it throws.
int run_or_report(const char* program, const std::function<int()>& run);

}  // namespace gateway
