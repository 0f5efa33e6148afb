// The agent's failure handling: a worker that failed, a hang found by --hang_timeout, another
// node's outcome, and the summary printed when the round ends. Part of the Agent (agent.hpp), on
// its event loop. It only gathers what happened; every word printed about it is
// report/failure_summary.hpp's.
#include <algorithm>
#include <optional>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/node_failures.hpp"
#include "launcher/report/root_cause_of.hpp"

namespace ddp::launcher {

FailureContext Agent::failure_context() const {
  FailureContext context;
  context.program = c_.program;
  context.host = eff_.host;
  context.node_rank = view_.group_rank;
  if (runs_with_python(c_)) context.python = eff_.python;
  return context;
}

bool Agent::stopped_by_us(const WorkerResult& w) const {
  if (!status_.stopping() || signal_sent_ == 0) return false;
  if (status_.interrupted_by()) return true;  // the user stopped the whole job
  for (int sig : {signal_sent_, SIGTERM, SIGKILL}) {
    if (w.term_signal == sig || w.exit_code == 128 + sig) return true;
  }
  return false;
}

void Agent::on_worker_exit(const WorkerResult& w) {
  const bool failed_first = w.exit_code != 0 && status_.state() == RoundState::Running;
  RankState state = w.exit_code == 0 ? RankState::Succeeded : RankState::Failed;
  if (!failed_first && state == RankState::Failed && stopped_by_us(w)) state = RankState::Stopped;
  std::string note = watch_->exited(w.pid);
  if (note.empty() && w.term_signal == SIGKILL && state == RankState::Failed) note = oom_.explain(w.pid).value_or("");
  report_.add(w, state, std::move(note));
  events_.emit(WorkerExited{view_, report_.ranks().back()});
  if (failed_first) {
    // A collective timed out: before anything is stopped, what the others were doing in their
    // collectives (the rank that never entered it). Only then: it holds the teardown a moment.
    if (timed_out_in_collective(report_.ranks().back())) {
      CollectivesAtFailure seen = watch_->flight_records_at_failure();
      report_.set_collectives(std::move(seen.text), std::move(seen.record));
    }
    // What the other nodes print at once; this node prints the whole report when the round ends.
    const std::string summary = failure_summary(report_, failure_context());
    const RankOutcome& root = *report_.root_cause();
    const int code = std::clamp(w.exit_code, 1, 255);
    // A node that had stopped answering before the rank failed (not lost yet): the rank failed of
    // it (its connection to that node closed, its collective timed out), so the node is the cause.
    if (const std::optional<NodeLoss> silent = monitor_ ? monitor_->silent_before(root.failed_at()) : std::nullopt) {
      NodeStop stop = lost_node_stop(*silent, view_.group_rank, eff_.host, view_.hosts());
      publish_failure(NodeFailure{view_.group_rank, began_at(stop.root), stop.summary, stop.root});
      return stop_round(Outcome::failure(code, std::move(stop.summary), view_.group_rank, std::move(stop.root)), true,
                        true);
    }
    const RootCause record = worker_root_cause(report_, view_.group_rank, eff_.host);
    publish_failure(NodeFailure{view_.group_rank, root.failed_at(), summary, record});
    return stop_round(Outcome::failure(code, summary, view_.group_rank, record), true, true);
  }
  check_round_end();
}

void Agent::on_hang(const HangReport& report) {
  events_.emit(HangFound{view_, report.collective, report.text, report.stacks_file});
  if (!report.collective) return log::error("{}", report.text);
  if (!status_.stoppable()) return;
  // A failure of this node's, found at this time: the other nodes print it as such.
  NodeStop stop = hang_failure(report.text, report.stacks_file, view_.group_rank, eff_.host, report.record);
  hang_ = NodeFailure{view_.group_rank, stop.root.time, stop.summary, stop.root};
  publish_failure(*hang_);
  stop_round(Outcome::failure(kExitHang, std::move(stop.summary), view_.group_rank, std::move(stop.root)), true, true);
}

void Agent::publish_failure(const NodeFailure& failure) {
  if (view_.nnodes() < 2 || !joiner_->job()) return;
  try {
    publish_node_failure(*joiner_->job(), key(""), failure);
  } catch (const Error& e) {
    log::warning("could not record this node's failure for the others: {}", e.what());
  }
}

RoundSummary Agent::final_summary(const Outcome& cause) const {
  RoundEnd end{cause, std::nullopt, hang_, view_.hosts()};
  if (view_.nnodes() > 1 && joiner_->job()) {
    end.other_node = earliest_other_failure(*joiner_->job(), key(""), view_.group_rank, view_.nnodes());
  }
  return end_of_round_summary(report_, failure_context(), end);
}

void Agent::on_outcome(const std::string& value) {
  Outcome outcome;
  try {
    outcome = Outcome::decode(value);
  } catch (const OutcomeError& e) {
    // Not ours: never an exit 0, never a restart on its word.
    NodeStop stop = malformed_outcome_stop(e.what());
    return stop_round(Outcome::failure(kExitFailure, std::move(stop.summary), -1, std::move(stop.root)), false, false);
  }
  if (outcome.succeeded()) {
    if (status_.state() == RoundState::Succeeded) return finish(kExitOk);
    // A success while this node's workers still run was not written by the last node to succeed.
    NodeStop stop = forged_success_stop();
    return stop_round(Outcome::failure(kExitFailure, std::move(stop.summary), -1, std::move(stop.root)), false, false);
  }
  outcome.summary = reported_failure(outcome, view_.hosts());
  // Another node's rank timed out in a collective (its record says so): this node's part of what
  // the ranks were doing, before its workers are stopped.
  if (outcome.root_cause && outcome.root_cause->collective_timeout && report_.collectives().empty()) {
    CollectivesAtFailure seen = watch_->flight_records_at_failure();
    report_.set_collectives(std::move(seen.text), std::move(seen.record));
  }
  stop_round(std::move(outcome), true, false);
}

}  // namespace ddp::launcher
