// Straggler detection on one node (docs/stragglers.md), off the agent's loop: every scoring
// interval (--straggler_window / 3; sampling is periodic by nature, nothing sends an event when
// collectives merely run late) a thread of its own
//   1. reads the local ranks' collectives entered since the last time (watch/entry_reader.hpp);
//   2. alone: scores them (watch/lateness_scorer.hpp);
//      node 0 of several: measures each other node's clock offset, reads their entries from the
//      store, scores every rank and publishes the scores (straggler_exchange.hpp);
//      another node: publishes its entries and reads node 0's scores for its own ranks;
//   3. hands the scores and the stragglers found or recovered to `on_scores` (which posts them to
//      the loop). On a node other than 0, a second thread answers node 0's clock exchanges,
//      parked in a store WAIT.
// A store that fails (node 0 gone) ends this round's watch quietly: the round's own monitor
// reports a lost node. watch() and stop() from one thread (the agent's loop).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/rdzv/stragglers.hpp"
#include "launcher/watch/entry_reader.hpp"
#include "launcher/watch/lateness_scorer.hpp"

namespace ddp::launcher {

struct StragglerWatchOptions {
  LatenessOptions scoring;
  std::string host;
  // A new connection to the job's view of the store (several nodes only); may block and throw.
  std::function<std::shared_ptr<rendezvous::Store>()> connect;
};

// The round as the watch needs it.
struct StragglerRound {
  int round = 0;
  int node = 0;  // this node's group rank
  int nnodes = 1;
  std::map<int, RankPlace> places;   // every rank of the round (its node and host)
  std::vector<EntrySource> workers;  // this node's
};

class StragglerWatch {
 public:
  // Called on the watch's thread; it must post its work elsewhere.
  using OnScores = std::function<void(int round, StragglerScores scores, std::vector<StragglerChange> changes)>;

  // `table` (nullable) must outlive this object.
  StragglerWatch(StragglerWatchOptions options, const ProgressTable* table, OnScores on_scores);
  ~StragglerWatch();  // stop(), and waits for the threads
  StragglerWatch(const StragglerWatch&) = delete;
  StragglerWatch& operator=(const StragglerWatch&) = delete;

  // A round's workers started: the threads start (after those of the round before have ended:
  // blocks until then, at most a worker server's answer, 5 s).
  void watch(StragglerRound round);
  // The round stops: the threads are told to end (their store calls interrupted); does not wait
  // for them. Idempotent.
  void stop();
  std::chrono::milliseconds interval() const;

 private:
  void score_loop(StragglerRound round);
  void clock_loop(StragglerRound round);
  // Waits for the next interval; false when stopping.
  void join();
  bool pause(std::chrono::milliseconds d);
  bool stopped() const;
  void tick(const StragglerRound& r, rendezvous::Store* job);
  std::shared_ptr<rendezvous::Store> connect_into(std::shared_ptr<rendezvous::Store>& slot);

  StragglerWatchOptions o_;
  OnScores on_scores_;
  EntryReader reader_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread scorer_, clock_;
  std::shared_ptr<rendezvous::Store> score_store_, clock_store_;  // under mutex_: stop() interrupts them
  LatenessScorer scorer_state_;                                   // the score thread's
  // Per round: the entries published before (a node > 0 sends two intervals' worth), node 0's
  // measured clock offsets (best of the last eight by round trip), the last scores read.
  std::vector<EntryTime> previous_;
  std::map<int, std::vector<std::pair<std::int64_t, std::int64_t>>> clock_samples_;  // node → (rtt, offset)
  long long clock_n_ = 0;
  std::optional<StragglerScores> last_read_;
};

// --stragglers=exclude|replace: why this node is to leave the next round, set by the agent's loop
// and taken by its health gate on the join thread. Thread-safe.
class StragglerExclusion {
 public:
  void set(std::optional<std::string> why) {
    std::lock_guard lock(mutex_);
    why_ = std::move(why);
  }
  std::optional<std::string> take() {
    std::lock_guard lock(mutex_);
    return std::exchange(why_, std::nullopt);
  }

 private:
  std::mutex mutex_;
  std::optional<std::string> why_;
};

// Found and recovered between two of node 0's scores, for `node`'s ranks and itself (another
// node's console lines). Pure.
std::vector<StragglerChange> changes_between(const std::optional<StragglerScores>& before, const StragglerScores& after,
                                             int node);

}  // namespace ddp::launcher
