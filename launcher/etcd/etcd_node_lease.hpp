// A node's liveness in the etcd rendezvous (a NodeLiveness for the JobMonitor): each launcher
// holds, per round, a lease (TTL: etcd_lease_rules.hpp) and its record "<prefix><group rank>"
// under it. Refreshing the lease every interval is the heartbeat. The others' records are watched
// with one prefix watch: a DELETE means etcd heard nothing from that launcher for the TTL and
// ended its lease, i.e. the node is lost (an event, no polling of the others). A node whose record
// never appears within the heartbeat timeout is lost too. Not a failure of the job's store: etcd
// itself is still there.
// Thread-safety: run() on one thread; interrupt() from any.
#pragma once

#include <atomic>
#include <string>

#include "launcher/etcd/etcd_client.hpp"
#include "launcher/rdzv/job_monitor.hpp"

namespace ddp::launcher {

class EtcdNodeLease : public NodeLiveness {
 public:
  // `prefix` is the round's record prefix in etcd, e.g. "/ddplaunch/<run_id>/alive/<job lease>/r0/".
  // Does not connect.
  EtcdNodeLease(const EtcdClientOptions& client, std::string prefix, const JobMonitorOptions& options);

  // Throws ddp::Error naming etcd when it cannot be reached, or when this node's own lease ran
  // out (etcd did not hear from it for the TTL: the others count it lost).
  std::optional<NodeLoss> run() override;
  void interrupt() override;

 private:
  std::optional<NodeLoss> watch_others();

  EtcdClient client_;
  std::string prefix_;
  JobMonitorOptions o_;
  std::atomic<bool> interrupted_{false};
};

}  // namespace ddp::launcher
