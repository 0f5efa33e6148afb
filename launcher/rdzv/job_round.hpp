// Joining one round of the job from the launcher's configuration: the static or the elastic
// rendezvous (node_rendezvous.hpp), with late arrivals carried to the next round. Runs on the
// agent's rendezvous thread; everything it learns comes back in the result.
#pragma once

#include <atomic>
#include <functional>

#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"

namespace ddp::launcher {

struct JoinedRound {
  RankMap ranks;
  int group_rank = 0;   // this node's rank in the round (= --node_rank unless elastic)
  int round = 0;        // the round joined: later than asked when this node arrived late
  int late_rounds = 0;  // rounds that closed without this node (each counts as a restart)
  // Where the workers' store is, when the round says (etcd-v3: its group rank 0 hosts it); ""
  // and 0: --master_addr and the launcher's store port.
  std::string master_addr;
  int master_port = 0;
};

// Blocks until this node is a member of round `round` or a later one. Throws as join_round and
// join_elastic_round do (UsageError, TimeoutError, ConnectionError, Error on cancellation).
// `status` receives the waiting lines; `clear_old_keys` is RendezvousOptions' (empty: none).
JoinedRound join_job_round(rendezvous::Store& root, rendezvous::Store& job, const LaunchConfig& config,
                           const EffectiveConfig& effective, int round, const std::atomic<bool>* cancelled,
                           const std::function<void(const std::string&)>& status,
                           std::function<void(int first_round_kept)> clear_old_keys = {});

// Records that every worker of node `node` exited 0 ("<round_prefix>done/<node>") and tells
// whether every node of the round has such a record, so the caller publishes the success. The
// store orders the writes, so of nodes that finish together the last one sees every record. A
// record is a value, read back through the job's view, so with a job secret a stranger cannot
// forge one (a counter could be bumped by anyone). `nnodes` counts the nodes that run workers
// (group ranks 0..nnodes-1); a standby node (`node` >= nnodes) may record itself and declare the
// success when it sees every active node's record. Throws what the store throws.
bool count_in(rendezvous::Store& job, const std::string& round_prefix, int node, int nnodes);

// The key of node `node`'s record that its workers finished (count_in's), under `round_prefix`
// ("r<round>/"). Pure.
std::string done_key(const std::string& round_prefix, int node);

// Closes round `next_round` of an elastic job that ended for good, with `why` as the error that a
// node waiting there (it arrived late) or arriving later exits with, instead of waiting until
// --rdzv_timeout. Returns whether a node waits there. Never throws (a failure is logged).
bool turn_away_late_nodes(rendezvous::Store& job, int next_round, const std::string& why);

// How a node leaves a multi-node job (leave_job).
struct JobExitOptions {
  int nnodes = 1;
  bool is_host = false;               // the store's host: it waits for the others
  std::chrono::milliseconds wait{0};  // how long the host waits for every node to count itself out
  bool quiet = false;                 // a store already gone is logged at debug level only
};

// The exit barrier of a multi-node job, after a success or a failure: every node counts itself
// out under `round_prefix` ("r<round>/") once it has printed its summary (having read the
// outcome and the other nodes' failure records); the store's host (`is_host`) then waits up to
// `wait` for all `nnodes`, so no node mistakes the end of the job for a lost store and prints
// that instead of the real outcome. Blocks up to `wait` on the host, one store call elsewhere.
// Never throws: a node gone meanwhile loses nothing, and is logged (a warning unless `quiet`).
void leave_job(rendezvous::Store& job, const std::string& round_prefix, const JobExitOptions& options);

}  // namespace ddp::launcher
