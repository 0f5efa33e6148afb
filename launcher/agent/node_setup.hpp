// What a node settles once, before its first round: the checks that fail fast (the program, the
// addresses), the log root, and (on node 0) the hosted store. The result, an EffectiveConfig, is
// what the agent uses from then on instead of recomputing from the LaunchConfig.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/etcd/etcd_job_lease.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/effective_config.hpp"

namespace ddp::launcher {


struct NodeSetupOptions {
  bool preflight = true;   // check the program and addresses (off for fake processes)
  bool host_store = true;  // node 0 hosts a TcpStoreServer at --master_addr:--master_port
};

struct NodeSetup {
  EffectiveConfig effective;
  std::unique_ptr<rendezvous::TcpStoreServer> server;  // node 0 only, already serving
};

// Resolves the effective configuration, makes this run's log directory and starts the hosted
// store. Blocks only for name lookups. Throws UsageError (exit 2) for a program that cannot run,
// an address that does not resolve, a port already in use, or a log directory that cannot be made.
NodeSetup set_up_node(const LaunchConfig& config, const NodeSetupOptions& options);

// New connections to the store root (un-prefixed): with etcd-v3, EtcdStores in the job's
// namespace with the job's lease, each call bounded by the heartbeat timeout (at least 1 s);
// otherwise at --master_addr and the effective port, as
// TcpStoreClients that retry until --rdzv_timeout and time replies out after the heartbeat
// timeout (at least 1 s), so a cut link cannot stall the teardown for longer.
// `connect_timeout` replaces --rdzv_timeout as the connect bound: the monitor of a running round
// connects to a store that is known to be up, so one that does not answer within the heartbeat
// timeout is lost (waiting --rdzv_timeout there would hold the teardown for minutes).
StoreConnector store_connector(const LaunchConfig& config, const EffectiveConfig& effective,
                               std::optional<std::chrono::milliseconds> connect_timeout = std::nullopt);

}  // namespace ddp::launcher
