// RankMap (prefix sums over nproc in node_rank order, independent of arrival order, describe())
// and the NodeInfo record kept in the store (serialize/parse round trip, garbage rejected).
#include "launcher/rdzv/rank_map.hpp"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace {

using ddp::launcher::NodeInfo;
using ddp::launcher::RankMap;
using ddp::launcher::UsageError;

NodeInfo node(int rank, int nproc) {
  NodeInfo n;
  n.node_rank = rank;
  n.nproc = nproc;
  n.address = "10.0.0." + std::to_string(rank + 1);
  n.host = "host" + std::to_string(rank);
  n.pid = 1000 + rank;
  return n;
}

TEST_CASE("RankMap takes prefix sums in node_rank order whatever the input order", "[rank_map]") {
  const RankMap in_order({node(0, 2), node(1, 1), node(2, 3)});
  const RankMap scrambled({node(2, 3), node(0, 2), node(1, 1)});
  for (const RankMap* m : {&in_order, &scrambled}) {
    CHECK(m->world_size() == 6);
    CHECK(m->num_nodes() == 3);
    CHECK(m->base_rank(0) == 0);
    CHECK(m->base_rank(1) == 2);
    CHECK(m->base_rank(2) == 3);
    REQUIRE(m->nodes().size() == 3);
    CHECK(m->nodes()[0].node_rank == 0);
    CHECK(m->nodes()[1].node_rank == 1);
    CHECK(m->nodes()[2].node_rank == 2);
  }
  CHECK(in_order.describe() == scrambled.describe());
}

TEST_CASE("RankMap handles heterogeneous nodes (3 + 1 workers)", "[rank_map]") {
  const RankMap m({node(1, 1), node(0, 3)});
  CHECK(m.base_rank(0) == 0);
  CHECK(m.base_rank(1) == 3);
  CHECK(m.world_size() == 4);
  CHECK(m.num_nodes() == 2);
}

TEST_CASE("RankMap::describe names every node and its rank range", "[rank_map]") {
  const RankMap m({node(0, 3), node(1, 1)});
  const std::string text = m.describe();
  CHECK_THAT(text, Catch::Contains("node 0") && Catch::Contains("host0") && Catch::Contains("10.0.0.1"));
  CHECK_THAT(text, Catch::Contains("node 1") && Catch::Contains("host1") && Catch::Contains("10.0.0.2"));
  CHECK_THAT(text, Catch::Contains("ranks 0-2"));
  CHECK_THAT(text, Catch::Contains("ranks 3"));
  CHECK_THAT(text, Catch::Contains("world size 4"));
}

TEST_CASE("RankMap::describe names a node's address once when it is its host name", "[rank_map]") {
  NodeInfo same = node(0, 2);
  same.address = same.host;
  CHECK_THAT(RankMap({same}).describe(), Catch::Contains("node 0 (" + same.host + "): ranks 0-1"));
}

TEST_CASE("NodeInfo survives serialize and parse", "[rank_map]") {
  NodeInfo n;
  n.node_rank = 7;
  n.nproc = 8;
  n.address = "fe80::1";
  n.host = "gpu-node-07.cluster";
  n.pid = 424242;
  const NodeInfo back = NodeInfo::parse(n.serialize());
  CHECK(back.node_rank == 7);
  CHECK(back.nproc == 8);
  CHECK(back.address == "fe80::1");
  CHECK(back.host == "gpu-node-07.cluster");
  CHECK(back.pid == 424242);

  SECTION("empty address and host") {
    NodeInfo e;
    const NodeInfo b = NodeInfo::parse(e.serialize());
    CHECK(b.node_rank == 0);
    CHECK(b.nproc == 1);
    CHECK(b.address.empty());
    CHECK(b.host.empty());
    CHECK(b.pid == 0);
  }
}

TEST_CASE("NodeInfo::parse rejects garbage with UsageError", "[rank_map]") {
  CHECK_THROWS_AS(NodeInfo::parse(""), UsageError);
  CHECK_THROWS_AS(NodeInfo::parse("garbage"), UsageError);
  CHECK_THROWS_AS(NodeInfo::parse("1\n2\naddr"), UsageError);
  CHECK_THROWS_WITH(NodeInfo::parse("garbage"), Catch::Contains("malformed node record"));
}

}  // namespace
