// TorchFT's layout on the command line; see replica_options.hpp.
#include "launcher/cli/replica_options.hpp"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "launcher/cli/flag_app.hpp"
#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {

void declare_replica_options(FlagApp& app, ReplicaValues& values, LaunchConfig& c) {
  app.add_option("--replica_groups,--replica-groups", values.groups,
                 "run N replica groups (TorchFT): each its own launcher, restart domain and store port "
                 "(--master_port + i, or a free one), told REPLICA_GROUP_ID, NUM_REPLICA_GROUPS and "
                 "TORCHFT_LIGHTHOUSE, beside a lighthouse this launcher supervises; restarting one group never "
                 "touches the others (default 0: off; docs/orchestrators/torchft.md)")
      ->type_name("N");
  app.add_option("--lighthouse", c.replicas.lighthouse,
                 "with --replica_groups: the lighthouse command (split at spaces; ddplaunch adds --bind "
                 "127.0.0.1:PORT), or none for one started elsewhere (TORCHFT_LIGHTHOUSE) (default: torchft_lighthouse "
                 "--min_replicas 1 --quorum_tick_ms 100 --join_timeout_ms 10000)")
      ->type_name("CMD|none");
  app.add_option("--lighthouse_port,--lighthouse-port", values.lighthouse_port,
                 "with --replica_groups: the lighthouse's port (default 29510)")
      ->type_name("PORT");
}

void apply_replica_groups(const ReplicaValues& values, const EnvLookup& env, bool max_restarts_given, LaunchConfig& c) {
  if (values.groups) c.replicas.count = parse_whole_number("--replica_groups", *values.groups);
  if (values.lighthouse_port) c.replicas.lighthouse_port = parse_whole_number("--lighthouse_port", *values.lighthouse_port);
  if (c.replicas.count > 0 && !max_restarts_given) c.max_restarts = kDefaultReplicaGroupRestarts;
  const auto index = env(kReplicaGroupEnv);
  if (!index || c.replicas.count <= 0) return;  // a stray variable without the layout: no group
  const int i = parse_whole_number(kReplicaGroupEnv, *index);
  if (i < 0 || i >= c.replicas.count) {
    throw UsageError(fmt::format("{}={} is not a group of --replica_groups={}; unset {} (the layout's launcher sets it)",
                                 kReplicaGroupEnv, *index, c.replicas.count, kReplicaGroupEnv));
  }
  c.replicas.index = i;
}

void check_replica_groups(const LaunchConfig& c) {
  const ReplicaGroups& r = c.replicas;
  if (r.count == 0) return;
  if (r.count < 0 || r.count > kMaxReplicaGroups) {
    throw UsageError(fmt::format("--replica_groups={} is outside 1..{}; give the number of replica groups (0: off)",
                                 r.count, kMaxReplicaGroups));
  }
  if (c.max_nodes != 1) {
    throw UsageError(fmt::format(
        "--replica_groups runs every group on this node, but --nnodes is {}; drop --nnodes (each group is one "
        "node, as in torchft's torchx recipe) or start one ddplaunch per group without --replica_groups",
        c.min_nodes == c.max_nodes ? std::to_string(c.max_nodes) : fmt::format("{}:{}", c.min_nodes, c.max_nodes)));
  }
  if (c.master_port > 0 && c.master_port + r.count - 1 > 65535) {
    throw UsageError(fmt::format("--master_port={} leaves no port for replica group {} (port {}); pick a port below {}",
                                 c.master_port, r.count - 1, c.master_port + r.count - 1, 65536 - r.count + 1));
  }
  if (c.status_port > 0 && c.status_port + r.count - 1 > 65535) {
    throw UsageError(fmt::format("--status_port={} leaves no port for replica group {}; pick a port below {} or 0",
                                 c.status_port, r.count - 1, 65536 - r.count + 1));
  }
  if (!r.starts_lighthouse()) return;
  if (r.lighthouse.find_first_not_of(" \t") == std::string::npos) {
    throw UsageError("--lighthouse is empty; give the lighthouse command, or none for one started elsewhere");
  }
  if (r.lighthouse_port < 1 || r.lighthouse_port > 65535) {
    throw UsageError(fmt::format("--lighthouse_port={} is not a port; pick one in 1..65535 (default {})",
                                 r.lighthouse_port, kDefaultLighthousePort));
  }
  if (r.lighthouse.find("--bind") != std::string::npos) {
    throw UsageError(fmt::format("--lighthouse '{}' has its own --bind; drop it and give the port as --lighthouse_port "
                                 "(ddplaunch binds the lighthouse and tells the groups where it is)",
                                 r.lighthouse));
  }
}

}  // namespace ddp::launcher
