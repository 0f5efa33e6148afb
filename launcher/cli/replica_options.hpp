// The flags of TorchFT's layout (--replica_groups, --lighthouse, --lighthouse_port), what they and
// the group's variable (kReplicaGroupEnv) make of a LaunchConfig, and their rules
// (config/replica_groups.hpp, docs/orchestrators/torchft.md). Not thread-safe.
#pragma once

#include <optional>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

class FlagApp;

// The flags as text, before conversion (as CommandLineValues keeps numbers).
struct ReplicaValues {
  std::optional<std::string> groups;  // --replica_groups
  std::optional<std::string> lighthouse_port;
};

// Declares the three flags on `app`, binding them to `values` and `c` (both outlive `app`). Never throws.
void declare_replica_options(FlagApp& app, ReplicaValues& values, LaunchConfig& c);

// The flags' values and the group's index into `c`; each group's restart budget is 10 (torchft's)
// unless --max_restarts was given (`max_restarts_given`). Throws UsageError for a number that
// is not one, or a group variable that is not an index below --replica_groups.
void apply_replica_groups(const ReplicaValues& values, const EnvLookup& env, bool max_restarts_given, LaunchConfig& c);

// The rules of the layout, for validate(): one node per group, ports that fit, a lighthouse
// command without --bind. Throws UsageError naming the flag and the fix.
void check_replica_groups(const LaunchConfig& c);

}  // namespace ddp::launcher
