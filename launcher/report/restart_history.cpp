// See restart_history.hpp. Every word about restarts is here; the short cause and the frame are
// the failure summary's (failure_summary.hpp).
#include "launcher/report/restart_history.hpp"

#include <fmt/format.h>

#include "launcher/report/failure_summary.hpp"

namespace ddp::launcher {
namespace {

std::string round_line(const FailedRound& r) {
  std::string line = fmt::format("  round {}: {}", r.round, r.cause());
  if (!r.progress.empty()) line += fmt::format(" [progress: {}]", r.progress);
  return line + "\n";
}

}  // namespace

std::string FailedRound::cause() const {
  return short_cause(root, this_node);
}

std::string RestartHistory::restart_notice(int streak, int max_no_progress_restarts) const {
  if (rounds_.empty()) return "";
  const FailedRound& r = rounds_.back();
  std::string out = fmt::format("round {} failed: {}", r.round, r.cause());
  if (max_no_progress_restarts > 0 && !r.progress.empty()) {
    out += fmt::format("\nprogress in round {}: {} ({} of {} restarts in a row without progress)", r.round, r.progress,
                       streak, max_no_progress_restarts);
    for (const std::string& node : r.progress_nodes) out += "\n  " + node;
  }
  return out;
}

std::string RestartHistory::section() const {
  if (rounds_.size() < 2) return "";
  std::string out = fmt::format("Every round's failure ({} rounds, oldest first):\n", rounds_.size());
  for (const FailedRound& r : rounds_) out += round_line(r);
  return out;
}

std::string RestartHistory::cured_note() const {
  if (rounds_.empty()) return "";
  std::string out = fmt::format("the job succeeded after {} failed round(s), which restarts cured:\n", rounds_.size());
  for (const FailedRound& r : rounds_) out += round_line(r);
  out.pop_back();  // the log adds its own newline
  return out;
}

std::string RestartHistory::no_progress_stop(int streak, int max_no_progress_restarts) const {
  std::string out = summary_frame() + "\n";
  out += fmt::format(
      "ddplaunch: stopping: {} restarts in a row made no progress (--max_no_progress_restarts={}); every node "
      "exits 123: do not requeue this job, fix it first\n",
      streak, max_no_progress_restarts);
  out += "Rounds (oldest first) and what was measured:\n";
  for (const FailedRound& r : rounds_) {
    out += round_line(r);
    for (const std::string& node : r.progress_nodes) out += "      " + node + "\n";
  }
  return out + summary_frame();
}

}  // namespace ddp::launcher
