// See progress_exchange_thread.hpp.
#include "launcher/agent/progress_exchange_thread.hpp"

#include <boost/asio/post.hpp>

#include "ddplaunch/common/error.hpp"

namespace ddp::launcher {

ProgressExchangeThread::~ProgressExchangeThread() {
  if (thread_.joinable()) thread_.join();
}

void ProgressExchangeThread::start(Connect connect, ProgressExchange x, NodeProgress mine, OnDone on_done) {
  DDP_ASSERT(!busy(), "a progress exchange started while another one runs");
  work_.emplace(io_.get_executor());
  thread_ = std::thread([this, connect = std::move(connect), x = std::move(x), mine, on_done = std::move(on_done)] {
    std::optional<ProgressVerdict> verdict;
    std::string error;
    try {
      const std::shared_ptr<rendezvous::Store> job = connect();
      verdict = exchange_progress(*job, x, mine);
    } catch (const Error& e) {
      error = e.what();
    }
    // The result goes back to the loop, which joins this (finished) thread first.
    boost::asio::post(io_, [this, verdict, error, on_done] {
      thread_.join();
      work_.reset();
      on_done(verdict, error);
    });
  });
}

}  // namespace ddp::launcher
