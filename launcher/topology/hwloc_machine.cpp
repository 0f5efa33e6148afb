// See hwloc_machine.hpp. hwloc's objects are walked once and turned into plain data, so that the
// binding rules (numa_binder.hpp) are pure and tested without hwloc.
#include "launcher/topology/hwloc_machine.hpp"

#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology load(const std::string& xml_path) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) throw Error(std::string("hwloc_topology_init: ") + std::strerror(errno));
  Topology topology(raw);
  const auto fail = [&](const char* step) {
    const std::string error = std::strerror(errno);
    if (xml_path.empty()) return Error(std::string("cannot read this machine's topology: ") + step + ": " + error);
    return Error("cannot load the topology in " + xml_path + ": " + step + ": " + error +
                 "; check that it is an hwloc XML file (lstopo --of xml)");
  };
  if (!xml_path.empty() && hwloc_topology_set_xml(raw, xml_path.c_str()) != 0) throw fail("hwloc_topology_set_xml");
  // PCI devices (the GPUs) are left out by default.
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(raw) != 0) throw fail("hwloc_topology_load");
  return topology;
}

// The cache shared by the most CPUs above `pu` that holds data (not an instruction cache).
int last_level_cache(hwloc_obj_t pu) {
  int id = -1;
  unsigned depth = 0;
  for (hwloc_obj_t o = pu->parent; o != nullptr; o = o->parent) {
    if (!hwloc_obj_type_is_cache(o->type) || o->attr->cache.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
    if (o->attr->cache.depth > depth) {
      depth = o->attr->cache.depth;
      id = static_cast<int>(o->gp_index);
    }
  }
  return id;
}

int ancestor_index(hwloc_topology_t t, hwloc_obj_type_t type, hwloc_obj_t pu, int otherwise) {
  const hwloc_obj_t o = hwloc_get_ancestor_obj_by_type(t, type, pu);
  return o != nullptr ? static_cast<int>(o->logical_index) : otherwise;
}

bool is_nvidia_gpu(hwloc_obj_t pci) {
  const unsigned short cls = pci->attr->pcidev.class_id;
  return pci->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302);
}

}  // namespace

Machine load_machine(const std::string& xml_path) {
  const Topology topology = load(xml_path);
  hwloc_topology_t t = topology.get();
  Machine m;
  for (hwloc_obj_t pu = nullptr; (pu = hwloc_get_next_obj_by_type(t, HWLOC_OBJ_PU, pu)) != nullptr;) {
    Machine::Cpu cpu;
    cpu.os_index = static_cast<int>(pu->os_index);
    // A PU without a core of its own (some virtual machines) is its own core.
    cpu.core = ancestor_index(t, HWLOC_OBJ_CORE, pu, -1 - cpu.os_index);
    cpu.package = ancestor_index(t, HWLOC_OBJ_PACKAGE, pu, 0);
    cpu.numa_node = std::max(0, hwloc_bitmap_first(pu->nodeset));
    cpu.cache = last_level_cache(pu);
    m.cpus.push_back(cpu);
  }
  std::sort(m.cpus.begin(), m.cpus.end(), [](const auto& a, const auto& b) { return a.os_index < b.os_index; });
  std::vector<std::tuple<unsigned, unsigned, unsigned, unsigned, Machine::Gpu>> gpus;
  for (hwloc_obj_t pci = nullptr; (pci = hwloc_get_next_pcidev(t, pci)) != nullptr;) {
    if (!is_nvidia_gpu(pci)) continue;
    const auto& a = pci->attr->pcidev;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
    // The first NUMA node of the nearest CPU-side object; torch reads sysfs numa_node, and -1
    // (one node, or unknown) counts as node 0 there too.
    const hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t, pci);
    const int node = near != nullptr ? std::max(0, hwloc_bitmap_first(near->nodeset)) : 0;
    gpus.emplace_back(a.domain, a.bus, a.dev, a.func, Machine::Gpu{bus_id, node});
  }
  std::sort(gpus.begin(), gpus.end(), [](const auto& x, const auto& y) {
    return std::tie(std::get<0>(x), std::get<1>(x), std::get<2>(x), std::get<3>(x)) <
           std::tie(std::get<0>(y), std::get<1>(y), std::get<2>(y), std::get<3>(y));
  });
  for (auto& g : gpus) m.gpus.push_back(std::move(std::get<4>(g)));
  return m;
}

}  // namespace ddp::launcher
