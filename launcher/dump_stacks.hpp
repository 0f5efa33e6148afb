// `ddplaunch --dump_stacks`: the client side of watch/stacks_request.hpp, run instead of a job.
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// The client: connects to --master_addr:--master_port for --rdzv_id (and the job secret, if
// any), asks, prints each node's answer on stdout. Returns 0 when every node answered, 1 when
// no job answers or a node did not answer within 30 s (named on stderr). Blocks.
int request_stacks(const LaunchConfig& config);

}  // namespace ddp::launcher
