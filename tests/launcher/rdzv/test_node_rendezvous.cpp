// join_round(): launchers meeting in one shared MemoryStore, each node a thread with its own
// PrefixStore("ddplaunch/<run_id>") job view. Covers the agreed RankMap whatever the arrival
// order, the conflicts that must fail every node (duplicate node_rank, different --nnodes,
// different --rdzv_id), the timeout naming the missing node, status lines, cancellation, a
// second round on the same store, the clearing of the rounds before, and an elastic node coming
// for a round whose keys went.
//
// Ordering between nodes is forced with store waits on the keys a node writes when it joins, not
// with sleeps; every thread is bounded by a short rendezvous timeout.
#include "launcher/rdzv/node_rendezvous.hpp"

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"
#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_round.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/rank_map.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using ddp::launcher::job_stores;
using ddp::launcher::JobStores;
using ddp::launcher::join_round;
using ddp::launcher::NodeInfo;
using ddp::launcher::RankMap;
using ddp::launcher::RendezvousOptions;
using ddp::launcher::UsageError;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Bound on anything that must happen (a key appearing, a thread finishing).
constexpr std::chrono::milliseconds kLong = 10s;

NodeInfo node(int rank, int nproc, const std::string& host = "") {
  NodeInfo n;
  n.node_rank = rank;
  n.nproc = nproc;
  n.host = host.empty() ? "host" + std::to_string(rank) : host;
  n.address = n.host + ".example";
  n.pid = 100 + rank;
  return n;
}

RendezvousOptions options(const std::string& run_id, int nnodes, std::chrono::milliseconds timeout, int round = 0) {
  RendezvousOptions o;
  o.nnodes = nnodes;
  o.round = round;
  o.run_id = run_id;
  o.timeout = timeout;
  o.endpoint = "memory:0";
  return o;
}

// One shared in-memory store; each joining node gets its own prefixed job view.
struct Cluster {
  std::shared_ptr<rdzv::MemoryStore> root = std::make_shared<rdzv::MemoryStore>();
  std::string secret;  // the job secret every node of this cluster uses ("" = none)

  // Starts join_round on a thread; the future holds the RankMap or the exception.
  std::future<RankMap> join(NodeInfo self, RendezvousOptions o) {
    return std::async(std::launch::async, [this, self, o] {
      const JobStores views = job_stores(root, o.run_id, secret);
      return join_round(*views.root, *views.job, self, o);
    });
  }

  // Blocks until `key` (un-prefixed) exists: the event that a node got that far.
  void wait_for_key(const std::string& key) { root->wait({key}, kLong); }
};

// The exception message of a failed join, or a marker that names what happened instead.
template <typename E>
std::string failure_of(std::future<RankMap>& f) {
  REQUIRE(f.wait_for(kLong) == std::future_status::ready);
  try {
    f.get();
    return "<no exception>";
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<other exception> ") + e.what();
  }
}

TEST_CASE("nodes joining in any order agree on one RankMap", "[node_rendezvous]") {
  Cluster c;
  const auto o = options("job", 3, kLong);
  // nproc 2, 1, 3 for node ranks 0, 1, 2; arrival order 2, 0, 1.
  auto f2 = c.join(node(2, 3), o);
  c.wait_for_key("ddplaunch/job/r0/node/2");
  auto f0 = c.join(node(0, 2), o);
  c.wait_for_key("ddplaunch/job/r0/node/0");
  auto f1 = c.join(node(1, 1), o);

  std::vector<RankMap> maps;
  for (auto* f : {&f0, &f1, &f2}) {
    REQUIRE(f->wait_for(kLong) == std::future_status::ready);
    maps.push_back(f->get());
  }
  for (const auto& m : maps) {
    CHECK(m.world_size() == 6);
    CHECK(m.num_nodes() == 3);
    CHECK(m.base_rank(0) == 0);
    CHECK(m.base_rank(1) == 2);
    CHECK(m.base_rank(2) == 3);
    CHECK(m.describe() == maps[0].describe());
    REQUIRE(m.nodes().size() == 3);
    CHECK(m.nodes()[2].host == "host2");
    CHECK(m.nodes()[2].address == "host2.example");
    CHECK(m.nodes()[2].pid == 102);
  }
}

TEST_CASE("a single node meets itself at once", "[node_rendezvous]") {
  Cluster c;
  auto f = c.join(node(0, 4), options("solo", 1, kLong));
  REQUIRE(f.wait_for(kLong) == std::future_status::ready);
  const RankMap m = f.get();
  CHECK(m.world_size() == 4);
  CHECK(m.base_rank(0) == 0);
}

TEST_CASE("a duplicate node_rank fails the duplicate and every other node", "[node_rendezvous]") {
  Cluster c;
  const auto o = options("dup", 3, 2s);
  auto first = c.join(node(0, 1, "alpha"), o);
  c.wait_for_key("ddplaunch/dup/r0/node/0");
  auto other = c.join(node(1, 1, "gamma"), o);
  c.wait_for_key("ddplaunch/dup/r0/node/1");
  NodeInfo twin = node(0, 1, "beta");
  twin.pid = 999;
  auto duplicate = c.join(twin, o);

  const std::string dup_msg = failure_of<UsageError>(duplicate);
  CHECK_THAT(dup_msg, Catch::Contains("--node_rank=0") && Catch::Contains("alpha") && Catch::Contains("beta"));
  CHECK_THAT(failure_of<UsageError>(first), Catch::Contains("--node_rank=0"));
  CHECK_THAT(failure_of<UsageError>(other), Catch::Contains("--node_rank=0"));
}

TEST_CASE("nodes with different --nnodes all fail", "[node_rendezvous]") {
  Cluster c;
  auto two = c.join(node(0, 1), options("nn", 2, 2s));
  c.wait_for_key("ddplaunch/nn/config/nnodes");
  auto three = c.join(node(1, 1), options("nn", 3, 2s));

  const std::string late = failure_of<UsageError>(three);
  CHECK_THAT(late, Catch::Contains("--nnodes=3") && Catch::Contains("--nnodes=2"));
  CHECK_THAT(failure_of<UsageError>(two), Catch::Contains("--nnodes"));
}

TEST_CASE("nodes with different run ids on one store all fail", "[node_rendezvous]") {
  Cluster c;
  auto alpha = c.join(node(0, 1), options("alpha", 2, 2s));
  c.wait_for_key("ddplaunch/alpha/r0/node/0");
  auto beta = c.join(node(1, 1), options("beta", 2, 2s));

  CHECK_THAT(failure_of<UsageError>(beta), Catch::Contains("--rdzv_id") && Catch::Contains("alpha"));
  CHECK_THAT(failure_of<UsageError>(alpha), Catch::Contains("--rdzv_id"));
}

TEST_CASE("a missing node times out naming its node_rank and status lines report progress", "[node_rendezvous]") {
  auto root = std::make_shared<rdzv::MemoryStore>();
  const JobStores views = job_stores(root, "lonely", "");
  std::vector<std::string> lines;
  auto o = options("lonely", 2, 1500ms);
  o.status = [&lines](const std::string& line) { lines.push_back(line); };

  const auto start = Clock::now();
  std::string message = "<no exception>";
  try {
    join_round(*views.root, *views.job, node(0, 1), o);
  } catch (const rdzv::TimeoutError& e) {
    message = e.what();
  }
  const auto elapsed = Clock::now() - start;
  CHECK_THAT(message, Catch::Contains("node_rank 1"));
  CHECK_THAT(message, Catch::StartsWith("timed out after 1.5 s "));
  CHECK(elapsed >= 1400ms);
  CHECK(elapsed < 3s);
  REQUIRE_FALSE(lines.empty());
  CHECK_THAT(lines.front(), Catch::Contains("waiting for nodes: 1/2 joined"));
}

TEST_CASE("setting the cancelled flag stops a waiting join promptly", "[node_rendezvous]") {
  Cluster c;
  std::atomic<bool> cancelled{false};
  auto o = options("cancel", 2, 60s);
  o.cancelled = &cancelled;
  auto f = c.join(node(0, 1), o);
  c.wait_for_key("ddplaunch/cancel/r0/node/0");

  const auto start = Clock::now();
  cancelled = true;
  REQUIRE(f.wait_for(kLong) == std::future_status::ready);
  CHECK(Clock::now() - start < 2s);
  CHECK_THAT(failure_of<ddp::Error>(f), Catch::Contains("interrupted"));
}

TEST_CASE("round 1 after round 0 works on the same store", "[node_rendezvous]") {
  Cluster c;
  {
    auto f0 = c.join(node(0, 2), options("again", 2, kLong, 0));
    auto f1 = c.join(node(1, 2), options("again", 2, kLong, 0));
    REQUIRE(f0.wait_for(kLong) == std::future_status::ready);
    REQUIRE(f1.wait_for(kLong) == std::future_status::ready);
    CHECK(f0.get().world_size() == 4);
    CHECK(f1.get().base_rank(1) == 2);
  }
  // After a restart node 0 comes back with 3 workers; the new round sees the new records.
  auto f1 = c.join(node(1, 2), options("again", 2, kLong, 1));
  c.wait_for_key("ddplaunch/again/r1/node/1");
  auto f0 = c.join(node(0, 3), options("again", 2, kLong, 1));
  REQUIRE(f0.wait_for(kLong) == std::future_status::ready);
  REQUIRE(f1.wait_for(kLong) == std::future_status::ready);
  const RankMap m0 = f0.get();
  const RankMap m1 = f1.get();
  CHECK(m0.world_size() == 5);
  CHECK(m0.base_rank(1) == 3);
  CHECK(m1.describe() == m0.describe());
}

}  // namespace

TEST_CASE("with a job secret, a stranger's node record is ignored and the real node takes its rank",
          "[node_rendezvous]") {
  Cluster c;
  c.secret = "0123456789abcdef-job-secret";
  const std::string space = ddp::launcher::store_namespace(c.secret);
  // A stranger who learnt the key names squats node 1's slot and pre-sets the round verdict.
  c.root->set(space + "/job/r0/node/1", "1\n1\nevil\nevil\n66\n");
  auto a = c.join(node(0, 2), options("job", 2, 5s));
  auto b = c.join(node(1, 3), options("job", 2, 5s));
  const RankMap ra = a.get();
  const RankMap rb = b.get();
  REQUIRE(ra.num_nodes() == 2);
  CHECK(ra.nodes()[1].host == rb.nodes()[1].host);
  CHECK(ra.nodes()[1].host != "evil");
  CHECK(ra.world_size() == 5);
}

TEST_CASE(
    "with a job secret, the keys live in a namespace derived from it, a node with another secret never meets "
    "the job",
    "[node_rendezvous]") {
  Cluster c;
  c.secret = "first-secret-0123456789";
  auto a = c.join(node(0, 1), options("job", 2, 1500ms));
  c.wait_for_key(ddp::launcher::store_namespace(c.secret) + "/job/r0/node/0");
  CHECK_FALSE(c.root->check({"ddplaunch/job/r0/node/0"}));  // not where a stranger would look

  const JobStores other = job_stores(c.root, "job", "second-secret-0123456789");
  CHECK_THROWS_AS(join_round(*other.root, *other.job, node(1, 1), options("job", 2, 1500ms)), rdzv::TimeoutError);
  CHECK_THROWS_AS(a.get(), rdzv::TimeoutError);
}

namespace {

// A clear_old_keys that records, when it runs, whether `done_key` (un-prefixed) was there
// already and whether `other` had returned within a moment (it must not, before the clearing).
struct ClearingProbe {
  std::shared_ptr<rdzv::MemoryStore> root;
  std::string done_key;
  std::future<RankMap>* other = nullptr;
  std::atomic<int> calls{0};
  std::atomic<int> first_round_kept{-1};
  std::atomic<bool> done_before{false};
  std::atomic<bool> other_returned_before{false};

  std::function<void(int)> hook() {
    return [this](int kept) {
      ++calls;
      first_round_kept = kept;
      done_before = root->check({done_key});
      // Node 1 is blocked until the clearing ends: it must not return meanwhile (a bounded wait
      // for something that must not happen; no event says "it would have returned by now").
      if (other) other_returned_before = other->wait_for(200ms) == std::future_status::ready;
    };
  }
};

}  // namespace

TEST_CASE("in a static round after the first, node 0 clears the workers' keys before the others go on",
          "[node_rendezvous]") {
  Cluster c;
  ClearingProbe probe{c.root, "ddplaunch/clear/r1/cleared"};
  auto o0 = options("clear", 2, kLong, 1);
  o0.clear_old_keys = probe.hook();
  auto f1 = c.join(node(1, 1), options("clear", 2, kLong, 1));
  probe.other = &f1;
  c.wait_for_key("ddplaunch/clear/r1/node/1");
  auto f0 = c.join(node(0, 1), o0);
  REQUIRE(f0.wait_for(kLong) == std::future_status::ready);
  REQUIRE(f1.wait_for(kLong) == std::future_status::ready);
  CHECK(f1.get().describe() == f0.get().describe());
  CHECK(probe.calls == 1);
  CHECK(probe.first_round_kept == 0);  // round 1 keeps round 0's keys: its nodes still read them
  CHECK_FALSE(probe.done_before);
  CHECK_FALSE(probe.other_returned_before);
  CHECK(c.root->check({"ddplaunch/clear/r1/cleared"}));
  CHECK(c.root->get("ddplaunch/clear/first_round_kept", kLong) == "0");
}

TEST_CASE("round 0 clears nothing, and a clearing that fails is said and the round goes on", "[node_rendezvous]") {
  Cluster c;
  int calls = 0;
  auto o = options("first", 1, kLong, 0);
  o.clear_old_keys = [&calls](int) { ++calls; };
  CHECK(c.join(node(0, 1), o).get().world_size() == 1);
  CHECK(calls == 0);
  CHECK_FALSE(c.root->check({"ddplaunch/first/r0/cleared"}));

  auto again = options("first", 1, kLong, 1);
  again.clear_old_keys = [](int) { throw rdzv::ConnectionError("store gone"); };
  CHECK(c.join(node(0, 1), again).get().world_size() == 1);
}

TEST_CASE("in an elastic round after the first, the host clears the workers' keys before it closes the round",
          "[node_rendezvous]") {
  Cluster c;
  ClearingProbe probe{c.root, "ddplaunch/el/r1/closed"};
  const auto elastic = [&](int rank, bool with_hook) {
    ddp::launcher::ElasticOptions e;
    e.base = options("el", 2, kLong, 1);
    e.min_nodes = 2;
    e.is_host = rank == 0;
    if (with_hook) e.base.clear_old_keys = probe.hook();
    return std::async(std::launch::async, [&c, rank, e] {
      const JobStores views = job_stores(c.root, "el", "");
      return ddp::launcher::join_elastic_round(*views.root, *views.job, node(rank, 1), e);
    });
  };
  auto f1 = elastic(1, false);
  c.wait_for_key("ddplaunch/el/r1/arrived/1");
  auto f0 = elastic(0, true);
  REQUIRE(f0.wait_for(kLong) == std::future_status::ready);
  REQUIRE(f1.wait_for(kLong) == std::future_status::ready);
  CHECK(f0.get().group_rank == 0);
  CHECK(f1.get().group_rank == 1);
  CHECK(probe.calls == 1);
  CHECK_FALSE(probe.done_before);
}

TEST_CASE("an elastic node that comes for a round whose keys went joins the first round kept", "[node_rendezvous]") {
  // The keys of rounds before 5 went (round_keys.hpp) while this node was still stopping its
  // workers of round 1: it must not wait in round 2, where no one comes, until --rdzv_timeout.
  Cluster c;
  const JobStores views = job_stores(c.root, "late", "");
  ddp::launcher::LaunchConfig config;
  config.min_nodes = 1;
  config.max_nodes = 2;
  config.run_id = "late";
  config.rdzv_timeout = kLong;
  config.last_call_timeout = 10ms;  // the host closes with itself alone
  ddp::launcher::EffectiveConfig eff;
  eff.host = "host0";
  const auto join = [&](int round) {
    return ddp::launcher::join_job_round(*views.root, *views.job, config, eff, round, nullptr,
                                         [](const std::string&) {});
  };
  views.job->set("first_round_kept", "5");
  const ddp::launcher::JoinedRound skipped = join(2);
  CHECK(skipped.round == 5);
  CHECK(skipped.late_rounds == 3);  // rounds 2, 3 and 4 count as restarts, as for a late arrival
  CHECK_FALSE(c.root->check({"ddplaunch/late/r2/joined"}));
  CHECK(join(6).round == 6);  // a round kept: joined as asked
  views.job->set("first_round_kept", "not a number");
  CHECK(join(7).round == 7);
}
