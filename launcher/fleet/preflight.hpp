// The checks before a launch over ssh, every host at once, done within seconds: ssh logs in
// without a prompt, the working directory is there, the same ddplaunch (or --remote_ddplaunch)
// is there at the same version, node 0's port is free on the first host and every other host
// reaches it at --master_addr (as that host resolves the name). Each failure is one line naming
// the host and the fix, e.g.
//   host gpu3: ssh asks for a password or refuses the key (Permission denied (publickey,password)); set up a key (ssh-copy-id gpu3) or an agent
// The hosts' side is `ddplaunch --fleet_probe` (port_probe.hpp).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/fleet/host_command.hpp"

namespace ddp::launcher {

struct PreflightResult {
  std::vector<std::string> failures;  // one line each, without a prefix; empty: all passed
  int master_port = 0;                // the port node 0's host had free (the asked one, or one it chose for 0)
};

// Runs the checks on plan.hosts with `port` (0: let node 0's host choose). `ssh_env` is ssh's
// environment. Blocks until every host has answered or `budget` has passed (a host still silent
// then is a failure: its ssh is killed). Throws StartError when ssh cannot be started here.
PreflightResult run_preflight(const FleetOptions& fleet, const FleetPlan& plan, int port, const Environment& ssh_env,
                              std::chrono::seconds budget);

// The failure line for an ssh that ended with 255 (its own failure) and this stderr text. Pure.
std::string ssh_failure_line(const std::string& host, const FleetOptions& fleet, const std::string& stderr_text);

}  // namespace ddp::launcher
