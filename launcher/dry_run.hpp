// `ddplaunch --dry-run`: what would run on this node, without running it.
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// The rank map (this node's view, every node with this nproc), each worker's command and the
// environment ddplaunch sets, on stdout, built by the run's own worker_spec_inputs(): the run
// directory is shown as its name template (<base>/<run_id>_XXXXXX; the run picks the suffix) and
// creates nothing; the collective-progress descriptor is a real one of this process. Returns 0.
// Throws UsageError as the run's worker specs would.
int print_dry_run(const LaunchConfig& config);

}  // namespace ddp::launcher
