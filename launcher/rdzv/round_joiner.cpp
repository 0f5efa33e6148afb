// See round_joiner.hpp.
#include "launcher/rdzv/round_joiner.hpp"
#include "launcher/rdzv/hosted_store.hpp"

#include <optional>

#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"

namespace ddp::launcher {

RoundJoiner::RoundJoiner(boost::asio::io_context& io, StoreConnector connect_root, const LaunchConfig& config,
                         const EffectiveConfig& effective)
    : io_(io), connect_root_(std::move(connect_root)), config_(config), effective_(effective) {}

RoundJoiner::~RoundJoiner() {
  if (thread_.joinable()) thread_.join();
}

void RoundJoiner::start(int round, OnJoined on_joined, OnError on_error) {
  thread_ = std::thread([this, round, on_joined = std::move(on_joined), on_error = std::move(on_error)] {
    std::optional<JoinedRound> joined;
    std::exception_ptr error;
    try {
      if (!root_) {
        JobStores views = job_stores(connect_root_(), config_.run_id, config_.rdzv_secret);
        root_ = std::move(views.root);
        job_ = std::move(views.job);
      }
      joined = join_job_round(*root_, *job_, config_, effective_, round, &cancelled_,
                              [](const std::string& s) { log::info("{}", s); });
      if (config_.uses_etcd()) meet_workers_store(*joined);
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

void RoundJoiner::meet_workers_store(JoinedRound& joined) {
  const std::string key = "r" + std::to_string(joined.round) + "/workers_store";
  if (joined.group_rank == 0) {
    if (!workers_store_) workers_store_ = host_job_store(config_);
    std::string address = config_.local_addr;
    if (address.empty()) address = root_->local_address();
    if (address.empty()) address = effective_.host;
    joined.master_addr = address;
    joined.master_port = workers_store_->port();
    job_->set(key, rendezvous::format_endpoint(address, workers_store_->port()));
    if (config_.min_nodes == config_.max_nodes) {
      // Only the round's nodes (and this host) may open new connections to it.
      workers_store_->allow_only(joined.ranks.ip_addresses());
    }
    return;
  }
  const std::string published = job_->get(key, config_.rdzv_timeout);
  const Endpoint where = parse_endpoint(published);
  if (!where.port) throw Error("etcd: the workers' store address '" + published + "' has no port");
  joined.master_addr = where.host;
  joined.master_port = *where.port;
}

}  // namespace ddp::launcher
