// See store_backend.hpp.
#include "launcher/rdzv/store_backend.hpp"

#include <algorithm>
#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/rdzv/hosted_store.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/workers_keys.hpp"

namespace ddp::launcher {

StoreBackend::StoreBackend(const LaunchConfig& c, EffectiveConfig& eff, bool host_store, StoreConnector connect_root)
    : c_(c), eff_(eff), connect_root_(std::move(connect_root)) {
  if (!host_store || c.node_rank != 0) {
    if (host_store) warn_without_secret(c, c.master_addr, c.master_port);
    return;
  }
  // Every worker of the job (all nodes) holds a connection to the store's host.
  eff.open_files_limit = raise_open_file_limit();
  server_ = host_job_store(c);
  eff.port = server_->port();
}

StoreConnector StoreBackend::connector(std::optional<std::chrono::milliseconds> connect_timeout) {
  if (connect_root_) return connect_root_;
  return [o = client_options(connect_timeout)] { return std::make_shared<rendezvous::TcpStoreClient>(o); };
}

rendezvous::TcpStoreClientOptions StoreBackend::client_options(
    std::optional<std::chrono::milliseconds> connect_timeout) const {
  rendezvous::TcpStoreClientOptions o;
  o.host = c_.master_addr;
  o.port = static_cast<std::uint16_t>(eff_.port);
  o.connect_timeout = connect_timeout.value_or(c_.rdzv_timeout);
  // A reply that does not come within the heartbeat timeout (at least 1 s) means the store is
  // lost, so a cut link cannot stall the teardown for longer.
  o.timeout = std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1));
  // A node started before node 0 listens says so about every 10 s instead of staying silent for
  // up to --rdzv_timeout. DDPLAUNCH_STATUS_INTERVAL (seconds) changes the interval (tests).
  o.on_waiting = [](const std::string& line) { log::info("{}", line); };
  o.auth = store_auth(c_.rdzv_secret);
  // Node 0 reaches its own store in process: no socket, and no thread switch before the loop runs.
  o.in_process = server_.get();
  // A node of a static job with restarts may be coming back (static_rejoin.hpp): node 0 admits
  // it once the job's next round starts forming.
  o.retry_refused = !connect_timeout && c_.min_nodes == c_.max_nodes && c_.max_restarts > 0;
  if (const char* v = std::getenv("DDPLAUNCH_STATUS_INTERVAL")) {
    if (const auto interval = parse_seconds(v)) o.waiting_interval = std::max(*interval, std::chrono::milliseconds(10));
  }
  return o;
}

void StoreBackend::set_liveness(JobMonitorOptions&, int) {}  // the defaults: heartbeats in the store

void StoreBackend::meet_workers_store(JoinedRound& joined, rendezvous::Store&, rendezvous::Store&,
                                      boost::asio::io_context& loop) {
  if (!server_) return;
  server_->start_when_dialled(loop);  // the workers dial it over TCP
  // The round formed: its workers may store what the budget allows, strangers only a little
  // (TcpStoreServer::trust_round), in an elastic job too.
  const std::vector<std::string> addresses = joined.ranks.ip_addresses();
  server_->trust_round(addresses);
  if (c_.min_nodes != c_.max_nodes || joined.ranks.num_nodes() < 2) return;
  // Only its nodes (and this host) may open new connections from now on. Every round: a node
  // that came back (readmit_until_formed) may have a new address.
  server_->allow_only(addresses);
  if (addresses != admitted_) log::info("store: new connections only from loopback and {}", fmt::join(addresses, ", "));
  admitted_ = addresses;
}

void StoreBackend::readmit_until_formed(int round) {
  if (!server_ || c_.min_nodes != c_.max_nodes || admitted_.empty()) return;
  server_->allow_any();
  admitted_.clear();
  log::info(
      "store: new connections from any address until round {} forms (a lost node may come back from a new "
      "one){}",
      round,
      c_.rdzv_secret.empty() ? "; without a job secret, any host that reaches the store meanwhile can join "
                               "in its place (see docs/security.md)"
                             : "");
}

void StoreBackend::clear_old_keys(int first_round_kept) {
  if (connect_root_) return;
  // The store is up (the round is forming in it): a connect that takes longer is a lost store.
  rendezvous::TcpStoreClientOptions o =
      client_options(std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1)));
  // The job's keys on the wire: its view's prefix behind the one the launchers' clients add.
  const StaleRounds rounds{o.key_prefix + job_key_prefix(c_.run_id, c_.rdzv_secret) + "/", first_round_kept};
  o.key_prefix = "";
  rendezvous::TcpStoreClient raw(o);
  const DeletedKeys deleted = delete_stale_keys(raw, rounds);
  if (deleted.workers > 0) log::info("store: deleted {} key(s) the workers of the last round left", deleted.workers);
  if (deleted.rounds > 0) log::debug("store: deleted {} key(s) of rounds before {}", deleted.rounds, first_round_kept);
}

bool StoreBackend::hosts_store(int) const {
  return server_ != nullptr;
}

void StoreBackend::end_job(rendezvous::Store&, const JobEnd&) {}  // the store ends with node 0's launcher

std::unique_ptr<RendezvousBackend> make_store_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                      bool host_store) {
  return std::make_unique<StoreBackend>(config, effective, host_store);
}

BackendKind store_backend_kind() {
  BackendKind kind;
  kind.names = {"static", "c10d"};
  kind.make = make_store_backend;
  return kind;
}

}  // namespace ddp::launcher
