// The status board and its JSON: a round joined, workers started and exited, the round stopping,
// a hang; the node's state as the ranks refine it; collective progress from a real table; no
// secret in the document.
#include "launcher/status/status_board.hpp"

#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "launcher/status/status_endpoint.hpp"
#include "launcher/status/status_json.hpp"

namespace {

using namespace ddp::launcher;
using nlohmann::json;

RankMap two_nodes() {
  NodeInfo a;
  a.node_rank = 0;
  a.nproc = 2;
  a.host = "alpha";
  NodeInfo b;
  b.node_rank = 1;
  b.nproc = 2;
  b.host = "beta";
  return RankMap({a, b});
}

// Round `round` joined as group rank `group_rank`, told the way the agent tells it: an event.
void join(StatusBoard& board, const RankMap& ranks, int group_rank, int restarts, int round = 3) {
  RoundView view;
  view.round = round;
  view.group_rank = group_rank;
  view.restarts = restarts;
  view.ranks = ranks;
  board.on_event(RoundJoined{view});
}

std::vector<WorkerSpec> specs(int first_rank) {
  std::vector<WorkerSpec> out(2);
  for (int i = 0; i < 2; ++i) {
    out[static_cast<std::size_t>(i)].local_rank = i;
    out[static_cast<std::size_t>(i)].rank = first_rank + i;
  }
  return out;
}

json doc(const StatusBoard& board) {
  return json::parse(status_json(board.snapshot()));
}

}  // namespace

TEST_CASE("a fresh board says who it is and that it is starting") {
  StatusBoard board;
  LaunchConfig c;
  c.run_id = "job7";
  c.node_rank = 1;
  c.max_restarts = 3;
  board.identify(status_identity(c, "beta"), {});
  const json j = doc(board);
  CHECK(j["job_id"] == "job7");
  CHECK(j["node"]["host"] == "beta");
  CHECK(j["node"]["node_rank"] == 1);
  CHECK(j["node"]["group_rank"].is_null());
  CHECK(j["node"]["state"] == "starting");
  CHECK(j["node"]["launcher_pid"] == static_cast<int>(::getpid()));
  CHECK(j["restarts"] == json({{"count", 0}, {"max", 3}, {"causes", json::array()}}));
  CHECK(j["ended"].is_null());
  CHECK(j["ranks"].empty());
  CHECK(j["hang"]["state"] == "none");
  CHECK(j["ddplaunch_version"].is_string());
  CHECK(j["uptime_s"].get<double>() >= 0);
}

TEST_CASE("a round: joined, started, one rank exits, the round stops, the rest are stopped") {
  StatusBoard board;
  board.joining(3, 1);
  CHECK(doc(board)["node"]["state"] == "joining");
  join(board, two_nodes(), 1, 1);
  board.started(specs(2), {101, 102});
  json j = doc(board);
  CHECK(j["round"] == 3);
  CHECK(j["world_size"] == 4);
  CHECK(j["node"]["group_rank"] == 1);
  CHECK(j["node"]["role"] == "active");
  CHECK(j["node"]["state"] == "running");
  REQUIRE(j["nodes"].size() == 2);
  CHECK(j["nodes"][1] ==
        json({{"group_rank", 1}, {"host", "beta"}, {"first_rank", 2}, {"nproc", 2}, {"role", "active"}}));
  REQUIRE(j["ranks"].size() == 2);
  CHECK(j["ranks"][0]["rank"] == 2);
  CHECK(j["ranks"][0]["pid"] == 101);
  CHECK(j["ranks"][0]["state"] == "running");
  CHECK(j["ranks"][0]["last_progress"].is_null());

  WorkerResult w;
  w.pid = 102;
  w.rank = 3;
  w.local_rank = 1;
  w.exit_code = 3;
  board.exited(w);
  board.stopping(3, 1);
  j = doc(board);
  CHECK(j["ranks"][1]["state"] == "exited");
  CHECK(j["ranks"][1]["exit_code"] == 3);
  CHECK(j["ranks"][1]["signal"].is_null());
  CHECK(j["ranks"][0]["state"] == "stopping");
  CHECK(j["node"]["state"] == "stopping");
  CHECK(j["stopping"] == json({{"code", 3}, {"origin_node", 1}}));

  w.pid = 101;
  w.exit_code = 128 + 15;
  w.term_signal = 15;
  board.exited(w);
  j = doc(board);
  CHECK(j["ranks"][0]["signal"] == 15);
  CHECK(j["node"]["state"] == "stopped");

  board.joining(4, 2);
  j = doc(board);
  CHECK(j["ranks"].empty());
  CHECK(j["restarts"]["count"] == 2);
  CHECK(j["stopping"].is_null());
}

TEST_CASE("every local rank exited 0: the node has succeeded and waits for the job") {
  StatusBoard board;
  join(board, two_nodes(), 0, 0);
  board.started(specs(0), {7, 8});
  for (int pid : {7, 8}) {
    WorkerResult w;
    w.pid = pid;
    board.exited(w);
  }
  CHECK(doc(board)["node"]["state"] == "succeeded");
}

TEST_CASE("a standby node of the round (--active_nodes) says so, with no workers") {
  NodeInfo a;
  a.nproc = 2;
  NodeInfo b;
  b.node_rank = 1;
  b.nproc = 2;
  b.standby = true;
  StatusBoard board;
  join(board, RankMap({a, b}), 1, 0, 0);
  const json j = doc(board);
  CHECK(j["node"]["role"] == "standby");
  CHECK(j["nodes"][1]["role"] == "standby");
  CHECK(j["nodes"][1]["nproc"] == 0);
}

TEST_CASE("a hang is kept with its first line until the next round") {
  StatusBoard board;
  board.hang(false, "suspected hang: no rank used CPU for 5 s\nrank 0: ...");
  json j = doc(board);
  CHECK(j["hang"]["state"] == "suspected");
  CHECK(j["hang"]["summary"] == "suspected hang: no rank used CPU for 5 s");
  CHECK(j["hang"]["since"].get<double>() > 0);
  board.joining(1, 1);
  CHECK(doc(board)["hang"]["state"] == "none");
}

TEST_CASE("a failed round's root cause is kept as fields, never its text, and the job's end") {
  StatusBoard board;
  join(board, two_nodes(), 0, 0, 0);
  FailedRound failed;
  failed.round = 0;
  failed.code = 1;
  failed.origin_node = 1;
  failed.root.kind = RootCause::Kind::Worker;
  failed.root.node = 1;
  failed.root.host = "beta";
  failed.root.rank = 3;
  failed.root.exit_code = 1;
  failed.root.error_type = "ValueError";
  failed.root.error = "boom: --password=hunter2";
  failed.root.traceback = "Traceback: hunter2";
  failed.root.time = std::chrono::system_clock::time_point(std::chrono::seconds(1795587700));
  RoundView view;
  board.on_event(RoundFailed{view, failed});
  FailedRound lost;
  lost.round = 1;
  lost.root.kind = RootCause::Kind::NodeLost;
  lost.root.node = 0;
  lost.root.reason = "node 1 (beta) lost: hunter2";
  board.on_event(RoundFailed{view, lost});
  json j = doc(board);
  REQUIRE(j["restarts"]["causes"].size() == 2);
  CHECK(j["restarts"]["causes"][0] == json({{"round", 0}, {"code", 1}, {"kind", "worker"}, {"node", 1}, {"host", "beta"},
                                            {"time", 1795587700.0}, {"rank", 3}, {"exit_code", 1}, {"signal", nullptr},
                                            {"error_type", "ValueError"}}));
  CHECK(j["restarts"]["causes"][1] == json({{"round", 1}, {"code", 1}, {"kind", "node_lost"}, {"node", 0},
                                            {"host", nullptr}, {"time", nullptr}}));
  CHECK(j.dump().find("hunter2") == std::string::npos);
  CHECK(j["ended"].is_null());
  std::optional<RootCause> root;
  const RoundReport report;
  board.on_event(JobEnded{view, 124, report, root, ""});
  CHECK(doc(board)["ended"] == json({{"exit_code", 124}}));
}

TEST_CASE("collective progress comes from the table, for this round's worker in the slot") {
  ddp::ProgressTable table = ddp::ProgressTable::create(2);
  StatusBoard board;
  board.identify(StatusIdentity{}, {&table, nullptr});
  join(board, two_nodes(), 0, 0);
  board.started(specs(0), {static_cast<int>(::getpid()), 4242});
  ::setenv(ddp::kProgressVariable, ddp::progress_variable_value(table.fd(), 0).c_str(), 1);
  auto writer = ddp::ProgressWriter::from_env(ddp::process_env());
  ::unsetenv(ddp::kProgressVariable);
  REQUIRE(writer);
  writer->enter(ddp::CollectiveKind::Allreduce, 64);
  writer->leave();
  writer->enter(ddp::CollectiveKind::Barrier, 0);
  const json j = doc(board);
  const json& p = j["ranks"][0]["last_progress"];
  CHECK(p["source"] == "collectives");
  CHECK(p["collectives_completed"] == 1);
  CHECK(p["in_collective"] == "barrier");
  CHECK(p["op"] == "barrier #2");  // as --dump_stacks names it
  CHECK(p["age_s"].get<double>() >= 0);
  CHECK(j["ranks"][1]["last_progress"].is_null());  // slot 1: no worker attached
}

TEST_CASE("the job secret is never in the status") {
  LaunchConfig c;
  c.rdzv_secret = "s3cr3t-token-value";
  c.etcd_password = "etcd-password-value";
  StatusBoard board;
  board.identify(status_identity(c, "h"), {});
  join(board, two_nodes(), 0, 0);
  const std::string text = status_json(board.snapshot());
  CHECK(text.find("s3cr3t") == std::string::npos);
  CHECK(text.find("etcd-password") == std::string::npos);
}

TEST_CASE("straggler scores are the status's stragglers object, by the contract's names") {
  StatusBoard board;
  CHECK(doc(board)["stragglers"].is_null());  // before the agent says the mode
  StragglerScores s;
  s.window_s = 30;
  s.scored_at = 1800000010;
  s.ranks.push_back({3, 1, "h2", 48.0, 0.31, true, 1800000000.0, {{1800000010.0, 48.0}}});
  s.ranks.push_back({2, 1, "h2", 1.0, std::nullopt, false, std::nullopt, {}});
  s.nodes.push_back({1, "h2", 24.5, false, std::nullopt});
  RoundView view;
  const std::vector<StragglerChange> none;
  board.on_event(StragglersScored{view, s, none});
  const json j = doc(board)["stragglers"];
  CHECK(j["mode"] == "warn");
  CHECK(j["window_s"] == 30);
  REQUIRE(j["ranks"].size() == 2);
  CHECK(j["ranks"][0] == json::parse(R"({"rank": 3, "node": 1, "host": "h2", "lateness_ms": 48.0,
      "step_fraction": 0.31, "straggler": true, "since": 1800000000.0, "history": [[1800000010.0, 48.0]]})"));
  CHECK(j["ranks"][1]["step_fraction"].is_null());
  CHECK(j["ranks"][1]["since"].is_null());
  CHECK(j["nodes"][0] == json::parse(R"({"node": 1, "host": "h2", "lateness_ms": 24.5, "straggler": false,
      "since": null})"));
}
