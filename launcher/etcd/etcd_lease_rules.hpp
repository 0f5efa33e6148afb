// Every timing rule of the etcd backend in one place, all derived from --heartbeat_timeout:
//   - each etcd call is bounded by the heartbeat timeout, at least 1 s: a member that does not
//     answer within it is as lost as a store;
//   - the job's lease (etcd_job_lease.hpp) lives at least 10 s past its last keep-alive, so the
//     job's keys outlive a launcher's restart; it is refreshed every third of its TTL;
//   - a node's lease (etcd_node_lease.hpp) has TTL = the heartbeat timeout rounded up to whole
//     seconds, at least etcd's minimum of 2 s; it is refreshed every --heartbeat_interval.
// Pure; thread-safe.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>

namespace ddp::launcher::etcd_lease_rules {

inline std::chrono::milliseconds call_timeout(std::chrono::milliseconds heartbeat_timeout) {
  return std::max<std::chrono::milliseconds>(heartbeat_timeout, std::chrono::seconds(1));
}

inline std::chrono::seconds whole_seconds(std::chrono::milliseconds t) {
  return std::chrono::seconds(static_cast<long long>(std::ceil(static_cast<double>(t.count()) / 1000.0)));
}

inline std::chrono::seconds job_lease_ttl(std::chrono::milliseconds heartbeat_timeout) {
  return std::max(whole_seconds(heartbeat_timeout), std::chrono::seconds(10));
}

inline std::chrono::milliseconds job_lease_refresh(std::chrono::seconds ttl) {
  return std::max<std::chrono::milliseconds>(ttl / 3, std::chrono::milliseconds(300));
}

inline std::chrono::seconds node_lease_ttl(std::chrono::milliseconds heartbeat_timeout) {
  return std::max(whole_seconds(heartbeat_timeout), std::chrono::seconds(2));
}

}  // namespace ddp::launcher::etcd_lease_rules
