// A child process for tests that run real executables: spawned with pipes on stdin, stdout and
// stderr, read line by line under a deadline, signalled, and waited for under a deadline through
// a pidfd (no sleep-and-poll). The destructor kills and reaps a child that is still running, so a
// failing test never leaves a process behind.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace ddp::testing {

// How a child ended: `exited` with `code`, or killed by `signal`.
struct ChildExit {
  bool exited = false;
  int code = -1;
  int signal = 0;
};

std::string describe(const ChildExit& e);

class ChildProcess {
 public:
  using Duration = std::chrono::milliseconds;

  // Spawns argv[0] (a path; no PATH lookup) with argv. Signal dispositions and the signal mask
  // are reset to the defaults in the child. Throws std::runtime_error when spawning fails.
  explicit ChildProcess(std::vector<std::string> argv);
  // Kills (SIGKILL) and reaps the child if it has not been reaped yet.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }

  // The next line of the child's stdout, without its '\n'. nullopt when stdout reached EOF (or
  // the deadline passed) before a whole line came. Meanwhile stderr is collected too, so the child
  // never blocks on a full pipe.
  std::optional<std::string> read_stdout_line(Duration timeout);

  // Closes our end of the child's stdin (the child reads EOF).
  void close_stdin();
  void send_signal(int signo);

  // Waits up to `timeout` for the child to end, collecting its output meanwhile; reaps it.
  // nullopt when it is still running at the deadline. After the child ended, returns its status
  // again on every call.
  std::optional<ChildExit> wait_for(Duration timeout);

  // Everything read from stdout/stderr so far (stdout lines already returned are not included).
  // After wait_for() succeeded, the pipes were drained to EOF (bounded) first.
  const std::string& stdout_text() const { return out_; }
  const std::string& stderr_text() const { return err_; }

 private:
  // Polls the pipes and the pidfd until `done()` or the deadline; returns done().
  template <class Done>
  bool pump(std::chrono::steady_clock::time_point deadline, Done done);
  // Reads what is available from `fd` into `buf`; closes `fd` (sets it to -1) on EOF.
  static void drain(int& fd, std::string& buf);
  bool try_reap();

  pid_t pid_ = -1;
  int pidfd_ = -1;
  int stdin_ = -1;
  int stdout_ = -1;
  int stderr_ = -1;
  std::string out_;
  std::string err_;
  std::optional<ChildExit> exit_;
};

}  // namespace ddp::testing
