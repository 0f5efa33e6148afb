// The machine-readable record of a run on this node (schema in the README, "Machine-readable
// output"):
//   --event_log FILE   JSON lines appended as things happen: round_joined, worker_started,
//                      worker_exited, teardown, restart, job_ended. Opened in append mode, one
//                      write(2) per line, so several launchers (or runs) may share one file.
//   --summary_json FILE, and summary.json in the run's log directory with --log_dir: written once
//                      when the job ends, with every local rank's outcome in the last round, the
//                      root cause, and every failed round ("rounds": restart_history.hpp).
// A write that fails (full disk, read-only) is reported once on the console and never changes
// the job's exit code. Not thread-safe: the agent's event loop only.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/rdzv/outcome.hpp"
#include "launcher/report/restart_history.hpp"
#include "launcher/report/round_report.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

struct RunRecorderOptions {
  std::string event_log;                  // "" = none
  std::vector<std::string> summary_json;  // files to write at the end (none: nothing)
  std::string run_id;
  std::string host;
};

class RunRecorder {
 public:
  // Checks that the summary files and the event log can be written (output_file.hpp), so a bad
  // path fails the start rather than losing the record at the end, then opens the event log
  // (created 0644 when missing). Throws UsageError naming the file, the error and the fix when a
  // file fails the check or cannot be opened. Does not block otherwise.
  explicit RunRecorder(RunRecorderOptions options);
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  // `standby`: this node joined as a standby (--active_nodes): no workers in this round; the
  // summary's "standby" is the last round's.
  void round_joined(int round, int group_rank, int nnodes, int world_size, bool standby = false);
  void workers_started(int round, const std::vector<WorkerSpec>& specs, const std::vector<int>& pids);
  void worker_exited(int round, const RankOutcome& outcome);
  // The round stops: `cause` says why (its code, the node that reported it, its first line).
  void teardown(int round, const Outcome& cause, int signal_sent);
  void restart(int restart, int max_restarts);
  // A round failed (restarted or not): appends round_failed and keeps it for the summary's
  // "rounds" list.
  void round_failed(const FailedRound& round);
  // --hang_timeout found a collective hang (`collective`: the job fails) or its heuristic
  // suspects one; the report and stacks are in `stacks_file`.
  void hang(int round, const std::string& stacks_file, bool collective);
  // The job ends on this node: appends job_ended and writes the summary files. `cause` is the
  // last round's (nullopt after a success), `cause_host` its node's host name.
  void job_ended(int exit_code, int group_rank, int restarts, const RoundReport& last_round,
                 const std::optional<Outcome>& cause, const std::string& cause_host);

 private:
  void append(const std::string& line);

  RunRecorderOptions o_;
  std::vector<FailedRound> failed_rounds_;
  bool standby_ = false;  // in the last round joined
  int fd_ = -1;
  bool warned_ = false;
};

}  // namespace ddp::launcher
