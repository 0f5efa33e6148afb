// The exit barrier as torchrun bounds it (--exit_barrier_timeout, TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT,
// default 300 s): a node whose workers all succeeded waits for the others' to finish, on the event
// loop (so /healthz keeps answering: torchrun's agent stopped answering in its barrier and
// schedulers killed it, pytorch#157318), for at most that long. Then a node other than the
// store's host leaves with exit 0 as torchrun's does, and its last heartbeat says it left
// (rdzv/job_monitor.hpp, kLeftBeat), so the nodes still running do not count it lost. The
// store's host stays: the others' store is in it, and torchrun's leaving there fails them all.
// Part of the Agent (agent.hpp), on its event loop.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "launcher/agent/agent.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/rdzv/job_round.hpp"

namespace ddp::launcher {

void Agent::start_exit_barrier() {
  if (view_.nnodes() < 2) return;
  const int round = view_.round;
  exit_barrier_timer_.expires_after(c_.exit_barrier_timeout);
  exit_barrier_timer_.async_wait([this, round](const boost::system::error_code& ec) {
    if (ec || round != view_.round || status_.state() != RoundState::Succeeded) return;
    leave_early();
  });
}

void Agent::leave_early() {
  std::vector<int> running;
  try {
    for (int n = 0; n < view_.active_nodes(); ++n) {
      if (!joiner_->job()->check({done_key(key(""), n)})) running.push_back(n);
    }
  } catch (const Error& e) {
    return on_lost(NodeLoss{"the store became unreachable: " + std::string(e.what()), true});
  }
  const std::string waited =
      fmt::format("this node's workers finished {} ago (--exit_barrier_timeout) and node(s) {} still run",
                  format_seconds(c_.exit_barrier_timeout), fmt::join(running, ", "));
  if (backend_->hosts_store(view_.group_rank) || !c_.rdzv_rules.node0_hosts_store) {
    log::warning("exit barrier: {}; this node stays until they finish, since {}", waited,
                 c_.rdzv_rules.node0_hosts_store ? "their store is in it"
                                                 : "its etcd lease is how the others know it is alive");
    return;
  }
  log::warning("exit barrier: {}; leaving with exit 0, as torchrun does (the others go on)", waited);
  monitor_.reset();  // its beater stops before the last beat
  try {
    joiner_->job()->set(key("hb/" + std::to_string(view_.group_rank)), std::string(kLeftBeat));
  } catch (const Error& e) {
    // The store went meanwhile: the others have lost it too, and this node's work is done.
    log::debug("exit barrier: the last heartbeat was not written: {}", e.what());
  }
  finish(kExitOk);
}

}  // namespace ddp::launcher
