// The agent's view of its local workers: start a group, signal it, hear about each exit.
// PosixProcessContext runs real processes; tests use a fake that scripts exits, so the agent's
// failure, restart and teardown logic is tested without starting a process.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "launcher/workers/console_writer.hpp"
#include "launcher/workers/job_lifetime.hpp"
#include "launcher/workers/log_file.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {

// How one worker ended.
struct WorkerResult {
  int local_rank = 0;
  int rank = 0;
  int pid = 0;
  int exit_code = 0;                     // the process's code, or 128+N when it died of signal N
  int term_signal = 0;                   // N, or 0
  std::vector<std::string> stderr_tail;  // its last stderr lines
  // How long its stderr had been quiet when it exited: from its last line to its exit (0: none).
  std::chrono::milliseconds stderr_quiet{0};
  std::string error_file;                // TORCHELASTIC_ERROR_FILE, "" if none
};

class ProcessContext {
 public:
  using ExitCallback = std::function<void(const WorkerResult&)>;
  virtual ~ProcessContext() = default;

  // Starts one worker per spec and returns their pids, in the specs' order. `on_exit` runs on the
  // agent's event loop once per worker, after its output has been passed on. Throws UsageError
  // when a worker cannot start (workers already started are killed and reaped first). Not
  // thread-safe: loop thread only.
  virtual std::vector<int> start(const std::vector<WorkerSpec>& specs, ExitCallback on_exit) = 0;
  // Sends `signo` to the process group of every worker that has not exited. Never blocks.
  virtual void signal(int signo) = 0;
  // Sends `signo` to each worker process that has not exited, not to its group (SIGUSR1 and
  // SIGUSR2 for the training script, which its helper processes may not handle). Never blocks.
  virtual void notify(int signo) = 0;
  // Workers started and not yet reported through on_exit.
  virtual std::size_t running() const = 0;
  // Gives up on the workers still running (they outlived SIGKILL: the kernel holds them) and
  // returns their pids: on_exit never reports them, running() no longer counts them and
  // destroying the context does not wait for them. Never blocks.
  virtual std::vector<int> abandon_running() = 0;
  // Nothing of this context is left to run on the loop: every worker was reported, its output
  // closed and reaped, and no timer or posted handler of the context is pending, so it may be
  // destroyed now (the agent frees the contexts of rounds gone once they are). Loop thread only.
  virtual bool settled() const = 0;
};

// Where worker output goes; each worker's routing comes with its spec (WorkerSpec::output).
struct OutputPolicy {
  ConsoleWriter* console = nullptr;
  LogFileTally* log_tally = nullptr;  // lines that missed their log files, over the run
};

// Real processes: one ProcessSet (own process groups, parent-death signal, only stdio inherited),
// exits through SIGCHLD on `io`, output through pipes read by `io`.
std::unique_ptr<ProcessContext> make_posix_process_context(boost::asio::io_context& io, OutputPolicy policy);
// The same, supervised by the job's lifetime (job_lifetime.hpp): workers join the job's cgroup,
// the rest of a worker's process group is stopped when it exits, adopted orphans are reaped on
// SIGCHLD. `lifetime` must outlive the context.
std::unique_ptr<ProcessContext> make_supervised_process_context(boost::asio::io_context& io, OutputPolicy policy,
                                                                JobLifetime& lifetime);

}  // namespace ddp::launcher
