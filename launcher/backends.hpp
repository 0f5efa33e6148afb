// Which rendezvous backends the launcher has: the built-in store (rdzv/store_backend.hpp:
// --rdzv_backend static or c10d) and etcd-v3 (etcd/etcd_backend.hpp). The one place that names
// them all: the command line chooses among this list (cli/rdzv_backend_choice.hpp) and the agent
// makes the chosen one through make_backend. A new backend is one more entry here.
#pragma once

#include <memory>
#include <vector>

#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// Every backend, in the order messages list their names. Pure; thread-safe.
const std::vector<BackendKind>& rendezvous_backends();

// A BackendFactory (rdzv/rendezvous_backend.hpp): the backend config.rdzv_backend names (checked
// by the command line); throws what the chosen backend's constructor throws.
std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                bool host_store);

}  // namespace ddp::launcher
