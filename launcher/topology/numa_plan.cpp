// See numa_plan.hpp.
#include "launcher/topology/numa_plan.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <sstream>

#include "common/worker_env.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/config/numa_mode.hpp"
#include "launcher/topology/hwloc_machine.hpp"
#include "launcher/topology/numa_binder.hpp"

namespace ddp::launcher {
namespace {

// The CPUs this process may run on (torch intersects its bindings with them too).
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0)
    throw Error(std::string("sched_getaffinity: ") + std::strerror(errno));
  std::vector<int> out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out.push_back(cpu);
  return out;
}

}  // namespace

std::vector<int> launcher_gpus(const Machine& machine, const Environment& env) {
  const int count = static_cast<int>(machine.gpus.size());
  std::vector<int> out;
  const auto it = env.find(worker_env::kCudaVisibleDevices);
  if (it == env.end()) {
    for (int i = 0; i < count; ++i) out.push_back(i);
    return out;
  }
  std::stringstream list(it->second);
  for (std::string entry; std::getline(list, entry, ',');) {
    if (entry.rfind("GPU-", 0) == 0 || entry.rfind("MIG-", 0) == 0) {
      throw UsageError("--numa_binding: CUDA_VISIBLE_DEVICES=" + it->second +
                       " names GPUs by UUID, which cannot be matched to PCI devices; list them by number");
    }
    if (entry.empty() || entry.find_first_not_of("0123456789") != std::string::npos) break;
    const int index = std::stoi(entry);
    if (index >= count) break;
    out.push_back(index);
  }
  return out;
}

std::vector<CpuBinding> plan_numa_binding(const std::string& mode, int nproc, const Environment& env) {
  if (mode.empty()) return {};
  NumaBindingRequest request;
  request.mode = parse_numa_mode(mode);
  request.nproc = nproc;
  const auto xml = env.find(kHwlocXmlEnv);
  const bool synthetic = xml != env.end() && !xml->second.empty();
  const Machine machine = load_machine(synthetic ? xml->second : "");
  request.gpus = launcher_gpus(machine, env);
  if (!synthetic) request.allowed_cpus = own_cpus();
  return numa_bindings(machine, request);
}

}  // namespace ddp::launcher
