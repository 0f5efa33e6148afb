// exclude_self(): a node that failed its health checks does not join, over one shared MemoryStore
// with each node a thread: a static round fails on every node with NodeUnhealthy naming the node
// and the check; an elastic round closes without waiting for the node (well before its last
// call) and its members read the line; the store's host keeps its store until the others read
// the verdict; the verdict's wire form.
#include "launcher/rdzv/self_exclusion.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::launcher;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

NodeInfo node(int rank) {
  NodeInfo n;
  n.node_rank = rank;
  n.host = "host" + std::to_string(rank);
  n.address = n.host;
  n.pid = 100 + rank;
  return n;
}

RendezvousOptions options(int nnodes) {
  RendezvousOptions o;
  o.nnodes = nnodes;
  o.run_id = "job";
  o.timeout = 10s;
  o.endpoint = "memory:0";
  return o;
}

ExclusionPlace place(int rank, bool elastic, bool holds_store, int min_nodes, int max_nodes) {
  ExclusionPlace p;
  p.round_prefix = round_prefix(0);
  p.node_rank = rank;
  p.host = "host" + std::to_string(rank);
  p.elastic = elastic;
  p.holds_store = holds_store;
  p.min_nodes = min_nodes;
  p.max_nodes = max_nodes;
  p.wait_first = 10s;
  p.last_call = 10s;
  return p;
}

const SelfExclusion kSick{"health check command 'check' failed: disk /scratch is read-only", "full report"};

struct Cluster {
  std::shared_ptr<rdzv::MemoryStore> root = std::make_shared<rdzv::MemoryStore>();
  JobStores views() { return job_stores(root, "job", ""); }

  std::string exclude(const ExclusionPlace& p) {
    try {
      exclude_self(*views().job, p, kSick);
    } catch (const NodeUnhealthy& e) {
      return e.what();
    }
    return "no exception";
  }
};

}  // namespace

TEST_CASE("a static round fails on every node, naming the unhealthy node and its check") {
  Cluster cluster;
  auto node0 = std::async(std::launch::async, [&] {
    const JobStores v = cluster.views();
    return join_round(*v.root, *v.job, node(0), options(2));
  });
  const std::string own = cluster.exclude(place(1, false, false, 2, 2));
  CHECK(own.find("full report") != std::string::npos);
  CHECK(own.find("node 1 (host1) excluded itself: health check command 'check' failed") != std::string::npos);
  REQUIRE(node0.wait_for(5s) == std::future_status::ready);
  try {
    node0.get();
    FAIL("node 0 joined a round without node 1");
  } catch (const NodeUnhealthy& e) {
    const std::string message = e.what();
    CHECK(message.find("node 1 (host1) excluded itself: health check command 'check' failed: disk /scratch is "
                       "read-only; the job cannot run without it (--nnodes=2 is static)") != std::string::npos);
  }
}

TEST_CASE("an elastic round closes without the unhealthy node, before its last call, and says so") {
  Cluster cluster;
  const auto join = [&](int rank) {
    return std::async(std::launch::async, [&cluster, rank] {
      ElasticOptions e;
      e.base = options(3);
      e.min_nodes = 2;
      e.is_host = rank == 0;
      e.last_call = 20s;
      const JobStores v = cluster.views();
      return join_elastic_round(*v.root, *v.job, node(rank), e);
    });
  };
  const auto start = Clock::now();
  auto node0 = join(0);
  auto node1 = join(1);
  const std::string own = cluster.exclude(place(2, true, false, 2, 3));
  CHECK(own.find("the other nodes go on without it") != std::string::npos);
  REQUIRE(node0.wait_for(10s) == std::future_status::ready);
  REQUIRE(node1.wait_for(10s) == std::future_status::ready);
  CHECK(Clock::now() - start < 10s);  // not the 20 s last call
  CHECK(node0.get().ranks.num_nodes() == 2);
  CHECK(node1.get().ranks.num_nodes() == 2);
  const std::vector<std::string> lines = excluded_nodes(*cluster.views().job, round_prefix(0));
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "node 2 (host2) excluded itself: health check command 'check' failed: disk /scratch is read-only");
}

TEST_CASE("the store's host keeps its store until the other node has read the verdict") {
  Cluster cluster;
  auto host = std::async(std::launch::async, [&] { return cluster.exclude(place(0, false, true, 2, 2)); });
  cluster.root->wait({"ddplaunch/job/" + round_prefix(0) + "ready"}, 5s);
  CHECK(host.wait_for(100ms) == std::future_status::timeout);  // waiting for node 1
  const JobStores v = cluster.views();
  CHECK_THROWS_AS(join_round(*v.root, *v.job, node(1), options(2)), NodeUnhealthy);
  REQUIRE(host.wait_for(5s) == std::future_status::ready);
  CHECK(host.get().find("node 0 (host0) excluded itself") != std::string::npos);
}

TEST_CASE("a round's error verdict carries its exit code") {
  rdzv::MemoryStore store;
  CHECK(round_error(2, "conflict") == "error: conflict");
  CHECK(round_error(69, "sick") == "error: [exit 69] sick");
  CHECK(is_round_error("error: x"));
  CHECK_FALSE(is_round_error("ok"));
  CHECK_THROWS_AS(fail_on_round_error(store, "r0/", "error: conflict"), ddp::UsageError);
  CHECK_THROWS_WITH(fail_on_round_error(store, "r0/", "error: [exit 69] sick"), "sick");
  CHECK(store.check({"r0/verdict_read/2"}));
}
