// --hang_timeout: hangs, found from outside the workers. Two ways, chosen per round:
//  - Collective level, for workers that publish their progress (the ddplaunch runtime writes
//    each collective's entry and exit in its slot of the progress table,
//    common/collective_progress.hpp): when a local rank has waited in a collective for the whole
//    timeout and no collective has completed on any local rank for that long, the hang is found:
//    each rank's collective, since when, which never entered it, and every local rank's stack.
//    The report goes to the owner (worker_watch.hpp adds the other nodes' ranks), and the job
//    fails on it.
//  - Python workers whose Flight Recorders answer are watched exactly by watch/fr/watch.hpp.
//  - A heuristic otherwise (Python workers without a worker server, e.g. an older torch): when no local worker has used
//  more than 5% of a core
//    (utime + stime of the worker process, all its threads; a rank waiting for a peer is not at 0:
//    gloo's loop thread wakes now and then) for the whole timeout, a *suspected* hang is
//    reported once (until a rank uses CPU again) with each rank's state (a SIGSTOPped rank shows
//    as "stopped") and stacks, also written to the run's directory. The job goes on: a heuristic
//    does not kill (a long blocking read looks the same). Only the worker processes' own CPU
//    counts: a worker waiting for its data-loader processes looks idle.
//
// Sampling is periodic by nature (the kernel sends no event for "no progress"): one steady timer
// on the agent's io_context; stacks are taken on it (blocking up to a few seconds). Not
// thread-safe: the agent's loop only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/watch/collective_hang.hpp"

namespace ddp::launcher {

struct HangWatchOptions {
  std::chrono::milliseconds timeout{0};     // > 0
  std::string run_dir;                      // where the stacks file goes
  std::string python;                       // the workers' interpreter, for py-spy
  const ProgressTable* progress = nullptr;  // the round's slots (nullptr: the heuristic only)
  std::string host;                         // this node's host, in the report
  // True while the workers' Flight Recorders answer (watch/fr/watch.hpp): they say exactly
  // what hangs, so no heuristic. Unset: never.
  std::function<bool()> exact;
  // Why they cannot ("" when they can), said in a suspected hang's report.
  std::function<std::string()> unavailable;
  // The workers' worker servers (pid → socket), for their Python stacks without ptrace.
  std::function<std::map<int, std::string>()> sockets;
  std::string no_server;  // why the workers run none ("--no_worker_server"), said under their stacks
};

struct HangReport {
  bool collective = false;               // found by collective progress (the job fails); else suspected
  std::string text;                      // suspected: the whole report; collective: its first line
  std::vector<RankProgress> progress;    // collective: this node's ranks
  std::string stacks;                    // this node's ranks' stacks
  std::string stacks_file;               // suspected: where they were written ("" when not)
  std::optional<HungCollective> record;  // collective: the collective it is about, when known
};

class HangWatch {
 public:
  // `on_report` runs on `io` for each hang found or suspected.
  HangWatch(boost::asio::io_context& io, HangWatchOptions options, std::function<void(const HangReport&)> on_report);
  // The round's workers (by pid) on this node (its group rank in the round): the clock starts now.
  void watch(std::map<int, WatchedWorker> workers, int round, int node);
  // A worker exited.
  void forget(int pid);
  // Stops sampling (the round ends).
  void stop();
  // This node's ranks' progress now (empty without a table). Never throws.
  std::vector<RankProgress> snapshot() const;

 private:
  void schedule();
  void sample();
  bool collective_hang(std::int64_t now_ns) const;
  void report_suspected(std::chrono::steady_clock::time_point now);
  void restart_window(std::chrono::steady_clock::time_point now);
  std::string take_stacks() const;

  boost::asio::io_context& io_;
  HangWatchOptions o_;
  std::function<void(const HangReport&)> on_report_;
  boost::asio::steady_timer timer_;
  std::map<int, WatchedWorker> workers_;  // by pid
  std::map<int, long long> cpu_;          // pid → CPU ticks when the idle window began
  std::chrono::steady_clock::time_point idle_since_;
  bool reported_ = false;
  int round_ = 0;
  int node_ = 0;
  double ticks_per_second_;
};

}  // namespace ddp::launcher
