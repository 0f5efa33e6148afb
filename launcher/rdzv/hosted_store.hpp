// The store a node hosts for its job: node 0's TcpStoreServer (the launchers' rendezvous and the
// workers' TCPStore), or, with a backend where node 0 hosts none (BackendRules::node0_hosts_store,
// etcd-v3), the workers' store on a round's group rank 0. Where it listens follows torchrun's
// rules, written out at store_bind_host().
#pragma once

#include <memory>
#include <string>

#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// host_job_store's port is taken while this node only guessed it hosts the store
// (LaunchConfig::store_host_guessed): another launcher of the job on this machine does, and this
// one should join it as a client (node_rank 1, a placeholder: ranks come from arrival).
class StoreHostTaken : public Error {
 public:
  using Error::Error;
};

// A store server for this job's workers (and, on node 0 of the built-in store, the launchers),
// listening at --master_port (0: a free one) on the address store_bind_host chooses, and serving,
// except a one-node job's on node 0: its thread is started by the first wait that needs it or the
// first connection (TcpStoreServer::start_when_dialled). Throws UsageError when the port is taken,
// StoreHostTaken instead when this node only guessed it hosts the store.
std::unique_ptr<rendezvous::TcpStoreServer> host_job_store(const LaunchConfig& config);

// Without a job secret, on a multi-node job whose store is reachable beyond loopback (listening
// on, or dialled at, `store_host`: "" is every interface): one warning line saying what any host
// reaching the port can do. Blocks only for a name lookup.
void warn_without_secret(const LaunchConfig& config, const std::string& store_host, int port);

// The address the hosted store binds: "" for every interface. Blocks only for a name lookup.
std::string store_bind_host(const LaunchConfig& config);

}  // namespace ddp::launcher
