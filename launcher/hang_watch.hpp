// --hang_timeout: a suspected hang, reported and never acted on. Every local worker's CPU time
// (utime + stime of the worker process, all its threads, from /proc/<pid>/stat) is sampled a few
// times per timeout; when no local rank has used any CPU time for the whole timeout, the hang is
// reported once (until a rank uses CPU again): which ranks, the state of each (a SIGSTOPped rank
// shows as "stopped"), and every local rank's stack (stack_dump.hpp), also written to the run's
// directory. The job goes on: a heuristic does not kill (a long blocking read looks the same).
// Only the worker processes' own CPU counts: a worker whose work runs in child processes (data
// loader workers) while it waits for them looks idle.
// Not the collective-level hang detection of the issue: that needs per-rank progress from the
// runtime, which does not exist yet.
//
// Sampling is periodic by nature (the kernel sends no event for "no CPU time"): one steady timer
// on the agent's io_context. Not thread-safe: the agent's loop only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

namespace ddp::launcher {

struct HangWatchOptions {
  std::chrono::milliseconds timeout{0};  // > 0
  std::string run_dir;                   // where the stacks file goes
  std::string python;                    // the workers' interpreter, for py-spy
};

struct HangReport {
  std::string text;         // the report, stacks included
  std::string stacks_file;  // "" when it could not be written
};

class HangWatch {
 public:
  // `on_report` runs on `io` for each suspected hang.
  HangWatch(boost::asio::io_context& io, HangWatchOptions options, std::function<void(const HangReport&)> on_report);
  // The round's workers (pid → rank): the clock starts now.
  void watch(std::map<int, int> ranks_by_pid, int round);
  // A worker exited.
  void forget(int pid);
  // Stops sampling (the round ends).
  void stop();

 private:
  void schedule();
  void sample();

  boost::asio::io_context& io_;
  HangWatchOptions o_;
  std::function<void(const HangReport&)> on_report_;
  boost::asio::steady_timer timer_;
  std::map<int, int> ranks_;      // pid → rank
  std::map<int, long long> cpu_;  // pid → CPU ticks at the last sample
  std::chrono::steady_clock::time_point idle_since_;
  bool reported_ = false;
  int round_ = 0;
};

}  // namespace ddp::launcher
