// Every failed round of the job on this node, for the words said about restarts: the short cause
// printed before each restart ("round 0 failed: rank 1 on node 0 (gpu1): exitcode 1: ValueError:
// boom", then "restarting the job (restart 1 of 3)"), the section of the final summary that lists
// every round's failure (so a failure a restart cured is not lost), the no-progress breaker's
// stop, and the "rounds" list of --summary_json (run_recorder.hpp). Pure data and words; not
// thread-safe (the agent's loop only); never throws (but std::bad_alloc).
#pragma once

#include <string>
#include <vector>

#include "launcher/rdzv/root_cause.hpp"

namespace ddp::launcher {

struct FailedRound {
  int round = 0;
  int code = 1;                             // the exit code the round's root cause gave
  int origin_node = -1;                     // the node that reported it (-1: none)
  RootCause root;                           // the round's root cause (failure_summary.hpp's RoundSummary)
  int this_node = 0;                        // the group rank of the node that keeps this history
  std::string progress;                     // the breaker's verdict on it ("" when the breaker is off)
  std::vector<std::string> progress_nodes;  // each node's measure ("node 0: iteration 100 ...")

  // Its short form, from the record's fields (short_cause() in failure_summary.hpp).
  std::string cause() const;
};

class RestartHistory {
 public:
  void add(FailedRound round) { rounds_.push_back(std::move(round)); }
  const std::vector<FailedRound>& rounds() const { return rounds_; }

  // What is printed before a restart, for the round just added: its cause, and the breaker's
  // measure when on ("progress in round 1: none (1 of 3 restarts without progress): node 0: ...").
  std::string restart_notice(int streak, int max_no_progress_restarts) const;
  // The final summary's list of every failed round, oldest first; "" when only one round failed
  // (the summary above it says all).
  std::string section() const;
  // Said when the job succeeds after restarts: the failures they cured, one line each; "" when
  // no round failed.
  std::string cured_note() const;
  // The breaker's stop: why every node exits 123, the rounds and what was measured, "do not
  // requeue"; printed after the last round's summary.
  std::string no_progress_stop(int streak, int max_no_progress_restarts) const;

 private:
  std::vector<FailedRound> rounds_;
};

}  // namespace ddp::launcher
