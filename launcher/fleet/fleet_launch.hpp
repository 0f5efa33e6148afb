// A launch over ssh from a hostfile (--hostfile / --hosts): the controller. In order:
//   1. the hosts (host_list.hpp) and the plan every host's command shares (host_command.hpp);
//   2. the preflight (preflight.hpp): every failure a line, then exit 2 before anything starts;
//   3. a fresh job secret (32 random bytes, hex) and the forwarded environment
//      (forwarded_env.hpp), written on each ssh's stdin (control_channel.hpp), never on a
//      command line;
//   4. one ssh per host, all at once, each running that host's launcher in the same directory;
//      their lines relayed whole, stdout to stdout and stderr to stderr, with the prefixes the
//      hosts' launchers give them (--log_line_prefix_template ${hostname} adds the host);
//   5. a Ctrl-C, SIGTERM or SIGHUP here is told to every host's launcher on its channel (a second
//      one closes the channels, a third kills ssh), as is the controller's death (the channels
//      end); every host's launcher then stops its own job, and nothing of another job;
//   5b. a static job's host whose ssh connection is lost (ssh exit 255) stops the job on every
//      host (nobody would start that node again), exit 1; an elastic job goes on without it;
//   6. the exit code is the job's, which every node agrees on: node 0's launcher's, never ssh's
//      own 255 (then another node's, or 1 when every connection was lost).
#pragma once

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Runs the job as above. Blocks until every host's launcher has ended. Returns the exit code.
// Throws UsageError for a bad hostfile or selection (exit 2).
int run_fleet(const LaunchConfig& config);

// --dry-run with --hostfile/--hosts: prints each host's ssh command line and what its stdin
// carries (the secret masked) without connecting to any host. Returns 0.
int print_fleet_dry_run(const LaunchConfig& config);

}  // namespace ddp::launcher
