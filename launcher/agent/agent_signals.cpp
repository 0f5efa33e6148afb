// The agent's signal handling: forwarding to the workers, stopping the round, the second Ctrl-C
// during the shutdown grace. Part of the Agent (agent.hpp), on its event loop.
#include <csignal>

#include "common/exit_codes.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/report/failure_summary.hpp"

namespace ddp::launcher {

void Agent::wait_signals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (ec) return;
    on_signal(s);
    wait_signals();
  });
}

void Agent::on_signal(int signo) {
  const bool stopping_signal = signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
  if (!procs_ && !stopping_signal) {
    log::info("received {} while waiting for nodes; no worker to forward it to", signal_name(signo));
    return;
  }
  if (!procs_) {
    // Still in rendezvous (or its health checks, or between rounds): no worker to stop, so stop
    // right away; a health check's command is killed (RoundJoiner::cancel).
    log::info("interrupted by {} {}", signal_name(signo),
              joiner_->checking_health() ? "during this node's health checks" : "while waiting for nodes");
    joiner_->cancel();
    return finish(exit_code_for_signal(signo));
  }
  if (!stopping_signal) {
    log::info("received {}, forwarding it to the workers", signal_name(signo));
    return procs_->notify(signo);  // e.g. SIGUSR1 for a checkpoint
  }
  if (!status_.stoppable()) {
    // Already in the shutdown grace: a second Ctrl-C (or SIGTERM) means now.
    log::info("received {} during the shutdown grace; sending SIGKILL to the workers", signal_name(signo));
    status_.interrupt(signo);
    return kill_workers();
  }
  status_.interrupt(signo);
  log::info("received {}, forwarding it to the workers (SIGKILL after {}, {})", signal_name(signo),
            format_seconds(preemption_grace_or(c_.shutdown_timeout)),
            signo == SIGTERM ? "--preemption_grace" : "--shutdown_timeout");
  NodeStop stop = interrupted_stop(view_.group_rank, eff_.host, signo);
  stop_round(
      Outcome::failure(exit_code_for_signal(signo), std::move(stop.summary), view_.group_rank, std::move(stop.root)),
      false, true);
}

std::chrono::milliseconds Agent::preemption_grace_or(std::chrono::milliseconds otherwise) const {
  return status_.interrupted_by() == SIGTERM ? c_.preemption_grace : otherwise;
}

}  // namespace ddp::launcher
