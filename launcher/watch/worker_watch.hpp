// What watches a round's running workers from outside, beside the agent: torchelastic's file
// timers (worker_timers.hpp), the collective-progress table the workers write (its descriptor
// goes to them, collective_progress.hpp), Python workers' Flight Recorders through their worker
// servers (watch/fr/watch.hpp: desyncs always, hangs with --hang_timeout, and what the
// ranks were doing when one failed), --hang_timeout's hangs (hang_watch.hpp; a collective
// hang in a multi-node job gathers the other nodes' progress and stacks through a --dump_stacks
// request, on a thread of its own, before it is reported), the answers to
// `ddplaunch --dump_stacks` (stacks_request.hpp, a watcher started 1 s into a round, so a short
// job pays nothing for it), and the stacks of the workers still running when a failure stops
// the round (with --log_dir only: taking them delays the teardown).
// Runs on the agent's io_context; the stacks are taken on it too (blocking up to a few seconds).
// Not thread-safe: the agent's loop only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/collective_progress.hpp"
#include "launcher/rdzv/hung_collective.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/watch/fr/watch.hpp"
#include "launcher/watch/hang_watch.hpp"
#include "launcher/watch/stack_dump.hpp"
#include "launcher/watch/stacks_request.hpp"
#include "launcher/watch/worker_timers.hpp"

namespace ddp::launcher {

// What the Flight Recorders showed when a rank failed of a collective timeout: the words and the
// collective as a record (hang_record.hpp); "" and nullopt when nothing.
struct CollectivesAtFailure {
  std::string text;
  std::optional<HungCollective> record;
};

struct WorkerWatchOptions {
  std::string run_dir;                        // the run's directory (node_setup.hpp)
  bool temporary_run_dir = false;             // no --log_dir: no survivors' stacks
  std::string python;                         // the workers' interpreter, for py-spy
  Environment env;                            // the timers' settings; empty: this process's
  std::string host;                           // this node's name, in --dump_stacks answers
  std::chrono::milliseconds hang_timeout{0};  // 0: no hang watch
  int local_workers = 1;                      // slots in the progress table
  bool real_processes = true;                 // false with fake processes (tests): no stacks, no request watcher
  std::string socket_dir;                     // Python workers' worker servers (worker_spec.hpp); "": none
  std::string no_server;                      // why they run none ("--no_worker_server"), said under stacks
  StoreConnector connect_job;                 // connections for the --dump_stacks watcher
};

class WorkerWatch {
 public:
  // Throws what WorkerTimers::create throws (the file-timer pipe) and what ProgressTable::create
  // throws. `on_hang` runs on `io`; for a collective hang, `text` is the whole report (all
  // nodes' ranks, stacks) and the job is to fail on it.
  WorkerWatch(boost::asio::io_context& io, WorkerWatchOptions options, std::function<void(const HangReport&)> on_hang);
  ~WorkerWatch();  // stops the watcher threads and removes the timer pipe
  WorkerWatch(const WorkerWatch&) = delete;
  WorkerWatch& operator=(const WorkerWatch&) = delete;

  // TORCHELASTIC_TIMER_FILE for the workers; "" when file timers are off.
  std::string timer_file() const;
  // The progress table's descriptor, for the workers (WorkerSpecInputs::progress_fd).
  int progress_fd() const { return progress_.fd(); }
  // The table itself: its slots may be read from any thread (collective_progress.hpp) while this
  // object lives (the live status endpoint reads them, status/status_board.hpp).
  const ProgressTable& progress_table() const { return progress_; }
  // The Python workers' Flight Recorder polls (thread-safe, watch/fr/watch.hpp); nullptr
  // without worker servers. Lives as long as this object.
  const FlightRecorderWatch* flight_recorders() const { return flight_.get(); }
  // A round's workers started (by pid).
  void started(int round, int group_rank, int nnodes, std::map<int, WatchedWorker> workers);
  // A worker exited: why ddplaunch killed it ("killed by ddplaunch: file timer 's' expired"),
  // or "" when it did not.
  std::string exited(int pid);
  // The round stops, for a failure when `failure`: hang sampling ends and, for a failure with
  // --log_dir, the running workers' stacks are saved to the run's directory.
  void stopping(bool failure);
  // A worker failed first of a collective timeout: what the Flight Recorders of this node's Python
  // ranks say about the collectives at this moment (a hang or desync they show,
  // watch/fr/analysis.hpp), words and record; none when they show none or no worker server answers. Blocks for the
  // answers (tens of ms; up to about 5 s for ranks that do not answer), only where worker servers
  // answer. Never throws.
  CollectivesAtFailure flight_records_at_failure();
  // How far this round's collectives got on this node: the highest sequence number of a completed
  // collective over the local ranks, from the progress table (the ddplaunch runtime) and the
  // Flight Recorders' last polled status (Python workers, polled every 2 s); nullopt when neither
  // saw a collective complete. For the no-progress breaker; call it before ended() (which
  // empties the table). Never blocks.
  std::optional<long long> collectives_completed() const;
  // The round is over: no more --dump_stacks answers for it.
  void ended();

 private:
  void watch_stack_requests();
  void answer(long long request);
  std::vector<RankProgress> local_progress() const;
  void on_hang(HangReport report);
  void gather_other_nodes(HangReport report);
  void report_collective_hang(HangReport report, const std::vector<RankProgress>& others, const std::string& stacks);
  // Asks the other nodes (through a --dump_stacks request, on the gathering thread) and calls
  // `then` on the loop with their answers, if the round is still live.
  struct OtherNodes {
    std::vector<RankProgress> progress;
    std::vector<RankFr> flight_records;
    std::string stacks;
  };
  void gather_other_nodes(std::function<void(const OtherNodes&)> then);
  void join_gather();
  void on_suspect(std::vector<RankFr> local, std::chrono::milliseconds waited);
  void check_flight_records(std::vector<RankFr> ranks, std::chrono::milliseconds waited, const std::string& stacks);
  StackDumpOptions stack_options(std::chrono::milliseconds timeout) const;
  std::string dump_flight_records();
  std::string dumps_note() const;

  boost::asio::io_context& io_;
  WorkerWatchOptions o_;
  std::function<void(const HangReport&)> on_hang_;
  ProgressTable progress_;
  std::unique_ptr<WorkerTimers> timers_;
  std::unique_ptr<HangWatch> hang_;
  std::unique_ptr<FlightRecorderWatch> flight_;  // with Python worker servers
  std::map<int, std::string> sockets_;           // pid → worker server, this round's
  boost::asio::steady_timer stacks_timer_;
  std::unique_ptr<StacksWatcher> stacks_watcher_;
  std::map<int, int> running_;  // pid → rank
  int round_ = 0;
  int group_rank_ = 0;
  int nnodes_ = 1;
  bool live_ = false;                     // between started() and stopping()/ended()
  std::map<int, WatchedWorker> workers_;  // the round's, by pid
  struct GatherStore {                    // the gathering thread's connection, to interrupt it
    std::mutex mutex;
    bool stopped = false;
    std::shared_ptr<rendezvous::Store> store;
  };
  std::thread gather_;  // a collective hang's gathering of the other nodes
  std::shared_ptr<GatherStore> gather_store_;
};

}  // namespace ddp::launcher
