// A node that failed its health checks before a round (health/node_health.hpp) does not join it,
// and tells the others through the round's keys (under "r<r>/"):
//   1. An elastic round where this node is not the store's host: "unhealthy" is incremented to u
//      and "unhealthy/<u>" holds its line ("node N (host) excluded itself: health check X
//      failed: ..."); then it counts as present (mark_present), so the host's last call for MAX
//      nodes ends without waiting for it. The members print every such line once the round
//      closed (excluded_nodes). With etcd every node takes this path (no node hosts the store).
//   2. A static round, or the store's host of an elastic one (the job cannot go on without it):
//      the round's verdict ("ready", or "closed") is compare-set to "error: [exit 69] <line>",
//      so every node fails at once with exit 69 (kExitUnhealthy). A node that reads an error
//      verdict counts itself in "verdict_read" and sets "verdict_read/<k>"; the store's host
//      keeps its store up until MIN-1 other nodes read it (at most --rdzv_timeout), then up to
//      the last call for the rest (MAX-1), so they fail with the verdict, not a lost store.
// A verdict without "[exit N]" is a usage error (exit 2), as before.
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/cancel_event.hpp"
#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

// Why this node does not join a round: `reason` is one line for the other nodes ("health check
// 'command' failed: disk /scratch is read-only"), `report` the full report this node prints.
struct SelfExclusion {
  std::string reason;
  std::string report;
};

// Runs before each round on the join thread (it may block, e.g. for a site command): nullopt
// when this node may join round `round`. `cancel` is the joiner's (RoundJoiner::cancel): a gate
// that blocks polls its fd() and returns at once when it fires, its processes ended.
using HealthGate = std::function<std::optional<SelfExclusion>(int round, const CancelEvent& cancel)>;

// A node failed its health checks: thrown to that node (what() is its report) and, when the job
// cannot go on without it, to every other node (what() names the node and the check). The agent
// exits kExitUnhealthy (69).
class NodeUnhealthy : public ddp::Error {
 public:
  using ddp::Error::Error;
};

// Where the excluding node stands (the values of its LaunchConfig).
struct ExclusionPlace {
  std::string round_prefix;  // "r<round>/"
  int node_rank = 0;
  std::string host;
  bool elastic = false;      // --nnodes=MIN:MAX (or etcd)
  bool holds_store = false;  // this launcher hosts the store the others meet in (node 0, not etcd)
  int min_nodes = 1;
  int max_nodes = 1;
  std::chrono::milliseconds wait_first{0};  // --rdzv_timeout: for MIN-1 nodes to read the verdict
  std::chrono::milliseconds last_call{0};   // then for the rest, up to MAX-1
};

// Records the exclusion as the header says (1 or 2) and throws NodeUnhealthy with
// `sick.report` (plus what the other nodes were told). Blocks in case 2 on the store's host
// (bounded as above); throws what the store throws when it cannot record (the caller still exits
// 69). Thread-safe as far as `job` is.
[[noreturn]] void exclude_self(rendezvous::Store& job, const ExclusionPlace& place, const SelfExclusion& sick);

// The verdict that fails a round with `code` (the "ready"/"closed" value): "error: <message>" for
// kExitUsage, "error: [exit <code>] <message>" otherwise. Pure.
std::string round_error(int code, const std::string& message);
// Whether a verdict is an error (starts "error: "). Pure.
bool is_round_error(const std::string& verdict);
// Counts this node as having read the error `verdict` of the round at `round_prefix` (case 2
// above; a store gone meanwhile is ignored) and throws it: NodeUnhealthy for [exit 69],
// UsageError otherwise.
[[noreturn]] void fail_on_round_error(rendezvous::Store& job, const std::string& round_prefix,
                                      const std::string& verdict);

// Counts a node (healthy or excluded) as present in an elastic round (case 1). Throws what the
// store throws.
void mark_present(rendezvous::Store& job, const std::string& round_prefix);
// The key that exists once `n` nodes are present. Pure.
std::string present_key(const std::string& round_prefix, int n);
// The lines of the nodes that excluded themselves from the round (case 1), in order; [] when
// none. One store call per line; throws what the store throws.
std::vector<std::string> excluded_nodes(rendezvous::Store& job, const std::string& round_prefix);

}  // namespace ddp::launcher
