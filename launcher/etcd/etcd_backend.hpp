// The etcd-v3 rendezvous backend (README: docs/etcd.md). The launchers meet in etcd under
// "/ddplaunch/<rdzv_id>/" (etcd_store.hpp), all keys under the job's shared lease
// (etcd_job_lease.hpp); each node shows itself alive with a lease per round
// (etcd_node_lease.hpp); the workers' TCPStore is hosted by the round's group rank 0, which
// publishes "r<round>/workers_store" = "address:port" (--local_addr, else the address it reaches
// etcd from), and the other nodes read it. Timings: etcd_lease_rules.hpp.
// Thread-safety: connector() and its connectors from any thread; the rest as the interface says.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/etcd/etcd_client.hpp"
#include "launcher/etcd/etcd_job_lease.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

class EtcdBackend : public RendezvousBackend {
 public:
  // With TLS keys, starts the TLS proxy (etcd_tls_process.hpp; throws UsageError or Error as it
  // does). Does not contact etcd: the first connect does. Keeps references to `config` and
  // `effective`.
  EtcdBackend(const LaunchConfig& config, EffectiveConfig& effective, bool host_store);

  StoreConnector connector(std::optional<std::chrono::milliseconds> connect_timeout) override;
  void set_liveness(JobMonitorOptions& options, int round) override;
  void meet_workers_store(JoinedRound& joined, rendezvous::Store& root, rendezvous::Store& job,
                          boost::asio::io_context& loop) override;
  // Nothing: the workers' keys of the rounds before are in the store meet_workers_store replaced
  // (the rounds' keys in etcd stay).
  void clear_old_keys(int) override {}
  // Group rank 0 hosts the workers' store.
  bool hosts_store(int group_rank) const override;
  // When the job is over, closes its next round for a late node with the reason; a successful
  // job's store host then revokes the job's lease, unless a late node must still read that.
  void end_job(rendezvous::Store& job, const JobEnd& end) override;

 private:
  EtcdClientOptions client_options(std::chrono::milliseconds call_timeout) const;

  const LaunchConfig& c_;
  EffectiveConfig& eff_;
  std::vector<std::string> endpoints_;  // the members, or with TLS the proxy's loopback ports
  std::shared_ptr<EtcdJobLease> lease_;
  std::unique_ptr<rendezvous::TcpStoreServer> workers_store_;  // on a group rank 0: a new one each such round
};

// The BackendFactory of etcd-v3.
std::unique_ptr<RendezvousBackend> make_etcd_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                     bool host_store);

// etcd-v3 as a backend: its names (torchrun's etcd and etcd-v2, etcd's v2 API, are refused with
// the fix), its round rules (no node hosts the launchers' store: ranks by arrival, any node of
// the job may close a round, every round elastic; --active_nodes, --standalone and --dump_stacks
// refused), and configure_etcd (etcd_config.hpp). Pure.
BackendKind etcd_backend_kind();

}  // namespace ddp::launcher
