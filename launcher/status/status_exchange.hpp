// Node 0's page covers the whole job: every launcher with --status_port publishes its status
// document (status_json.hpp, the same board its own /status serves) under the job's keys in the
// store, and group rank 0 reads the others' (docs/job-page.md), only while someone reads node 0's
// status (a request within the last 10 s), so a job nobody looks at costs each node one small
// read per interval:
//   "status/wanted"    group rank 0's turn number, set at every turn while its status is read;
//   "status/node/<g>"  group rank g's document (g > 0), set at each turn that finds "status/wanted"
//                      changed, and once more when the launcher ends;
//   "status/page"      node 0's page URL (without the token), set by group rank 0;
// both in the launcher's own key space (rdzv/job_store.hpp: signed and under the secret's tag
// when the job has a secret), so a stranger can neither read nor forge them.
// A document is published on a cadence, not on an event: its progress and lateness change with
// every collective, and one set of a few KB per node every 2 s costs the store nothing.
//
// Its own thread and store connection, started at the first round this node joins; a store that
// does not answer costs that thread only (the page then shows the documents last read).
// Thread-safe: on_event on the agent's loop, status() on the status server's thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "launcher/events/round_events.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/status/status_board.hpp"

namespace ddp::launcher {

struct StatusExchangeOptions {
  StoreConnector connect;  // connections to the job's view (blocks; throws ddp::Error)
  std::chrono::milliseconds interval{std::chrono::seconds(2)};
};

class StatusExchange : public RoundListener {
 public:
  // `board` must outlive this. Starts nothing yet. Never throws (but std::bad_alloc).
  StatusExchange(const StatusBoard& board, StatusExchangeOptions options);
  // Publishes once more (another node's last status, read by node 0's page) and stops the
  // thread; nothing reads the board afterwards and later events are ignored. Blocks for that last
  // exchange (the store's timeouts bound it). Idempotent.
  void stop();
  // stop()s.
  ~StatusExchange() override;
  StatusExchange(const StatusExchange&) = delete;
  StatusExchange& operator=(const StatusExchange&) = delete;

  // RoundJoined: this node's group rank and the round's nodes (starts the thread at the first);
  // JobEnded: publish now. Never blocks.
  void on_event(const RoundEvent& event) override;

  // This launcher's page, "http://HOST:PORT/" (published by group rank 0). Never blocks.
  void set_page_url(std::string url);

  // The document this launcher serves: its board's, plus on group rank 0 every other node's as
  // last read ("other_nodes"), elsewhere node 0's page ("job_page"); job_status_json.hpp.
  std::string status() const;

 private:
  void run();
  // One turn: `watched`, node 0's status was read lately; `last`, the launcher ends.
  void exchange(rendezvous::Store& store, int group_rank, int nnodes, bool watched, bool last);

  const StatusBoard& board_;
  StatusExchangeOptions o_;
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;
  bool stop_ = false;
  bool last_ = false;          // stopping: one last exchange, then stop
  mutable bool now_ = false;   // exchange without waiting for the interval  // publish without waiting for the interval
  int group_rank_ = -1;
  int nnodes_ = 0;
  std::string page_url_;                    // this launcher's
  std::string job_page_;                    // node 0's, as read
  std::map<int, std::string> others_;       // group rank -> its document, as last read (group rank 0)
  mutable std::chrono::steady_clock::time_point asked_;  // the last status() call
  // The thread's own:
  std::string wanted_;         // "status/wanted" as last read (group rank > 0)
  std::string job_page_read_;  // node 0's page once read (it does not change)
  std::string url_published_;  // this page's URL once published (group rank 0)
  long long turn_ = 0;         // group rank 0's turns while watched
  std::thread thread_;
};

// The keys above. Pure.
std::string node_status_key(int group_rank);
inline constexpr const char* kJobPageKey = "status/page";
inline constexpr const char* kWantedKey = "status/wanted";
// How long after a read of node 0's status the other nodes are still gathered.
inline constexpr std::chrono::seconds kWatched{10};

}  // namespace ddp::launcher
