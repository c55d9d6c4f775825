// stress/profiles.cpp — the profile table. Sizes fit a 2-core machine: each profile keeps the
// harness's own threads below saturation there, so what the report shows is the engine's jitter
// under load rather than a harness that cannot keep up (raise --timers or --schedule-rate on bigger
// machines; up to 10M and beyond is supported).
#include "profiles.hpp"

#include <array>

#include "clock.hpp"

namespace tickwheel::stress {
namespace {

// The one-shot population alone: no canceller threads, no periodic timers, no RepeatedTimers.
void one_shots_only(Options& o) {
  o.cancellers = 0;
  o.periodic = 0;
  o.repeated = 0;
}

constexpr std::array kProfiles{
    Profile{"default",
            "1M one-shot timers (uniform 1ms..10s, half cancelled, a fifth pushed back by reschedule), 10k "
            "periodic at 100ms (every policy, 10% cancelled), 4 RepeatedTimers",
            [](Options&) {}},
    Profile{"gateway",
            "2M request (1s) and idle (30s) timeouts, 95% cancelled and re-armed as on every message, the "
            "other 5% pushed back by reschedule",
            [](Options& o) {
              o.timers = 2'000'000;
              o.cancel_share = 0.95;
              o.reschedule_share = 0.05;
              o.delay = DelayKind::bimodal;
              o.delay_short_ns = 1 * kSecond;
              o.delay_long_ns = 30 * kSecond;
              o.short_share = 0.1;
              o.periodic = 0;
            }},
    Profile{"heartbeat",
            "200k periodic heartbeats at 1s (schedule_every: the engine re-arms them), beside 10k one-shots",
            [](Options& o) {
              o.timers = 10'000;
              o.periodic = 200'000;
              o.period_ns = 1 * kSecond;
            }},
    // Netty's shape: a 100 ms tick and a 100k transfer cap. A 300k flood takes a few milliseconds to
    // schedule, well inside one tick, and its deadlines lie beyond the worker's planned wake-up, so
    // it is all queued when the worker next wakes: the cap splits it over passes (the cap-hit count).
    Profile{"burst", "every 3s a 300k flood in a tight loop against a 100k transfer cap and a 100ms tick",
            [](Options& o) {
              o.timers = 20'000;
              o.delay_min_ns = 200 * kMs;
              o.delay_max_ns = 2 * kSecond;
              o.periodic = 0;
              o.burst = 300'000;
              o.burst_every_ns = 3 * kSecond;
              o.tick_ns = 100 * kMs;
            }},
    Profile{"mixed",
            "500k exponential one-shots (80% cancelled, 2 canceller threads, 10% pushed back by reschedule), "
            "50k periodic, 100k bursts",
            [](Options& o) {
              o.timers = 500'000;
              o.delay = DelayKind::exponential;
              o.delay_mean_ns = 2 * kSecond;
              o.cancel_share = 0.8;
              o.reschedule_share = 0.1;
              o.cancellers = 2;
              o.periodic = 50'000;
              o.period_ns = 250 * kMs;
              o.burst = 100'000;
              o.burst_every_ns = 5 * kSecond;
            }},
    // The platform's floor and the engine's own overhead: next to no load, so what the tick probes
    // show beyond the control thread is the engine's wake-up and pass. One worker on a CPU of its own.
    Profile{"idle",
            "next to no load: 1 shard, 1k one-shots (1ms..1s), no periodic timers, no cancellers, no "
            "RepeatedTimers",
            [](Options& o) {
              one_shots_only(o);
              o.shards = 1;
              o.producers = 1;
              o.timers = 1'000;
              o.delay_max_ns = 1 * kSecond;
              o.duration_ns = 20 * kSecond;
            }},
    // The load other timers are measured with: 500k timers scheduled at once, due uniformly over one
    // second after a 2 s lead.
    Profile{"batch",
            "500k one-shots scheduled at once, due uniform over 1..1000ms after a 2s lead, none re-armed, "
            "nothing else",
            [](Options& o) {
              one_shots_only(o);
              o.timers = 500'000;
              o.delay_max_ns = 1 * kSecond;
              o.lead_ns = 2 * kSecond;
              o.rearm = false;
              o.cancel_share = 0;
              o.reschedule_share = 0;
              o.duration_ns = 4 * kSecond;
            }},
    Profile{"manual",
            "the default workload, caller-driven: one harness thread per shard calls Engine::poll()",
            [](Options& o) { o.threads = Threads::manual; }},
};

}  // namespace

std::span<const Profile> profiles() noexcept { return kProfiles; }

const Profile* find_profile(std::string_view name) noexcept {
  for (const Profile& p : kProfiles) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace tickwheel::stress
