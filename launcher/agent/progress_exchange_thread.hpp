// The no-progress verdict exchange (progress_exchange.hpp) off the agent's event loop. The
// exchange may wait up to --shutdown_timeout + --heartbeat_timeout + 2 s for the other nodes'
// measures; meanwhile the loop must go on serving signals (a Ctrl-C ends the launcher at once) and
// the status endpoint's /healthz probe. So it runs on a helper thread, over a store connection of
// its own (a wait on the joiner's connection would hold up every other call on it), and its
// result is posted back to the loop, as the RoundJoiner does with a round.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/agent/progress_exchange.hpp"
#include "launcher/agent/progress_tracker.hpp"

namespace ddp::launcher {

class ProgressExchangeThread {
 public:
  // The verdict in the store, or none and why (the store's error, or the connect's).
  using OnDone = std::function<void(std::optional<ProgressVerdict> verdict, const std::string& error)>;
  // A new connection to the job's view of the store; may block and throw ddp::Error.
  using Connect = std::function<std::shared_ptr<rendezvous::Store>()>;

  // Keeps a reference to `io`, which must outlive this object.
  explicit ProgressExchangeThread(boost::asio::io_context& io) : io_(io) {}
  // Joins a thread still running: blocks until its exchange ends (at most its wait plus a few
  // store calls). The agent ends the process instead when a signal stopped the loop meanwhile.
  ~ProgressExchangeThread();
  ProgressExchangeThread(const ProgressExchangeThread&) = delete;
  ProgressExchangeThread& operator=(const ProgressExchangeThread&) = delete;

  // Connects with `connect` and runs exchange_progress(store, x, mine) on a new thread. Does not
  // block. `on_done` runs later on `io`'s thread, unless `io` is stopped first (until then `io`
  // has work: its run() does not return for lack of it). Loop thread only; not while busy().
  void start(Connect connect, ProgressExchange x, NodeProgress mine, OnDone on_done);
  // An exchange thread exists whose result the loop has not taken yet. Loop thread only.
  bool busy() const { return thread_.joinable(); }

 private:
  boost::asio::io_context& io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::thread thread_;
};

}  // namespace ddp::launcher
