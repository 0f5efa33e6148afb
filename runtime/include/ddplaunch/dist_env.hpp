// Where a worker finds out who it is: rank, world size, local rank, local world size and the
// store's address, read from the environment its launcher left (ddplaunch/torchrun, the legacy
// torch.distributed.launch `--local_rank` argument, or Slurm's srun). A pure function over an
// environment lookup and argv, so every init path is testable without touching the process.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/common/error.hpp"

namespace ddp::runtime {

// Missing, malformed or inconsistent launch variables; the message names every variable involved.
class EnvError : public ddp::Error {
 public:
  using Error::Error;
};

// The environment is read through ddp::EnvLookup (ddplaunch/common/env_lookup.hpp).
using ddp::EnvLookup;
using ddp::process_env;

// Which launcher's variables the DistEnv came from.
enum class EnvSource { Torchrun, LegacyLocalRank, Slurm, Mpi };

const char* to_string(EnvSource source);

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  // Ranks on this node; 0 when the launcher did not say (legacy path without LOCAL_WORLD_SIZE).
  int local_world_size = 1;
  std::string master_addr;
  std::uint16_t master_port = 0;
  EnvSource source = EnvSource::Torchrun;
  // This process hosts the store at master_addr:master_port: rank 0 of an MPI job started without
  // a launcher (mpirun -np 4 ./train), where no launcher hosts one.
  bool host_store = false;
};

// Resolves the distributed environment. Does not block; not affected by other threads (it only
// calls `env`). The first path whose marker is present wins:
//  1. torchrun/ddplaunch: LOCAL_RANK is set. Needs RANK, WORLD_SIZE, LOCAL_RANK,
//     LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT. A `--local_rank` in argv must agree.
//  2. legacy torch.distributed.launch: `--local_rank=i`, `--local-rank=i` or `--local_rank i` in
//     argv. Needs MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK; LOCAL_WORLD_SIZE is optional.
//  3. srun: SLURM_PROCID is set. Needs SLURM_NTASKS, SLURM_LOCALID, and SLURM_JOB_NODELIST (or
//     SLURM_NODELIST) unless MASTER_ADDR is set. Local world size from SLURM_NTASKS_PER_NODE,
//     else SLURM_TASKS_PER_NODE ("2(x3),1") at SLURM_NODEID, else SLURM_NTASKS /
//     SLURM_JOB_NUM_NODES. Master: MASTER_ADDR or the first host of the node list. Port:
//     MASTER_PORT or 15000 + SLURM_JOB_ID % 20000.
//  4. mpirun/mpiexec: OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK is set (common/mpi_env.hpp:
//     OpenMPI, PMIx, MPICH Hydra). Rank, size, local rank and local size from those variables;
//     master: MASTER_ADDR, else mpirun's own address (OMPI_MCA_orte_hnp_uri), else 127.0.0.1;
//     port: MASTER_PORT, else 15000 + job id % 20000 (29500 without a job id). Rank 0 hosts the
//     store (host_store).
// Throws EnvError naming the variables when none of the paths applies, a required variable is
// missing or not a number, or the values contradict each other (rank >= world size, ...).
DistEnv resolve_dist_env(const EnvLookup& env, const std::vector<std::string>& argv);

// Whether any launcher's marker is present (LOCAL_RANK, SLURM_PROCID, an MPI rank variable or a
// --local_rank argument),
// i.e. whether resolve_dist_env has a path to try. Does not validate; does not throw.
bool has_launch_env(const EnvLookup& env, const std::vector<std::string>& argv);

// resolve_dist_env over this process's environment (getenv) and argv.
DistEnv dist_env_from_process(int argc, const char* const* argv);

}  // namespace ddp::runtime
