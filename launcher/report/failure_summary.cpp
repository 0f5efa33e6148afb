// The failure summary's words; see failure_summary.hpp. The words about one round's failure are
// here; those about the rounds of a job (restart notices, the no-progress stop) are
// restart_history.cpp's. Every failure wording is in report/, and none is read back: what other
// code needs of a failure it takes from the record (rdzv/root_cause.hpp).
#include "launcher/report/failure_summary.hpp"

#include <algorithm>
#include <ctime>
#include <map>
#include <optional>
#include <sstream>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/rank_ranges.hpp"
#include "common/signals.hpp"
#include "launcher/report/root_cause_of.hpp"

namespace ddp::launcher {
namespace {

constexpr char kFrame = '=';  // the rules above and below a summary
constexpr char kDivider = '-';
// A root rank's stderr quiet for this long before it exited: its last lines are named as older.
constexpr std::chrono::seconds kQuietTail{5};

// The summary's rules: 60 columns, torchrun's width.
std::string rule(char c) {
  return std::string(60, c);
}

// The first line of `text` (all of it when it has one); callers escape it where it is shown.
std::string first_line(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

// Local time as torchrun prints it: 2026-11-25_06:30:00.
std::string time_text(std::chrono::system_clock::time_point time) {
  const std::time_t t = std::chrono::system_clock::to_time_t(time);
  std::tm local{};
  ::localtime_r(&t, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &local);
  return buf;
}

// "node 2 (gpu2)", or "node 2" when its host is unknown.
std::string node_name(int node, const std::vector<std::string>& hosts) {
  const bool known =
      node >= 0 && node < static_cast<int>(hosts.size()) && !hosts[static_cast<std::size_t>(node)].empty();
  if (!known) return fmt::format("node {}", node);
  return fmt::format("node {} ({})", node, printable(hosts[static_cast<std::size_t>(node)]));
}

// One line: "exitcode 1: ValueError: boom", "exitcode 137 (SIGKILL: out-of-memory ...)", or the
// last stderr line when the worker wrote no error file.
std::string headline(const RankOutcome& o) {
  const WorkerResult& w = o.worker;
  std::string text = fmt::format("exitcode {}", w.exit_code);
  if (w.term_signal != 0) {
    text += fmt::format(" ({}{})", signal_name(w.term_signal), o.death_note.empty() ? "" : ": " + o.death_note);
  }
  if (o.record && !o.record->message.empty()) return text + ": " + printable(o.record->message);
  for (auto it = w.stderr_tail.rbegin(); it != w.stderr_tail.rend(); ++it) {
    if (it->find_first_not_of(" \t") != std::string::npos) return text + ": " + printable(*it);
  }
  return text;
}

// The "other failures" and "stopped" sections, without `root`; "" when there is nothing to list.
std::string sections(const RoundReport& report, const RankOutcome* root) {
  // Failures merged by what they say (exit code, signal, exception or last line), in the order
  // of their first occurrence.
  std::vector<std::pair<std::string, std::vector<int>>> failed;
  std::map<int, std::vector<int>> stopped;  // by signal (0: exited non-zero after the stop)
  for (const RankOutcome& o : report.ranks()) {
    if (&o == root) continue;
    if (o.state == RankState::Stopped) stopped[o.worker.term_signal].push_back(o.worker.rank);
    if (o.state != RankState::Failed) continue;
    std::string line = headline(o);
    if (root && line == headline(*root)) line += " (as the root cause)";
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

// The root cause in torchrun's layout, from what was read at its exit, then `more` (the other
// sections) inside the same frame.
std::string root_cause_block(const RankOutcome& root, const FailureContext& c, const std::string& more) {
  const WorkerResult& w = root.worker;
  const std::optional<ErrorRecord>& record = root.record;
  std::ostringstream out;
  out << rule(kFrame) << "\n" << c.program << " FAILED\n" << rule(kDivider) << "\n";
  out << "Root cause (the earliest failure):\n";
  out << "  time      : " << time_text(root.failed_at()) << "\n";
  out << "  host      : " << c.host << "\n";
  out << "  node rank : " << c.node_rank << "\n";
  out << "  rank      : " << w.rank << " (local_rank: " << w.local_rank << ")\n";
  out << "  exitcode  : " << w.exit_code;
  if (w.term_signal) {
    out << " (died of " << signal_name(w.term_signal) << (root.death_note.empty() ? "" : ": " + root.death_note) << ")";
  }
  out << " (pid: " << w.pid << ")\n";
  // The worker's own record of its exception (@record), else its last stderr lines.
  if (record && !record->message.empty()) out << "  error     : " << printable(record->message) << "\n";
  if (record && !record->traceback.empty()) {
    out << "  traceback :\n";
    std::istringstream lines(printable(record->traceback));
    for (std::string line; std::getline(lines, line);) out << "    " << line << "\n";
  }
  if (record && !record->problem.empty())
    out << "  error_file: " << w.error_file << ": " << record->problem << "\n";
  else
    out << "  error_file: " << (record ? w.error_file : "<N/A> (the worker wrote none: use @record on its main)")
        << "\n";
  const bool explained = record && !record->message.empty();
  if (!w.stderr_tail.empty() && !explained) {
    // Lines written long before the exit (a warning at start) did not say why it ended: say so.
    const bool quiet = w.stderr_quiet >= kQuietTail;
    out << "  last stderr lines"
        << (quiet ? " (the last one " + format_seconds_fixed(w.stderr_quiet, 1) + " before it exited)" : "") << ":\n";
    for (const auto& line : w.stderr_tail) out << "    " << line << "\n";
  }
  const bool module_missing = std::any_of(w.stderr_tail.begin(), w.stderr_tail.end(), [](const std::string& line) {
    return line.find("ModuleNotFoundError") != std::string::npos;
  });
  if (module_missing && !c.python.path.empty()) {
    out << "  hint      : the worker ran " << c.python.path << " (" << c.python.reason
        << "); install the module for that interpreter, or choose another with PYTHON_EXEC\n";
  }
  if (!more.empty()) out << rule(kDivider) << "\n" << more;
  out << rule(kFrame);
  return out.str();
}

}  // namespace

std::string failure_summary(const RoundReport& report, const FailureContext& node) {
  const RankOutcome* root = report.root_cause();
  if (!root) return "";
  return root_cause_block(*root, node, report.collectives() + sections(report, root));
}

RoundSummary end_of_round_summary(const RoundReport& report, const FailureContext& node, const RoundEnd& end) {
  // The earliest failure elsewhere: another node's record, or this node's own hang when it came
  // first (a hang is a failure of this node's, but of no rank's).
  std::optional<NodeFailure> other = end.other_node;
  if (end.hang && (!other || end.hang->time <= other->time)) other = end.hang;
  const RankOutcome* mine = report.root_cause();
  const Outcome& cause = end.cause;
  // What stopped the round, when it is a failure of no rank's that began before this node's
  // earliest failed rank (a peer that stopped answering before the rank's connection to it
  // closed): the rank failed of it.
  const bool stop_earlier = cause.root_cause && mine && began_before(*cause.root_cause, mine->failed_at());
  const bool stop_before_other = cause.root_cause && other && began_before(*cause.root_cause, other->time);
  const bool other_earlier = other && (!mine || other->time < mine->failed_at()) && !stop_before_other;
  // A record for a failure an older launcher told without one: the node, and no more.
  const auto reported = [&end](int origin) {
    const bool known = origin >= 0 && origin < static_cast<int>(end.hosts.size());
    return node_root_cause(RootCause::Kind::Reported, origin, known ? end.hosts[static_cast<std::size_t>(origin)] : "",
                           "");
  };
  RoundSummary out;
  if (mine && !other_earlier && !stop_earlier) {
    out.root = worker_root_cause(report, node.node_rank, node.host);
    out.root_text = failure_summary(report, node);
    out.text = out.root_text;
    if (cause.origin_node >= 0 && cause.origin_node != node.node_rank) {
      out.text += fmt::format("\n(node {} reported its failure first; by their own times this node's came earlier)",
                              cause.origin_node);
    }
    return out;
  }
  std::string head = cause.summary;
  out.root = cause.root_cause;
  if (!out.root && !cause.succeeded()) out.root = reported(cause.origin_node);
  if (other_earlier && other->node != cause.origin_node) {
    head = fmt::format("ddplaunch: the earliest failure by its own time was on {} (node {} reported first):\n{}",
                       node_name(other->node, end.hosts), cause.origin_node, printable(other->summary));
    out.root = other->root ? other->root : reported(other->node);
  }
  out.root_text = head;
  const std::string here = report.collectives() + sections(report, nullptr);
  out.text = here.empty() || head.empty() ? head
                                          : fmt::format("{}\nOn this node (node {} on {}):\n{}", head, node.node_rank,
                                                        node.host, here);
  return out;
}

std::string reported_failure(const Outcome& outcome, const std::vector<std::string>& hosts) {
  // Another node's words: shown as its report, never as raw bytes on this terminal.
  const std::string where = outcome.origin_node < 0 ? "" : " reported by " + node_name(outcome.origin_node, hosts);
  return fmt::format("ddplaunch: stopping: a failure{}:\n{}", where, printable(outcome.summary));
}

NodeStop malformed_outcome_stop(const std::string& why) {
  return {"ddplaunch: stopping: " + why, node_root_cause(RootCause::Kind::StoreRecord, -1, "", why)};
}

NodeStop forged_success_stop() {
  const std::string why =
      "the store says the job succeeded while workers on this node still run; another program is writing "
      "ddplaunch's keys";
  return {"ddplaunch: stopping: " + why, node_root_cause(RootCause::Kind::StoreRecord, -1, "", why)};
}

NodeStop lost_node_stop(const NodeLoss& loss, int node, const std::string& host,
                        const std::vector<std::string>& hosts) {
  NodeStop stop{"ddplaunch: " + loss.message + "; stopped the workers on this node",
                node_root_cause(RootCause::Kind::NodeLost, node, host, loss.message)};
  RootCause& root = stop.root;
  root.lost_node = loss.node;
  const bool known = loss.node >= 0 && loss.node < static_cast<int>(hosts.size());
  root.lost_host = known ? hosts[static_cast<std::size_t>(loss.node)] : "";
  root.silent_since = loss.silent_since;
  if (loss.node >= 0 && loss.silent_since.time_since_epoch().count() > 0) {
    // What the ranks that fail later (their connections to it closed, their collectives timed out)
    // do not say: which node went first.
    stop.summary += fmt::format(
        "\nddplaunch: {} stopped answering first, at {} (silent for {} when this node stopped its workers); "
        "failures after that are its consequences",
        node_name(loss.node, hosts), time_text(loss.silent_since),
        format_seconds_fixed(root.time - loss.silent_since, 1));
  }
  return stop;
}

NodeStop workers_not_started(int node, const std::string& host, const std::string& error) {
  std::string text = fmt::format("node {} could not start its workers: {}", node, error);
  return {text, node_root_cause(RootCause::Kind::NotStarted, node, host, text)};
}

NodeStop interrupted_stop(int node, const std::string& host, int signo) {
  std::string text = fmt::format("the launcher on node {} ({}) received {}", node, host, signal_name(signo));
  return {text, node_root_cause(RootCause::Kind::Interrupted, node, host, text)};
}

std::string lost_node_notice(const std::string& message, bool recover, bool elastic,
                             std::chrono::milliseconds rdzv_timeout) {
  if (!recover) return message;
  if (elastic) return message + "; continuing with the remaining nodes in a new round";
  return fmt::format("{}; waiting up to {} (--rdzv_timeout) for it to come back in a new round", message,
                     format_seconds(rdzv_timeout));
}

NodeStop hang_failure(const std::string& text, const std::string& stacks_file, int node, const std::string& host,
                      std::optional<HungCollective> collective) {
  // The stacks of many ranks can be long: what goes through the store stays far below its value
  // limit, and the file keeps the whole report.
  constexpr std::size_t kMaxSummary = 512 * 1024;
  std::string summary = "ddplaunch: " + text;
  if (summary.size() > kMaxSummary) {
    summary.resize(kMaxSummary);
    summary += fmt::format("\n... (cut at {} KiB; the whole report is in {} on node {})", kMaxSummary / 1024,
                           stacks_file.empty() ? "no file" : stacks_file, node);
  }
  NodeStop stop{summary, node_root_cause(RootCause::Kind::Hang, node, host, first_line(text))};
  stop.root.collective = std::move(collective);
  return stop;
}

std::string short_cause(const RootCause& c, int this_node) {
  if (c.kind == RootCause::Kind::Worker) {
    std::string code = std::to_string(c.exit_code);
    if (c.signal) code += fmt::format(" (died of {}{})", signal_name(c.signal), c.note.empty() ? "" : ": " + c.note);
    std::string what = first_line(printable(c.error));
    for (auto it = c.stderr_tail.rbegin(); what.empty() && it != c.stderr_tail.rend(); ++it) {
      if (it->find_first_not_of(" \t") != std::string::npos) what = *it;
    }
    return fmt::format("rank {} (local_rank: {}) on node {} ({}): exitcode {}{}", c.rank, c.local_rank, c.node, c.host,
                       code, what.empty() ? "" : ": " + what);
  }
  const std::string reason = first_line(printable(c.reason));
  if (c.node >= 0 && c.node != this_node) {
    const std::string who =
        c.host.empty() ? fmt::format("node {}", c.node) : fmt::format("node {} ({})", c.node, printable(c.host));
    return fmt::format("a failure reported by {}{}", who, reason.empty() ? "" : ": " + reason);
  }
  if (c.kind == RootCause::Kind::NodeLost) return reason + "; stopped the workers on this node";
  return reason.empty() ? "no failure was described" : reason;
}

std::string summary_frame() {
  return rule(kFrame);
}

std::string summary_first_line(const std::string& summary) {
  const std::size_t start = summary.find_first_not_of(std::string{kFrame, '\n'});
  if (start == std::string::npos) return "";
  return summary.substr(start, summary.find('\n', start) - start);
}

}  // namespace ddp::launcher
