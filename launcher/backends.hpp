// Which rendezvous backend a launch uses: --rdzv_backend etcd-v3 meets in etcd
// (etcd/etcd_backend.hpp); every other backend name that validation lets through (static, c10d)
// meets in the built-in store (rdzv/store_backend.hpp). The one place that names both.
#pragma once

#include <memory>

#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// A BackendFactory (rdzv/rendezvous_backend.hpp); throws what the chosen backend's constructor throws.
std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                bool host_store);

}  // namespace ddp::launcher
