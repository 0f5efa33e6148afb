// The machine-readable record of a run on this node (schema: docs/json-output.md), a listener of
// the round's events (round_events.hpp):
//   --event_log FILE   JSON lines appended as things happen: round_joined, workers_started,
//                      worker_exited, teardown, hang / hang_suspected, round_failed, restart,
//                      job_ended. Opened in append mode, one write(2) per line, so several
//                      launchers (or runs) may share one file.
//   --summary_json FILE, and summary.json in the run's log directory with --log_dir: written once
//                      when the job ends, with every local rank's outcome in the last round, the
//                      root cause (from its record: the same fields whichever node it happened
//                      on), every failed round ("rounds": restart_history.hpp), and the run's
//                      slowest ranks and nodes ("stragglers", docs/stragglers.md).
// Straggler detection's found and recovered go to the event log as "straggler" and
// "straggler_recovered" lines.
// A write that fails (full disk, read-only) is reported once on the console and never changes
// the job's exit code. Not thread-safe: the agent's event loop only.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "launcher/events/round_events.hpp"
#include "launcher/rdzv/root_cause.hpp"
#include "launcher/report/restart_history.hpp"

namespace ddp::launcher {

// When a failed round was joined (the epoch when this launcher saw no round_joined for it) and
// when it failed.
struct RoundTimes {
  std::chrono::system_clock::time_point joined, failed;
};

struct RunRecorderOptions {
  std::string event_log;                  // "" = none
  std::vector<std::string> summary_json;  // files to write at the end (none: nothing)
  std::string run_id;
  std::string host;
};

class RunRecorder : public RoundListener {
 public:
  // Checks that the summary files and the event log can be written (config/file_flag.hpp: a
  // regular file, /dev/null or the launcher's stdout/stderr, never a FIFO or a device), so a bad
  // path fails the start rather than losing the record at the end, then opens the event log
  // (created 0644 when missing; opened non-blocking, so a FIFO is refused, not waited on). Throws
  // UsageError naming the file, the error and the fix when a file fails the check or cannot be
  // opened. Does not block otherwise.
  explicit RunRecorder(RunRecorderOptions options);
  ~RunRecorder() override;
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  // Appends the event's line to the event log; JobEnded also writes the summary files. Blocks on
  // the file system only; never throws (but std::bad_alloc).
  void on_event(const RoundEvent& event) override;

 private:
  void append(const nlohmann::json& line);
  void write_summary(const JobEnded& end);
  // The run's slowest ranks and nodes: each one's highest lateness in any scoring.
  void note_slowest(const StragglerScores& scores);
  nlohmann::json slowest_json() const;

  RunRecorderOptions o_;
  std::vector<std::pair<FailedRound, RoundTimes>> failed_rounds_;
  std::chrono::system_clock::time_point joined_;  // when the last round was joined (epoch: none yet)
  bool standby_ = false;                          // in the last round joined
  int fd_ = -1;
  bool warned_ = false;
  std::string mode_;  // --stragglers, once scored ("": never)
  std::map<int, RankLateness> slowest_ranks_;
  std::map<int, NodeLateness> slowest_nodes_;
};

// The JSON of a root cause (the summary's "root_cause"): the same members for every kind and
// every node; `summary` the words printed about it. Pure.
nlohmann::json root_cause_json(const RootCause& cause, const std::string& summary);

}  // namespace ddp::launcher
