// engine/platform/topology.hpp — what the machine looks like (hwloc) and binding a thread to one PU.
//
// The engine wants one worker per physical core, on that core's first processing unit, leaving
// SMT siblings alone. Binding can be refused (containers, cgroups, a PU that is not there); that is
// reported, never fatal.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

struct hwloc_topology;  // hwloc's own type, declared as hwloc.h does

namespace tickwheel::detail {

class Topology {
 public:
  // Loads the topology. If hwloc cannot, the topology has one core, PU 0, and binding fails.
  Topology();
  ~Topology();
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  // OS index of the first PU of each physical core, in topology order. Never empty.
  const std::vector<unsigned>& core_pus() const noexcept { return core_pus_; }

  // The placement plan, one rule for every thread the library starts (and for tickwheel-topo,
  // which shows it): thread i goes to cpus[i % cpus.size()] when the user named PUs, else to the
  // first PU of a physical core, taken in topology order from the first core (shard workers) or
  // from the last (thread-pool threads, so that they meet the workers only when the cores run out).
  enum class From : unsigned char { first_core, last_core };
  unsigned pu_for(std::size_t i, std::span<const unsigned> cpus, From from) const noexcept {
    if (!cpus.empty()) return cpus[i % cpus.size()];
    const std::size_t n = core_pus_.size();
    return core_pus_[from == From::first_core ? i % n : n - 1 - i % n];
  }

  // Binds the calling thread to PU `os_index`. Returns 0 on success, else an errno value, or
  // kNoTopology when hwloc could not load the topology. Allocates nothing but hwloc's bitmap (a
  // failure to allocate it is ENOMEM), so a thread may call it where it must not throw.
  int bind_thread(unsigned os_index) const noexcept;
  static constexpr int kNoTopology = -1;
  // Why bind_thread(os_index) failed with `error`, as one line in `out` (NUL-terminated, cut to
  // fit). No allocation.
  static void describe_bind_error(int error, unsigned os_index, std::span<char> out) noexcept;
  // bind_thread() with its reason as text: "" on success.
  std::string bind_this_thread(unsigned os_index) const;

 private:
  ::hwloc_topology* topology_ = nullptr;
  std::vector<unsigned> core_pus_;
};

}  // namespace tickwheel::detail
