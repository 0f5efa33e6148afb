// torchelastic's file timers, served as torchrun's FileTimerServer serves them: with
// TORCHELASTIC_ENABLE_FILE_TIMER=1 in the launcher's environment, ddplaunch makes a named pipe
// (TORCHELASTIC_TIMER_FILE if set, else "watchdog_timer" in the run's directory), passes its path
// to the workers as TORCHELASTIC_TIMER_FILE, and reads the requests that
// torch.distributed.elastic.timer's FileTimerClient writes there, one JSON object per line:
//   {"version": 1, "pid": 4242, "scope_id": "step", "expiration_time": 1795587795.5, "signal": 9}
// (a negative expiration_time releases the scope). When a scope of one of this round's workers
// expires, its stack is taken (stack_dump.hpp) and printed, then that worker alone gets the
// request's signal (torchrun 2.15 kills its own process group, itself included, and prints
// nothing); a request with signal 0 is reported and kills nothing. The worker's failure summary
// then names the expired scope (note()).
//
// Event-driven on the agent's io_context: the pipe is read asynchronously and one steady timer is
// armed for the earliest deadline. The stack is taken on a helper thread. Not thread-safe: the
// agent's loop only.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

struct WorkerTimersOptions {
  std::string path;    // the named pipe; replaced if something is there
  std::string python;  // the workers' interpreter, for py-spy (stack_dump.hpp)
};

// The timer file of a run: "" unless TORCHELASTIC_ENABLE_FILE_TIMER=1 in `env`; then
// TORCHELASTIC_TIMER_FILE when given, else <run_dir>/watchdog_timer. Pure; thread-safe.
std::string timer_file_path(const Environment& env, const std::string& run_dir);

class WorkerTimers {
 public:
  // Null unless TORCHELASTIC_ENABLE_FILE_TIMER=1 in `env`. `run_dir` is the run's directory.
  // Throws UsageError naming the path when the pipe cannot be made there (something else is at
  // that path, which is never removed, or its directory is missing), Error when it cannot be
  // opened.
  static std::unique_ptr<WorkerTimers> create(boost::asio::io_context& io, const Environment& env,
                                              const std::string& run_dir, const std::string& python);
  WorkerTimers(boost::asio::io_context& io, WorkerTimersOptions options);
  ~WorkerTimers();  // removes the pipe
  WorkerTimers(const WorkerTimers&) = delete;
  WorkerTimers& operator=(const WorkerTimers&) = delete;

  const std::string& path() const { return o_.path; }
  // This round's workers (pid → rank); timers of other pids are reported once and ignored.
  // Forgets the previous round's timers.
  void watch(std::map<int, int> ranks_by_pid);
  // The worker `pid` exited: its timers go, and its pid is no longer signalled.
  void forget(int pid);
  // Why the worker `pid` was killed, when a timer of it expired: "killed by ddplaunch: file
  // timer 'step' expired"; "" otherwise.
  std::string note(int pid) const;

 private:
  struct Timer {
    double expiration = 0;  // seconds since the epoch
    int signal = 0;
  };
  void read();
  void handle(const std::string& line);
  void arm();
  void expire();
  void erase_timers(int pid);
  void kill_after_stack(int pid, int rank, std::string scope, int signal);

  boost::asio::io_context& io_;
  WorkerTimersOptions o_;
  boost::asio::posix::stream_descriptor reader_;
  int keep_open_ = -1;  // our own write end: readers never see end of file between clients
  boost::asio::steady_timer timer_;
  std::string buffer_, pending_;
  std::map<std::pair<int, std::string>, Timer> timers_;  // (pid, scope) → deadline
  std::map<int, int> ranks_by_pid_;
  std::map<int, std::string> notes_;
  bool warned_unknown_ = false;
  std::vector<std::thread> threads_;                            // stack dumps; joined by the destructor
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // for the stack threads' posts
};

}  // namespace ddp::launcher
