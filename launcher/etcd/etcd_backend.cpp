// See etcd_backend.hpp.
#include "launcher/etcd/etcd_backend.hpp"

#include <fmt/format.h>

#include "common/host_port.hpp"
#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/etcd/etcd_config.hpp"
#include "launcher/etcd/etcd_lease_rules.hpp"
#include "launcher/etcd/etcd_node_lease.hpp"
#include "launcher/etcd/etcd_store.hpp"
#include "launcher/etcd/etcd_tls_process.hpp"
#include "launcher/rdzv/hosted_store.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace ddp::launcher {

EtcdBackend::EtcdBackend(const LaunchConfig& c, EffectiveConfig& eff, bool host_store) : c_(c), eff_(eff) {
  // Every worker of the job (all nodes) holds a connection to the workers' store, and any node
  // may come to host it.
  if (host_store) eff.open_files_limit = raise_open_file_limit();
  endpoints_ = c.etcd_tls ? start_etcd_tls_proxy(c) : c.etcd_endpoints;
  const auto timeout = etcd_lease_rules::call_timeout(c.heartbeat_timeout);
  lease_ = std::make_shared<EtcdJobLease>(client_options(timeout), etcd_prefix(c),
                                          etcd_lease_rules::job_lease_ttl(c.heartbeat_timeout));
}

EtcdClientOptions EtcdBackend::client_options(std::chrono::milliseconds call_timeout) const {
  return etcd_client_options(c_, endpoints_, call_timeout);
}

StoreConnector EtcdBackend::connector(std::optional<std::chrono::milliseconds>) {
  // Each etcd call is bounded by the call timeout, so no connect waits longer than that.
  EtcdStoreOptions o;
  o.client = client_options(etcd_lease_rules::call_timeout(c_.heartbeat_timeout));
  o.prefix = etcd_prefix(c_);
  return [o, lease = lease_]() mutable {
    o.lease = lease->id();
    return std::make_shared<EtcdStore>(o);
  };
}

void EtcdBackend::set_liveness(JobMonitorOptions& mo, int round) {
  mo.store_lost = "lost etcd at " + c_.rdzv_endpoint;
  // The records are not under the job's lease (each has its node's own), so their prefix names
  // the job's lease: a rerun with the same run id never watches this run's records run out.
  const std::string records = fmt::format("{}alive/{:x}/{}", etcd_prefix(c_), lease_->id(), round_prefix(round));
  mo.liveness = [this, records](const JobMonitorOptions& o) {
    return std::make_unique<EtcdNodeLease>(client_options(etcd_lease_rules::call_timeout(c_.heartbeat_timeout)),
                                           records, o);
  };
}

void EtcdBackend::meet_workers_store(JoinedRound& joined, rendezvous::Store& root, rendezvous::Store& job,
                                     boost::asio::io_context&) {
  const std::string key = round_prefix(joined.round) + "workers_store";
  if (joined.group_rank == 0) {
    // A fresh store each round: PyTorch's workers would read the keys of the round before as
    // their own (rdzv/workers_keys.hpp), and the old one's connections (a late node's workers of
    // the round before) close with it. The old one goes first, freeing a fixed --master_port.
    workers_store_.reset();
    workers_store_ = host_job_store(c_);
    std::string address = c_.local_addr;
    if (address.empty()) address = root.local_address();
    if (address.empty()) address = eff_.host;
    joined.master_addr = address;
    joined.master_port = workers_store_->port();
    job.set(key, rendezvous::format_endpoint(address, workers_store_->port()));
    if (c_.min_nodes == c_.max_nodes) {
      // Only the round's nodes (and this host) may open new connections to it.
      workers_store_->allow_only(joined.ranks.ip_addresses());
    } else {
      // Anyone may connect, but only the round's workers may fill it (TcpStoreServer::trust_round).
      workers_store_->trust_round(joined.ranks.ip_addresses());
    }
    return;
  }
  const std::string published = job.get(key, c_.rdzv_timeout);
  // A malformed value is the job's state gone wrong, not a usage error: Error (exit 1).
  const std::optional<HostPort> where = try_parse_host_port(published);
  if (!where || !where->port) throw Error("etcd: the workers' store address '" + published + "' is not host:port");
  joined.master_addr = where->host;
  joined.master_port = *where->port;
}

bool EtcdBackend::hosts_store(int group_rank) const {
  return group_rank == 0;
}

void EtcdBackend::end_job(rendezvous::Store& job, const JobEnd& end) {
  // A late node waits for the next round in keys that its own keep-alives keep: tell it (and any
  // node that comes later) that the job is over, once that is so for every node.
  if (!end.over) return;
  const bool waiting = turn_away_late_nodes(
      job, end.next_round,
      fmt::format("job '{}' ended (exit code {}) before this node could join it; start a new job (another "
                  "--rdzv_id)",
                  c_.run_id, end.exit_code));
  // Its keys go once every node left, unless a late node must still read that.
  if (end.exit_code == 0 && end.store_host && !waiting) lease_->revoke();
}

std::unique_ptr<RendezvousBackend> make_etcd_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                     bool host_store) {
  return std::make_unique<EtcdBackend>(config, effective, host_store);
}

BackendKind etcd_backend_kind() {
  BackendKind kind;
  kind.names = {"etcd-v3"};
  kind.refused_names = {"etcd", "etcd-v2"};
  kind.refused_why =
      "speaks etcd's v2 API, which etcd 3.6 removed; use --rdzv_backend etcd-v3 (etcd's v3 API, the same "
      "--rdzv_endpoint)";
  kind.rules.node0_hosts_store = false;
  kind.rules.meeting_place = "etcd";
  kind.rules.ranks_by_arrival = true;
  kind.rules.any_node_closes = true;
  kind.rules.always_elastic = true;
  kind.rules.refuses_active_nodes = true;
  kind.rules.refuses_standalone = true;
  kind.rules.refuses_dump_stacks = true;
  kind.configure = configure_etcd;
  kind.make = make_etcd_backend;
  return kind;
}

}  // namespace ddp::launcher
