// Slurm support: launching one ddplaunch per node with `srun --ntasks-per-node=1 ddplaunch ...`
// fills nnodes, node_rank and master address from SLURM_* and a per-job port. The host-list and
// port rules are common (common/hostlist.hpp), so srun-started workers find the same master.
#pragma once

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Sets min/max nodes from SLURM_NNODES (or SLURM_JOB_NUM_NODES), node_rank from SLURM_NODEID,
// master_addr from the first host of SLURM_JOB_NODELIST (or SLURM_NODELIST), and, unless
// `port_given`, master_port from slurm_master_port(). Throws UsageError naming a missing or
// malformed variable.
void apply_slurm_environment(const EnvLookup& env, bool port_given, LaunchConfig& config);

}  // namespace ddp::launcher
