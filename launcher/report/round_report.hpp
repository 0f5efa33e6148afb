// What happened to each local worker in one round, and the failure summary built from it:
//   - the root cause, the earliest failure by its own timestamp (the error file's, which @record
//     writes, else the time ddplaunch saw the exit), in full (failure_summary.hpp);
//   - the other failed ranks, one line each, identical failures merged:
//     "ranks 1-7 (7 ranks): exitcode 1: ValueError: boom (as the root cause)";
//   - the ranks that ddplaunch stopped (killed by its SIGTERM/SIGKILL, or by the forwarded
//     stopping signal), listed apart: stopped, not failed.
// Not thread-safe: the agent's event loop only.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/rank_ranges.hpp"
#include "launcher/report/error_file.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/node_failures.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/workers/process_context.hpp"

namespace ddp::launcher {

enum class RankState { Succeeded, Failed, Stopped };
const char* state_name(RankState state);  // "succeeded", "failed", "stopped"

struct RankOutcome {
  WorkerResult worker;
  RankState state = RankState::Failed;
  std::chrono::system_clock::time_point exited;  // when ddplaunch saw it exit
  std::optional<ErrorRecord> record;             // its error file, read at exit (nullopt: none)
  std::string death_note;                        // why a signal came, when known (oom_check.hpp)

  // The failure's own time: the error file's timestamp when the worker wrote one, else `exited`.
  std::chrono::system_clock::time_point failed_at() const;
  // One line: "exitcode 1: ValueError: boom", "exitcode 137 (SIGKILL: out-of-memory ...)", or the
  // last stderr line when the worker wrote no error file. Control bytes escaped.
  std::string headline() const;
};


class RoundReport {
 public:
  // Forgets the previous round.
  void clear() { ranks_.clear(); }
  // Reads the worker's error file (blocks on the file system only). A worker given as Stopped
  // whose error file holds an exception counts as Failed: it raised before we stopped it.
  // Never throws.
  void add(const WorkerResult& worker, RankState state, std::string death_note = "");
  const std::vector<RankOutcome>& ranks() const { return ranks_; }
  // The earliest failure (ties: the first seen); nullptr when no rank failed.
  const RankOutcome* root_cause() const;
  // The full summary: the root cause's block with the other sections inside its frame; "" when
  // no rank failed.
  std::string summary(FailureContext context) const;
  // Only the "other failures" and "stopped" sections (for a node whose root cause came from
  // another node); "" when there is nothing to list.
  std::string sections(const RankOutcome* root = nullptr) const;
  // What a node prints when the round ends for `cause`: summary() when the root cause is one of
  // ours (`context` describes this node), else the cause's summary, or `other`'s when another
  // node recorded an earlier failure (node_failures.hpp; `other_label` names that node),
  // followed by this node's sections under "On this node (<node_label>):".
  std::string final_summary(const Outcome& cause, const FailureContext& context, const std::string& node_label,
                            const std::optional<NodeFailure>& other = std::nullopt,
                            const std::string& other_label = "") const;

 private:
  std::vector<RankOutcome> ranks_;
};

}  // namespace ddp::launcher
