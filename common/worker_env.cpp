// See worker_env.hpp.
#include "common/worker_env.hpp"

namespace ddp::worker_env {

void apply(Environment& e, const WorkerEnv& w) {
  e[kLocalRank] = std::to_string(w.local_rank);
  e[kRank] = std::to_string(w.rank);
  e[kGroupRank] = std::to_string(w.group_rank);
  e[kRoleRank] = std::to_string(w.rank);
  e[kRoleName] = w.role_name;
  e[kLocalWorldSize] = std::to_string(w.local_world_size);
  e[kWorldSize] = std::to_string(w.world_size);
  e[kGroupWorldSize] = std::to_string(w.group_world_size);
  e[kRoleWorldSize] = std::to_string(w.world_size);
  e[kMasterAddr] = w.master_addr;
  e[kMasterPort] = std::to_string(w.master_port);
  e[kRestartCount] = std::to_string(w.restart_count);
  e[kMaxRestarts] = std::to_string(w.max_restarts);
  e[kRunId] = w.run_id;
  e[kUseAgentStore] = "True";
  e[kErrorFile] = w.error_file;
  e.try_emplace(kNcclAsyncErrorHandling, "1");
  if (w.local_world_size > 1) e.try_emplace(kOmpNumThreads, "1");
}

}  // namespace ddp::worker_env
