// --dry-run: what would run, without running it.
#include <unistd.h>

#include <iostream>

#include "common/exit_codes.hpp"
#include "common/host_name.hpp"
#include "launcher/agent/agent.hpp"

namespace ddp::launcher {

int print_dry_run(const LaunchConfig& c) {
  const std::string host = host_name();
  std::vector<NodeInfo> nodes;
  for (int n = 0; n < c.max_nodes; ++n) {
    const std::string name = n == c.node_rank ? host : "?";
    nodes.push_back({n, c.nproc_per_node, name, name, 0, ""});
  }
  const RankMap ranks(nodes);
  std::cout << ranks.describe();
  WorkerSpecInputs in{c, ranks, c.node_rank, 0, c.master_addr, c.master_port, current_environment(), c.log_dir};
  const PythonInterpreter python = choose_python(in.base_env, own_executable());
  in.python = python.path;
  if (runs_with_python(c)) std::cout << "python: " << python.path << " (" << python.reason << ")\n";
  for (const auto& w : build_worker_specs(in)) {
    std::cout << "worker local_rank " << w.local_rank << " rank " << w.rank << ":\n  command:";
    for (const auto& a : w.argv) std::cout << " " << a;
    std::cout << "\n  environment (set or changed by ddplaunch):\n";
    for (const auto& [k, v] : w.env) {
      const auto it = in.base_env.find(k);
      if (it == in.base_env.end() || it->second != v) std::cout << "    " << k << "=" << v << "\n";
    }
  }
  return kExitOk;
}

}  // namespace ddp::launcher
