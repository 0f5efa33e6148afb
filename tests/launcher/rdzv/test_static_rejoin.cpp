// A static job's node coming back (static_rejoin.hpp), over one shared MemoryStore with each node a
// thread: the current-round record, a formed round that keeps its members when a launcher comes
// again on one of their ranks (RankHeld, the round not failed), the wait for the round's end
// (a failure: go on; a success: stop; none: the holder lives, stop), and join_job_round taking a
// fresh launcher (round 0 in its head) to the round the job is in, counting those rounds as
// restarts.
#include "launcher/rdzv/static_rejoin.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "ddplaunch/rendezvous/memory_store.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_round.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "tests/launcher/rdzv/test_nodes.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

namespace rdzv = ddp::rendezvous;
using namespace ddp::launcher;
using namespace std::chrono_literals;

constexpr std::chrono::milliseconds kLong = 10s;

// Node `rank` with 1 worker on pod<rank> (a Kubernetes pod); `pid` tells launchers apart.
NodeInfo node(int rank, int pid) {
  return ddp::testing::test_node(rank, pid, 1, "pod");
}

RendezvousOptions options(int round) {
  RendezvousOptions o;
  o.nnodes = 2;
  o.round = round;
  o.run_id = "job";
  o.timeout = kLong;
  o.endpoint = "memory:0";
  return o;
}

struct Job {
  std::shared_ptr<rdzv::MemoryStore> root = std::make_shared<rdzv::MemoryStore>();
  JobStores views = job_stores(root, "job", "");

  // A node of the survivors' kind: joins `round` as the agent does (the round recorded first).
  std::future<RankMap> join(NodeInfo self, int round) {
    return std::async(std::launch::async, [this, self, round] {
      const JobStores mine = job_stores(root, "job", "");
      record_current_round(*mine.job, round);
      return join_round(*mine.root, *mine.job, self, options(round));
    });
  }

  // A launcher started again on node rank 1 (this process's pid: not the old record's).
  std::future<JoinedRound> come_back() {
    return std::async(std::launch::async, [this] {
      const JobStores mine = job_stores(root, "job", "");
      LaunchConfig c;
      c.min_nodes = c.max_nodes = 2;
      c.node_rank = 1;
      c.run_id = "job";
      c.rdzv_timeout = kLong;
      c.heartbeat_timeout = 2s;
      EffectiveConfig eff;
      eff.host = "pod1";
      return join_job_round(*mine.root, *mine.job, c, eff, 0, nullptr, [](const std::string&) {});
    });
  }

  // Round 0 formed by node 0 and the first launcher of node 1 (pid 101).
  void form_round_0() {
    auto a = join(node(0, 100), 0);
    auto b = join(node(1, 101), 0);
    REQUIRE(a.get().num_nodes() == 2);
    REQUIRE(b.get().num_nodes() == 2);
  }
};

}  // namespace

TEST_CASE("the current round is 0 for a new job and what the nodes last recorded after", "[static_rejoin]") {
  Job job;
  CHECK(current_round(*job.views.job) == 0);
  record_current_round(*job.views.job, 3);
  CHECK(current_round(*job.views.job) == 3);
  job.views.job->set("current_round", "not a number");
  CHECK(current_round(*job.views.job) == 0);
}

TEST_CASE("a launcher on a formed round's node rank gets RankHeld, and the round stays formed", "[static_rejoin]") {
  Job job;
  job.form_round_0();
  try {
    join_round(*job.views.root, *job.views.job, node(1, 202), options(0));
    FAIL("no RankHeld");
  } catch (const RankHeld& held) {
    CHECK_THAT(held.what(), Catch::Contains("round 0 formed with --node_rank=1 on pod1 (pid 101)"));
    CHECK(NodeInfo::parse(held.holder()).pid == 101);
  }
  CHECK(job.views.job->get("r0/ready", 1s) == "ok");
}

TEST_CASE("before a round forms, a second node on one rank still fails the round", "[static_rejoin]") {
  Job job;
  auto first = job.join(node(1, 101), 0);
  job.root->wait({"ddplaunch/job/r0/node/1"}, kLong);
  const std::string error =
      ddp::testing::usage_error_of([&] { join_round(*job.views.root, *job.views.job, node(1, 202), options(0)); });
  CHECK_THAT(error, Catch::Contains("--node_rank=1 is used twice"));
  CHECK_THROWS_AS(first.get(), UsageError);
}

TEST_CASE("after RankHeld, the round's end decides: a failure goes on, a success or none stops", "[static_rejoin]") {
  Job job;
  const RankHeld held("round 0 formed", node(1, 101).serialize());
  rdzv::Store& store = *job.views.job;
  SECTION("no outcome within the bound: the holder is alive, two nodes claim one rank") {
    const std::string error = ddp::testing::usage_error_of([&] { await_round_end(store, 0, 1, held, 100ms); });
    CHECK_THAT(error, Catch::Contains("--node_rank=1 is held in round 0 by pod1 (pid 101), which is still alive"));
  }
  SECTION("a failure (the others lost the holder): return, to join the next round") {
    store.set("r0/outcome", Outcome::failure(1, "lost node 1: no heartbeat for 2 s", 0).encode());
    CHECK_NOTHROW(await_round_end(store, 0, 1, held, 100ms));
  }
  SECTION("a success: the job is over") {
    store.set("r0/outcome", Outcome::success(0).encode());
    const std::string error = ddp::testing::usage_error_of([&] { await_round_end(store, 0, 1, held, 100ms); });
    CHECK_THAT(error, Catch::Contains("ended in round 0 with success"));
  }
  CHECK(rank_holder_bound(2s) == 5s);
}

TEST_CASE("a launcher come back while its old record holds round 0 joins round 1 once the others lost it",
          "[static_rejoin]") {
  Job job;
  job.form_round_0();
  auto back = job.come_back();
  // It waits on round 0's outcome: nothing of round 1 exists yet.
  CHECK(back.wait_for(200ms) == std::future_status::timeout);
  // The survivor loses the old node 1, publishes it, and goes to round 1.
  job.views.job->set("r0/outcome", Outcome::failure(1, "lost node 1: no heartbeat for 2 s", 0).encode());
  auto survivor = job.join(node(0, 100), 1);
  const JoinedRound joined = back.get();
  CHECK(joined.round == 1);
  CHECK(joined.late_rounds == 1);  // its restart count, as the survivor's
  CHECK(joined.group_rank == 1);
  CHECK(survivor.get().nodes()[1].pid == joined.ranks.nodes()[1].pid);
}

TEST_CASE("a launcher come back after the others moved on joins the round they wait in", "[static_rejoin]") {
  Job job;
  job.form_round_0();
  job.views.job->set("r0/outcome", Outcome::failure(1, "lost node 1", 0).encode());
  auto survivor = job.join(node(0, 100), 1);
  job.root->wait({"ddplaunch/job/r1/node/0"}, kLong);
  const JoinedRound joined = job.come_back().get();
  CHECK(joined.round == 1);
  CHECK(joined.late_rounds == 1);
  CHECK(survivor.get().num_nodes() == 2);
}
