// See backends.hpp.
#include "launcher/backends.hpp"

#include "launcher/cli/rdzv_backend_choice.hpp"
#include "launcher/etcd/etcd_backend.hpp"
#include "launcher/rdzv/store_backend.hpp"

namespace ddp::launcher {

const std::vector<BackendKind>& rendezvous_backends() {
  static const std::vector<BackendKind> backends{store_backend_kind(), etcd_backend_kind()};
  return backends;
}

std::unique_ptr<RendezvousBackend> make_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                bool host_store) {
  const BackendKind* kind = find_backend(rendezvous_backends(), config.rdzv_backend);
  DDP_ASSERT(kind != nullptr, "--rdzv_backend=" + config.rdzv_backend + " passed the command line's check");
  return kind->make(config, effective, host_store);
}

}  // namespace ddp::launcher
