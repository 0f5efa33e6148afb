// The parent side of spawn(): starts the copies (fork + exec, own process group, death with the
// parent) and watches them in one poll() loop over their pidfds and a self-pipe fed by the
// SIGINT/SIGTERM handlers, with the shutdown grace as the loop's only timeout. Linux-specific.
#pragma once

#include <sys/types.h>

#include <signal.h>
#include <chrono>
#include <string>
#include <vector>

namespace ddp::runtime {

class SpawnSupervisor {
 public:
  // Installs the SIGINT/SIGTERM handlers (they write the signal number to a self-pipe) and sets
  // SIGCHLD to its default action, so that nothing else reaps our children. Does not block.
  // Throws SpawnError if the pipe cannot be created. One supervisor per process at a time.
  explicit SpawnSupervisor(std::chrono::milliseconds grace);
  // SIGKILLs the process group of every copy not yet reaped, reaps them and restores the handlers.
  ~SpawnSupervisor();
  SpawnSupervisor(const SpawnSupervisor&) = delete;
  SpawnSupervisor& operator=(const SpawnSupervisor&) = delete;

  // Starts `exe` with `argv` and `env` ("NAME=value" strings) as rank `rank`. Does not block.
  // Throws SpawnError when fork or pidfd_open fails; exec failing shows up as exit code 127.
  void start(int rank, const std::string& exe, const std::vector<std::string>& argv,
             const std::vector<std::string>& env);

  // Blocks until every copy has ended and returns the exit code spawn() returns (see spawn.hpp):
  // 0, the first failed copy's code, or 128 + N after signal N reached this process.
  int wait();

 private:
  struct Child {
    int rank = 0;
    pid_t pid = -1;
    int pidfd = -1;
    bool exited = false;  // ended; kept unreaped (a zombie) until the end, see wait()
    bool reaped = false;
  };

  void on_exit(Child& child);
  void on_signal(int signo);
  // Sends `signo` to the process group of every copy not yet reaped.
  void signal_all(int signo);
  void begin_stop(int signo);
  int running() const;
  void reap_all();

  std::chrono::milliseconds grace_;
  std::vector<Child> children_;
  int pipe_read_ = -1;
  int pipe_write_ = -1;
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
  struct sigaction old_chld_ {};
  bool stopping_ = false;
  bool killed_ = false;
  std::chrono::steady_clock::time_point kill_at_;
  int result_ = 0;
};

}  // namespace ddp::runtime
