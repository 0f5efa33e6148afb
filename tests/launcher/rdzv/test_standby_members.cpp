// Standby nodes (--active_nodes): the membership rule (order_members, standby_rank_map and the
// store values of standby_members.hpp) as pure functions, and join_elastic_round applying it over
// one shared MemoryStore with each node a thread: round 0 splits active and standby, round 1
// promotes the standby in a lost node's place, prefers returning active nodes over an earlier
// standby, runs with fewer than --active_nodes when no spare is left, and refuses a node whose
// --active_nodes differs.
//
// Arrival order is forced by waiting for the key each arrival writes ("r<r>/arrived/<i>"), not
// with sleeps; every join is bounded by a short rendezvous timeout.
#include "launcher/rdzv/standby_members.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "tests/launcher/rdzv/test_nodes.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::launcher;
using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kLong = 10s;

// Node `rank` with 2 workers on host<rank>; `pid` tells launchers apart.
NodeInfo node(int rank, int pid) {
  return ddp::testing::test_node(rank, pid, 2, "host");
}

std::vector<std::string> hosts_in(const RankMap& m) {
  std::vector<std::string> out;
  for (const NodeInfo& n : m.nodes()) out.push_back(n.host + (n.standby ? " standby" : ""));
  return out;
}

TEST_CASE("the host comes first, then the previous round's active nodes, then arrival order", "[standby]") {
  const std::vector<NodeInfo> arrived{node(3, 13), node(2, 12), node(0, 10), node(1, 11)};
  CHECK(order_members(arrived, {}) == std::vector<std::size_t>{2, 0, 1, 3});
  // Node 1 and node 3 were active (in that group-rank order); node 2 arrived before node 1.
  const std::vector<std::string> previous{node_identity(node(0, 10)), node_identity(node(1, 11)),
                                          node_identity(node(3, 13))};
  CHECK(order_members(arrived, previous) == std::vector<std::size_t>{2, 3, 0, 1});
  // A launcher started again (a new pid) is a new node: it comes after the others.
  CHECK(order_members({node(1, 99), node(0, 10), node(2, 12)},
                      {node_identity(node(0, 10)), node_identity(node(1, 11))}) == std::vector<std::size_t>{1, 0, 2});
}

TEST_CASE("standby nodes take no ranks and the map says so", "[standby]") {
  const std::vector<NodeInfo> arrived{node(0, 10), node(2, 12), node(1, 11)};
  const RankMap m = standby_rank_map(arrived, {0, 1, 2}, 2);
  CHECK(m.num_nodes() == 3);
  CHECK(m.num_active() == 2);
  CHECK(m.world_size() == 4);
  CHECK(m.base_rank(0) == 0);
  CHECK(m.base_rank(1) == 2);
  CHECK(m.base_rank(2) == -1);
  CHECK(m.is_standby(2));
  CHECK_FALSE(m.is_standby(1));
  CHECK(hosts_in(m) == std::vector<std::string>{"host0", "host2", "host1 standby"});
  CHECK(m.describe() ==
        "rank map: 3 node(s) (2 active, 1 standby), world size 4\n"
        "  node 0 (host0, from 10.0.0.1): ranks 0-1 (2 workers)\n"
        "  node 1 (host2, from 10.0.0.3): ranks 2-3 (2 workers)\n"
        "  node 2 (host1, from 10.0.0.2): standby (no workers)\n");
  CHECK(parse_active(format_active(m)) ==
        std::vector<std::string>{node_identity(node(0, 10)), node_identity(node(2, 12))});
  // Fewer members than active nodes: all of them are active.
  CHECK(standby_rank_map(arrived, {0, 1, 2}, 5).num_active() == 3);
}

TEST_CASE("the stored order reads back, and a foreign one is refused", "[standby]") {
  CHECK(parse_order(format_order({2, 0, 1}), 3) == std::vector<std::size_t>{2, 0, 1});
  for (const std::string bad : {"", "0,1", "0,1,1", "0,1,3", "0,x,1", "0,,1,2"}) {
    CHECK_THROWS_AS(parse_order(bad, 3), UsageError);
  }
}

// One job on one shared in-memory store; each node joins on its own thread.
struct Job {
  std::shared_ptr<rdzv::MemoryStore> root = std::make_shared<rdzv::MemoryStore>();
  int active_nodes = 2;

  std::future<ElasticRound> join(const NodeInfo& self, int round, int active = -1) {
    ElasticOptions e;
    e.base.nnodes = 3;
    e.base.round = round;
    e.base.run_id = "job";
    e.base.timeout = kLong;
    e.base.endpoint = "memory:0";
    e.min_nodes = 2;
    e.is_host = self.node_rank == 0;
    e.last_call = 300ms;
    e.active_nodes = active < 0 ? active_nodes : active;
    return std::async(std::launch::async, [this, self, e] {
      const JobStores views = job_stores(root, "job", "");
      return join_elastic_round(*views.root, *views.job, self, e);
    });
  }
  // Blocks until the i-th node (from 1) arrived in `round`.
  void arrived(int round, int i) {
    root->wait({"ddplaunch/job/r" + std::to_string(round) + "/arrived/" + std::to_string(i)}, kLong);
  }
  // Joins `nodes` to `round` in that order (each after the previous one arrived); their results.
  std::vector<ElasticRound> round_of(int round, const std::vector<NodeInfo>& nodes) {
    std::vector<std::future<ElasticRound>> joins;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (i > 0) arrived(round, static_cast<int>(i));
      joins.push_back(join(nodes[i], round));
    }
    std::vector<ElasticRound> out;
    for (auto& f : joins) {
      REQUIRE(f.wait_for(kLong) == std::future_status::ready);
      out.push_back(f.get());
    }
    return out;
  }
};

TEST_CASE("a standby takes a lost active node's place in the next round", "[standby]") {
  Job job;
  // Round 0: node 2 arrives before node 1, so node 2 is active and node 1 stands by.
  const auto r = job.round_of(0, {node(0, 10), node(2, 12), node(1, 11)});
  CHECK(hosts_in(r[0].ranks) == std::vector<std::string>{"host0", "host2", "host1 standby"});
  CHECK(r[0].ranks.world_size() == 4);
  CHECK(r[0].group_rank == 0);
  CHECK(r[1].group_rank == 1);
  CHECK(r[2].group_rank == 2);
  CHECK(r[2].ranks.describe() == r[0].ranks.describe());

  // Round 1: node 2 is gone; the standby (node 1) is promoted and the world size stays 4.
  const auto n = job.round_of(1, {node(0, 10), node(1, 11)});
  CHECK(hosts_in(n[0].ranks) == std::vector<std::string>{"host0", "host1"});
  CHECK(n[0].ranks.world_size() == 4);
  CHECK(n[1].group_rank == 1);
  CHECK_FALSE(n[1].ranks.is_standby(1));
}

TEST_CASE("a returning active node keeps its place over a standby that arrives first", "[standby]") {
  Job job;
  const auto r = job.round_of(0, {node(0, 10), node(1, 11), node(2, 12)});
  CHECK(hosts_in(r[0].ranks) == std::vector<std::string>{"host0", "host1", "host2 standby"});
  // Round 1 (a restart after a worker failure): the standby arrives before the active node.
  const auto n = job.round_of(1, {node(0, 10), node(2, 12), node(1, 11)});
  CHECK(hosts_in(n[0].ranks) == std::vector<std::string>{"host0", "host1", "host2 standby"});
  CHECK(n[2].group_rank == 1);
  CHECK(n[1].group_rank == 2);
}

TEST_CASE("with fewer nodes than --active_nodes every node runs workers", "[standby]") {
  Job job;
  job.active_nodes = 3;
  const auto r = job.round_of(0, {node(0, 10), node(1, 11)});
  CHECK(hosts_in(r[0].ranks) == std::vector<std::string>{"host0", "host1"});
  CHECK(r[0].ranks.world_size() == 4);
}

TEST_CASE("a node with another --active_nodes fails the round", "[standby]") {
  Job job;
  auto h0 = job.join(node(0, 10), 0);
  job.arrived(0, 1);
  auto other = job.join(node(1, 11), 0, 0);
  REQUIRE(other.wait_for(kLong) == std::future_status::ready);
  CHECK_THROWS_WITH(other.get(), Catch::Contains("has --active_nodes=none but the other nodes have --active_nodes=2"));
  // The round is failed: the nodes that agree learn it as it closes.
  auto a2 = job.join(node(2, 12), 0);
  for (auto* f : {&h0, &a2}) {
    REQUIRE(f->wait_for(kLong) == std::future_status::ready);
    CHECK_THROWS_WITH(f->get(), Catch::Contains("--active_nodes=none"));
  }
}

}  // namespace
