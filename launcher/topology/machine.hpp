// What --numa_binding needs to know of a machine, as plain data: every logical CPU with the core,
// socket, NUMA node and last-level cache it belongs to, and the GPUs with the NUMA node each is
// attached to. Filled from hwloc (hwloc_machine.hpp) or written out by tests. Plain data.
#pragma once

#include <string>
#include <vector>

namespace ddp::launcher {

struct Machine {
  struct Cpu {
    int os_index = 0;   // the kernel's CPU number
    int core = 0;       // equal for the hardware threads of one physical core
    int package = 0;    // the socket
    int numa_node = 0;  // the NUMA node's OS number
    int cache = -1;     // equal for the CPUs sharing one last-level cache; -1: no cache known
  };
  struct Gpu {
    std::string pci_bus_id;  // "0000:3b:00.0"
    int numa_node = 0;       // the nearest NUMA node's OS number
  };
  std::vector<Cpu> cpus;  // ascending os_index
  std::vector<Gpu> gpus;  // in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID; nvidia-smi's order)
};

}  // namespace ddp::launcher
