// MPI support: `mpirun -np N --map-by ppr:1:node ddplaunch --nproc_per_node=G ./train` starts one
// launcher per node; nnodes, node_rank, run id and the store's port come from the MPI launcher's
// variables (common/mpi_env.hpp), as they come from SLURM_* under srun (slurm.hpp). No MPI
// library is linked.
#pragma once

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Sets min/max nodes from the MPI world size, node_rank from the MPI rank, the run id (unless
// --rdzv_id gave one), master_addr from MASTER_ADDR or mpirun's address (unless `addr_given`),
// and master_port from mpi_master_port() (unless `port_given`). Throws UsageError naming a
// malformed variable. Call only when under_mpi(env).
void apply_mpi_environment(const EnvLookup& env, bool addr_given, bool port_given, LaunchConfig& config);

}  // namespace ddp::launcher
