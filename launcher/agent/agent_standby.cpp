// A standby node's round (--active_nodes; the rule is in rdzv/standby_members.hpp). Part of the
// Agent (agent.hpp), on its event loop. A standby starts no worker: it counts as a node whose
// workers all finished, so the round's states, outcome, restarts and exit barrier are those of
// any node, and a failure or a lost active node takes it to the next round like the others,
// where it may be promoted.
#include "common/log.hpp"
#include "launcher/agent/agent.hpp"

namespace ddp::launcher {

bool Agent::stands_by(bool was_standby) {
  if (!view_.standby) {
    if (was_standby) {
      log::info("round {}: this standby node takes an active node's place: group rank {}, world size {}",
                view_.round, view_.group_rank, view_.ranks.world_size());
    }
    return false;
  }
  log::info(
      "round {}: standby (group rank {}): no workers; this node waits to take the place of a lost or failed "
      "active node at a restart (active nodes: {}, world size {})",
      view_.round, view_.group_rank, view_.active_nodes(), view_.ranks.world_size());
  procs_ = deps_.processes(io_, OutputPolicy{&console_, &log_tally_});  // stays empty
  report_.clear();
  status_.run();
  register_once();  // --status finds a standby node too
  start_monitor();
  // No worker will exit: the round is "done" here at once (Running → Succeeded), and a standby
  // that sees every active node's record declares the job's success as any node would.
  check_round_end();
  return true;
}

}  // namespace ddp::launcher
