// The ordering rule between what stopped a round and its ranks' failures (root_cause_of.hpp): a
// failure of no rank's that began before a rank failed is the root cause, a lost node from when it
// went silent; and what a node prints and records when it finds that another stopped answering
// first (failure_summary.hpp: lost_node_stop, end_of_round_summary).
#include "launcher/report/root_cause_of.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "launcher/report/failure_summary.hpp"

namespace {

using ddp::launcher::began_at;
using ddp::launcher::began_before;
using ddp::launcher::NodeLoss;
using ddp::launcher::RootCause;
using Time = std::chrono::system_clock::time_point;
using std::chrono::seconds;

const Time kT0{seconds(1800000000)};

RootCause lost_node(Time silent_since, Time found) {
  RootCause c;
  c.kind = RootCause::Kind::NodeLost;
  c.node = 0;
  c.lost_node = 1;
  c.silent_since = silent_since;
  c.time = found;
  return c;
}

// A rank of node 0 that exited 1 (no error file: the time the report saw it exit counts, now).
ddp::launcher::WorkerResult exited_1(int rank) {
  ddp::launcher::WorkerResult w;
  w.rank = rank;
  w.local_rank = rank;
  w.pid = 100 + rank;
  w.exit_code = 1;
  w.stderr_tail = {"warning at start", "RuntimeError: Connection closed by peer"};
  return w;
}

}  // namespace

TEST_CASE("ordering: a lost node began when it went silent, not when it was found", "[root_cause]") {
  const RootCause lost = lost_node(kT0, kT0 + seconds(10));
  CHECK(began_at(lost) == kT0);
  // A rank that failed after the silence began, even before the node was found lost, failed of it.
  CHECK(began_before(lost, kT0 + seconds(5)));
  CHECK(began_before(lost, kT0 + seconds(30)));
  // One that failed before the node went silent did not.
  CHECK_FALSE(began_before(lost, kT0 - seconds(1)));
  CHECK_FALSE(began_before(lost, kT0));
  // Silence not known (etcd's "never showed up", the store lost): the time it was found.
  RootCause unknown = lost_node(Time{}, kT0 + seconds(10));
  CHECK(began_at(unknown) == kT0 + seconds(10));
  CHECK_FALSE(began_before(unknown, kT0 + seconds(5)));
  CHECK(began_before(unknown, kT0 + seconds(11)));
}

TEST_CASE("ordering: other stops of no rank's come before later failures, but a worker's or a reported one never",
          "[root_cause]") {
  for (const auto kind : {RootCause::Kind::Hang, RootCause::Kind::Interrupted, RootCause::Kind::NotStarted,
                          RootCause::Kind::StoreRecord}) {
    RootCause stop;
    stop.kind = kind;
    stop.time = kT0;
    CHECK(began_before(stop, kT0 + seconds(1)));
    CHECK_FALSE(began_before(stop, kT0 - seconds(1)));
  }
  for (const auto kind : {RootCause::Kind::Worker, RootCause::Kind::Reported}) {
    RootCause stop;
    stop.kind = kind;
    stop.time = kT0;
    CHECK_FALSE(began_before(stop, kT0 + seconds(1)));
  }
}

TEST_CASE("a lost node's stop names the node that stopped answering, since when, in words and fields", "[root_cause]") {
  NodeLoss loss{"lost node 1: no heartbeat for 10 s", false, 1, kT0};
  const auto stop = ddp::launcher::lost_node_stop(loss, 0, "gpu0", {"gpu0", "gpu1"});
  CHECK(stop.root.kind == RootCause::Kind::NodeLost);
  CHECK(stop.root.node == 0);
  CHECK(stop.root.host == "gpu0");
  CHECK(stop.root.lost_node == 1);
  CHECK(stop.root.lost_host == "gpu1");
  CHECK(stop.root.silent_since == kT0);
  CHECK(stop.root.reason == "lost node 1: no heartbeat for 10 s");
  const std::string first = "ddplaunch: lost node 1: no heartbeat for 10 s; stopped the workers on this node\n";
  REQUIRE(stop.summary.rfind(first, 0) == 0);
  const std::string second = stop.summary.substr(first.size());
  CHECK(second.rfind("ddplaunch: node 1 (gpu1) stopped answering first, at ", 0) == 0);
  CHECK(second.find(" when this node stopped its workers); failures after that are its consequences") !=
        std::string::npos);
  // A loss that names no node (the store's) keeps its one line.
  const auto store = ddp::launcher::lost_node_stop(NodeLoss{"lost the store on node 0 (x)", true}, 1, "gpu1", {});
  CHECK(store.summary == "ddplaunch: lost the store on node 0 (x); stopped the workers on this node");
  CHECK(store.root.lost_node == -1);
  CHECK(store.root.lost_host.empty());
}

TEST_CASE("a rank that failed after a peer went silent is not the root cause, but one that failed before is",
          "[root_cause]") {
  using ddp::launcher::Outcome;
  using ddp::launcher::RankState;
  using ddp::launcher::RoundEnd;
  using ddp::launcher::RoundReport;
  ddp::launcher::FailureContext here;
  here.program = "t.py";
  here.host = "gpu0";
  here.node_rank = 0;
  const std::vector<std::string> hosts{"gpu0", "gpu1"};
  // Rank 1's connection to node 1 closed now, long after node 1 went silent (an hour ago).
  const Time silent = std::chrono::system_clock::now() - std::chrono::hours(1);
  const auto stop =
      ddp::launcher::lost_node_stop(NodeLoss{"lost node 1: no heartbeat for 10 s", false, 1, silent}, 0, "gpu0", hosts);
  const Outcome cause = Outcome::failure(1, stop.summary, 0, stop.root);
  RoundReport report;
  report.add(exited_1(1), RankState::Failed);
  const auto end = end_of_round_summary(report, here, RoundEnd{cause, {}, {}, hosts});
  REQUIRE(end.root);
  CHECK(end.root->kind == RootCause::Kind::NodeLost);
  CHECK(end.root->lost_node == 1);
  CHECK(end.root_text == stop.summary);
  CHECK(end.text == stop.summary +
                        "\nOn this node (node 0 on gpu0):\nOther failures (by what they say):\n"
                        "  rank 1: exitcode 1: RuntimeError: Connection closed by peer\n");
  // Another node's rank that failed after the silence too (its record came first): still node 1.
  const ddp::launcher::NodeFailure later{1, silent + seconds(30), "node 1's rank", std::nullopt};
  const auto with_other = end_of_round_summary(report, here, RoundEnd{cause, later, {}, hosts});
  CHECK(with_other.root->kind == RootCause::Kind::NodeLost);
  // But a failure before node 1 went silent stays the root cause: here, another node's record.
  const ddp::launcher::NodeFailure earlier{1, silent - seconds(30), "node 1's rank failed first", std::nullopt};
  const auto before = end_of_round_summary(report, here, RoundEnd{cause, earlier, {}, hosts});
  CHECK(before.root->kind == RootCause::Kind::Reported);
  CHECK(before.root->node == 1);
  CHECK(before.text.find("node 1's rank failed first") != std::string::npos);
  // And a silence that began after this node's rank failed does not take its place.
  const Time future = std::chrono::system_clock::now() + std::chrono::hours(1);
  const auto late =
      ddp::launcher::lost_node_stop(NodeLoss{"lost node 1: no heartbeat for 10 s", false, 1, future}, 0, "gpu0", hosts);
  const auto mine =
      end_of_round_summary(report, here, RoundEnd{Outcome::failure(1, late.summary, 0, late.root), {}, {}, hosts});
  CHECK(mine.root->kind == RootCause::Kind::Worker);
  CHECK(mine.root->rank == 1);
}

TEST_CASE("a rank that timed out in a collective carries what the Flight Recorders showed, others none",
          "[root_cause]") {
  ddp::launcher::HungCollective shown;
  shown.finding = "hang";
  shown.seq = 4;
  shown.op = "gloo:all_reduce";
  shown.missing = {1};
  ddp::launcher::RoundReport report;
  ddp::launcher::WorkerResult w = exited_1(0);
  w.stderr_tail = {"RuntimeError: [../gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 5000ms for recv"};
  report.add(w, ddp::launcher::RankState::Failed);
  report.set_collectives("What the ranks' Flight Recorders show (a hang):\n...", shown);
  const RootCause timed_out = ddp::launcher::worker_root_cause(report, 0, "h0");
  CHECK(timed_out.collective_timeout);
  REQUIRE(timed_out.collective);
  CHECK(timed_out.collective->seq == 4);
  CHECK(timed_out.collective->missing == std::vector<int>{1});
  // It travels with the record.
  const auto decoded = ddp::launcher::decode_root_cause(ddp::launcher::encode_root_cause(timed_out));
  REQUIRE(decoded);
  REQUIRE(decoded->collective);
  CHECK(decoded->collective->op == "gloo:all_reduce");
  // A rank that failed otherwise: no collective, whatever the report holds.
  ddp::launcher::RoundReport other;
  other.add(exited_1(0), ddp::launcher::RankState::Failed);
  other.set_collectives("...", shown);
  CHECK_FALSE(ddp::launcher::worker_root_cause(other, 0, "h0").collective);
}
