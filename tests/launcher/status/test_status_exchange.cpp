// The status exchange of the job's page, two launchers on one in-memory store: node 1 publishes
// nothing while nobody reads node 0's status; once node 0's is read, node 0's document carries
// node 1's (and node 1's names node 0's page); node 1's last status is published when it stops.
#include "launcher/status/status_exchange.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/status/status_json.hpp"

namespace {

using namespace ddp::launcher;
using nlohmann::json;
using namespace std::chrono_literals;

RankMap two_nodes() {
  NodeInfo a;
  a.node_rank = 0;
  a.nproc = 1;
  a.host = "alpha";
  NodeInfo b;
  b.node_rank = 1;
  b.nproc = 1;
  b.host = "beta";
  return RankMap({a, b});
}

void join(StatusBoard& board, StatusExchange& exchange, int group_rank) {
  RoundView view;
  view.group_rank = group_rank;
  view.ranks = two_nodes();
  board.on_event(RoundJoined{view});
  exchange.on_event(RoundJoined{view});
}

// Polls `pred` (the exchange runs on its own thread, on a 20 ms cadence here) for up to 5 s.
template <class Pred>
bool within_5s(Pred pred) {
  for (int i = 0; i < 500; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

TEST_CASE("node 0's status gathers node 1's through the store only once it is read") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  StatusExchangeOptions o{[store] { return store; }, 20ms};
  StatusBoard board0;
  StatusBoard board1;
  board0.identify(StatusIdentity{"job", "alpha", 0, 0}, {});
  board1.identify(StatusIdentity{"job", "beta", 1, 0}, {});
  StatusExchange node0(board0, o);
  StatusExchange node1(board1, o);
  node0.set_page_url("http://alpha:29600/");
  join(board0, node0, 0);
  join(board1, node1, 1);
  std::this_thread::sleep_for(200ms);  // ten turns of each: nobody reads node 0's status
  CHECK_FALSE(store->check({node_status_key(1)}));
  CHECK_FALSE(store->check({kWantedKey}));

  json doc = json::parse(node0.status());  // read: node 0 asks, node 1 publishes, node 0 reads
  REQUIRE(doc["other_nodes"].size() == 1);
  CHECK(within_5s([&] { return !json::parse(node0.status())["other_nodes"][0]["status"].is_null(); }));
  doc = json::parse(node0.status());
  CHECK(doc["other_nodes"][0]["group_rank"] == 1);
  CHECK(doc["other_nodes"][0]["status"]["node"]["host"] == "beta");
  CHECK(within_5s([&] { return json::parse(node1.status())["job_page"] == "http://alpha:29600/"; }));
  CHECK_FALSE(json::parse(node1.status()).contains("other_nodes"));

  // Its end: the last document is published when it stops, watched or not.
  store->delete_key(node_status_key(1));
  node1.stop();
  CHECK(store->check({node_status_key(1)}));
}

}  // namespace
