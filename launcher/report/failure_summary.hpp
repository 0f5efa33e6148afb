// Every word of the failure summary printed on stderr when a round fails, made here from plain
// data (round_report.hpp, node_failures.hpp, outcome.hpp) that the agent hands over; the agent and
// the watchers word none of it. The summary, inside a frame of 60-column rules:
//   - the root cause in full, torchrun's layout plus the worker's exception and traceback from its
//     error file, else its last stderr lines (so the real error is on screen without @record); a
//     Python worker whose stderr names a ModuleNotFoundError gets a hint naming the interpreter;
//   - the other failed ranks, one line each, identical failures merged:
//     "ranks 1-7 (7 ranks): exitcode 1: ValueError: boom (as the root cause)";
//   - the ranks that ddplaunch stopped (killed by its SIGTERM/SIGKILL, or by the forwarded
//     stopping signal), listed apart: stopped, not failed.
// When the root cause is another node's, that node's report comes first and this node's ranks
// follow under "On this node (...)". All pure (apart from reading the clock, for the local time
// printed) and never throw (but std::bad_alloc); terminal control bytes from workers and other
// nodes are escaped (printable()).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/python_interpreter.hpp"
#include "launcher/rdzv/job_monitor.hpp"  // NodeLoss
#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/root_cause.hpp"
#include "launcher/report/node_failures.hpp"
#include "launcher/report/round_report.hpp"

namespace ddp::launcher {

// This node, as the summary names it.
struct FailureContext {
  std::string program;
  std::string host;
  int node_rank = 0;
  PythonInterpreter python;  // the workers' interpreter; path "" when the program is not Python
};

// How the round ended, seen from this node: what end_of_round_summary() words.
// (The `cause` and `other_node`/`hang` records carry their root causes as fields.)
struct RoundEnd {
  Outcome cause;                          // what stopped the round (its summary: the text that did)
  std::optional<NodeFailure> other_node;  // the earliest failure another node recorded (node_failures.hpp)
  std::optional<NodeFailure> hang;        // this node's collective hang in this round, if any
  std::vector<std::string> hosts;         // the round's host names by group rank, as the nodes gave them
};

// This node's summary: the root cause's block with the other sections inside its frame; "" when
// no rank failed. What the other nodes print, and what this node prints when the cause is ours.
std::string failure_summary(const RoundReport& report, const FailureContext& node);

// The end of a round, as words and as a record.
struct RoundSummary {
  std::string text;                // what is printed (below)
  std::optional<RootCause> root;   // the root cause those words name, as fields (nullopt: none)
  std::string root_text;           // the part of `text` about the root cause (the JSON's "summary")
};

// What a node prints when the round ends: failure_summary() when the root cause is one of ours,
// else the cause's summary (or the earlier failure another node recorded, or this node's hang),
// followed by this node's other sections under "On this node (node <n> on <host>):"; "" when
// there is nothing to say. The record is the one of the failure the text names first: this node's
// root rank (worker_root_cause), or the record the other node or the outcome carried (a
// "reported" record naming the node when an older launcher sent none).
RoundSummary end_of_round_summary(const RoundReport& report, const FailureContext& node, const RoundEnd& end);

// The summary of a failure that node `outcome.origin_node` published, as this node keeps it:
// "ddplaunch: stopping: a failure reported by node 1 (gpu2):\n<its summary>". `hosts` as in
// RoundEnd.
std::string reported_failure(const Outcome& outcome, const std::vector<std::string>& hosts);

// A failure of no rank's that stops the round on this node: its summary (what is printed and
// told to the other nodes) and its record (root_cause_of.hpp), made together.
struct NodeStop {
  std::string summary;
  RootCause root;
};

// A collective hang found on node `node` (group rank) of `host`: the summary is "ddplaunch: " and
// the hang report `text`, cut to 512 KiB (it goes through the store; `stacks_file`, where the
// whole report is, is named at the cut); the record's reason is the report's first line, its
// collective `collective` (the report's, when it names one).
NodeStop hang_failure(const std::string& text, const std::string& stacks_file, int node, const std::string& host,
                      std::optional<HungCollective> collective = std::nullopt);

// The stops of a round for a reason other than a worker's failure:
// - the outcome in the store is not one ddplaunch wrote (`why` says what is wrong with it);
// - the store says the job succeeded while this node's workers still run;
// - a node (or the store) was lost, as the liveness watcher found it on node `node`: its message,
//   and, when the loss names the silent node, that node (its host from `hosts`, as in RoundEnd)
//   and since when it was silent, in the record and as a second line of the summary;
// - this node could not start its workers (`error`, the usage error's text);
// - the launcher on node `node` of `host` received the stopping signal `signo`.
NodeStop malformed_outcome_stop(const std::string& why);
NodeStop forged_success_stop();
NodeStop lost_node_stop(const NodeLoss& loss, int node, const std::string& host, const std::vector<std::string>& hosts);
NodeStop workers_not_started(int node, const std::string& host, const std::string& error);
NodeStop interrupted_stop(int node, const std::string& host, int signo);

// What a node logs when it loses another node (or the store): `message`, and what happens next:
// nothing more when the job cannot recover, else carrying on without it (elastic) or waiting up
// to `rdzv_timeout` for it to come back. Pure.
std::string lost_node_notice(const std::string& message, bool recover, bool elastic,
                             std::chrono::milliseconds rdzv_timeout);

// The short form of a round's root cause, one line, what is printed before a restart and in the
// final summary's list of rounds: "rank 1 (local_rank: 1) on node 0 (gpu1): exitcode 1:
// ValueError: boom" (its error's first line, else its last stderr line); for a failure of no
// rank's, its reason ("a failure reported by node 2 (gpu3): <reason>" when it happened on a node
// other than `this_node`). Made from the record's fields, never from printed text. Pure.
std::string short_cause(const RootCause& cause, int this_node);

// The rule above and below every framed block of the failure summary and the restart history:
// 60 columns of '=', torchrun's width. Pure.
std::string summary_frame();

// The first line of a summary that is not its frame: the reason the event log gives. "" for none.
std::string summary_first_line(const std::string& summary);

}  // namespace ddp::launcher
