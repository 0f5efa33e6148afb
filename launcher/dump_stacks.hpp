// `ddplaunch --dump_stacks`: the client side of watch/stacks_request.hpp, run instead of a job.
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// The client: connects to --master_addr:--master_port for --rdzv_id (and the job secret, if
// any), asks, prints each node's answer on stdout. Without any of those flags (config.find_job),
// the job is this user's only one on this machine, else the one started in the working directory
// (status/job_lookup.hpp); stderr says which, and names the others with the flags that choose
// them. When none or several were started there, it lists them and returns 2. Returns 0 when every
// node answered, 1 when no job is found or answers, the found job needs a job secret that was
// not given, the store refuses this host (a static job's store admits only its nodes and
// loopback once its round formed), a node did not answer within 30 s, or the nodes answered but
// no rank's stack could be read at all (ptrace refused everywhere: the notes under the ranks say
// why); each said in one line on stderr. Blocks.
int request_stacks(const LaunchConfig& config);

}  // namespace ddp::launcher
