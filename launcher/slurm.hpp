// Slurm support: launching one ddplaunch per node with `srun --ntasks-per-node=1 ddplaunch ...`
// fills nnodes, node_rank and master address from SLURM_* and a per-job port.
#pragma once

#include <string>
#include <vector>

#include "launcher/cli.hpp"

namespace ddp::launcher {

// Expands a Slurm host list such as "gpu[01-04,07],login1" into host names, in order.
// Throws UsageError on unbalanced brackets or a bad range.
std::vector<std::string> expand_hostlist(const std::string& list);

// The default store port for a Slurm job: 15000 + (job id % 20000), unless MASTER_PORT is set,
// so that jobs sharing a node do not collide (Lightning's rule).
int slurm_port(const EnvLookup& env);

// Sets min/max nodes from SLURM_NNODES (or SLURM_JOB_NUM_NODES), node_rank from SLURM_NODEID,
// master_addr from the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST), and, unless
// `port_given`, master_port from slurm_port(). Throws UsageError naming a missing variable.
void apply_slurm_environment(const EnvLookup& env, bool port_given, LaunchConfig& config);

}  // namespace ddp::launcher
