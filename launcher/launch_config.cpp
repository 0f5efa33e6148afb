// validate() and the signal-name helpers.
#include "launcher/launch_config.hpp"

#include <algorithm>
#include <cctype>

namespace ddp::launcher {

int StreamSelection::for_rank(int local_rank) const {
  const auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? all : it->second;
}

void validate(const LaunchConfig& c) {
  if (c.program.empty()) {
    throw UsageError("no program given; usage: ddplaunch [options] PROGRAM [ARGS...] (see --help)");
  }
  if (c.min_nodes < 1 || c.max_nodes < c.min_nodes) {
    throw UsageError("--nnodes=" + std::to_string(c.min_nodes) + ":" + std::to_string(c.max_nodes) +
                     " is not a valid range; use N or MIN:MAX with 1 <= MIN <= MAX");
  }
  if (c.nproc_per_node < 1) {
    throw UsageError("--nproc_per_node=" + std::to_string(c.nproc_per_node) +
                     " must be at least 1 (or gpu, cpu, auto)");
  }
  if (c.node_rank < 0 || c.node_rank >= c.max_nodes) {
    throw UsageError("--node_rank=" + std::to_string(c.node_rank) + " is outside 0.." +
                     std::to_string(c.max_nodes - 1) + " for --nnodes=" + std::to_string(c.max_nodes) +
                     "; give each node a distinct rank below nnodes");
  }
  if (c.master_port < 0 || c.master_port > 65535 || (c.master_port == 0 && c.max_nodes > 1)) {
    throw UsageError("--master_port=" + std::to_string(c.master_port) +
                     " is not a usable port; pick one in 1..65535 (0 = any free port, single node only)");
  }
  if (c.max_restarts < 0) {
    throw UsageError("--max_restarts=" + std::to_string(c.max_restarts) + " must be 0 or more");
  }
  if (c.shutdown_timeout.count() < 0) throw UsageError("--shutdown_timeout must be 0 or more seconds");
  if (c.monitor_interval.count() <= 0) throw UsageError("--monitor_interval must be more than 0 seconds");
  if (c.rdzv_timeout.count() <= 0) throw UsageError("--rdzv_timeout must be more than 0 seconds");
  if (c.heartbeat_timeout.count() < 100) {
    throw UsageError("--heartbeat_timeout=" + std::to_string(c.heartbeat_timeout.count() / 1000.0) +
                     " s is too short; use at least 0.1 s (default 10)");
  }
  if (c.master_addr.empty()) throw UsageError("--master_addr is empty; give node 0's address (default 127.0.0.1)");
  if (c.run_id.empty()) throw UsageError("--rdzv_id is empty; give a job id shared by all nodes (default none)");
  if (c.role.empty()) throw UsageError("--role is empty; give a role name (default 'default')");
  {
    std::string rest = c.line_prefix_template;
    for (const char* v : {"${rank}", "${local_rank}", "${role_name}"}) {
      for (auto p = rest.find(v); p != std::string::npos; p = rest.find(v)) rest.erase(p, std::string(v).size());
    }
    if (rest.find("${") != std::string::npos) {
      throw UsageError("--log_line_prefix_template='" + c.line_prefix_template +
                       "' uses an unknown variable; use ${rank}, ${local_rank} and ${role_name}");
    }
  }
  if (c.no_python && c.module) {
    throw UsageError("--no_python and -m/--module exclude each other; drop one of them");
  }
  if (c.rdzv_backend != "static" && c.rdzv_backend != "c10d") {
    throw UsageError("--rdzv_backend=" + c.rdzv_backend +
                     " is not supported; use static or c10d (both use ddplaunch's own store)");
  }
  for (int r : c.local_ranks_filter) {
    if (r < 0 || r >= c.nproc_per_node) {
      throw UsageError("--local_ranks_filter names local rank " + std::to_string(r) + ", but only 0.." +
                       std::to_string(c.nproc_per_node - 1) + " exist");
    }
  }
}

}  // namespace ddp::launcher
