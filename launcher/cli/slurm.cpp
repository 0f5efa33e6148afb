// Slurm environment → LaunchConfig; see slurm.hpp.
#include "launcher/cli/slurm.hpp"

#include <algorithm>

#include "common/hostlist.hpp"

namespace ddp::launcher {
namespace {

bool is_count(const std::string& s) {
  return !s.empty() && s.size() <= 6 && std::all_of(s.begin(), s.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
}

}  // namespace

void apply_slurm_environment(const EnvLookup& env, bool port_given, LaunchConfig& c) {
  const auto need = [&](std::initializer_list<const char*> names) {
    for (const char* n : names) {
      if (auto v = env(n)) return *v;
    }
    throw UsageError(std::string("running under Slurm (SLURM_JOB_ID is set) but ") + *names.begin() +
                     " is not; start ddplaunch with srun, or pass --nnodes/--node_rank/--master_addr");
  };
  const std::string nnodes = need({"SLURM_NNODES", "SLURM_JOB_NUM_NODES"});
  const std::string nodeid = need({"SLURM_NODEID"});
  const std::string nodelist = need({"SLURM_JOB_NODELIST", "SLURM_NODELIST"});
  if (!is_count(nnodes) || !is_count(nodeid)) {
    throw UsageError("SLURM_NNODES=" + nnodes + " / SLURM_NODEID=" + nodeid + " are not numbers");
  }
  c.min_nodes = c.max_nodes = std::stoi(nnodes);
  c.node_rank = std::stoi(nodeid);
  const auto hosts = expand_hostlist(nodelist);
  if (hosts.empty()) throw UsageError("SLURM_JOB_NODELIST='" + nodelist + "' names no host");
  c.master_addr = hosts.front();
  if (!port_given) c.master_port = slurm_master_port(env);
  if (c.run_id == "none") {
    if (auto job = env("SLURM_JOB_ID")) c.run_id = "slurm-" + *job;
  }
}

}  // namespace ddp::launcher
