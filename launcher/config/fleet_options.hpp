// What a launch over ssh from a hostfile asks for (--hostfile / --hosts, launcher/fleet/): the
// hosts, how ssh reaches them, what of the local environment goes with the job, and the
// command line every host's launcher is given. Plain data, filled by the command line (cli/);
// the fleet area reads it. A launcher started by the controller over ssh (--fleet_stdin) has
// none of the host fields set: it is an ordinary node that reads its secret and environment from
// its standard input (fleet/control_channel.hpp).
#pragma once

#include <set>
#include <string>
#include <vector>

namespace ddp::launcher {

struct FleetOptions {
  std::string hostfile;  // --hostfile: DeepSpeed's format, `host slots=N` lines
  std::string hosts;     // --hosts: a Slurm host list, node[01-04]
  std::string include;   // --include: DeepSpeed's host[:slot,slot]@host
  std::string exclude;   // --exclude: the same syntax
  int ssh_port = 0;      // --ssh_port: ssh -p (0: the user's ssh config decides)
  std::vector<std::string> ssh_options;  // each --ssh_option: one ssh -o value, after the user's own config
  std::vector<std::string> exports;      // --export NAME[,NAME]: local variables forwarded besides the defaults
  std::string env_file;                  // --env_file: NAME=VALUE lines for every host ("": ./.ddplaunch_env if present)
  std::string remote_ddplaunch;          // --remote_ddplaunch: the launcher on the hosts ("": this one's path)
  bool fleet_stdin = false;              // --fleet_stdin (hidden): started by a controller, see above
  std::string fleet_probe;               // --fleet_probe listen|connect (hidden): the preflight's port check
  // The launcher's own arguments with the flags above removed (argv[0] excluded), then the
  // program and its arguments; and the flags among them that the user gave (full names, e.g.
  // "--nnodes"), which the controller then leaves to the user instead of setting per host.
  std::vector<std::string> forward_args;
  std::set<std::string> given_flags;

  bool active() const { return !hostfile.empty() || !hosts.empty(); }
};

}  // namespace ddp::launcher
