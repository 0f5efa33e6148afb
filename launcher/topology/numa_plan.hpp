// --numa_binding for this node: the topology (hwloc: this machine, or the XML file named by
// DDPLAUNCH_HWLOC_XML, for tests and diagnosis), the launcher's GPUs (CUDA_VISIBLE_DEVICES) and
// CPU mask, turned into one CpuBinding per local rank (numa_binder.hpp). Run once per node,
// before the first round and by --dry-run; the workers area applies the result at each spawn.
#pragma once

#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/cpu_binding.hpp"
#include "launcher/topology/machine.hpp"

namespace ddp::launcher {

// Test and diagnosis only: an hwloc XML topology to use instead of this machine's. The
// launcher's CPU mask is not applied to it (it describes another machine); a binding to CPUs
// this machine lacks then fails at the worker's start (sched_setaffinity).
inline constexpr const char* kHwlocXmlEnv = "DDPLAUNCH_HWLOC_XML";

// The launcher's GPUs as indices into machine.gpus: CUDA_VISIBLE_DEVICES's numbers when set (as
// CUDA reads it, the list ends at the first entry that is not a GPU's number; "" hides them all),
// else every GPU. Throws UsageError for GPU UUIDs (GPU-..., MIG-...), which cannot be mapped to
// PCI devices.
std::vector<int> launcher_gpus(const Machine& machine, const Environment& env);

// `mode` is --numa_binding's value ("" : none, and an empty result). Reads the topology (blocks
// for about a millisecond), never changes the launcher's own affinity. Throws UsageError for an
// invalid mode or a binding that cannot be made (numa_binder.hpp), Error when the topology
// cannot be read. Not thread-safe (load_machine(), hwloc_machine.hpp): call it before starting threads.
std::vector<CpuBinding> plan_numa_binding(const std::string& mode, int nproc, const Environment& env);

}  // namespace ddp::launcher
