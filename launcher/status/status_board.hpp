// The live status of one launcher, as its status endpoint serves it (status_server.hpp) and
// `ddplaunch --status` prints it: a snapshot kept up to date by the round's events (a listener,
// events/round_events.hpp: a round joining or joined, workers started or exited, the round
// stopping, a hang, a failed round's root cause, the job's end) and read by the server thread.
// The fields, and what each means, are in docs/json-output.md ("Live status").
//
// What is never in it: the job secret, the token file, the store's credentials, any worker's
// environment or arguments, any worker output or failure summary text (which may quote them).
//
// Thread-safe: every method takes one mutex for a few copies; none blocks otherwise or throws
// (but std::bad_alloc). The progress table, when set, is read without it (its slots are
// seqlocks, readable from any thread: common/collective_progress.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "common/collective_progress.hpp"
#include "launcher/events/round_events.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "launcher/watch/fr/watch.hpp"
#include "launcher/workers/process_context.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

// Who this launcher is; fixed for its life.
struct StatusIdentity {
  std::string job_id;  // --rdzv_id
  std::string host;    // this machine's host name
  int node_rank = 0;   // --node_rank as given (elastic jobs: the group rank may differ)
  int max_restarts = 0;
};

// A local rank as the board knows it.
struct RankStatus {
  int rank = 0;
  int local_rank = 0;
  int pid = 0;
  int slot = -1;               // its slot in the progress table (its index on this node)
  std::string state;           // "running", "stopping" (signalled by the launcher), "exited"
  int exit_code = 0;           // when exited: the code, or 128+N after signal N
  int signal = 0;              // when exited: N, or 0
  std::int64_t exited_ns = 0;  // CLOCK_REALTIME ns
};

// One node of the round, by group rank.
struct NodeStatus {
  int group_rank = 0;
  std::string host;
  int first_rank = 0;
  int nproc = 0;
  bool standby = false;  // no workers this round (--active_nodes)
};

// A failed round's root cause, as the board keeps it: the record's fields that say who and how,
// never its text (an error message or traceback may quote arguments or environment).
struct RoundCause {
  int round = 0;
  int code = 0;          // the exit code the round's root cause gave
  std::string kind;      // kind_name() of the record: "worker", "hang", "node_lost", ...
  int node = -1;         // where it happened (-1: none to blame)
  std::string host;
  int rank = -1;         // a worker's failure: its rank, exit code or signal, error type
  int exit_code = 0;
  int signal = 0;
  std::string error_type;
  std::int64_t time_ns = 0;  // CLOCK_REALTIME ns (0: not known)
};

// Where the ranks' progress is read at each snapshot, without the agent: both must outlive every
// later snapshot(); nullptr: none.
struct ProgressSources {
  const ProgressTable* collectives = nullptr;             // the runtime's slots (worker_watch.hpp)
  const FlightRecorderWatch* flight_recorders = nullptr;  // Python workers' polls
};

// Everything the board holds, copied out in one go.
struct StatusSnapshot {
  StatusIdentity id;
  int pid = 0;                     // the launcher's
  std::int64_t started_ns = 0;     // when the launcher made the board (CLOCK_REALTIME ns)
  std::string state = "starting";  // starting, joining, running, stopping (see docs)
  int round = 0;
  int group_rank = -1;  // -1: not in a round yet
  int world_size = 0;
  int restarts = 0;
  std::vector<NodeStatus> nodes;
  std::vector<RankStatus> ranks;
  std::string hang = "none";  // none, suspected, collective
  std::string hang_summary;   // its first line
  std::int64_t hang_ns = 0;
  int stop_code = 0;                           // while stopping: the root cause's exit code
  int stop_origin = -1;                        // and the group rank it came from (-1: none or unknown)
  std::vector<RoundCause> causes;              // every failed round's root cause, oldest first
  std::optional<int> ended;                    // the job ended on this node: its exit code
  std::vector<CollectiveProgress> progress;    // by slot, read at snapshot time (empty: no table)
  std::map<int, FrProgress> flight_recorders;  // by rank, as the last polls saw them
  std::optional<StragglerScores> stragglers;   // the last scores (none yet: detection off, or not scored)
  std::int64_t now_ns = 0;                     // when the snapshot was taken
};

class StatusBoard : public RoundListener {
 public:
  StatusBoard();

  // The round's events, each to the method below that keeps what it says (the others are
  // ignored). Called on the agent's loop.
  void on_event(const RoundEvent& event) override;

  // Who this launcher is (known once the node is set up), and where progress is read.
  void identify(StatusIdentity id, ProgressSources sources);
  // Round `round` is being joined (the first, a restart, or a new elastic round); `restarts`: the
  // job's restart count so far.
  void joining(int round, int restarts);
  // Round `round` is formed: the nodes (`ranks`), this node's group rank; the job's restart count.
  void joined(int round, const RankMap& ranks, int group_rank, int restarts);
  // This node's workers started (pids in the specs' order; slot i is specs[i]'s).
  void started(const std::vector<WorkerSpec>& specs, const std::vector<int>& pids);
  // A worker exited.
  void exited(const WorkerResult& worker);
  // The round stops: the root cause's code and origin node; the running ranks are signalled.
  void stopping(int code, int origin_node);
  // A hang was found (`collective`) or is suspected; `text`'s first line is kept.
  void hang(bool collective, const std::string& text);
  // A round failed: its root cause (fields only, no text) is kept.
  void failed(const FailedRound& round);
  // The job ended on this node with `exit_code`.
  void ended(int exit_code);
  // Straggler detection's last scores (kept across rounds until the next scores).
  void stragglers(const StragglerScores& scores);

  StatusSnapshot snapshot() const;

 private:
  mutable std::mutex mutex_;
  StatusSnapshot s_;
  ProgressSources sources_;
};

}  // namespace ddp::launcher
