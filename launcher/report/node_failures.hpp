// The root cause across nodes: the earliest failure by its own time, not the first one published.
// Each node whose rank failed first on it writes "<round prefix>failed/<group rank>" =
//   "ddplaunch-failure 2 <ms since the epoch>\n<its root cause: one line, rdzv/root_cause.hpp>\n<that node's summary>"
// (signed like every launcher record when the job has a secret); when its round ends, a node
// reads the other nodes' records (check, then get: no waiting) and prints the earliest as the
// root cause. Nodes' clocks are compared as they are: keep them in sync (NTP), as for any
// distributed log. A record that is not in this format (a stranger's) is ignored; version 1 (no
// root-cause line, an older ddplaunch) is read without the record, and an older ddplaunch ignores
// a version-2 record (that node's word is then missing from its comparison).
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/rdzv/root_cause.hpp"

namespace ddp::launcher {

struct NodeFailure {
  int node = -1;
  std::chrono::system_clock::time_point time;
  std::string summary;  // as the node wrote it (not yet escaped)
  std::optional<RootCause> root;  // the failure as fields (nullopt from a version-1 record)
};

// Pure.
std::string encode_node_failure(const NodeFailure& failure);
// nullopt for anything encode_node_failure() did not write. Pure.
std::optional<NodeFailure> decode_node_failure(int node, const std::string& value);

// Writes this node's record. Blocks for one store round trip; throws what the store throws.
void publish_node_failure(rendezvous::Store& job, const std::string& round_prefix, const NodeFailure& failure);
// The earliest record of the nodes other than `self`, nullopt when there is none. Blocks for up
// to two round trips per node; a node whose record cannot be read is skipped. Never throws.
std::optional<NodeFailure> earliest_other_failure(rendezvous::Store& job, const std::string& round_prefix, int self,
                                                  int nnodes);

}  // namespace ddp::launcher
