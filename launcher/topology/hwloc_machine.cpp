// See hwloc_machine.hpp. hwloc's objects are walked once and turned into plain data, so that the
// binding rules (numa_binder.hpp) are pure and tested without hwloc. The walk follows the object
// links itself (parent, children, I/O children) instead of hwloc's inline helpers, which would
// tie the binary to the library at link time (hwloc_library.hpp). Where the GPUs are has two
// answers: this machine's sysfs (sysfs_gpus.hpp), or a synthetic topology's PCI objects.
#include "launcher/topology/hwloc_machine.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <tuple>

#include "ddplaunch/common/error.hpp"
#include "launcher/topology/hwloc_library.hpp"
#include "launcher/topology/hwloc_plugins_off.hpp"
#include "launcher/topology/sysfs_gpus.hpp"

namespace ddp::launcher {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { HwlocLibrary::get().topology_destroy(t); }
};
using Topology = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Topology load(const HwlocLibrary& h, const std::string& xml_path) {
  const auto fail = [&](const char* step) {
    const std::string error = std::strerror(errno);
    if (xml_path.empty()) return Error(std::string("cannot read this machine's topology: ") + step + ": " + error);
    return Error("cannot load the topology in " + xml_path + ": " + step + ": " + error +
                 "; check that it is an hwloc XML file (lstopo --of xml)");
  };
  hwloc_topology_t raw = nullptr;
  {
    const HwlocPluginsOff no_plugins;  // hwloc loads its plugins here, and none is needed
    if (h.topology_init(&raw) != 0) throw fail("hwloc_topology_init");
  }
  Topology topology(raw);
  if (xml_path.empty()) {
    // This machine: CPUs, caches and NUMA nodes only. Its GPUs come from sysfs (sysfs_gpus.hpp):
    // hwloc's PCI discovery cost most of the read. The x86 component only annotates what Linux's
    // sysfs already gave (CPU model, cache inclusiveness), running cpuid on every CPU in turn.
    // Both calls only save time: a failure (no x86 component on another architecture) is ignored.
    h.topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
    h.topology_set_components(raw, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, "x86");
  } else {
    if (h.topology_set_xml(raw, xml_path.c_str()) != 0) throw fail("hwloc_topology_set_xml");
    // The file's GPUs are PCI objects (left out by default); their OS devices are not needed.
    h.topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    h.topology_set_type_filter(raw, HWLOC_OBJ_OS_DEVICE, HWLOC_TYPE_FILTER_KEEP_NONE);
  }
  if (h.topology_load(raw) != 0) throw fail("hwloc_topology_load");
  return topology;
}

bool is_data_cache(hwloc_obj_t o) {
  return o->type >= HWLOC_OBJ_L1CACHE && o->type <= HWLOC_OBJ_L3ICACHE &&
         o->attr->cache.type != HWLOC_OBJ_CACHE_INSTRUCTION;
}

bool is_io(hwloc_obj_t o) {
  return o->type == HWLOC_OBJ_BRIDGE || o->type == HWLOC_OBJ_PCI_DEVICE || o->type == HWLOC_OBJ_OS_DEVICE;
}

// The cache shared by the most CPUs above `pu` that holds data (not an instruction cache).
int last_level_cache(hwloc_obj_t pu) {
  int id = -1;
  unsigned depth = 0;
  for (hwloc_obj_t o = pu->parent; o != nullptr; o = o->parent) {
    if (is_data_cache(o) && o->attr->cache.depth > depth) {
      depth = o->attr->cache.depth;
      id = static_cast<int>(o->gp_index);
    }
  }
  return id;
}

int ancestor_index(hwloc_obj_type_t type, hwloc_obj_t pu, int otherwise) {
  for (hwloc_obj_t o = pu->parent; o != nullptr; o = o->parent)
    if (o->type == type) return static_cast<int>(o->logical_index);
  return otherwise;
}

bool is_nvidia_gpu(hwloc_obj_t o) {
  if (o->type != HWLOC_OBJ_PCI_DEVICE) return false;
  const unsigned short cls = o->attr->pcidev.class_id;
  return o->attr->pcidev.vendor_id == 0x10de && (cls == 0x0300 || cls == 0x0302);
}

struct Walk {
  std::vector<hwloc_obj_t> pus, gpus;
  void visit(hwloc_obj_t o) {
    if (o->type == HWLOC_OBJ_PU) pus.push_back(o);
    if (is_nvidia_gpu(o)) gpus.push_back(o);
    for (hwloc_obj_t c = o->first_child; c != nullptr; c = c->next_sibling) visit(c);
    for (hwloc_obj_t c = o->io_first_child; c != nullptr; c = c->next_sibling) visit(c);
  }
};

Machine::Gpu gpu_of(const HwlocLibrary& h, hwloc_obj_t pci) {
  const auto& a = pci->attr->pcidev;
  char bus_id[32];
  std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", a.domain, a.bus, a.dev, a.func);
  // The first NUMA node of the nearest CPU-side object; torch reads sysfs numa_node, and -1
  // (one node, or unknown) counts as node 0 there too.
  hwloc_obj_t near = pci->parent;
  while (near != nullptr && is_io(near)) near = near->parent;
  const int node = near != nullptr ? std::max(0, h.bitmap_first(near->nodeset)) : 0;
  return Machine::Gpu{bus_id, node};
}

}  // namespace

Machine load_machine(const std::string& xml_path) {
  const HwlocLibrary& h = HwlocLibrary::get();
  const Topology topology = load(h, xml_path);
  Walk walk;
  walk.visit(h.get_obj_by_depth(topology.get(), 0, 0));
  Machine m;
  for (hwloc_obj_t pu : walk.pus) {
    Machine::Cpu cpu;
    cpu.os_index = static_cast<int>(pu->os_index);
    // A PU without a core of its own (some virtual machines) is its own core.
    cpu.core = ancestor_index(HWLOC_OBJ_CORE, pu, -1 - cpu.os_index);
    cpu.package = ancestor_index(HWLOC_OBJ_PACKAGE, pu, 0);
    cpu.numa_node = std::max(0, h.bitmap_first(pu->nodeset));
    cpu.cache = last_level_cache(pu);
    m.cpus.push_back(cpu);
  }
  std::sort(m.cpus.begin(), m.cpus.end(), [](const auto& a, const auto& b) { return a.os_index < b.os_index; });
  if (xml_path.empty()) {
    m.gpus = sysfs_nvidia_gpus();
    return m;
  }
  const auto bus_order = [](hwloc_obj_t x, hwloc_obj_t y) {
    const auto& a = x->attr->pcidev;
    const auto& b = y->attr->pcidev;
    return std::tie(a.domain, a.bus, a.dev, a.func) < std::tie(b.domain, b.bus, b.dev, b.func);
  };
  std::sort(walk.gpus.begin(), walk.gpus.end(), bus_order);
  for (hwloc_obj_t pci : walk.gpus) m.gpus.push_back(gpu_of(h, pci));
  return m;
}

}  // namespace ddp::launcher
