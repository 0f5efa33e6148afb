// See workers_keys.hpp.
#include "launcher/rdzv/workers_keys.hpp"

#include <optional>

#include "ddplaunch/common/error.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace ddp::launcher {

bool is_workers_key(std::string_view wire_key) {
  return wire_key.substr(0, kLaunchersWirePrefix.size()) != kLaunchersWirePrefix;
}

std::size_t delete_workers_keys(rendezvous::TcpStoreClient& raw) {
  return delete_stale_keys(raw, StaleRounds{}).workers;
}

DeletedKeys delete_stale_keys(rendezvous::TcpStoreClient& raw, const StaleRounds& rounds) {
  DDP_ASSERT(raw.options().key_prefix.empty(),
             "delete_stale_keys needs a client without a key prefix, not '" + raw.options().key_prefix + "'");
  const std::string_view job = rounds.job_wire_prefix;
  DeletedKeys deleted;
  for (const std::string& key : raw.list_keys()) {
    // A key gone meanwhile (nothing else deletes these keys) is not counted.
    if (is_workers_key(key)) {
      if (raw.delete_key(key)) ++deleted.workers;
      continue;
    }
    if (job.empty() || std::string_view(key).substr(0, job.size()) != job) continue;
    const std::optional<int> round = round_of_key(std::string_view(key).substr(job.size()));
    if (round && *round < rounds.first_round_kept && raw.delete_key(key)) ++deleted.rounds;
  }
  return deleted;
}

}  // namespace ddp::launcher
