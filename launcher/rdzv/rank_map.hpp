// Global rank assignment, deterministic and independent of arrival order:
//   1. Every node registers (node_rank, nproc, address) in the store.
//   2. Nodes are taken in node_rank order.
//   3. A node's base rank is the sum of nproc of all lower node ranks (a prefix sum), so rank 0 is
//      always local rank 0 of node 0, and nodes may run different nproc.
//   4. RANK = base + local_rank; WORLD_SIZE = the sum of all nproc.
#pragma once

#include <string>
#include <vector>

namespace ddp::launcher {

struct NodeInfo {
  int node_rank = 0;
  int nproc = 1;
  std::string address;  // what the node advertises (--local_addr or host name)
  std::string host;     // host name, for messages
  int pid = 0;
  std::string store_address;  // the IP this node's launcher reaches the store from ("" in-process)

  std::string serialize() const;
  // Throws UsageError on a malformed record (another program using the same store keys).
  static NodeInfo parse(const std::string& text);
};

class RankMap {
 public:
  // `nodes` in any order; node ranks must be 0..n-1 exactly once (asserted by the caller).
  explicit RankMap(std::vector<NodeInfo> nodes);

  int base_rank(int node_rank) const;
  int world_size() const { return world_size_; }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  // One line per node: "node 0 (host, addr, from 10.0.0.1): ranks 0-3 (4 workers)"; "from": the
  // address it reached the store from, in a multi-node job.
  std::string describe() const;
  // The IP addresses the nodes reach the store from, and their advertised addresses where those
  // are IP literals; sorted, without duplicates (what the store's allowlist admits).
  std::vector<std::string> ip_addresses() const;

 private:
  std::vector<NodeInfo> nodes_;
  std::vector<int> base_;
  int world_size_ = 0;
};

}  // namespace ddp::launcher
