// See round_report.hpp.
#include "launcher/report/round_report.hpp"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "common/signals.hpp"
#include "launcher/rdzv/outcome.hpp"

namespace ddp::launcher {

const char* state_name(RankState state) {
  switch (state) {
    case RankState::Succeeded:
      return "succeeded";
    case RankState::Failed:
      return "failed";
    case RankState::Stopped:
      return "stopped";
  }
  return "failed";
}

std::chrono::system_clock::time_point RankOutcome::failed_at() const {
  if (record && record->timestamp) {
    // @record's timestamp has whole seconds: within the same second the exit time orders them.
    const std::chrono::system_clock::time_point own{std::chrono::seconds(*record->timestamp)};
    if (own < std::chrono::time_point_cast<std::chrono::seconds>(exited)) return own;
  }
  return exited;
}

std::string RankOutcome::headline() const {
  std::string text = fmt::format("exitcode {}", worker.exit_code);
  if (worker.term_signal != 0) {
    text += fmt::format(" ({}{})", signal_name(worker.term_signal), death_note.empty() ? "" : ": " + death_note);
  }
  if (record && !record->message.empty()) return text + ": " + printable(record->message);
  for (auto it = worker.stderr_tail.rbegin(); it != worker.stderr_tail.rend(); ++it) {
    if (it->find_first_not_of(" \t") != std::string::npos) return text + ": " + printable(*it);
  }
  return text;
}

void RoundReport::add(const WorkerResult& worker, RankState state, std::string death_note) {
  RankOutcome o;
  o.worker = worker;
  o.exited = std::chrono::system_clock::now();
  if (state != RankState::Succeeded) o.record = read_error_file(worker.error_file);
  // A worker that recorded its own exception failed, even if our SIGTERM ended it afterwards
  // (Python may still be shutting down after @record wrote the file).
  if (state == RankState::Stopped && o.record && !o.record->message.empty()) state = RankState::Failed;
  o.state = state;
  o.death_note = std::move(death_note);
  ranks_.push_back(std::move(o));
}

const RankOutcome* RoundReport::root_cause() const {
  const RankOutcome* root = nullptr;
  for (const RankOutcome& o : ranks_) {
    if (o.state == RankState::Failed && (!root || o.failed_at() < root->failed_at())) root = &o;
  }
  return root;
}

std::string RoundReport::sections(const RankOutcome* root) const {
  // Failures merged by what they say (exit code, signal, exception or last line), in the order
  // of their first occurrence.
  std::vector<std::pair<std::string, std::vector<int>>> failed;
  std::map<int, std::vector<int>> stopped;  // by signal (0: exited non-zero after the stop)
  for (const RankOutcome& o : ranks_) {
    if (&o == root) continue;
    if (o.state == RankState::Stopped) stopped[o.worker.term_signal].push_back(o.worker.rank);
    if (o.state != RankState::Failed) continue;
    std::string line = o.headline();
    if (root && line == root->headline()) line += " (as the root cause)";
    auto it = std::find_if(failed.begin(), failed.end(), [&](const auto& f) { return f.first == line; });
    if (it == failed.end()) it = failed.insert(failed.end(), {line, {}});
    it->second.push_back(o.worker.rank);
  }
  std::string out;
  if (!failed.empty()) out += "Other failures (by what they say):\n";
  for (const auto& [line, ranks] : failed) out += fmt::format("  {}: {}\n", ranks_phrase(ranks), line);
  if (!stopped.empty()) out += "Stopped by ddplaunch (not failed):\n";
  for (const auto& [sig, ranks] : stopped) {
    out += fmt::format("  {}: {}\n", ranks_phrase(ranks),
                       sig ? "ended by " + signal_name(sig) : std::string("exited non-zero after being told to stop"));
  }
  return out;
}

std::string RoundReport::summary(FailureContext context) const {
  const RankOutcome* root = root_cause();
  if (!root) return "";
  context.death_note = root->death_note;
  context.time = root->failed_at();
  const std::string more = sections(root);
  if (!more.empty()) context.appendix = std::string(60, '-') + "\n" + more;
  context.heading = "Root cause (the earliest failure):";
  return describe_failure(root->worker, context);
}

std::string RoundReport::final_summary(const Outcome& cause, const FailureContext& context,
                                       const std::string& node_label, const std::optional<NodeFailure>& other,
                                       const std::string& other_label) const {
  const RankOutcome* mine = root_cause();
  const bool other_earlier = other && (!mine || other->time < mine->failed_at());
  if (mine && !other_earlier) {
    std::string text = summary(context);
    if (cause.origin_node >= 0 && cause.origin_node != context.node_rank) {
      text += fmt::format("\n(node {} reported its failure first; by their own times this node's came earlier)",
                          cause.origin_node);
    }
    return text;
  }
  std::string head = cause.summary;
  if (other_earlier && other->node != cause.origin_node) {
    head = fmt::format("ddplaunch: the earliest failure by its own time was on {} (node {} reported first):\n{}",
                       other_label, cause.origin_node, printable(other->summary));
  }
  const std::string here = sections();
  if (here.empty() || head.empty()) return head;
  return fmt::format("{}\nOn this node ({}):\n{}", head, node_label, here);
}

}  // namespace ddp::launcher
