// The workers' keys in the launchers' store, and their removal between rounds.
//
// The workers of every round meet in the same store as the launchers (node 0's), and PyTorch
// assumes a fresh store per attempt: a restarted round's gloo workers read the addresses the last
// round's ranks left there and fail (`connectFullMesh ... Connection refused`), or hang. So before
// a round after the first forms, every key that is not the launchers' is deleted
// (node_rendezvous.hpp says who does it, and when: once every member's workers have exited).
// The launchers' keys are those under kLaunchersWirePrefix on the wire (job_store.hpp's namespace
// behind the TCPStore client's "/"); every other key is a worker's: PyTorch's "/"-prefixed keys
// (gloo's addresses, the store barriers), c10d's un-prefixed "init/" counter, and the runtime's
// keys (runtime/process_group.cpp; already per attempt, deleted all the same).
// In the same pass go the job's keys of rounds no one reads any more (round_keys.hpp:
// first_round_kept), so that the store does not grow with the restarts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ddplaunch/rendezvous/tcp_store_client.hpp"

namespace ddp::launcher {

// Every launcher key on the wire starts with this ("/ddplaunch/...", job secret or not).
inline constexpr std::string_view kLaunchersWirePrefix = "/ddplaunch/";

// Whether a wire key is a worker's (not under kLaunchersWirePrefix). Pure.
bool is_workers_key(std::string_view wire_key);

// Deletes every worker key from the store that `raw` reaches; `raw` must have no key prefix
// (TcpStoreClientOptions::key_prefix = ""), so that it lists and deletes wire keys as they are.
// Returns how many it deleted. Blocks for 1 + N store calls (N: the workers' keys); throws what
// the client throws (ConnectionError, TimeoutError, ProtocolError). Thread-safe as the client is.
std::size_t delete_workers_keys(rendezvous::TcpStoreClient& raw);

// What goes from the store as a round after the first forms, besides the workers' keys.
struct StaleRounds {
  std::string job_wire_prefix;  // the job's keys on the wire: "/" + job_key_prefix(...) + "/" (job_store.hpp)
  int first_round_kept = 0;     // keys "r<k>/..." under job_wire_prefix with k below it go
};

// How many keys delete_stale_keys deleted, of each kind.
struct DeletedKeys {
  std::size_t workers = 0;
  std::size_t rounds = 0;
};

// Deletes every worker key, and the job's keys of rounds before rounds.first_round_kept, from
// the store that `raw` reaches (no key prefix, as above). Blocks for 1 + N store calls (N: the
// keys deleted); throws as delete_workers_keys. Thread-safe as the client is.
DeletedKeys delete_stale_keys(rendezvous::TcpStoreClient& raw, const StaleRounds& rounds);

}  // namespace ddp::launcher
