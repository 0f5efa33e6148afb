// Joining a round off the agent's event loop: the rendezvous blocks (for up to --rdzv_timeout),
// so it runs on a helper thread, and its result is posted back to the loop. One node (without
// etcd) meets only itself in its own store, reached in process, and blocks on no one: it joins on
// the loop's thread, and the result is posted all the same (unless it has a --health_check, which
// may block for minutes: then on the thread, so that the loop still handles a Ctrl-C). The first
// join also opens the agent's connections to the store (root and the job's prefixed view). Once joined,
// group rank 0 logs the rank map and the backend says where the round's workers dial their store
// (RendezvousBackend::meet_workers_store). Before each join the health gate, if any, runs on the
// same thread: a node that fails it does not join (self_exclusion.hpp); the members of an elastic
// round log the nodes that excluded themselves from it.
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include <boost/asio/io_context.hpp>

#include "common/cancel_event.hpp"
#include "launcher/rdzv/job_round.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"
#include "launcher/rdzv/self_exclusion.hpp"

namespace ddp::launcher {

class RoundJoiner {
 public:
  using OnJoined = std::function<void(const JoinedRound&)>;
  using OnError = std::function<void(std::exception_ptr)>;

  // Keeps references to `io`, `backend`, `config` and `effective`: they must outlive the joiner.
  // `health` (may be empty) runs before every join, on the join thread.
  RoundJoiner(boost::asio::io_context& io, RendezvousBackend& backend, const LaunchConfig& config,
              const EffectiveConfig& effective, HealthGate health = {});
  // Joins the helper thread. Callers must not destroy a joiner whose thread still blocks (the
  // agent ends the process instead, see busy()).
  ~RoundJoiner();
  RoundJoiner(const RoundJoiner&) = delete;
  RoundJoiner& operator=(const RoundJoiner&) = delete;

  // Starts joining round `round` (or a later one, for a late elastic arrival). Does not block,
  // beyond one node's own join (above) and its health gate.
  // A node that fails the health gate gets NodeUnhealthy through `on_error`.
  // Exactly one of the callbacks runs later on `io`'s thread, unless `io` stops first.
  // Loop thread only; not while busy().
  void start(int round, OnJoined on_joined, OnError on_error);
  // Makes a blocked join give up: at once in the health gate (its command's group killed), within
  // about a second in the rendezvous. Never blocks; thread-safe.
  void cancel() {
    cancelled_ = true;
    cancel_event_.cancel();
  }
  bool cancelled() const { return cancelled_; }
  // Whether the join thread is in the health gate now (for messages). Thread-safe.
  bool checking_health() const { return checking_health_; }
  // A join thread exists whose result the loop has not taken yet.
  bool busy() const { return thread_.joinable(); }
  // The job's prefixed store, once the first join connected (nullptr before). Loop thread only.
  rendezvous::Store* job() const { return job_.get(); }

 private:
  // The join itself (health gate, connections, rendezvous, the backend's part): the round
  // joined, or the error to hand to OnError. Join thread (or the loop's, for one node).
  std::pair<std::optional<JoinedRound>, std::exception_ptr> join(int round);
  // Opens the connections to the store on the first call. Join thread; throws what the connector throws.
  void connect();
  // Does not join round `round`: tells the others (self_exclusion.hpp). Always throws NodeUnhealthy.
  [[noreturn]] void leave_sick(int round, const SelfExclusion& sick);

  boost::asio::io_context& io_;
  RendezvousBackend& backend_;
  const LaunchConfig& config_;
  const EffectiveConfig& effective_;
  HealthGate health_;
  std::shared_ptr<rendezvous::Store> root_;  // the namespace view (job_store.hpp)
  std::shared_ptr<rendezvous::Store> job_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> checking_health_{false};
  CancelEvent cancel_event_;  // what the health gate polls
  std::thread thread_;
};

}  // namespace ddp::launcher
