// Straggler detection's records (docs/stragglers.md): each rank's entry times into collectives as
// a node sends them to node 0 through the job's store, and the scores node 0 makes of them and
// sends back, which the console, the live status, the event log and the summary read. They live
// here, beside the other records that cross nodes (root_cause.hpp), so that the watch that makes
// them and the listeners that show them share one definition.
//
// Wire forms (store values under the round's prefix, docs/stragglers.md):
//   entries: "ddplaunch-entries 1 <node> <host>\n" then one line per collective entry,
//            "<rank> <group> <seq> <entered ns, the node's own clock> <signature>";
//   scores:  "ddplaunch-stragglers 1\n" then the scores as one JSON object (straggler_json's).
// decode_* return nullopt for anything encode_* did not write. Pure; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "launcher/config/straggler_mode.hpp"

namespace ddp::launcher {

// One rank entering one collective: `group` is the process group's name, the same on every rank
// ("0": the default group; "runtime": the ddplaunch runtime's communicator), `seq` its collective
// number in that group, `entered_ns` CLOCK_REALTIME (node 0 applies each node's clock offset),
// `signature` what makes two collectives of a step tell apart ("gloo:all_reduce[1000]").
struct EntryTime {
  int rank = 0;
  std::string group;
  long long seq = 0;
  std::int64_t entered_ns = 0;
  std::string signature;
};

struct NodeEntries {
  int node = 0;
  std::string host;
  std::vector<EntryTime> entries;
};

std::string encode_entries(const NodeEntries& entries);
std::optional<NodeEntries> decode_entries(const std::string& value);

struct RankLateness {
  int rank = 0;
  int node = 0;
  std::string host;
  double lateness_ms = 0;               // median over the window's collectives, vs the group's median
  std::optional<double> step_fraction;  // lateness over the step time; nullopt: step unknown
  bool straggler = false;
  std::optional<double> since;                     // unix s: when its lateness began (flagged) or nullopt
  std::vector<std::pair<double, double>> history;  // [unix s, lateness ms], the last 10 min
};

struct NodeLateness {
  int node = 0;
  std::string host;
  double lateness_ms = 0;  // the median of its ranks'
  bool straggler = false;
  std::optional<double> since;
};

struct StragglerScores {
  StragglerMode mode = StragglerMode::Warn;
  double window_s = 0;
  double scored_at = 0;             // unix s
  std::vector<RankLateness> ranks;  // by rank
  std::vector<NodeLateness> nodes;  // by node
};

// The "stragglers" object of --status (docs/json-output.md), as text: {"mode":..., "window_s":...,
// "ranks":[...], "nodes":[...]}.
std::string straggler_json(const StragglerScores& scores);
std::string encode_scores(const StragglerScores& scores);
std::optional<StragglerScores> decode_scores(const std::string& value);

// The scores of one node's ranks only (another node's view of node 0's scores).
StragglerScores node_view(const StragglerScores& scores, int node);

// A straggler found or gone, as the console, the event log and the job's record say it.
struct StragglerChange {
  bool found = true;     // false: recovered
  bool is_node = false;  // a node (its ranks late together) rather than one rank
  int rank = -1;         // when !is_node
  int node = 0;
  std::string host;
  double lateness_ms = 0;
  std::optional<double> step_fraction;
  double for_s = 0;  // how long it has been late (found), or was late (recovered)
};

// "rank 3 on node 1 (h2) enters collectives 48 ms late, 31% of a step, for 2 min", or
// "rank 3 on node 1 (h2) is no longer late (2 ms), after 2 min"; for a node, "node 1 (h2)
// enters collectives 45 ms late with all its ranks, ...".
std::string describe(const StragglerChange& change);

}  // namespace ddp::launcher
