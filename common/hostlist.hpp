// Slurm's host lists and its per-job default port, written once for the launcher (which reads
// them to find node 0) and the runtime (whose srun-started tasks read them to find rank 0), so
// that both always agree on the master's address and port.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp {

// Expands a Slurm host list: top-level commas separate entries, each bracket group holds
// comma-separated numbers or ranges (zero padding kept: "n[08-10]" -> n08 n09 n10), several
// groups in one entry multiply ("a[1-2]b[3-4]" -> a1b3 a1b4 a2b3 a2b4). Pure; does not block.
// Throws UsageError naming the list on an unbalanced bracket, a bad or descending range, or an
// expansion over kMaxHosts hosts.
std::vector<std::string> expand_hostlist(const std::string& list);
inline constexpr std::size_t kMaxHosts = 1'000'000;

// The store port of a Slurm job: MASTER_PORT when set, else 15000 + (SLURM_JOB_ID mod 20000)
// (Lightning's rule, so jobs sharing a node do not collide), computed exactly for job ids of any
// length. Throws UsageError naming the variable when MASTER_PORT is not a port, or SLURM_JOB_ID
// is missing or not a number.
int slurm_master_port(const EnvLookup& env);

// MASTER_PORT when set and not empty, which beats every per-job rule (Slurm's, MPI's). Throws
// UsageError when it is not a port number.
std::optional<int> master_port_override(const EnvLookup& env);

}  // namespace ddp
