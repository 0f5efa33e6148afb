// libhwloc, loaded at run time (dlopen) the first time --numa_binding needs it, so that a launch
// without the flag neither maps it nor libudev: linked, the two cost every launch ~0.8 ms of
// wall time on the benchmark machine (bench/RESULTS.md, NUMA binding). The same choice as NVML's
// (health/nvml_devices.hpp). Only hwloc's exported functions are used through it: none of
// hwloc's inline helpers, which would call the library directly.
#pragma once

#include <hwloc.h>

namespace ddp::launcher {

struct HwlocLibrary {
  int (*topology_init)(hwloc_topology_t*);
  void (*topology_destroy)(hwloc_topology_t);
  int (*topology_set_xml)(hwloc_topology_t, const char*);
  int (*topology_set_io_types_filter)(hwloc_topology_t, enum hwloc_type_filter_e);
  int (*topology_set_type_filter)(hwloc_topology_t, hwloc_obj_type_t, enum hwloc_type_filter_e);
  int (*topology_set_components)(hwloc_topology_t, unsigned long, const char*);
  int (*topology_load)(hwloc_topology_t);
  hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t, int, unsigned);
  int (*bitmap_first)(hwloc_const_bitmap_t);

  // The library, loaded once (libhwloc.so.15: hwloc 2.x's ABI). Blocks for the dlopen the first
  // time. Throws Error naming the library and the fix (Debian: apt-get install libhwloc15) when it
  // cannot be loaded, lacks a function, or is not hwloc 2. Thread-safe.
  static const HwlocLibrary& get();
};

}  // namespace ddp::launcher
