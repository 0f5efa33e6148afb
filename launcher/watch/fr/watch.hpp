// This node's Python workers' collectives, read from PyTorch's own Flight Recorder through each
// worker's worker server (its private socket, watch/probe/worker_server.hpp; started in the
// worker by ddplaunch's Python hook, workers/python_hook.hpp, which adds the handlers used here):
//   "ddplaunch_fr_status"  every process group's last enqueued and completed collective, and its
//                          members (torch's dump without its entries: ~0.1 ms in the worker);
//   "ddplaunch_fr"         the whole record (torch's JSON, ~40 ms for 2000 entries), asked only
//                          when a rank has waited long in one collective, or once when two polls
//                          in a row see it wait in the same one (to name its op for --status);
//   "ddplaunch_fr_dump"    the same with each entry's Python frames, also written by the worker
//                          in torch's own dump format (once a hang or desync is found) to
//                          <run dir>/fr_<backend>_rank_<rank> (torch's fr_trace reads it);
//   "dump_traceback"       torch's: every thread's Python stack, without ptrace.
// The status is polled (sampling is periodic by nature: nothing sends an event when nothing
// happens) on a thread of its own, so a slow worker never holds the agent's loop: every 2 s, or a
// tenth of --hang_timeout (at least 0.2 s). When a local rank has waited in collective #N of a
// group for the desync check's delay (10 s, or --hang_timeout when shorter) or for --hang_timeout,
// this node's records are read in full and handed to `on_suspect` (the caller adds the other
// nodes' and analyses them: analysis.hpp); each (group, #N) once per delay. The last full
// record of each rank is kept, so a rank that dies of its collective timeout is still known.
// Thread-safe (the thread and the caller's loop share it under one mutex).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "launcher/watch/fr/analysis.hpp"

namespace ddp::launcher {

struct FlightRecorderWatchOptions {
  std::chrono::milliseconds hang_timeout{0};  // 0: no hang checks (desync checks only)
  std::chrono::milliseconds desync_after{std::chrono::seconds(10)};
  std::string host;  // this node's host, in the records
};

// A local worker of the round.
struct FrWorker {
  int pid = 0;
  int rank = 0;
  std::string socket;  // its worker server
};

// A rank's collectives as the last poll of its Flight Recorder saw them (the live status reads it,
// status/status_board.hpp).
struct FrProgress {
  long long completed = 0;  // collectives completed, over all its groups
  std::string waiting_in;   // "#12 in group 0" while one is enqueued and not completed; else ""
  // The op it waits in, as --dump_stacks words it ("gloo:barrier #12"), once a poll has seen the
  // same wait twice (its name is in the whole record, read once per such wait); else "".
  std::string op;
  std::string group_id;  // the pg_id of the group of `waiting_in`, and its #N
  long long seq = 0;
  std::int64_t changed_ns = 0;  // CLOCK_REALTIME of the poll that first saw the present counts
};

class FlightRecorderWatch {
 public:
  // Called on the watch's thread: this node's ranks' full records and tracebacks, and how long
  // the suspect has waited at least (the check's delay). It must post its work elsewhere.
  using OnSuspect = std::function<void(std::vector<RankFr> local, std::chrono::milliseconds waited)>;

  FlightRecorderWatch(FlightRecorderWatchOptions options, OnSuspect on_suspect);
  ~FlightRecorderWatch();  // stop()
  FlightRecorderWatch(const FlightRecorderWatch&) = delete;
  FlightRecorderWatch& operator=(const FlightRecorderWatch&) = delete;

  // A round's workers on this node (group rank `node`): polling starts on the watch's thread.
  void watch(std::vector<FrWorker> workers, int node);
  // Polling ends (the round stops); the records kept so far stay for collect(). Joins the thread.
  void stop();

  // Every local worker's full record and Python stack now, asked in parallel (blocks up to about
  // 5 s, 12 s with `dump`); a worker that no longer answers (dead, stopped, its interpreter stuck) gives the last
  // record kept (full, else its last status), marked as such, with its process state. With
  // `dump`, each worker also writes its record in torch's dump format (see above). Never throws.
  std::vector<RankFr> collect(bool dump);
  // The checks done so far are to be made again at the next poll that finds them due (a check
  // whose records, read a moment later than the poll, showed no wait long enough yet).
  void recheck();
  // True when a worker of the round has answered: the Flight Recorder speaks for this round.
  bool answering() const;
  // Why some worker cannot answer (an older torch without a worker server, said by the hook in
  // "<socket>.unavailable"), "" when none. For the one line said about it.
  std::string unavailable() const;

  std::chrono::milliseconds period() const;

  // The highest sequence number of a completed collective, over this round's local ranks and
  // their groups, as their last polled status said; -1 when none has answered. Never blocks.
  long long most_completed() const;
  // This round's ranks' progress, by rank, as the polls saw it (none before the first answer).
  // Thread-safe; never blocks beyond the mutex.
  std::map<int, FrProgress> progress() const;

 private:
  void run();
  void poll(const std::vector<FrWorker>& workers);
  RankFr ask_full(const FrWorker& worker, bool dump);
  void name_op(const FrWorker& worker);

  FlightRecorderWatchOptions o_;
  OnSuspect on_suspect_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;
  bool stopping_ = false;
  bool answering_ = false;
  std::string unavailable_;
  std::vector<FrWorker> workers_;
  int node_ = 0;
  struct Wait {
    long long seq = 0;
    std::chrono::steady_clock::time_point since;
  };
  std::map<std::pair<int, std::string>, Wait> waiting_;              // (rank, group) → its open collective
  std::set<std::tuple<std::string, long long, long long>> checked_;  // (group, #N, delay ms) done
  std::map<int, RankFr> last_full_;                                  // by rank
  std::map<int, FrSnapshot> last_status_;                            // by rank
  std::map<int, FrProgress> progress_;                               // by rank
};

}  // namespace ddp::launcher
