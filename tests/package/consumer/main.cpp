// tests/package/consumer/main.cpp — a program outside the project that uses tickwheel the way a
// user would: one Wheel driven by a made-up clock, one Engine on the real clock, each with a timer
// that must fire, then the version it was built against. tests/package/ builds it against the
// installed CMake package, the source tree (add_subdirectory) and tickwheel.pc, and runs it.
#include <tickwheel/engine.hpp>
#include <tickwheel/version.hpp>
#include <tickwheel/wheel.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <utility>

static_assert(tickwheel::version().major == TICKWHEEL_VERSION_MAJOR);

namespace {

bool wheel_fires() {
  using namespace std::chrono_literals;
  bool fired = false;
  tickwheel::Wheel wheel({.tick = 1ms});
  const tickwheel::TimerId id = wheel.schedule_after(5ms, [&fired] { fired = true; });
  if (!id) return false;
  wheel.advance(10ms);  // the wheel's clock is whatever the caller passes in
  return fired;
}

bool engine_fires() {
  using namespace std::chrono_literals;
  std::atomic<bool> fired{false};
  // By assignment: EngineOptions has members without default initializers (cpus, log), so a
  // designated initializer trips -Wmissing-field-initializers under -Wextra -Werror.
  tickwheel::EngineOptions options;
  options.shards = 1;
  options.tick = 1ms;
  tickwheel::Engine engine(std::move(options));
  const tickwheel::Timer timer = engine.schedule_after(1ms, [&fired] { fired.store(true); });
  if (!timer) return false;
  // A bound on the wait, not a timing check: the timer is due in 1 ms, and only a broken build
  // (or a machine stalled for 30 s) gets anywhere near the bound.
  const auto give_up = std::chrono::steady_clock::now() + 30s;
  while (!fired.load() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(1ms);
  }
  engine.stop();  // joins the worker; nothing is left pending once the timer fired
  return fired.load();
}

}  // namespace

int main() {
  if (!wheel_fires()) {
    std::fprintf(stderr, "consumer: the Wheel's timer did not fire\n");
    return 1;
  }
  if (!engine_fires()) {
    std::fprintf(stderr, "consumer: the Engine's timer did not fire\n");
    return 1;
  }
  const tickwheel::Version v = tickwheel::version();
  std::printf("consumer: tickwheel %s (%u.%u.%u): wheel and engine timers fired\n", v.string, v.major,
              v.minor, v.patch);
  return 0;
}
