// Volcano's pytorch plugin → LaunchConfig; see volcano.hpp.
#include "launcher/cli/volcano.hpp"

#include <fmt/format.h>

#include "common/log.hpp"
#include "common/worker_env.hpp"
#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {

bool under_volcano(const EnvLookup& env) {
  for (const char* name : {worker_env::kWorldSize, worker_env::kRank, worker_env::kMasterAddr, worker_env::kMasterPort}) {
    if (!env(name)) return false;
  }
  if (env("PET_NNODES") || env("PET_NODE_RANK")) return false;
  for (const char* mark : {"VC_MASTER_NUM", "VC_WORKER_NUM", "VC_TASK_INDEX", "VK_TASK_INDEX"}) {
    if (env(mark)) return true;
  }
  return false;
}

void apply_volcano_environment(const EnvLookup& env, bool addr_given, bool port_given, LaunchConfig& c) {
  const int pods = parse_whole_number(worker_env::kWorldSize, *env(worker_env::kWorldSize));
  const int rank = parse_whole_number(worker_env::kRank, *env(worker_env::kRank));
  if (pods < 1 || rank < 0 || rank >= pods) {
    throw UsageError(fmt::format(
        "Volcano's pytorch plugin set WORLD_SIZE={} and RANK={} (pods, and this pod's index): RANK must be in "
        "0..WORLD_SIZE-1; check the job's master and worker tasks, or give --nnodes and --node_rank",
        pods, rank));
  }
  c.min_nodes = c.max_nodes = pods;
  c.node_rank = rank;
  if (!addr_given) c.master_addr = *env(worker_env::kMasterAddr);
  if (!port_given) c.master_port = parse_whole_number(worker_env::kMasterPort, *env(worker_env::kMasterPort));
  log::info("Volcano's pytorch plugin: pod {} of {} (WORLD_SIZE, RANK), store at {}:{}; the workers get their own "
            "RANK and WORLD_SIZE",
            rank, pods, c.master_addr, c.master_port);
}

}  // namespace ddp::launcher
