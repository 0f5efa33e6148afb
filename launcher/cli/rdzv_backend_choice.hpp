// --rdzv_backend: the name checked against the backends the launcher has (BackendKind,
// rdzv/rendezvous_backend.hpp; launcher/backends.cpp lists them), the chosen one's rules copied
// into the configuration, and what it takes from the command line filled in. The only part of the
// command line that knows there is more than one backend, and it names none.
#pragma once

#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// The backend of `backends` that --rdzv_backend `name` chooses; nullptr for a name none has.
const BackendKind* find_backend(const std::vector<BackendKind>& backends, const std::string& name);

// Chooses config.rdzv_backend among `backends` (after --rdzv_conf is applied): sets
// config.rdzv_rules, checks the --rdzv_conf keys against it (rdzv_conf.hpp), runs its configure
// step, and with a backend where node 0 hosts no store (BackendRules) makes the workers' store's
// port a free one unless --master_port was given (`master_port_given`). Throws UsageError naming
// the value and the fix: a refused name (torchrun's etcd: use etcd-v3), an unknown one (listing
// the known), a key of another backend, or what the backend's configure step throws.
void apply_rdzv_backend(LaunchConfig& config, const EnvLookup& env, bool master_port_given,
                        const std::vector<BackendKind>& backends);

}  // namespace ddp::launcher
