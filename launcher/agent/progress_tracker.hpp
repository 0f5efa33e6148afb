// The no-progress breaker's rule (--max_no_progress_restarts K): what "a round made progress"
// means, on one node and for the job. Written out:
//   1. Each node measures each failed round once its workers have all exited, from two sources:
//      a. --progress_file, when given and readable here with an integer (progress_file.hpp): the
//         round advanced when the iteration is higher than the highest this node saw before
//         (at the launcher's start, or at the end of an earlier round); a file that appears
//         during the round counts as advanced;
//      b. otherwise the collectives (worker_watch.hpp, collectives_completed()): the round
//         advanced when its ranks got further (a completed collective with a higher sequence
//         number) than in any earlier round on this node;
//      c. neither (no file here, an unreadable or non-integer file, workers that report no
//         collectives): the node measured nothing: "unknown".
//   2. The job's round: advanced when any node says advanced; "none" (no progress) when every
//      node's measure arrived, at least one node measured, and none advanced; unknown otherwise
//      (no node measured, or a node's measure never arrived: it may have advanced).
//   3. The streak: the consecutive restarts whose rounds made no progress. A round that advanced,
//      or that nobody could measure, resets it to 0 (ddplaunch never stops a job for a lack of
//      progress it could not see); the first round is not a restart and never counts.
//   4. When the streak reaches K, every node exits kExitNoProgress (123: do not requeue).
// The nodes agree through the store (progress_exchange.hpp): each publishes its measure, one
// rule reads them all, and the first verdict written is the one every node acts on.
// Pure, apart from ProgressTracker's memory of what this node saw. Not thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/watch/progress_file.hpp"

namespace ddp::launcher {

enum class RoundProgress { Advanced, Same, Unknown };
const char* to_string(RoundProgress progress);  // "advanced", "none", "unknown"

// One node's measure of one round.
struct NodeProgress {
  RoundProgress progress = RoundProgress::Unknown;
  std::string text;  // what was measured: "iteration 120 (before: 100)"
};

// The job's verdict on one round (step 2 and 3 above).
struct ProgressVerdict {
  RoundProgress progress = RoundProgress::Unknown;
  int streak = 0;                  // consecutive restarts without progress, this round's included
  std::vector<std::string> nodes;  // "node 0: iteration 100 (before: 100)", one per node
};

// Step 1 on this node. Not thread-safe.
class ProgressTracker {
 public:
  // `baseline`: --progress_file read before the first round (nullopt: no --progress_file).
  explicit ProgressTracker(std::optional<ProgressFileReading> baseline);
  // The round that just ended: the file read now (nullopt: no --progress_file), and how far the
  // collectives got (nullopt: none seen). Remembers the highest values for the next rounds.
  NodeProgress measure(const std::optional<ProgressFileReading>& file, std::optional<long long> collectives);

 private:
  std::optional<long long> best_iteration_;
  std::optional<long long> best_collective_;
};

// Steps 2 and 3: `nodes` by group rank (nullopt: that node's measure never arrived, as unknown);
// `is_restart`: the round was started by a restart; `previous_streak`: the last round's.
ProgressVerdict judge_round(const std::vector<std::optional<NodeProgress>>& nodes, bool is_restart,
                            int previous_streak);
// Step 4.
inline bool breaker_trips(const ProgressVerdict& verdict, int max_no_progress_restarts) {
  return max_no_progress_restarts > 0 && verdict.streak >= max_no_progress_restarts;
}

// Wire forms (store values): "ddplaunch-progress 1 <advanced|none|unknown>\n<text>" and
// "ddplaunch-verdict 1 <advanced|none|unknown> <streak>\n<one line per node>". decode_* return
// nullopt for anything encode_* did not write.
std::string encode_node_progress(const NodeProgress& progress);
std::optional<NodeProgress> decode_node_progress(const std::string& value);
std::string encode_verdict(const ProgressVerdict& verdict);
std::optional<ProgressVerdict> decode_verdict(const std::string& value);

}  // namespace ddp::launcher
