// Launchers meeting in the store, one round at a time. Keys live under the job's PrefixStore
// ("ddplaunch/<run_id>"), round r under "r<r>/":
//   1. "config" is compare-set to this node's nnodes: a node with another nnodes fails, and
//      marks the round failed so the others fail too.
//   2. "r<r>/node/<node_rank>" is compare-set to the NodeInfo: a second node with the same
//      node_rank fails, and marks the round failed ("r<r>/ready" = "error: ..."), unless the
//      round formed already: then it throws RankHeld and the round stays (static_rejoin.hpp).
//   3. "r<r>/joined" is incremented; the node that brings it to nnodes sets "r<r>/ready" = "ok".
//   4. Everyone waits for "r<r>/ready" (printing "waiting for nodes: k/N joined" as nodes join).
//   5. In a round after the first, node 0 then deletes the workers' keys the rounds before left
//      and the keys of the rounds before first_round_kept(r) (options.clear_old_keys; round_keys.hpp):
//      every member's workers of those rounds have exited, since a launcher joins only once its
//      own have. It sets "first_round_kept" and "r<r>/cleared", which the others wait for, so no
//      key of the new round's workers is deleted.
//   6. Everyone reads every node record and builds the RankMap.
// A different --rdzv_id on the same store is detected through the namespace view's key "run_id"
// (job_store.hpp: "ddplaunch/run_id" without a job secret).
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/rank_map.hpp"

namespace ddp::launcher {

struct RendezvousOptions {
  int nnodes = 1;
  int round = 0;
  std::string run_id;
  std::chrono::milliseconds timeout{std::chrono::seconds(900)};
  std::string endpoint;                            // for messages
  bool with_secret = false;                        // a job secret is in use (for the timeout's hint)
  std::function<void(const std::string&)> status;  // one status line, e.g. "waiting for nodes: 1/2 joined"
  const std::atomic<bool>* cancelled = nullptr;    // checked about once a second
  // Deletes the workers' keys of the rounds before, and the job's keys of the rounds before the
  // one it is given (first_round_kept: round_keys.hpp; workers_keys.hpp), called where the steps
  // say, in rounds after the first; empty: nothing to delete (tests' in-memory stores). Its
  // ddp::Error is logged as a warning and the round goes on.
  std::function<void(int first_round_kept)> clear_old_keys;
};

// What a node with a job secret adds to a rendezvous that timed out or lost the store: nodes
// whose secrets differ never see each other's keys, so they only ever see one of those two.
inline constexpr const char* kSameSecretHint =
    "every node has the same job secret (DDPLAUNCH_RDZV_TOKEN or token_file)";

// Blocks until all nodes joined round `options.round` (or throws). `root` is the namespace view
// (for the run-id check), `job` the job's view under it (job_store.hpp).
// Throws UsageError for conflicting configuration (both sides), RankHeld (static_rejoin.hpp) when
// the round formed with another launcher on this node rank, TimeoutError naming the
// missing node ranks, ConnectionError when the store goes away, and Error("interrupted")
// when *cancelled becomes true.
RankMap join_round(rendezvous::Store& root, rendezvous::Store& job, const NodeInfo& self,
                   const RendezvousOptions& options);

}  // namespace ddp::launcher

namespace ddp::launcher {

// Thrown by join_elastic_round to a node that arrived after its round closed: it takes part from
// the next round on (the next restart of the job).
class LateArrival : public ddp::Error {
 public:
  using ddp::Error::Error;
};

struct ElasticOptions {
  RendezvousOptions base;  // base.nnodes is MAX
  int min_nodes = 1;
  bool is_host = false;  // this node closes rounds: the store's host (--node_rank 0); with etcd, every node
  std::chrono::milliseconds last_call{std::chrono::seconds(3)};
  bool by_arrival = false;  // group ranks in arrival order only; --node_rank plays no part (etcd)
  int active_nodes = 0;     // --active_nodes: members beyond it stand by (standby_members.hpp); 0: none do
};

struct ElasticRound {
  RankMap ranks;   // NodeInfo::node_rank holds the group rank assigned in this round
  int group_rank;  // this node's
};

// Elastic rendezvous (--nnodes=MIN:MAX), round r under "r<r>/":
//   1. A node takes an arrival index i = ++"joined", writes "member/<i>" and sets "arrived/<i>".
//   2. The host waits until MIN nodes arrived, then up to `last_call` more for MAX present (a node
//      that excluded itself counts as present: self_exclusion.hpp), and closes the round:
//      "closed" = the number of members N (compare-set, so it happens once). In a round after
//      the first it deletes the workers' keys of the rounds before, and the rounds' keys before
//      first_round_kept(r), first (clear_old_keys, as step 5 of join_round): the members' workers
//      of those rounds have exited (a node of the round before that has not arrived yet may still
//      be stopping its own: see docs/resilience.md; a node that arrives for a round whose keys
//      went joins the first one kept, job_round.cpp).
//   3. Nodes with i <= N are members: the host is group rank 0, the others follow in arrival
//      order (by_arrival: all in arrival order); ranks are prefix sums as in rank_map.hpp. A node
//      with i > N throws LateArrival.
//   With active_nodes (not by_arrival), the host, before step 2's "closed", orders the members by
//   the rule in standby_members.hpp and writes "order" (the members' group-rank order) and
//   "active" (the active nodes' identities, read when it closes the next round); every member
//   builds the rank map from "order", the first active_nodes of it active, the rest standby.
// Blocks until the round closes or options.base.timeout passes (TimeoutError); cancellation and
// configuration conflicts as in join_round.
ElasticRound join_elastic_round(rendezvous::Store& root, rendezvous::Store& job, const NodeInfo& self,
                                const ElasticOptions& options);

}  // namespace ddp::launcher
