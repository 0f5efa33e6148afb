// `ddplaunch --dump_stacks`: every rank's stack on every node of a running job, on demand,
// without stopping anything. Through the job's keys in the store (job_store.hpp; signed with the
// job secret when there is one):
//   "stacks/nnodes"          the round's node count, set by group rank 0's watcher;
//   "stacks/request"         a counter: the client adds 1 and gets its request number n;
//   "stacks/<n>/req"         the client sets it; every launcher's watcher is parked on it;
//   "stacks/<n>/progress/<g>" each launcher's local ranks' collective progress (collective_hang.hpp),
//                            set first (it is read without delay);
//   "stacks/<n>/fr/<g>"      each launcher's Python ranks' Flight Recorder (watch/fr/analysis.hpp's
//                            encode_rank_fr; "[]" without any), set with the progress;
//   "stacks/<n>/read/<g>"    "R N": R of its N local ranks gave a stack, set before the stacks;
//   "stacks/<n>/node/<g>"    each launcher's answer: its local ranks' stacks (stack_dump.hpp).
// A launcher that finds a collective hang asks the same way (worker_watch.hpp).
// A launcher starts its watcher 1 s after its workers (a short job pays nothing for it), on its
// own store connection and thread; the stacks themselves are taken on the agent's loop.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_monitor.hpp"

namespace ddp::launcher {

// One node's answer to a request.
struct NodeAnswer {
  std::string progress;        // its ranks' collective progress (encode_progress)
  std::string flight_records;  // their Flight Recorders (encode_rank_fr)
  std::string stacks;          // their stacks, as printed
  int ranks = 0;               // its local ranks
  int read = 0;                // of which gave a stack
};

class StacksWatcher {
 public:
  // Called on the watcher's thread with a request number; it must post the work elsewhere and
  // answer with answer(n, text) (from any thread).
  using OnRequest = std::function<void(long long n)>;
  // Starts the thread. Never blocks.
  StacksWatcher(StoreConnector connect, int group_rank, int nnodes, OnRequest on_request);
  // Interrupts the parked wait and joins.
  ~StacksWatcher();
  StacksWatcher(const StacksWatcher&) = delete;
  StacksWatcher& operator=(const StacksWatcher&) = delete;

  // Stores this node's answer to request n on its own connection, the stacks last. Throws what
  // the store throws.
  void answer(long long n, const NodeAnswer& answer);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::thread thread_;
};

// Makes request n and returns n. Throws what the store throws.
long long make_stacks_request(rendezvous::Store& job);
// Where node g answers request n.
std::string stacks_key(long long n, int g);
std::string progress_key(long long n, int g);
std::string flight_records_key(long long n, int g);
std::string read_key(long long n, int g);

}  // namespace ddp::launcher
