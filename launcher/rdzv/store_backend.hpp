// The built-in rendezvous backend: node 0 hosts one TcpStoreServer (rdzv/hosted_store.hpp) that
// is both the launchers' meeting place and the workers' TCPStore; the other nodes dial
// --master_addr:--master_port. Liveness is heartbeats in the job's store (job_monitor.hpp).
// Thread-safety: connector() and its connectors from any thread; the rest as the interface says.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

class StoreBackend : public RendezvousBackend {
 public:
  // On node 0 with `host_store`, starts the store (throws UsageError when the port is taken) and
  // sets effective.port to its real port; node 0's own connections to it are in process
  // (TcpStoreClientOptions::in_process). `connect_root`, when given, replaces the connections
  // (tests with an in-memory store). Keeps references to `config` and `effective`.
  StoreBackend(const LaunchConfig& config, EffectiveConfig& effective, bool host_store,
               StoreConnector connect_root = {});

  StoreConnector connector(std::optional<std::chrono::milliseconds> connect_timeout) override;
  void set_liveness(JobMonitorOptions& options, int round) override;
  // The workers dial node 0's store. One node's store (reached in process by its launcher,
  // hosted_store.hpp) starts serving when `loop` sees the first connection arrive, so a job
  // whose workers never dial it never starts its thread. Once a round of a static multi-node job
  // forms, the store takes new connections only from the round's nodes (and this host).
  void meet_workers_store(JoinedRound& joined, rendezvous::Store& root, rendezvous::Store& job,
                          boost::asio::io_context& loop) override;
  // Node 0 of a static multi-node job: new connections from anywhere until round `round` forms
  // (a lost node's new address is not known before), said in one line.
  void readmit_until_formed(int round) override;
  // Through a connection of its own without a key prefix (workers_keys.hpp: delete_stale_keys);
  // nothing with `connect_root` (tests' in-memory store). Logs how many workers' keys went.
  void clear_old_keys(int first_round_kept) override;
  bool hosts_store(int group_rank) const override;
  void end_job(rendezvous::Store& job, const JobEnd& end) override;

 private:
  // The options of a connection to the store; see connector().
  rendezvous::TcpStoreClientOptions client_options(std::optional<std::chrono::milliseconds> connect_timeout) const;

  const LaunchConfig& c_;
  EffectiveConfig& eff_;
  StoreConnector connect_root_;
  std::unique_ptr<rendezvous::TcpStoreServer> server_;  // node 0 only
  std::vector<std::string> admitted_;                   // the allowlist last applied ("": none yet)
};

// The BackendFactory of the built-in store.
std::unique_ptr<RendezvousBackend> make_store_backend(const LaunchConfig& config, EffectiveConfig& effective,
                                                      bool host_store);

// The built-in store as a backend: --rdzv_backend static or c10d (the same store: torchrun's c10d
// is node 0's TCPStore too), with BackendRules' defaults: node 0 hosts the store, a static round
// ranks by --node_rank and node 0 closes an elastic one. Pure.
BackendKind store_backend_kind();

}  // namespace ddp::launcher
