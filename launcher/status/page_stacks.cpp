// See page_stacks.hpp.
#include "launcher/status/page_stacks.hpp"

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"
#include "launcher/watch/stacks_request.hpp"

namespace ddp::launcher {

std::string rank_stack(const std::string& answer, int rank) {
  const std::string head = fmt::format("rank {} (pid ", rank);
  std::size_t at = answer.rfind('\n' + head);
  at = answer.compare(0, head.size(), head) == 0 ? 0 : at == std::string::npos ? at : at + 1;
  if (at == std::string::npos) return "";
  std::size_t end = answer.size();
  for (std::size_t next = answer.find("\nrank ", at); next != std::string::npos; next = answer.find("\nrank ", next + 1)) {
    // The next rank's line: "rank N (pid P):".
    const std::size_t digits = next + 6;
    const std::size_t after = answer.find_first_not_of("0123456789", digits);
    if (after != digits && after != std::string::npos && answer.compare(after, 6, " (pid ") == 0) {
      end = next + 1;
      break;
    }
  }
  return answer.substr(at, end - at);
}

PageStacks::PageStacks(const StatusBoard& board, PageStacksOptions options) : board_(board), o_(std::move(options)) {}

PageStacks::~PageStacks() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    if (store_) store_->interrupt();
  }
  if (thread_.joinable()) thread_.join();
}

void PageStacks::request(int rank, StatusServerOptions::StackDone done) {
  std::lock_guard lock(mutex_);
  if (busy_ || stop_) {
    return done(429, "the stack of another rank is being taken; ask again when it is shown\n");
  }
  busy_ = true;
  if (thread_.joinable()) thread_.join();  // the last request's thread, finished (busy_ was false)
  thread_ = std::thread([this, rank, done = std::move(done)] {
    take(rank, done);
    std::lock_guard lock(mutex_);
    store_.reset();
    busy_ = false;
  });
}

void PageStacks::take(int rank, const StatusServerOptions::StackDone& done) {
  const StatusSnapshot s = board_.snapshot();
  const NodeStatus* node = nullptr;
  for (const NodeStatus& n : s.nodes) {
    if (rank >= n.first_rank && rank < n.first_rank + n.nproc) node = &n;
  }
  if (node == nullptr) {
    return done(404, fmt::format("rank {} is not in round {} of the job (world size {})\n", rank, s.round, s.world_size));
  }
  try {
    std::shared_ptr<rendezvous::Store> store = o_.connect();
    {
      std::lock_guard lock(mutex_);
      if (stop_) return done(503, "the launcher is stopping\n");
      store_ = store;
    }
    if (!store->check({"stacks/nnodes"})) {
      return done(503, "the job's launchers do not take stack requests yet (they start 1 s into a round); "
                       "ask again in a second\n");
    }
    const long long n = make_stacks_request(*store);
    const std::string answer = store->get(stacks_key(n, node->group_rank), o_.timeout);
    const std::string text = rank_stack(answer, rank);
    if (text.empty()) return done(404, fmt::format("node {} ({}) runs no rank {} now\n{}", node->group_rank, node->host, rank, answer));
    done(200, text);
  } catch (const Error& e) {
    done(503, fmt::format("node {} ({}) did not answer for rank {}: {}\n", node->group_rank, node->host, rank, e.what()));
  }
}

}  // namespace ddp::launcher
