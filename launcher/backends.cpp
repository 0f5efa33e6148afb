// See backends.hpp.
#include "launcher/backends.hpp"

#include "launcher/etcd/etcd_backend.hpp"
#include "launcher/rdzv/store_backend.hpp"

namespace ddp::launcher {

std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                bool host_store) {
  if (config.uses_etcd()) return make_etcd_backend(config, effective, host_store);
  return make_store_backend(config, effective, host_store);
}

}  // namespace ddp::launcher
