// stress/placement.hpp — where a run's threads go, and what the run cannot measure because of it.
//
// A jitter figure means something only when the measured threads have CPUs to themselves. The plan
// puts the workers (or, caller-driven, the polling threads) on one PU each of distinct physical
// cores, from the highest-numbered allowed CPU down (CPU 0 takes most of the housekeeping), the
// load threads (producers and cancellers) on the CPUs left, and the control thread on the first
// worker's CPU when the workers sleep (it sleeps too, half a tick out of phase) or on a CPU apart
// when they spin (a spinning control thread beside a spinning worker would halve both). Options
// given on the command line win; the plan then only checks them.
//
// The warnings say, in plain words, when the run measures the scheduler rather than the engine:
// more busy threads than CPUs, a worker whose core (SMT siblings included) also runs load threads,
// a spinning worker on a CPU that is not isolated, SCHED_FIFO spinners under RT throttling.
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "options.hpp"
#include "platform.hpp"

namespace tickwheel::stress {

struct Placement {
  std::vector<unsigned> workers;      // PU per shard (EngineOptions::cpus); empty = not pinned
  std::vector<unsigned> load;         // the producers' and cancellers' CPUs; empty = anywhere
  int control = -1;                   // the control thread's CPU; -1 = anywhere
  std::vector<std::string> warnings;  // the plan's; the driver adds what the run itself saw
};

// The physical cores among `cpus` (SMT siblings counted once).
std::size_t core_count(const std::vector<unsigned>& cpus);

// The plan for a run with `shards` shards and `producers` producers, on `platform`'s CPUs.
Placement plan_placement(const Options& o, std::size_t shards, unsigned producers, const Platform& platform);

// Binds a thread to a set of CPUs; "" on success, else why (errno text), never throws.
std::string bind_thread(pthread_t thread, const std::vector<unsigned>& cpus);

// SCHED_FIFO at `priority` for the thread `tid` (0: the calling thread). Throws std::runtime_error
// naming the priority, the thread and errno's text when the kernel refuses (EPERM without
// CAP_SYS_NICE or an RLIMIT_RTPRIO that allows it).
void set_fifo(pid_t tid, int priority, const std::string& who);

// mlockall(MCL_CURRENT | MCL_FUTURE). Throws std::runtime_error with errno's text when refused.
void lock_memory();

}  // namespace tickwheel::stress
