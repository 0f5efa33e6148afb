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

namespace ddp::launcher {

FailureContext Agent::failure_context() const {
  FailureContext context;
  context.program = c_.program;
  context.host = eff_.host;
  context.node_rank = group_rank_;
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
  status_board_.exited(w);
  recorder_->worker_exited(round_, report_.ranks().back());
  if (failed_first) {
    // A collective timed out: before anything is stopped, what the others were doing in their
    // collectives (the rank that never entered it). Only then: it holds the teardown a moment.
    if (timed_out_in_collective(report_.ranks().back())) report_.set_collectives(watch_->flight_records_at_failure());
    // What the other nodes print at once; this node prints the whole report when the round ends.
    const std::string summary = failure_summary(report_, failure_context());
    if (nnodes_ > 1 && joiner_->job()) {
      try {
        publish_node_failure(*joiner_->job(), key(""),
                             NodeFailure{group_rank_, report_.root_cause()->failed_at(), summary});
      } catch (const Error& e) {
        log::warning("could not record this node's failure for the others: {}", e.what());
      }
    }
    return stop_round(Outcome::failure(std::clamp(w.exit_code, 1, 255), summary, group_rank_), true, true);
  }
  check_round_end();
}

void Agent::on_hang(const HangReport& report) {
  recorder_->hang(round_, report.stacks_file, report.collective);
  status_board_.hang(report.collective, report.text);
  if (!report.collective) return log::error("{}", report.text);
  if (!status_.stoppable()) return;
  // A failure of this node's, found at this time: the other nodes print it as such.
  const std::string summary = hang_failure(report.text, report.stacks_file, group_rank_);
  hang_ = NodeFailure{group_rank_, std::chrono::system_clock::now(), summary};
  if (nnodes_ > 1 && joiner_->job()) {
    try {
      publish_node_failure(*joiner_->job(), key(""), *hang_);
    } catch (const Error& e) {
      log::warning("could not record this node's failure for the others: {}", e.what());
    }
  }
  stop_round(Outcome::failure(kExitHang, summary, group_rank_), true, true);
}

std::string Agent::final_summary(const Outcome& cause) const {
  RoundEnd end{cause, std::nullopt, hang_, hosts_};
  if (nnodes_ > 1 && joiner_->job()) {
    end.other_node = earliest_other_failure(*joiner_->job(), key(""), group_rank_, nnodes_);
  }
  return end_of_round_summary(report_, failure_context(), end);
}

void Agent::on_outcome(const std::string& value) {
  Outcome outcome;
  try {
    outcome = Outcome::decode(value);
  } catch (const OutcomeError& e) {
    // Not ours: never an exit 0, never a restart on its word.
    return stop_round(Outcome::failure(kExitFailure, malformed_outcome_stop(e.what()), -1), false, false);
  }
  if (outcome.succeeded()) {
    if (status_.state() == RoundState::Succeeded) return finish(kExitOk);
    // A success while this node's workers still run was not written by the last node to succeed.
    return stop_round(Outcome::failure(kExitFailure, forged_success_stop(), -1), false, false);
  }
  outcome.summary = reported_failure(outcome, hosts_);
  // Another node's rank timed out in a collective: this node's part of what the ranks were doing,
  // before its workers are stopped.
  if (says_collective_timed_out(outcome.summary) && report_.collectives().empty()) {
    report_.set_collectives(watch_->flight_records_at_failure());
  }
  stop_round(std::move(outcome), true, false);
}

std::string Agent::host_name(int node) const {
  if (node < 0 || node >= static_cast<int>(hosts_.size())) return "";
  return printable(hosts_[static_cast<std::size_t>(node)]);
}

}  // namespace ddp::launcher
