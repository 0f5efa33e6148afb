// Workers the kernel will not let go (watch/held_workers.hpp): SIGKILL, then, for a worker still
// there --unkillable_timeout later, its name and wchan, no new round on this host and the exit
// code kExitUnkillable. Part of the Agent (agent.hpp), on its event loop (held_gate's gate runs on
// the join thread).
#include <csignal>

#include "common/log.hpp"
#include "launcher/agent/agent.hpp"

namespace ddp::launcher {

void Agent::kill_workers() {
  signal_sent_ = SIGKILL;
  procs_->signal(SIGKILL);
  // No event says "this process will never exit": a timer bounds the wait.
  held_timer_.expires_after(c_.unkillable_timeout);
  held_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) on_held();
  });
}

void Agent::on_held() {
  if (!procs_ || procs_->running() == 0) return;
  for (const int pid : procs_->abandon_running()) {
    const auto it = round_workers_.find(pid);
    const auto [rank, local_rank] = it != round_workers_.end() ? it->second : std::pair(-1, -1);
    held_.push_back(read_held_worker(pid, rank, local_rank));
  }
  log::error("{}", held_workers_report(held_, eff_.host, c_.unkillable_timeout, kExitUnkillable));
  {
    std::lock_guard<std::mutex> lock(held_mutex_);
    held_line_ = held_workers_line(held_, c_.unkillable_timeout);
  }
  check_round_end();  // none of this round's workers is counted any more: the round ends
}

void Agent::leave_held(bool restarting) {
  if (!restarting || c_.max_nodes == 1) return end_job(round_end_ ? round_end_->text : "", kExitUnkillable);
  ++view_.restarts;
  ++view_.round;
  log::info("the other nodes go on to round {}: this node joins it only to tell them it is out", view_.round);
  start_round();
}

HealthGate Agent::held_gate(HealthGate inner) {
  return [this, inner = std::move(inner)](int round, const CancelEvent& cancel) -> std::optional<SelfExclusion> {
    {
      std::lock_guard<std::mutex> lock(held_mutex_);
      if (!held_line_.empty()) return SelfExclusion{held_line_, "this node left the job: " + held_line_};
    }
    return inner ? inner(round, cancel) : std::nullopt;
  };
}

}  // namespace ddp::launcher
