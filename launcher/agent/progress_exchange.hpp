// How the nodes agree on the no-progress breaker's verdict for a failed round
// (progress_tracker.hpp has the rule), through the job's store, under the round's prefix:
//   1. each node, once its workers have all exited, writes "<round prefix>progress/<group rank>"
//      (its measure: encode_node_progress);
//   2. it waits until every node's measure is there, or `wait` has passed (a lost node never
//      writes one: it counts as unknown);
//   3. it judges the round from the measures it has and the previous round's verdict (its streak),
//      and compare-sets "<round prefix>progress_verdict" to its judgement;
//   4. the value now in the store, the first one written, is the verdict every node acts on.
// So every node stops with kExitNoProgress, or every node restarts, even when one node saw a
// measure arrive that another had stopped waiting for.
#pragma once

#include <chrono>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/agent/progress_tracker.hpp"

namespace ddp::launcher {

struct ProgressExchange {
  std::string round_prefix;           // the failed round's ("r3/")
  std::string previous_round_prefix;  // the round before it ("" for the first round)
  int node = 0;                       // this node's group rank in the round
  int nnodes = 1;
  bool is_restart = false;            // the round was started by a restart
  std::chrono::milliseconds wait{0};  // how long to wait for the other nodes' measures
};

// Steps 1-4. Blocks up to `x.wait` plus a few store round trips. Throws what the store throws
// (the caller then restarts as if the round had advanced). A measure or verdict in the store that
// ddplaunch did not write is read as unknown (a verdict: unknown, streak 0).
ProgressVerdict exchange_progress(rendezvous::Store& job, const ProgressExchange& x, const NodeProgress& mine);

}  // namespace ddp::launcher
