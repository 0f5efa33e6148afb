// See etcd_node_lease.hpp.
#include "launcher/etcd/etcd_node_lease.hpp"

#include <algorithm>
#include <charconv>
#include <set>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/etcd/etcd_lease_rules.hpp"

namespace ddp::launcher {
namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

EtcdNodeLease::EtcdNodeLease(const EtcdClientOptions& client, std::string prefix, const JobMonitorOptions& options)
    : client_(client), prefix_(std::move(prefix)), o_(options) {}

void EtcdNodeLease::interrupt() {
  interrupted_ = true;
  client_.interrupt();
}

std::optional<NodeLoss> EtcdNodeLease::run() {
  try {
    return watch_others();
  } catch (const rendezvous::ConnectionError& e) {
    if (interrupted_) return std::nullopt;
    throw Error("lost etcd: " + std::string(e.what()));
  } catch (const rendezvous::TimeoutError& e) {
    throw Error("lost etcd: " + std::string(e.what()));
  }
}

std::optional<NodeLoss> EtcdNodeLease::watch_others() {
  const std::chrono::seconds ttl = etcd_lease_rules::node_lease_ttl(o_.timeout);
  const std::int64_t lease = client_.grant_lease(ttl);
  std::int64_t revision = client_.put(prefix_ + std::to_string(o_.node), "alive", lease);
  auto next_beat = Clock::now() + o_.interval;
  auto check_all_at = Clock::now() + o_.timeout;  // by then every node's record must exist
  bool checked_all = false;
  while (!interrupted_) {
    const auto until = checked_all ? next_beat : std::min(next_beat, check_all_at);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    for (const EtcdEvent& e : client_.watch(prefix_, true, revision, std::max(left, std::chrono::milliseconds(1)))) {
      revision = std::max(revision, e.kv.mod_revision);
      if (!e.deleted) continue;
      const std::string node = e.kv.key.substr(prefix_.size());
      if (node == std::to_string(o_.node)) continue;  // our own: the keep-alive below says so
      // Its last keep-alive came a TTL before etcd deleted its record.
      int n = -1;
      std::from_chars(node.data(), node.data() + node.size(), n);
      return NodeLoss{
          fmt::format("lost node {}: its etcd lease ran out (no keep-alive for {})", node, format_whole_seconds(ttl)),
          false, n, std::chrono::system_clock::now() - ttl};
    }
    if (Clock::now() >= next_beat) {
      if (client_.keep_alive(lease) == 0) {
        throw Error(fmt::format(
            "lost etcd: this node's lease ran out (etcd did not hear from it for {}), so the other nodes count it "
            "lost",
            format_whole_seconds(ttl)));
      }
      next_beat = Clock::now() + o_.interval;
    }
    if (!checked_all && Clock::now() >= check_all_at) {
      checked_all = true;
      std::set<std::string> present;
      for (const EtcdKeyValue& kv : client_.get_prefix(prefix_)) present.insert(kv.key.substr(prefix_.size()));
      for (int n = 0; n < o_.nnodes; ++n) {
        if (!present.count(std::to_string(n))) {
          return NodeLoss{
              fmt::format("lost node {}: it never showed up alive in etcd within {}", n, format_seconds(o_.timeout)),
              false, n};
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace ddp::launcher
