// The launchers' node records of the rendezvous tests, where each node is a thread: one spelling
// for the suites that need a node's rank, worker count, host and launcher pid.
#pragma once

#include <string>

#include "launcher/rdzv/rank_map.hpp"

namespace ddp::testing {

// Node `rank` (--node_rank; 0 hosts the store) with `nproc` workers on host "<host_prefix><rank>"
// (its address too), launcher pid `pid` (it tells launchers on one rank apart), and the store
// reached from 10.0.0.<rank + 1>. Pure.
inline ddp::launcher::NodeInfo test_node(int rank, int pid, int nproc, const std::string& host_prefix) {
  ddp::launcher::NodeInfo n;
  n.node_rank = rank;
  n.nproc = nproc;
  n.host = host_prefix + std::to_string(rank);
  n.address = n.host;
  n.pid = pid;
  n.store_address = "10.0.0." + std::to_string(rank + 1);
  return n;
}

}  // namespace ddp::testing
