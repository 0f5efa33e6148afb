// What an MPI launcher (OpenMPI's mpirun, PMIx's prterun, MPICH's Hydra mpiexec) tells each
// process it starts, read from the environment without linking MPI, written once for the launcher
// (one ddplaunch per node under mpirun: nnodes, node_rank, run id) and the runtime (one training
// process per GPU under mpirun: rank, world size, local rank).
//
// Variables, by launcher:
//   OpenMPI 4/5: OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE; the job id from
//                OMPI_MCA_ess_base_jobid (4.x) or PMIX_NAMESPACE (5.x); mpirun's own addresses
//                from OMPI_MCA_orte_hnp_uri (4.x, "<id>;tcp://10.0.0.1,192.168.1.1:port;...").
//   PMIx:        PMIX_RANK with PMIX_NAMESPACE (size only with OMPI_COMM_WORLD_SIZE).
//   MPICH Hydra: PMI_RANK, PMI_SIZE, MPI_LOCALRANKID, MPI_LOCALNRANKS.
//
// The master address: MASTER_ADDR when set; otherwise the first IPv4 address of mpirun itself
// (OMPI_MCA_orte_hnp_uri), which is rank 0's host when mpirun runs on the first host of the
// allocation (its default mapping); otherwise none (the caller's default, 127.0.0.1 on one
// machine). MASTER_ADDR (`mpirun -x MASTER_ADDR=host`) is the way to say it otherwise.
#pragma once

#include <optional>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp {

struct MpiProcess {
  const char* flavour = "";  // "OpenMPI", "PMIx", "MPICH"
  int rank = 0;
  int size = 1;
  int local_rank = 0;
  int local_size = 1;
  std::string job_id;                      // "" when the launcher names none
  std::optional<std::string> master_addr;  // MASTER_ADDR, else mpirun's address
};

// Whether any MPI launcher's rank variable is set (OMPI_COMM_WORLD_RANK, PMIX_RANK, PMI_RANK).
bool under_mpi(const EnvLookup& env);

// The MPI process this is, or nullopt when no MPI launcher started it. Pure. Throws UsageError
// naming the variable when one is malformed, missing beside the others (a rank without a size),
// or inconsistent (rank >= size, local rank >= local size).
std::optional<MpiProcess> mpi_process(const EnvLookup& env);

// The store port of an MPI job: MASTER_PORT when set, else 15000 + (job id mod 20000), the rule
// Slurm jobs use (hostlist.hpp), with a non-numeric job id (PMIx namespaces) hashed first; 29500
// when the launcher names no job. Throws UsageError for a MASTER_PORT that is not a port.
int mpi_master_port(const EnvLookup& env, const MpiProcess& process);

// The run id of an MPI job: "mpi-<job id>" with characters outside [A-Za-z0-9_.-] replaced by
// '_', or "none" when the launcher names no job. Pure.
std::string mpi_run_id(const MpiProcess& process);

}  // namespace ddp
