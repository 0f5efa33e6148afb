// See workers_keys.hpp.
#include "launcher/rdzv/workers_keys.hpp"

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

bool is_workers_key(std::string_view wire_key) {
  return wire_key.substr(0, kLaunchersWirePrefix.size()) != kLaunchersWirePrefix;
}

std::size_t delete_workers_keys(rendezvous::TcpStoreClient& raw) {
  DDP_ASSERT(raw.options().key_prefix.empty(),
             "delete_workers_keys needs a client without a key prefix, not '" + raw.options().key_prefix + "'");
  std::size_t deleted = 0;
  for (const std::string& key : raw.list_keys()) {
    // A key gone meanwhile (nothing else deletes workers' keys now) is not counted.
    if (is_workers_key(key) && raw.delete_key(key)) ++deleted;
  }
  return deleted;
}

}  // namespace ddp::launcher
