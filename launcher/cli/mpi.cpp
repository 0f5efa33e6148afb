// MPI environment → LaunchConfig; see mpi.hpp.
#include "launcher/cli/mpi.hpp"

#include "common/mpi_env.hpp"

namespace ddp::launcher {

void apply_mpi_environment(const EnvLookup& env, bool addr_given, bool port_given, LaunchConfig& c) {
  const auto process = mpi_process(env);
  DDP_ASSERT(process, "apply_mpi_environment called without MPI variables");
  c.min_nodes = c.max_nodes = process->size;
  c.node_rank = process->rank;
  if (!addr_given && process->master_addr) c.master_addr = *process->master_addr;
  if (!port_given) c.master_port = mpi_master_port(env, *process);
  if (c.run_id == "none") c.run_id = mpi_run_id(*process);
}

}  // namespace ddp::launcher
