// See round_joiner.hpp.
#include "launcher/rdzv/round_joiner.hpp"

#include <optional>

#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"

namespace ddp::launcher {

RoundJoiner::RoundJoiner(boost::asio::io_context& io, RendezvousBackend& backend, const LaunchConfig& config,
                         const EffectiveConfig& effective)
    : io_(io), backend_(backend), config_(config), effective_(effective) {}

RoundJoiner::~RoundJoiner() {
  if (thread_.joinable()) thread_.join();
}

void RoundJoiner::start(int round, OnJoined on_joined, OnError on_error) {
  thread_ = std::thread([this, round, on_joined = std::move(on_joined), on_error = std::move(on_error)] {
    std::optional<JoinedRound> joined;
    std::exception_ptr error;
    try {
      if (!root_) {
        JobStores views = job_stores(backend_.connector(std::nullopt)(), config_.run_id, config_.rdzv_secret);
        root_ = std::move(views.root);
        job_ = std::move(views.job);
      }
      // A node of the round before may come back from another address (rendezvous_backend.hpp).
      if (round > 0) backend_.readmit_until_formed(round);
      joined = join_job_round(*root_, *job_, config_, effective_, round, &cancelled_,
                              [](const std::string& s) { log::info("{}", s); });
      if (joined->group_rank == 0) log::info("{}", joined->ranks.describe());
      backend_.meet_workers_store(*joined, *root_, *job_);
    } catch (const rendezvous::ConnectionError& e) {
      // Node 0 never sees a node whose job secret differs: it times out and ends, and this node
      // loses (or never reaches) the store, whichever comes first.
      error = config_.rdzv_secret.empty() || config_.uses_etcd()  // etcd: no node 0 to time out
                  ? std::current_exception()
                  : std::make_exception_ptr(rendezvous::ConnectionError(
                        std::string(e.what()) + "; if node 0 timed out waiting for this node, check that " +
                        kSameSecretHint));
    } catch (...) {
      error = std::current_exception();
    }
    // The result goes back to the loop, which joins this (finished) thread first.
    boost::asio::post(io_, [this, joined = std::move(joined), error, on_joined, on_error] {
      thread_.join();
      if (error) return on_error(error);
      on_joined(*joined);
    });
  });
}

}  // namespace ddp::launcher
