// Joining a round off the agent's event loop: the rendezvous blocks (for up to --rdzv_timeout),
// so it runs on a helper thread, and its result is posted back to the loop. The first join also
// opens the agent's connections to the store (root and the job's prefixed view).
// With etcd-v3 the workers still need a TCPStore: the round's group rank 0 hosts one (started at
// its first such round, kept until the joiner ends) and publishes "r<r>/workers_store" =
// "address:port" (--local_addr, else the address it reaches etcd from); the other nodes read it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <thread>

#include <boost/asio/io_context.hpp>

#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/rdzv/job_round.hpp"

namespace ddp::launcher {

class RoundJoiner {
 public:
  using OnJoined = std::function<void(const JoinedRound&)>;
  using OnError = std::function<void(std::exception_ptr)>;

  // Keeps references to `io`, `config` and `effective`: they must outlive the joiner.
  RoundJoiner(boost::asio::io_context& io, StoreConnector connect_root, const LaunchConfig& config,
              const EffectiveConfig& effective);
  // Joins the helper thread. Callers must not destroy a joiner whose thread still blocks (the
  // agent ends the process instead, see busy()).
  ~RoundJoiner();
  RoundJoiner(const RoundJoiner&) = delete;
  RoundJoiner& operator=(const RoundJoiner&) = delete;

  // Starts joining round `round` (or a later one, for a late elastic arrival). Does not block.
  // Exactly one of the callbacks runs later on `io`'s thread, unless `io` stops first.
  // Loop thread only; not while busy().
  void start(int round, OnJoined on_joined, OnError on_error);
  // Makes a blocked join give up within about a second. Thread-safe.
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  // A join thread exists whose result the loop has not taken yet.
  bool busy() const { return thread_.joinable(); }
  // The job's prefixed store, once the first join connected (nullptr before). Loop thread only.
  rendezvous::Store* job() const { return job_.get(); }

 private:
  // etcd-v3: hosts or finds the round's workers' store (see above) and fills it in. Join thread.
  void meet_workers_store(JoinedRound& joined);

  boost::asio::io_context& io_;
  StoreConnector connect_root_;
  const LaunchConfig& config_;
  const EffectiveConfig& effective_;
  std::shared_ptr<rendezvous::Store> root_;  // the namespace view (job_store.hpp)
  std::shared_ptr<rendezvous::Store> job_;
  std::atomic<bool> cancelled_{false};
  std::thread thread_;
  std::unique_ptr<rendezvous::TcpStoreServer> workers_store_;  // etcd-v3, on a group rank 0
};

}  // namespace ddp::launcher
