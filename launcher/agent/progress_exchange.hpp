// How the nodes agree on the no-progress breaker's verdict for a failed round
// (progress_tracker.hpp has the rule), through the job's store, under the round's prefix:
//   1. each node, once its workers have all exited, writes "<round prefix>progress/<group rank>"
//      (its measure: encode_node_progress);
//   2. a node that then finds every node's measure there, or that saw a node lost in this round
//      (its measure will never come), judges the round from the measures there and the previous
//      round's verdict (its streak), and compare-sets "<round prefix>progress_verdict";
//   3. every node waits for that key, up to `wait` (then it judges and compare-sets as in 2 with
//      what is there: a node still stopping its workers, or lost unseen);
//   4. the value in the store, the first one written, is the verdict every node acts on.
// So every node stops with kExitNoProgress, or every node restarts. A measure that never arrived
// makes the round unknown unless another node advanced (progress_tracker.hpp).
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
  bool node_lost = false;             // this node saw a node lost in this round: no waiting
  std::chrono::milliseconds wait{0};  // how long to wait for the other nodes' measures
};

// Steps 1-4. Blocks up to `x.wait` (not with `node_lost`) plus a few store round trips. Throws what the store throws
// (the caller then restarts as if the round had advanced). A measure or verdict in the store that
// ddplaunch did not write is read as unknown (a verdict: unknown, streak 0).
ProgressVerdict exchange_progress(rendezvous::Store& job, const ProgressExchange& x, const NodeProgress& mine);

}  // namespace ddp::launcher
