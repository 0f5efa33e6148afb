// See round_joiner.hpp.
#include "launcher/rdzv/round_joiner.hpp"

#include <optional>

#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace ddp::launcher {

RoundJoiner::RoundJoiner(boost::asio::io_context& io, RendezvousBackend& backend, const LaunchConfig& config,
                         const EffectiveConfig& effective, HealthGate health)
    : io_(io), backend_(backend), config_(config), effective_(effective), health_(std::move(health)) {}

RoundJoiner::~RoundJoiner() {
  if (thread_.joinable()) thread_.join();
}

void RoundJoiner::start(int round, OnJoined on_joined, OnError on_error) {
  if (config_.max_nodes == 1 && config_.rdzv_rules.node0_hosts_store && config_.health_check.empty()) {
    // One node meets only itself, in its own store, in process: nothing blocks, so no thread.
    // The result still reaches the loop as a posted event, as from the thread.
    auto result = join(round);
    boost::asio::post(io_, [joined = std::move(result.first), error = result.second, on_joined = std::move(on_joined),
                            on_error = std::move(on_error)] {
      if (error) return on_error(error);
      on_joined(*joined);
    });
    return;
  }
  thread_ = std::thread([this, round, on_joined = std::move(on_joined), on_error = std::move(on_error)] {
    auto result = join(round);
    // The result goes back to the loop, which joins this (finished) thread first.
    boost::asio::post(io_, [this, joined = std::move(result.first), error = result.second, on_joined, on_error] {
      thread_.join();
      if (error) return on_error(error);
      on_joined(*joined);
    });
  });
}

std::pair<std::optional<JoinedRound>, std::exception_ptr> RoundJoiner::join(int round) {
  std::optional<JoinedRound> joined;
  std::exception_ptr error;
  try {
    checking_health_ = true;
    const std::optional<SelfExclusion> sick = health_ ? health_(round, cancel_event_) : std::nullopt;
    checking_health_ = false;
    // Interrupted: the gate's verdict means nothing, and the other nodes are not told.
    if (cancelled_) throw ddp::Error("interrupted during the health checks");
    if (sick) leave_sick(round, *sick);
    connect();
    // A node of the round before may come back from another address (rendezvous_backend.hpp).
    if (round > 0) backend_.readmit_until_formed(round);
    joined = join_job_round(
        *root_, *job_, config_, effective_, round, &cancelled_, [](const std::string& s) { log::info("{}", s); },
        [this](int first_round_kept) { backend_.clear_old_keys(first_round_kept); });
    if (config_.min_nodes < config_.max_nodes || config_.rdzv_rules.always_elastic) {
      for (const std::string& line : excluded_nodes(*job_, round_prefix(joined->round))) log::warning("{}", line);
    }
    if (joined->group_rank == 0) log::info("{}", joined->ranks.describe());
    backend_.meet_workers_store(*joined, *root_, *job_, io_);
  } catch (const rendezvous::ConnectionError& e) {
    // Node 0 never sees a node whose job secret differs: it times out and ends, and this node
    // loses (or never reaches) the store, whichever comes first.
    error = config_.rdzv_secret.empty() || !config_.rdzv_rules.node0_hosts_store  // no node 0 to time out
                ? std::current_exception()
                : std::make_exception_ptr(rendezvous::ConnectionError(
                      std::string(e.what()) + "; if node 0 timed out waiting for this node, check that " +
                      kSameSecretHint));
  } catch (...) {
    error = std::current_exception();
  }
  checking_health_ = false;  // also when the gate threw
  return {std::move(joined), error};
}

void RoundJoiner::connect() {
  if (root_) return;
  JobStores views = job_stores(backend_.connector(std::nullopt)(), config_.run_id, config_.rdzv_secret);
  root_ = std::move(views.root);
  job_ = std::move(views.job);
}

void RoundJoiner::leave_sick(int round, const SelfExclusion& sick) {
  ExclusionPlace place;
  place.round_prefix = round_prefix(round);
  place.node_rank = config_.node_rank;
  place.host = effective_.host;
  place.elastic = config_.min_nodes < config_.max_nodes || config_.rdzv_rules.always_elastic;
  place.holds_store = config_.rdzv_rules.node0_hosts_store && backend_.hosts_store(config_.node_rank);
  place.min_nodes = config_.min_nodes;
  place.max_nodes = config_.max_nodes;
  place.wait_first = config_.rdzv_timeout;
  place.last_call = config_.last_call_timeout;
  try {
    connect();
    exclude_self(*job_, place, sick);
  } catch (const NodeUnhealthy&) {
    throw;
  } catch (const Error& e) {
    // Unhealthy all the same: the exit code says so, and the message why the others were not told.
    throw NodeUnhealthy(sick.report + "\ncould not tell the other nodes: " + e.what());
  }
}

}  // namespace ddp::launcher
