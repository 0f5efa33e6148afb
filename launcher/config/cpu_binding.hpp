// One worker's CPUs under --numa_binding: decided once per node, before the first round, by the
// topology area (launcher/topology/numa_plan.hpp), and applied at every spawn (the child calls
// sched_setaffinity before exec, common/child_process.hpp). Plain data.
#pragma once

#include <string>
#include <vector>

namespace ddp::launcher {

struct CpuBinding {
  std::vector<int> cpus;  // logical CPU numbers (as in /proc/self/status Cpus_allowed_list), ascending
  std::string place;      // where they are, for --dry-run: "NUMA node 1, next to GPU 0 (0000:3b:00.0)"
};

}  // namespace ddp::launcher
