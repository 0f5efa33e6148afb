// See dry_run.hpp.
#include "launcher/dry_run.hpp"

#include <iostream>

#include <fmt/format.h>

#include "common/collective_progress.hpp"
#include "common/exit_codes.hpp"
#include "common/rank_ranges.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/agent/node_setup.hpp"
#include "launcher/config/failure_budget.hpp"
#include "launcher/health/node_health.hpp"
#include "launcher/status/job_registry.hpp"
#include "launcher/topology/numa_plan.hpp"
#include "launcher/watch/worker_timers.hpp"
#include "launcher/workers/python_hook.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {
namespace {

// Where the job's store will be, and how --dump_stacks finds the job (status/job_registry.hpp).
std::string describe_store(const LaunchConfig& c) {
  const std::string registry = JobRegistry::for_user(process_env()).dir();
  if (c.node_rank != 0) {
    return "store: node 0's, at " +
           rendezvous::format_endpoint(c.master_addr, static_cast<std::uint16_t>(c.master_port));
  }
  if (c.master_port == 0) {
    return fmt::format(
        "store: on {}, at a free port chosen at start (MASTER_PORT=0 below stands for it); the launcher prints it then "
        "('job store on {}:PORT'), and ddplaunch --dump_stacks without flags finds the job in {}",
        c.master_addr, c.master_addr, registry);
  }
  return fmt::format("store: on {}, hosted by this launcher; ddplaunch --dump_stacks without flags finds the job in {}",
                     rendezvous::format_endpoint(c.master_addr, static_cast<std::uint16_t>(c.master_port)), registry);
}

}  // namespace

int print_dry_run(const LaunchConfig& c) {
  EffectiveConfig eff;
  settle_node(c, eff);
  const Environment& env = eff.env;
  const PlannedRunDir run_dir = planned_run_dir(c);
  eff.log_root = run_dir.name_template;
  eff.temporary_log_root = run_dir.temporary;

  std::vector<NodeInfo> nodes;
  for (int n = 0; n < c.max_nodes; ++n) {
    const std::string name = n == c.node_rank ? eff.host : "?";
    nodes.push_back({n, c.nproc_per_node, name, name, 0, ""});
  }
  const RankMap ranks(nodes);
  std::cout << ranks.describe();
  if (c.rdzv_rules.node0_hosts_store) std::cout << describe_store(c) << "\n";
  const ProgressTable progress = ProgressTable::create(std::max(1, c.nproc_per_node));
  const bool hook = runs_with_python(c) && c.worker_server;
  const RoundWorkerContext context{.master_addr = std::string(),  // "": --master_addr and the launcher's port
                                   .master_port = 0,
                                   .timer_file = timer_file_path(env, eff.log_root),
                                   .progress_fd = progress.fd(),
                                   .python_hook_dir = hook ? python_hook_dir(eff.log_root) : std::string(),
                                   .socket_dir = hook ? eff.log_root : std::string()};
  const WorkerSpecInputs in = worker_spec_inputs(c, eff, ranks, c.node_rank, 0, context, env);
  if (runs_with_python(c)) std::cout << "python: " << eff.python.path << " (" << eff.python.reason << ")\n";
  const TimeoutsInForce timeouts = timeouts_in_force(c, env);
  for (const std::string& line : describe_timeouts(timeouts)) std::cout << line << "\n";
  for (const std::string& warning : nesting_warnings(timeouts)) std::cout << "warning: " << warning << "\n";
  std::cout << "health checks before every round (a node that fails one does not join; exit 69):\n";
  for (const std::string& line : describe_health_checks(c, run_dir.base)) std::cout << "  " << line << "\n";
  for (const auto& w : build_worker_specs(in)) {
    std::cout << "worker local_rank " << w.local_rank << " rank " << w.rank << ":\n  command:";
    for (const auto& a : w.argv) std::cout << " " << a;
    if (!eff.cpu_bindings.empty()) {
      const CpuBinding& b = eff.cpu_bindings.at(w.local_rank);
      std::cout << "\n  cpus (--numa_binding=" << c.numa_binding << "): " << rank_ranges(b.cpus) << ", " << b.place;
    }
    std::cout << "\n  environment (set or changed by ddplaunch):\n";
    for (const auto& [k, v] : w.env) {
      const auto it = env.find(k);
      if (it == env.end() || it->second != v) std::cout << "    " << k << "=" << v << "\n";
    }
  }
  return kExitOk;
}

}  // namespace ddp::launcher
