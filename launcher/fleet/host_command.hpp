// The ssh command lines of a launch over ssh: for each host, `ssh [options] HOST COMMAND`, where
// COMMAND (run by the host's login shell, a POSIX sh) changes to the controller's working
// directory and execs the same ddplaunch (or --remote_ddplaunch) with the user's arguments and
// the per-host flags the user did not give (--nnodes, --node_rank, --master_addr,
// --master_port, --nproc_per_node from the slots, --rdzv_id). ssh options: the user's
// --ssh_option values first (ssh keeps the first value of an option, so theirs win over ours),
// then BatchMode=yes (a prompt would hang: the controller owns ssh's stdin); the user's
// ~/.ssh/config applies as always. Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "launcher/config/fleet_options.hpp"
#include "launcher/fleet/host_list.hpp"

namespace ddp::launcher {

// What every host's command shares.
struct FleetPlan {
  std::vector<FleetHost> hosts;
  std::string cwd;           // the controller's working directory
  std::string ddplaunch;     // the launcher to exec on the hosts (absolute)
  std::string master_addr;   // node 0 as the other hosts reach it: the first host's name
  int master_port = 29500;
  std::string run_id;        // a fresh --rdzv_id, so that two jobs on the same hosts never meet
};

// `word` quoted for a POSIX shell ('...' with ' written as '\''). Pure.
std::string shell_quote(const std::string& word);

// ssh's arguments before the host: ssh, -p, the user's -o options, ours. `extra` are more -o
// options of the caller's (the preflight's ConnectTimeout), after the user's.
std::vector<std::string> ssh_prefix(const FleetOptions& fleet, const std::vector<std::string>& extra = {});

// The remote command for host `index` (the shell text after the host on ssh's command line).
std::string host_command(const FleetOptions& fleet, const FleetPlan& plan, std::size_t index);

// ssh's whole argv for host `index`.
std::vector<std::string> host_ssh_argv(const FleetOptions& fleet, const FleetPlan& plan, std::size_t index);

// A line a user can paste: the argv joined with shell quoting where needed.
std::string printable_command(const std::vector<std::string>& argv);

}  // namespace ddp::launcher
