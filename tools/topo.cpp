// tools/topo.cpp — tickwheel-topo: the machine as the Engine sees it, the shard-to-PU plan it
// would use, and whether pinning works here.
//
// Prints, as text or (--json) as one JSON document on stdout:
//   - packages, NUMA nodes, cores and their processing units (PUs) as hwloc reports them. PU
//     numbers are OS indexes, the numbers EngineOptions::cpus takes and `taskset` shows; the PUs of
//     a core (its SMT siblings) are listed together, in hwloc's order, so the first one listed is
//     the one the engine pins a core's shard to;
//   - the plan for --shards and --cpus: the shard count, the PU of each shard, and the notices the
//     engine would log (e.g. more shards than cores);
//   - per shard, whether binding works: a short-lived thread binds itself to the planned PU with
//     the engine's own Topology::bind_this_thread, then reports the PU it runs on, or the error.
//     Containers and cgroup cpusets often refuse; the engine then runs unpinned, and so it is a
//     finding here, not a failure.
//
// The plan is the engine's, not a copy of it where that can be avoided: the shard count, the
// validation of the options and the notices come from constructing (never starting) a
// tickwheel::Engine with the same options; the PU of each shard is the engine's own plan,
// Topology::pu_for (engine/platform/topology.hpp: cpus[i % size], else the first PU of each physical core
// in turn).
//
// Cost: one hwloc topology load for the listing and one each for the probe engine and the binding
// check (tens of milliseconds), plus one thread per shard, started and joined one at a time.
// Exit status: 0 when the report was printed, binding refused or not; 1 if hwloc cannot load the
// topology; CLI11's codes for a malformed command line or options the Engine refuses.
#include <hwloc.h>
#include <sched.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#include "platform/topology.hpp"
#include "tickwheel/engine.hpp"

namespace {

// ---- The machine ----

struct Package {
  unsigned logical = 0;
  std::optional<unsigned> os;   // absent when hwloc does not know it
  std::vector<unsigned> cores;  // logical core indexes
  std::vector<unsigned> pus;    // OS indexes
};

struct NumaNode {
  unsigned logical = 0;
  std::optional<unsigned> os;
  std::uint64_t local_memory = 0;  // bytes
  std::vector<unsigned> pus;
};

struct Core {
  unsigned logical = 0;
  std::optional<unsigned> os;
  std::optional<unsigned> package;  // logical package index
  std::vector<unsigned> pus;        // OS indexes, hwloc's order: SMT siblings together
};

struct Machine {
  std::vector<Package> packages;
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;
  std::size_t pu_count = 0;
};

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const noexcept { hwloc_topology_destroy(t); }
};
using TopologyHandle = std::unique_ptr<hwloc_topology, TopologyDeleter>;

std::optional<unsigned> os_index(hwloc_obj_t obj) {
  if (obj->os_index == HWLOC_UNKNOWN_INDEX) return std::nullopt;
  return obj->os_index;
}

// Every object of `type`, in hwloc's logical order.
std::vector<hwloc_obj_t> all_of(hwloc_topology_t topo, hwloc_obj_type_t type) {
  std::vector<hwloc_obj_t> out;
  for (hwloc_obj_t o = nullptr; (o = hwloc_get_next_obj_by_type(topo, type, o)) != nullptr;) {
    out.push_back(o);
  }
  return out;
}

// The objects of `type` inside `set`, in hwloc's logical order.
std::vector<hwloc_obj_t> inside(hwloc_topology_t topo, hwloc_const_cpuset_t set, hwloc_obj_type_t type) {
  std::vector<hwloc_obj_t> out;
  for (hwloc_obj_t o = nullptr;
       (o = hwloc_get_next_obj_inside_cpuset_by_type(topo, set, type, o)) != nullptr;) {
    out.push_back(o);
  }
  return out;
}

// OS indexes of the PUs of `obj`, in hwloc's logical order.
std::vector<unsigned> pus_of(hwloc_topology_t topo, hwloc_obj_t obj) {
  std::vector<unsigned> pus;
  for (hwloc_obj_t pu : inside(topo, obj->cpuset, HWLOC_OBJ_PU)) pus.push_back(pu->os_index);
  return pus;
}

Machine describe(hwloc_topology_t topo) {
  Machine m;
  for (hwloc_obj_t obj : all_of(topo, HWLOC_OBJ_PACKAGE)) {
    Package p{.logical = obj->logical_index, .os = os_index(obj), .cores = {}, .pus = pus_of(topo, obj)};
    for (hwloc_obj_t core : inside(topo, obj->cpuset, HWLOC_OBJ_CORE)) p.cores.push_back(core->logical_index);
    m.packages.push_back(std::move(p));
  }
  for (hwloc_obj_t obj : all_of(topo, HWLOC_OBJ_NUMANODE)) {
    m.numa_nodes.push_back({.logical = obj->logical_index,
                            .os = os_index(obj),
                            .local_memory = obj->attr->numanode.local_memory,
                            .pus = pus_of(topo, obj)});
  }
  for (hwloc_obj_t obj : all_of(topo, HWLOC_OBJ_CORE)) {
    Core c{.logical = obj->logical_index, .os = os_index(obj), .package = {}, .pus = pus_of(topo, obj)};
    hwloc_obj_t package = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_PACKAGE, obj);
    if (package != nullptr) c.package = package->logical_index;
    m.cores.push_back(std::move(c));
  }
  m.pu_count = all_of(topo, HWLOC_OBJ_PU).size();
  return m;
}

// The logical index of the core holding PU `os`; absent if this machine has no such PU.
std::optional<unsigned> core_of_pu(hwloc_topology_t topo, unsigned os) {
  hwloc_obj_t pu = hwloc_get_pu_obj_by_os_index(topo, os);
  if (pu == nullptr) return std::nullopt;
  hwloc_obj_t core = hwloc_get_ancestor_obj_by_type(topo, HWLOC_OBJ_CORE, pu);
  if (core == nullptr) return std::nullopt;
  return core->logical_index;
}

// ---- The plan ----

struct ShardPlan {
  std::size_t shard = 0;
  unsigned pu = 0;               // OS index the worker would be bound to
  std::optional<unsigned> core;  // logical core holding that PU; absent if no such PU here
  std::string bind_error;        // "" if binding succeeded
  int ran_on = -1;               // sched_getcpu() after the bind attempt; -1 if it failed
};

struct Plan {
  std::size_t shards_option = 0;
  std::vector<unsigned> cpus_option;
  std::vector<std::string> notices;  // what the engine would log, one line each
  std::vector<ShardPlan> shards;
};

Plan make_plan(hwloc_topology_t topo, std::size_t shards_option, const std::vector<unsigned>& cpus) {
  Plan plan{.shards_option = shards_option, .cpus_option = cpus, .notices = {}, .shards = {}};
  tickwheel::EngineOptions opts;
  opts.shards = shards_option;
  opts.cpus = cpus;
  opts.log = [&plan](std::string_view line) { plan.notices.emplace_back(line); };
  std::size_t count = 0;
  {
    // Validates as the engine does (std::invalid_argument naming the bad value) and settles the
    // shard count; an Engine starts no thread before its first schedule or start().
    const tickwheel::Engine probe(std::move(opts));
    count = probe.shard_count();
  }
  const tickwheel::detail::Topology topology;
  for (std::size_t i = 0; i < count; ++i) {
    const unsigned pu = topology.pu_for(i, cpus, tickwheel::detail::Topology::From::first_core);
    ShardPlan s{.shard = i, .pu = pu, .core = core_of_pu(topo, pu), .bind_error = {}, .ran_on = -1};
    // A fresh thread per shard, as each worker is: binding a thread never affects another, and
    // this process's main thread stays where it was.
    try {
      std::thread([&s, &topology] {
        s.bind_error = topology.bind_this_thread(s.pu);
        if (s.bind_error.empty()) s.ran_on = sched_getcpu();
      }).join();
    } catch (const std::system_error& e) {
      s.bind_error = std::string("could not start a thread: ") + e.what();
    }
    plan.shards.push_back(std::move(s));
  }
  return plan;
}

// ---- Text output ----

// "0-3,8,10-11": runs of consecutive numbers, for PU lists that can be a few hundred long.
std::string ranges(const std::vector<unsigned>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(v[i]);
    if (j > i) out += '-' + std::to_string(v[j]);
    i = j + 1;
  }
  return out.empty() ? "none" : out;
}

// hwloc's notation: L# logical index, P# OS ("physical") index.
std::string name(std::string_view kind, unsigned logical, std::optional<unsigned> os) {
  std::string out = std::string(kind) + " L#" + std::to_string(logical);
  if (os) out += " (P#" + std::to_string(*os) + ")";
  return out;
}

std::string plural(std::size_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

void print_text(std::ostream& out, const Machine& m, const Plan& plan) {
  out << "machine: " << plural(m.packages.size(), "package", "packages") << ", "
      << plural(m.numa_nodes.size(), "NUMA node", "NUMA nodes") << ", "
      << plural(m.cores.size(), "core", "cores") << ", " << plural(m.pu_count, "PU", "PUs") << " (hwloc "
      << HWLOC_VERSION << "; PU numbers are OS indexes, as EngineOptions::cpus takes)\n";
  for (const Package& p : m.packages) {
    out << "  " << name("package", p.logical, p.os) << ": cores L#" << ranges(p.cores) << ", PUs "
        << ranges(p.pus) << '\n';
  }
  for (const NumaNode& n : m.numa_nodes) {
    char memory[32];
    const double gib = static_cast<double>(n.local_memory) / (1024.0 * 1024 * 1024);
    std::snprintf(memory, sizeof memory, "%.2f GiB", gib);
    out << "  " << name("NUMA node", n.logical, n.os) << ": " << memory << ", PUs " << ranges(n.pus) << '\n';
  }
  for (const Core& c : m.cores) {
    out << "  " << name("core", c.logical, c.os);
    if (c.package) out << " in package L#" << *c.package;
    out << ": PU" << (c.pus.size() == 1 ? " " : "s ") << ranges(c.pus) << '\n';
  }

  out << "engine plan: " << plural(plan.shards.size(), "shard", "shards") << " (--shards "
      << plan.shards_option << (plan.shards_option == 0 ? ": one per physical core" : "") << "), ";
  if (plan.cpus_option.empty()) {
    out << "shard i on the first PU of core (i modulo the core count)\n";
  } else {
    out << "shard i on --cpus[i modulo " << plan.cpus_option.size() << "]\n";
  }
  for (const ShardPlan& s : plan.shards) {
    out << "  shard " << s.shard << ": PU " << s.pu;
    if (s.core) {
      out << " (core L#" << *s.core << ")";
    } else {
      out << " (no such PU here)";
    }
    if (s.bind_error.empty()) {
      out << ": bound, ran on PU " << s.ran_on << '\n';
    } else {
      out << ": not bound: " << s.bind_error << '\n';
    }
  }
  for (const std::string& notice : plan.notices) out << "engine notice: " << notice << '\n';
}

// ---- JSON output (nlohmann-json) ----

using Json = nlohmann::ordered_json;

Json optional_json(std::optional<unsigned> v) { return v ? Json(*v) : Json(nullptr); }

Json shard_json(const ShardPlan& s) {
  const bool bound = s.bind_error.empty();
  return {{"shard", s.shard},
          {"pu", s.pu},
          {"core", optional_json(s.core)},
          {"bound", bound},
          {"error", bound ? Json(nullptr) : Json(s.bind_error)},
          {"ran_on", s.ran_on < 0 ? Json(nullptr) : Json(s.ran_on)}};
}

void print_json(std::ostream& out, const Machine& m, const Plan& plan) {
  Json j = {{"hwloc_version", HWLOC_VERSION},
            {"packages", Json::array()},
            {"numa_nodes", Json::array()},
            {"cores", Json::array()}};
  for (const Package& p : m.packages) {
    j["packages"].push_back(
        {{"logical", p.logical}, {"os", optional_json(p.os)}, {"cores", p.cores}, {"pus", p.pus}});
  }
  for (const NumaNode& n : m.numa_nodes) {
    j["numa_nodes"].push_back({{"logical", n.logical},
                               {"os", optional_json(n.os)},
                               {"local_memory_bytes", n.local_memory},
                               {"pus", n.pus}});
  }
  for (const Core& c : m.cores) {
    j["cores"].push_back({{"logical", c.logical},
                          {"os", optional_json(c.os)},
                          {"package", optional_json(c.package)},
                          {"pus", c.pus}});
  }
  j["pu_count"] = m.pu_count;
  Json shards = Json::array();
  for (const ShardPlan& s : plan.shards) shards.push_back(shard_json(s));
  j["plan"] = {{"shards_option", plan.shards_option},
               {"cpus_option", plan.cpus_option},
               {"notices", plan.notices},
               {"shards", shards}};
  out << j.dump(2) << '\n';
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "tickwheel-topo: the machine as tickwheel::Engine sees it (hwloc), the shard-to-PU plan\n"
      "it would use for the options given, and whether binding a thread to each planned PU works\n"
      "here.",
      "tickwheel-topo"};
  app.footer(
      "Binding is tried from a short-lived thread per shard; a refusal is reported, not an error.\n"
      "Exit status: 0 when the report was printed; 1 if hwloc cannot load the topology; CLI11's\n"
      "own codes for a malformed command line or options the Engine refuses.");
  std::size_t shards = 0;
  std::vector<unsigned> cpus;
  bool json = false;
  app.add_option("--shards", shards, "Shards, as EngineOptions::shards (0 = one per physical core)")
      ->capture_default_str();
  app.add_option("--cpus", cpus,
                 "PUs (OS indexes) for the workers, as EngineOptions::cpus: shard i on "
                 "cpus[i % size]; default: the first PU of each core in turn")
      ->delimiter(',');
  app.add_flag("--json", json, "Print one JSON document instead of text");

  TopologyHandle topo;
  Plan plan;
  try {
    app.parse(argc, argv);
    hwloc_topology_t raw = nullptr;
    if (hwloc_topology_init(&raw) != 0) {
      std::cerr << "tickwheel-topo: hwloc_topology_init failed\n";
      return 1;
    }
    topo.reset(raw);
    if (hwloc_topology_load(topo.get()) != 0) {
      std::cerr << "tickwheel-topo: hwloc could not load the topology\n";
      return 1;
    }
    try {
      plan = make_plan(topo.get(), shards, cpus);
    } catch (const std::invalid_argument& e) {
      throw CLI::ValidationError("--shards/--cpus", e.what());
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  const Machine machine = describe(topo.get());
  if (json) {
    print_json(std::cout, machine, plan);
  } else {
    print_text(std::cout, machine, plan);
  }
  return 0;
}
