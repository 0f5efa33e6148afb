// TorchFT's layout as data: what the layout's launcher gives each replica group's launcher and
// the lighthouse, and what a group's launcher makes of the command line it shares with the
// others (config/replica_groups.hpp, docs/orchestrators/torchft.md). Pure; never throws but
// where said.
#pragma once

#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// torchft's variables (torchft/torchx.py, torchft/manager.py).
inline constexpr const char* kReplicaGroupIdEnv = "REPLICA_GROUP_ID";
inline constexpr const char* kNumReplicaGroupsEnv = "NUM_REPLICA_GROUPS";
inline constexpr const char* kTorchftLighthouseEnv = "TORCHFT_LIGHTHOUSE";

// Group `layout.replicas.index`'s own configuration, from the command line every group shares:
//   - its store on --master_port + i (a given port; 0 stays a free port), --status_port + i;
//   - its run id "<run id>-replica<i>", its logs in <--log_dir>/replica_<i>;
//   - --summary_json, --event_log and --progress_file named for the group ("step.txt" →
//     "step.replica_<i>.txt": the script writes the one its REPLICA_GROUP_ID names);
//   - console lines "[replica_<i>/<rank>]:" when the prefix is the default one;
//   - the no-progress breaker measures --progress_file only: torchft makes new process groups
//     at every quorum, so collective sequence numbers restart and would call a group that heals
//     "no progress".
LaunchConfig group_config(const LaunchConfig& layout);

// "<stem>.replica_<i><extension>": "/x/summary.json" → "/x/summary.replica_1.json"; "" stays "".
std::string group_file(const std::string& path, int group);

// Where the groups find the lighthouse: "http://127.0.0.1:<--lighthouse_port>", or, with
// --lighthouse none, TORCHFT_LIGHTHOUSE from `env` when it is set.
std::string lighthouse_url(const ReplicaGroups& replicas, const Environment& env);

// Group i's launcher's environment: `env` with kReplicaGroupEnv, REPLICA_GROUP_ID, NUM_REPLICA_GROUPS and
// TORCHFT_LIGHTHOUSE (= `url`) set.
Environment group_environment(Environment env, const ReplicaGroups& replicas, int group, const std::string& url);

// The lighthouse's argv: --lighthouse split at spaces and tabs, then "--bind", "127.0.0.1:<port>".
std::vector<std::string> lighthouse_argv(const ReplicaGroups& replicas);

// --dry-run's account of the layout (`layout`: the layout's launcher's configuration), one line
// each: the lighthouse, then each group's store port, run id and variables.
std::string describe_layout(const LaunchConfig& layout, const Environment& env);

}  // namespace ddp::launcher
