// Slurm host lists ("node[01-03,07],gpu5"): expanded here so that the runtime can pick the first
// host of SLURM_JOB_NODELIST as master without depending on the launcher (which has its own).
#pragma once

#include <string>
#include <vector>

namespace ddp::runtime {

// Expands a Slurm host list: top-level commas separate entries, each bracket group holds
// comma-separated numbers or ranges (zero padding kept: "n[08-10]" -> n08 n09 n10), several
// groups in one entry multiply ("a[1-2]b[3-4]" -> a1b3 a1b4 a2b3 a2b4). Does not block.
// Throws EnvError on an unbalanced bracket, a bad range, or an expansion over 1,000,000 hosts.
std::vector<std::string> expand_hostlist(const std::string& list);

}  // namespace ddp::runtime
