// Launchers meeting in the store, one round at a time. Keys live under the job's PrefixStore
// ("ddplaunch/<run_id>"), round r under "r<r>/":
//   1. "config" is compare-set to this node's nnodes: a node with another nnodes fails, and
//      marks the round failed so the others fail too.
//   2. "r<r>/node/<node_rank>" is compare-set to the NodeInfo: a second node with the same
//      node_rank fails, and marks the round failed ("r<r>/ready" = "error: ...").
//   3. "r<r>/joined" is incremented; the node that brings it to nnodes sets "r<r>/ready" = "ok".
//   4. Everyone waits for "r<r>/ready" (printing "waiting for nodes: k/N joined" as nodes join),
//      then reads every node record and builds the RankMap.
// A different --rdzv_id on the same store is detected through the root key "ddplaunch/run_id".
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "launcher/launch_config.hpp"
#include "launcher/rank_map.hpp"
#include "rendezvous/store.hpp"

namespace ddp::launcher {

struct RendezvousOptions {
  int nnodes = 1;
  int round = 0;
  std::string run_id;
  std::chrono::milliseconds timeout{std::chrono::seconds(900)};
  std::string endpoint;  // for messages
  std::function<void(const std::string&)> status;  // one status line, e.g. "waiting for nodes: 1/2 joined"
  const std::atomic<bool>* cancelled = nullptr;     // checked about once a second
};

// Blocks until all nodes joined round `options.round` (or throws). `root` is the un-prefixed
// store (for the run-id check), `job` the job's prefixed view.
// Throws UsageError for conflicting configuration (both sides), TimeoutError naming the
// missing node ranks, ConnectionError when the store goes away, and Error("interrupted")
// when *cancelled becomes true.
RankMap join_round(rendezvous::Store& root, rendezvous::Store& job, const NodeInfo& self,
                   const RendezvousOptions& options);

}  // namespace ddp::launcher
