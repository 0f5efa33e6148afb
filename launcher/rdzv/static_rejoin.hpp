// A node of a static job (--nnodes=N) that comes back: a launcher started again on a lost node's
// rank (a Kubernetes pod restarted with a new address) finds the round the job is in and joins
// it, or the next one, instead of round 0 (docs/resilience.md#kubernetes).
//   1. Every node of a static job records the round it joins in the job's key "current_round"
//      (record_current_round), before it registers there.
//   2. A launcher that starts (round 0 in its head) reads it (current_round) and joins that round.
//   3. If that round already formed with another launcher's record on this node rank (the dead
//      launcher's, or a live duplicate's), join_round throws RankHeld and the newcomer waits for
//      the round's outcome (await_round_end): the other nodes publish one when they lose the
//      holder (no heartbeat for --heartbeat_timeout), and then the newcomer joins the next round,
//      where they wait for it. No outcome within the bound means the holder is alive: a second
//      node claims its rank, and the newcomer stops (UsageError) without disturbing the job.
// The round joined counts as the job's restarts (round = restarts in a static job), so the
// newcomer's workers see the same TORCHELASTIC_RESTART_COUNT as the others.
#pragma once

#include <chrono>
#include <string>

#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

// Thrown by join_round when the round already formed and its record for this node rank is
// another launcher's (`holder`, a NodeInfo's text). The round is left as it is.
class RankHeld : public ddp::Error {
 public:
  RankHeld(const std::string& message, std::string holder) : ddp::Error(message), holder_(std::move(holder)) {}
  const std::string& holder() const { return holder_; }

 private:
  std::string holder_;
};

// The round the job's nodes last joined; 0 when no node recorded one (a new job). One store
// call; throws what the store throws.
int current_round(rendezvous::Store& job);

// Records that this node joins round `round`. One store call; throws what the store throws.
void record_current_round(rendezvous::Store& job, int round);

// After RankHeld in round `round`: blocks until that round has an outcome, up to `bound`.
// Returns when the round failed (the holder is gone, or the job restarts): join round + 1.
// Throws UsageError when the round's holder of `node_rank` is still alive after `bound` (two
// live nodes claim one rank) or the round succeeded (the job is over); what the store throws.
void await_round_end(rendezvous::Store& job, int round, int node_rank, const RankHeld& held,
                     std::chrono::milliseconds bound);

// How long a newcomer waits for the end of a round whose record holds its rank: two heartbeat
// timeouts and a second (the others lose a dead holder within one). Pure.
std::chrono::milliseconds rank_holder_bound(std::chrono::milliseconds heartbeat_timeout);

}  // namespace ddp::launcher
