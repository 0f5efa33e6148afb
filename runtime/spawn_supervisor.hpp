// The parent side of spawn(): starts the copies in one ProcessSet (common/process_set.hpp: own
// process group, death with the parent, only stdin/stdout/stderr inherited) and watches them in
// one poll() loop over a self-pipe fed by the SIGINT/SIGTERM/SIGCHLD handlers, with the shutdown
// grace as the loop's only timeout. Linux-specific.
#pragma once

#include <signal.h>

#include <chrono>
#include <string>
#include <vector>

#include "common/process_set.hpp"

namespace ddp::runtime {

class SpawnSupervisor {
 public:
  // Installs the SIGINT/SIGTERM/SIGCHLD handlers (they write the signal number to a self-pipe).
  // Does not block. Throws SpawnError if the pipe cannot be created. One supervisor per process
  // at a time.
  explicit SpawnSupervisor(std::chrono::milliseconds grace);
  // The ProcessSet SIGKILLs and reaps every copy still there; then the handlers are restored.
  ~SpawnSupervisor();
  SpawnSupervisor(const SpawnSupervisor&) = delete;
  SpawnSupervisor& operator=(const SpawnSupervisor&) = delete;

  // Starts `exe` with `argv` and `env` as rank `rank` (ranks are started in order 0, 1, ...).
  // Does not block. Throws SpawnError when the copy cannot be started.
  void start(int rank, const std::string& exe, const std::vector<std::string>& argv, const Environment& env);

  // Blocks until every copy has ended and returns the exit code spawn() returns (see spawn.hpp):
  // 0, the first failed copy's code, or 128 + N after signal N reached this process.
  int wait();

 private:
  void on_exit(const ProcessSet::Exit& exit);
  void on_signal(int signo);
  void begin_stop(int signo);

  std::chrono::milliseconds grace_;
  int pipe_read_ = -1;
  int pipe_write_ = -1;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_chld_ {};
  // Declared after the pipe and handlers: destroyed (children killed and reaped) before they go.
  ProcessSet processes_;
  bool stopping_ = false;
  bool killed_ = false;
  std::chrono::steady_clock::time_point kill_at_;
  int result_ = 0;
};

}  // namespace ddp::runtime
