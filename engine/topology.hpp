// engine/topology.hpp — what the machine looks like (hwloc) and binding a thread to one PU.
//
// The engine wants one worker per physical core, on that core's first processing unit, leaving
// SMT siblings alone. Binding can be refused (containers, cgroups, a PU that is not there); that is
// reported, never fatal.
#pragma once

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

  // Binds the calling thread to PU `os_index`. Returns "" on success, else why it failed.
  std::string bind_this_thread(unsigned os_index) const;

 private:
  ::hwloc_topology* topology_ = nullptr;
  std::vector<unsigned> core_pus_;
};

}  // namespace tickwheel::detail
