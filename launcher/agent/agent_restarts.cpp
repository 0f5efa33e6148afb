// The agent's restart loop: what a failed round leaves behind (its short cause, printed before a
// restart and listed in the final summary), the no-progress breaker's verdict agreed through the
// store (progress_tracker.hpp, progress_exchange.hpp; agreed on a helper thread:
// progress_exchange_thread.hpp), the restart itself and the end of the job. Part of the Agent
// (agent.hpp), on its event loop; every word printed is report/'s.
#include <optional>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/agent/progress_exchange.hpp"
#include "launcher/rdzv/round_keys.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/root_cause_of.hpp"
#include "launcher/watch/progress_file.hpp"

namespace ddp::launcher {

void Agent::retire_processes() {
  // The last round's context stays (a SIGCHLD between rounds still reaps adopted orphans there,
  // as in the round).
  std::erase_if(retired_, [](const std::unique_ptr<ProcessContext>& p) { return p->settled(); });
  if (procs_) retired_.push_back(std::move(procs_));
}

void Agent::note_failed_round(const Outcome& cause, const RoundSummary& summary, std::optional<long long> collectives,
                              std::function<void(bool)> then) {
  verdict_.reset();
  if (cause.code == kExitOk) return then(false);
  FailedRound round{view_.round,
                    cause.code,
                    cause.origin_node,
                    summary.root.value_or(node_root_cause(RootCause::Kind::Reported, cause.origin_node, "", "")),
                    view_.group_rank,
                    "",
                    {}};
  auto record = [this, round, then = std::move(then)](std::optional<ProgressVerdict> verdict) mutable {
    verdict_ = std::move(verdict);
    if (verdict_) {
      round.progress = to_string(verdict_->progress);
      round.progress_nodes = verdict_->nodes;
    }
    history_.add(round);
    events_.emit(RoundFailed{view_, round});
    then(verdict_ && breaker_trips(*verdict_, c_.max_no_progress_restarts));
  };
  // A TorchFT replica group's collectives measure nothing (launch_config.hpp): unknown, never "none".
  if (!c_.progress_from_collectives) collectives.reset();
  if (c_.max_no_progress_restarts > 0 && status_.restartable()) return settle_progress(collectives, std::move(record));
  record(std::nullopt);
}

void Agent::settle_progress(std::optional<long long> collectives,
                            std::function<void(std::optional<ProgressVerdict>)> then) {
  std::optional<ProgressFileReading> file;
  if (!c_.progress_file.empty()) {
    file = read_progress_file(c_.progress_file);
    if (file->state == ProgressFileReading::State::Unusable && !progress_file_warned_)
      log::warning("{}", file->problem);
    progress_file_warned_ = progress_file_warned_ || file->state == ProgressFileReading::State::Unusable;
  }
  const NodeProgress mine = progress_->measure(file, collectives);
  if (!joiner_->job()) return then(std::nullopt);
  ProgressExchange x;
  x.round_prefix = round_prefix(view_.round);
  x.previous_round_prefix = view_.round > 0 ? round_prefix(view_.round - 1) : "";
  x.node = view_.group_rank;
  x.nnodes = view_.nnodes();
  x.is_restart = view_.restarts > 0;
  x.node_lost = lost_.has_value();
  // The others measure once their workers have exited: at most the shutdown grace after they
  // heard of the failure, which their watchers hear within a heartbeat timeout.
  x.wait = c_.shutdown_timeout + c_.heartbeat_timeout + std::chrono::seconds(2);
  const int round = view_.round;
  exchange_.start(
      [this] { return connect_job(); }, std::move(x), mine,
      [this, round, then = std::move(then)](std::optional<ProgressVerdict> verdict, const std::string& error) {
        if (exit_code_) return;  // a signal ended the job meanwhile
        if (!error.empty()) {
          // Without the other nodes' word the round cannot be judged the same way
          // everywhere: it counts as progress (never a stop for what ddplaunch could
          // not see).
          log::warning(
              "the no-progress breaker could not agree on round {} with the other nodes ({}); it counts "
              "as progress",
              round, error);
        }
        then(verdict);
      });
}

void Agent::restart_job() {
  const int streak = verdict_ ? verdict_->streak : 0;
  log::warning("{}", history_.restart_notice(streak, c_.max_no_progress_restarts));
  ++view_.restarts;
  ++view_.round;
  log::info("restarting the job (restart {} of {})", view_.restarts, c_.max_restarts);
  events_.emit(JobRestarting{view_, view_.restarts, c_.max_restarts});
  start_round();
}

void Agent::end_job(const std::string& summary, int code) {
  console_.flush();
  std::string text = summary;
  if (const std::string rounds = history_.section(); !rounds.empty()) text += (text.empty() ? "" : "\n") + rounds;
  if (code == kExitNoProgress && verdict_) {
    text += (text.empty() ? "" : "\n") + history_.no_progress_stop(verdict_->streak, c_.max_no_progress_restarts);
  }
  if (!text.empty()) console_.write(2, text + "\n");
  finish(code);
}

}  // namespace ddp::launcher
