// A round's events as data: what the agent emits once, at each step of a round, to every listener
// (the event log and summary, run_recorder.hpp; the live status, status_board.hpp; anything a
// test or a new view adds through AgentDeps::listeners). A new view of the job (a page, a metrics
// exporter, an orchestrator's report) is a new RoundListener and touches no agent file.
//
// The events, in the order a round has them:
//   RoundJoining    a round is being joined (the first, a restart, a new elastic round)
//   RoundJoined     the round is formed; the view says who is in it (a standby node too)
//   WorkersStarted  this node's workers started (not on a standby node)
//   WorkerExited    one of them exited
//   HangFound       --hang_timeout found a collective hang, or suspects one
//   StragglersScored  straggler detection scored the ranks (every third of --straggler_window;
//                   rdzv/stragglers.hpp), with the stragglers found or recovered since the last
//   RoundStopping   the round stops: the cause (its code, origin node, record) and the signal sent
//   RoundFailed     the round failed; its record, as the restart history keeps it
//   JobRestarting   the next round is a restart
//   JobEnded        the job ends on this node: its exit code and the root cause as a record
// Each event refers to the agent's data: valid during the call only (copy what is kept).
// Not thread-safe: events are emitted on the agent's event loop, to each listener in the order
// they were added. A listener must not throw (an exception ends the launcher as an unexpected
// error) and must not block: it runs on the loop that watches the workers.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "launcher/rdzv/root_cause.hpp"
#include "launcher/rdzv/stragglers.hpp"
#include "launcher/report/restart_history.hpp"
#include "launcher/report/round_report.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

// The round as this node sees it: carried whole by every event.
struct RoundView {
  int round = 0;
  int group_rank = 0;  // this node's rank in the round (= --node_rank unless elastic)
  int restarts = 0;    // the job's restart count so far, as the members see it
  bool standby = false;  // this node stands by in the round (--active_nodes): no workers
  RankMap ranks{std::vector<NodeInfo>{}};  // every member, standby ones included (empty before a join)

  // Members of the round (1 before a join), and those of them that run workers.
  int nnodes() const { return ranks.num_nodes() > 0 ? ranks.num_nodes() : 1; }
  int active_nodes() const { return ranks.num_nodes() > 0 ? ranks.num_active() : 1; }
  // Each member's host name, by group rank, as it gave it (from the rank map, sorted by rank).
  std::vector<std::string> hosts() const;
};

struct RoundJoining {
  int round = 0;
  int restarts = 0;
};
struct RoundJoined {
  const RoundView& view;
};
struct WorkersStarted {
  const RoundView& view;
  const std::vector<WorkerSpec>& specs;
  const std::vector<int>& pids;  // in the specs' order
};
struct WorkerExited {
  const RoundView& view;
  const RankOutcome& outcome;  // its end as the round's report keeps it (state, error file read)
};
struct HangFound {
  const RoundView& view;
  bool collective = false;  // true: a collective hang (the job fails); false: suspected
  const std::string& text;         // the report
  const std::string& stacks_file;  // where the whole report and the stacks are ("" when none)
};
struct StragglersScored {
  const RoundView& view;
  const StragglerScores& scores;  // this node's view: on node 0 every rank, on another its own
  const std::vector<StragglerChange>& changes;
};
struct RoundStopping {
  const RoundView& view;
  const Outcome& cause;  // the first reason to stop (its record: cause.root_cause)
  int signal_sent = 0;   // what the workers were sent
};
struct RoundFailed {
  const RoundView& view;
  const FailedRound& failed;
};
struct JobRestarting {
  const RoundView& view;
  int restart = 0;  // 1 for the first restart
  int max_restarts = 0;
};
struct JobEnded {
  const RoundView& view;
  int exit_code = 0;
  const RoundReport& last_round;         // every local rank's end in the last round
  const std::optional<RootCause>& root;  // the job's root cause (nullopt after a success)
  const std::string& root_text;          // the words printed about it ("" with none)
};

using RoundEvent = std::variant<RoundJoining, RoundJoined, WorkersStarted, WorkerExited, HangFound, StragglersScored,
                                RoundStopping, RoundFailed, JobRestarting, JobEnded>;

class RoundListener {
 public:
  virtual ~RoundListener() = default;
  // One event; see above for what may be done here.
  virtual void on_event(const RoundEvent& event) = 0;
};

// The agent's list of listeners. Not thread-safe (the agent's loop only).
class RoundEvents {
 public:
  // `listener` must outlive this list.
  void add(RoundListener& listener) { listeners_.push_back(&listener); }
  void emit(const RoundEvent& event) const {
    for (RoundListener* l : listeners_) l->on_event(event);
  }

 private:
  std::vector<RoundListener*> listeners_;
};

}  // namespace ddp::launcher
