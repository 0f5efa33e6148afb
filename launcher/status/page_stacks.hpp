// A rank's stack for the job's page (GET /stack?rank=R, status_server.hpp): asked the way
// `ddplaunch --dump_stacks` asks (watch/stacks_request.hpp: a request through the job's keys in
// the store, answered by the launcher of the rank's node, which reads its workers' stacks from
// their worker servers first: no ptrace for a Python worker that runs one), then cut to that
// rank. So node 0's page reaches a rank on any node, through the store alone.
// One request at a time (a page's button, not a load generator): another while one is taken is
// answered 429 at once. Each is taken on a thread of its own, with its own store connection.
// Thread-safe.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/status/status_board.hpp"
#include "launcher/status/status_server.hpp"

namespace ddp::launcher {

struct PageStacksOptions {
  StoreConnector connect;  // connections to the job's view (blocks; throws ddp::Error)
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  // for the node's answer
};

class PageStacks {
 public:
  // `board` (where the ranks are: the round's nodes) must outlive this.
  PageStacks(const StatusBoard& board, PageStacksOptions options);
  // Interrupts a request in progress and joins its thread.
  ~PageStacks();
  PageStacks(const PageStacks&) = delete;
  PageStacks& operator=(const PageStacks&) = delete;

  // Calls done (on the request's thread, or here when busy) with 200 and the stack; 404 when the
  // rank is not in the round; 429 while another is taken; 503 when the job's launchers do not
  // answer (the text says why). Never blocks.
  void request(int rank, StatusServerOptions::StackDone done);

 private:
  void take(int rank, const StatusServerOptions::StackDone& done);

  const StatusBoard& board_;
  PageStacksOptions o_;
  std::mutex mutex_;
  bool busy_ = false;
  bool stop_ = false;
  std::shared_ptr<rendezvous::Store> store_;  // the request's connection, while it waits
  std::thread thread_;
};

// Rank `rank`'s part of a node's --dump_stacks answer: from its line "rank R (pid P):" to the
// next rank's (the last rank keeps the notes under it); "" when the answer has no such rank. Pure.
std::string rank_stack(const std::string& node_answer, int rank);

}  // namespace ddp::launcher
