// engine/platform/topology.cpp — hwloc discovery of physical cores and thread binding.
#include "platform/topology.hpp"

#include <hwloc.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tickwheel::detail {
namespace {

// strerror_r in whichever form the C library declares, since strerror may share one buffer among
// threads: GNU's returns the message (not necessarily in buf), POSIX's fills buf and returns 0.
[[maybe_unused]] const char* message_of(const char* gnu_result, const char* /*buf*/) noexcept {
  return gnu_result;
}
[[maybe_unused]] const char* message_of(int /*posix_result*/, const char* buf) noexcept { return buf; }

}  // namespace

Topology::Topology() {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) == 0 && hwloc_topology_load(topology) == 0) {
    topology_ = topology;
    const int cores = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_CORE);
    for (int i = 0; i < cores; ++i) {
      hwloc_obj_t core = hwloc_get_obj_by_type(topology, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
      hwloc_obj_t pu = hwloc_get_obj_inside_cpuset_by_type(topology, core->cpuset, HWLOC_OBJ_PU, 0);
      if (pu != nullptr) core_pus_.push_back(pu->os_index);
    }
  } else if (topology != nullptr) {
    hwloc_topology_destroy(topology);
  }
  if (core_pus_.empty()) core_pus_.push_back(0);
}

Topology::~Topology() {
  if (topology_ != nullptr) hwloc_topology_destroy(topology_);
}

int Topology::bind_thread(unsigned os_index) const noexcept {
  if (topology_ == nullptr) return kNoTopology;
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == nullptr) return ENOMEM;
  hwloc_bitmap_only(set, os_index);
  const int rc = hwloc_set_cpubind(topology_, set, HWLOC_CPUBIND_THREAD);
  const int error = errno;
  hwloc_bitmap_free(set);
  return rc == 0 ? 0 : error;
}

void Topology::describe_bind_error(int error, unsigned os_index, std::span<char> out) noexcept {
  if (out.empty()) return;
  if (error == kNoTopology) {
    (void)std::snprintf(out.data(), out.size(), "hwloc could not load the topology");
    return;
  }
  std::array<char, 128> reason{};
  (void)std::snprintf(out.data(), out.size(), "binding to PU %u refused: %s", os_index,
                      message_of(::strerror_r(error, reason.data(), reason.size()), reason.data()));
}

std::string Topology::bind_this_thread(unsigned os_index) const {
  const int error = bind_thread(os_index);
  if (error == 0) return {};
  std::array<char, 256> text{};
  describe_bind_error(error, os_index, text);
  return text.data();
}

}  // namespace tickwheel::detail
