// Which CPUs each local rank of a node gets under --numa_binding: torch 2.15's rules
// (torch/numa/binding.py), plus a placement for workers without a GPU, which torch refuses.
//
// With GPUs, local rank i goes with the launcher's GPU i (torch binds device index = local rank)
// and its device's NUMA node is the worker's node. Without GPUs, ddplaunch places local rank i on
// the NUMA nodes round-robin (node i mod the number of nodes; for `socket`, socket i mod the
// number of sockets), and the workers placed on a node play the part of its devices. Then:
//   node:         every allowed CPU of the node;
//   socket:       every allowed CPU of the node's socket;
//   exclusive:    the node's physical cores, in CPU order, split into one contiguous slice per
//                 device on the node, the first (cores mod devices) slices one core longer; each
//                 worker gets every hardware thread of its slice's cores;
//   core-complex: the node's last-level-cache domains, largest first (then lowest CPU), and the
//                 k-th device of the node gets domain k mod their number.
// "Allowed" is the launcher's own CPU mask (sched_getaffinity), as in torch. Pure.
#pragma once

#include <vector>

#include "launcher/config/cpu_binding.hpp"
#include "launcher/config/numa_mode.hpp"
#include "launcher/topology/machine.hpp"

namespace ddp::launcher {

struct NumaBindingRequest {
  NumaMode mode = NumaMode::Node;
  int nproc = 1;                  // workers on this node (local ranks 0..nproc-1)
  std::vector<int> gpus;          // the launcher's GPUs, as indices into Machine::gpus, in device order; empty: none
  std::vector<int> allowed_cpus;  // the CPUs the launcher may use; empty: every CPU of the machine
};

// One CpuBinding per local rank. Throws UsageError naming the values and a fix when a worker has
// no GPU while others have (more workers than GPUs), when `exclusive` finds fewer cores than
// devices on a node, or when a worker would get no CPU.
std::vector<CpuBinding> numa_bindings(const Machine& machine, const NumaBindingRequest& request);

}  // namespace ddp::launcher
