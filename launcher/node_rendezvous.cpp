// Rendezvous rounds; the steps are in node_rendezvous.hpp.
#include "launcher/node_rendezvous.hpp"

#include <algorithm>

namespace ddp::launcher {

using rendezvous::Store;
using rendezvous::TimeoutError;

namespace {
const std::string kErrorPrefix = "error: ";

[[noreturn]] void fail_round(Store& job, const std::string& ready_key, const std::string& message) {
  job.set(ready_key, kErrorPrefix + message);
  throw UsageError(message);
}
}  // namespace

RankMap join_round(Store& root, Store& job, const NodeInfo& self, const RendezvousOptions& o) {
  const std::string round = "r" + std::to_string(o.round) + "/";
  const std::string ready_key = round + "ready";

  const std::string other_run = root.compare_set("ddplaunch/run_id", "", o.run_id);
  if (other_run != o.run_id) {
    const std::string message = "node " + std::to_string(self.node_rank) + " (" + self.host + ") has --rdzv_id=" +
                                o.run_id + " but the store at " + o.endpoint + " runs job '" + other_run +
                                "'; use the same --rdzv_id on every node";
    root.set("ddplaunch/" + other_run + "/" + ready_key, kErrorPrefix + message);
    throw UsageError(message);
  }
  const std::string mine = std::to_string(o.nnodes);
  const std::string agreed = job.compare_set("config/nnodes", "", mine);
  if (agreed != mine) {
    fail_round(job, ready_key, "node " + std::to_string(self.node_rank) + " (" + self.host + ") has --nnodes=" + mine +
                                   " but the other nodes have --nnodes=" + agreed +
                                   "; start every node with the same --nnodes");
  }
  const std::string record = self.serialize();
  const std::string node_key = round + "node/" + std::to_string(self.node_rank);
  const std::string holder = job.compare_set(node_key, "", record);
  if (holder != record) {
    const NodeInfo other = NodeInfo::parse(holder);
    fail_round(job, ready_key, "--node_rank=" + std::to_string(self.node_rank) + " is used twice: by " + other.host +
                                   " (pid " + std::to_string(other.pid) + ") and by " + self.host + " (pid " +
                                   std::to_string(self.pid) + "); give every node a distinct --node_rank");
  }
  if (job.add(round + "joined", 1) == o.nnodes) job.set(ready_key, "ok");

  const auto start = std::chrono::steady_clock::now();
  std::int64_t reported = -1;
  for (;;) {
    const auto left = o.timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    try {
      // One-second slices only to print progress and notice Ctrl-C; the wake-up itself is
      // the store's event.
      job.wait({ready_key}, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(1000)));
      break;
    } catch (const TimeoutError&) {
      // Not all nodes yet: fall through to report and check the deadline.
    }
    if (o.cancelled && o.cancelled->load()) throw rendezvous::Error("interrupted while waiting for nodes");
    const std::int64_t joined = job.add(round + "joined", 0);
    if (joined != reported && o.status) {
      o.status("waiting for nodes: " + std::to_string(joined) + "/" + std::to_string(o.nnodes) +
               " joined (node_rank " + std::to_string(self.node_rank) + ")");
      reported = joined;
    }
    if (left.count() <= 1000) {
      std::string missing;
      for (int r = 0; r < o.nnodes; ++r) {
        if (!job.check({round + "node/" + std::to_string(r)})) missing += (missing.empty() ? "" : ",") + std::to_string(r);
      }
      throw TimeoutError("timed out after " + std::to_string(o.timeout.count() / 1000) + " s waiting for " +
                         std::to_string(o.nnodes - joined) + " of " + std::to_string(o.nnodes) + " nodes (node_rank " +
                         missing + ") at " + o.endpoint + "; check --nnodes and --master_addr on every node");
    }
  }
  const std::string ready = job.get(ready_key, o.timeout);
  if (ready.rfind(kErrorPrefix, 0) == 0) throw UsageError(ready.substr(kErrorPrefix.size()));
  std::vector<NodeInfo> nodes;
  for (int r = 0; r < o.nnodes; ++r) nodes.push_back(NodeInfo::parse(job.get(round + "node/" + std::to_string(r), o.timeout)));
  return RankMap(std::move(nodes));
}

}  // namespace ddp::launcher
