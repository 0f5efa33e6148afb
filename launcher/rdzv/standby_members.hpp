// Who of an elastic round's members runs workers and who stands by (--active_nodes, docs/resilience.md
// "Standby nodes"). Pure functions: the round itself (node_rendezvous.cpp) reads and writes the store.
//
// The rule, applied by the store's host when it closes round r with N members:
//   1. The members are ordered: the store's host (--node_rank 0) first; then the nodes that were
//      active in round r-1, in their group-rank order there; then the others in arrival order.
//   2. The first min(N, active_nodes) of that order are active and take group ranks 0..A-1 in it:
//      they start workers, and the world size is the sum of their nproc.
//   3. The others are standby: group ranks A..N-1, no workers, no ranks. They heartbeat and watch
//      the round's outcome, and go to round r+1 on a restart, where step 1 puts them after the
//      nodes that were active, so a lost active node's place goes to the earliest standby.
// A node is known across rounds by its identity (host, the address it reaches the store from, the
// launcher's pid): a launcher keeps it over restarts, and a node started again gets a new one.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "launcher/rdzv/rank_map.hpp"

namespace ddp::launcher {

// A node's identity across the rounds of one job: "host|store_address|pid". Pure.
std::string node_identity(const NodeInfo& node);

// The group-rank order of a round's members (steps 1-3 above): `arrived` in arrival order,
// `previous_active` the identities of round r-1's active nodes in their group-rank order (empty
// for round 0). Returns indices into `arrived`, group rank 0 first. Pure; never throws.
std::vector<std::size_t> order_members(const std::vector<NodeInfo>& arrived,
                                       const std::vector<std::string>& previous_active);

// The round's rank map from `arrived` taken in `order`: group ranks 0..N-1 in that order, the first
// `active_nodes` active and the rest standby (NodeInfo::standby). `active_nodes` <= 0: all active.
// Pure; never throws.
RankMap standby_rank_map(const std::vector<NodeInfo>& arrived, const std::vector<std::size_t>& order, int active_nodes);

// The order as stored under "r<r>/order" ("2,0,1": indices into the arrival order, group rank 0 first)
// and read back. parse_order throws UsageError on a malformed value (another program's keys).
std::string format_order(const std::vector<std::size_t>& order);
std::vector<std::size_t> parse_order(const std::string& text, std::size_t members);

// The identities of a rank map's active nodes, one per line, group rank order ("r<r>/active").
std::string format_active(const RankMap& ranks);
std::vector<std::string> parse_active(const std::string& text);

}  // namespace ddp::launcher
