// The etcd backend's timing rules (launcher/etcd/etcd_lease_rules.hpp), each derived from
// --heartbeat_timeout: the call bound, the job's and a node's lease TTL, the job lease's refresh.
#include "launcher/etcd/etcd_lease_rules.hpp"

#include <catch2/catch.hpp>

#include <chrono>

namespace rules = ddp::launcher::etcd_lease_rules;
using namespace std::chrono_literals;

TEST_CASE("etcd lease rules: a call is bounded by the heartbeat timeout, at least 1 s", "[etcd]") {
  CHECK(rules::call_timeout(30s) == 30s);
  CHECK(rules::call_timeout(1500ms) == 1500ms);
  CHECK(rules::call_timeout(200ms) == 1s);
}

TEST_CASE("etcd lease rules: a node's lease lasts the heartbeat timeout in whole seconds, at least 2 s", "[etcd]") {
  CHECK(rules::node_lease_ttl(30s) == 30s);
  CHECK(rules::node_lease_ttl(2001ms) == 3s);  // rounded up: never shorter than the timeout
  CHECK(rules::node_lease_ttl(1s) == 2s);      // etcd's minimum TTL
  CHECK(rules::node_lease_ttl(0ms) == 2s);
}

TEST_CASE("etcd lease rules: the job's lease outlives a launcher's restart and is refreshed every third", "[etcd]") {
  CHECK(rules::job_lease_ttl(3s) == 10s);
  CHECK(rules::job_lease_ttl(29500ms) == 30s);
  CHECK(rules::job_lease_refresh(30s) == 10s);
  CHECK(rules::job_lease_refresh(10s) == 3s);                         // a third in whole seconds, so a little early
  CHECK(rules::job_lease_refresh(std::chrono::seconds(0)) == 300ms);  // never a busy loop
  // The refresh comes well inside the TTL for every heartbeat timeout.
  for (const std::chrono::milliseconds timeout : {100ms, 1000ms, 9999ms, 45000ms, 600000ms}) {
    const auto ttl = rules::job_lease_ttl(timeout);
    CHECK(rules::job_lease_refresh(ttl) * 3 <= ttl);
    CHECK(ttl >= timeout);
  }
}
