// The event log and the JSON summary (run_recorder.hpp), fed by the round's events as the agent
// emits them: the summary's root cause is made from the record's fields, so node 0's copy of a
// failure on node 1 has the same members and values as node 1's own, and no wording of the
// printed summary reaches a field but "summary" itself.
#include "launcher/events/run_recorder.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "launcher/rdzv/outcome.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/root_cause_of.hpp"

namespace {

using namespace ddp::launcher;
using nlohmann::json;

std::string temp_dir() {
  char templ[] = "/tmp/ddp_recorder_XXXXXX";
  REQUIRE(::mkdtemp(templ) != nullptr);
  return templ;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

// Rank 3 (local rank 1) on node 1 of host gpu2 failed with an error file saying ValueError.
RoundReport failed_round(const std::string& dir) {
  const std::string error_file = dir + "/error.json";
  std::ofstream(error_file) << R"({"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  x", "timestamp": "1700000000"}}})";
  WorkerResult w;
  w.rank = 3;
  w.local_rank = 1;
  w.pid = 4242;
  w.exit_code = 1;
  w.stderr_tail = {"ValueError: boom"};
  w.error_file = error_file;
  RoundReport report;
  report.add(w, RankState::Failed);
  return report;
}

// The summary a node writes when the job ends with `root` as its root cause.
json summary_of(const std::string& path, int group_rank, const RoundReport& last, const std::optional<RootCause>& root,
                const std::string& text) {
  RunRecorder recorder(RunRecorderOptions{"", {path}, "job", "host-of-the-writer"});
  RoundView view;
  view.group_rank = group_rank;
  recorder.on_event(RoundJoined{view});
  recorder.on_event(JobEnded{view, 1, last, root, text});
  return read_json(path);
}

}  // namespace

TEST_CASE("the root cause of a failure on another node has the same members and values as the node's own") {
  const std::string dir = temp_dir();
  const RoundReport report = failed_round(dir);
  FailureContext node1;
  node1.program = "train.py";
  node1.host = "gpu2";
  node1.node_rank = 1;
  const std::string words = failure_summary(report, node1);
  const RootCause mine = worker_root_cause(*report.root_cause(), 1, "gpu2");
  // Node 0 gets it through the store: the outcome's wire form.
  const Outcome got = Outcome::decode(Outcome::failure(1, words, 1, mine).encode());
  REQUIRE(got.root_cause);

  const json own = summary_of(dir + "/node1.json", 1, report, mine, words)["root_cause"];
  const json other = summary_of(dir + "/node0.json", 0, RoundReport{}, got.root_cause, words)["root_cause"];
  CHECK(own == other);
  CHECK(own["kind"] == "worker");
  CHECK(own["rank"] == 3);
  CHECK(own["local_rank"] == 1);
  CHECK(own["node_rank"] == 1);
  CHECK(own["host"] == "gpu2");
  CHECK(own["pid"] == 4242);
  CHECK(own["exit_code"] == 1);
  CHECK(own["signal"].is_null());
  CHECK(own["state"] == "failed");
  CHECK(own["error"] == "ValueError: boom");
  CHECK(own["error_type"] == "ValueError");
  CHECK(own["traceback"] == "Traceback (most recent call last):\n  x");
  CHECK(own["time"].get<double>() == 1700000000.0);
  CHECK(own["summary"] == words);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("no field of the root cause but its summary comes from the printed words") {
  const std::string dir = temp_dir();
  const RoundReport report = failed_round(dir);
  const RootCause root = worker_root_cause(*report.root_cause(), 1, "gpu2");
  // The same record under two wholly different texts (as if every label had been reworded).
  json a = summary_of(dir + "/a.json", 1, report, root, "Root cause (the earliest failure):\n  rank      : 99")["root_cause"];
  json b = summary_of(dir + "/b.json", 1, report, root, "Ursache: Rang neunundneunzig")["root_cause"];
  CHECK(a["summary"] != b["summary"]);
  a.erase("summary");
  b.erase("summary");
  CHECK(a == b);
  CHECK(a["rank"] == 3);
  // And the short cause, what restarts print and the "rounds" list keeps, reads the fields only.
  CHECK(short_cause(root, 0) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 1: ValueError: boom");
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a failure of no rank's has the same members, the rank's ones null") {
  const std::string dir = temp_dir();
  const auto silent = std::chrono::system_clock::time_point(std::chrono::seconds(1800000000));
  const NodeLoss loss{"node 2 (h2) lost: no heartbeat for 10 s", false, 2, silent};
  NodeStop lost = lost_node_stop(loss, 0, "h0", {"h0", "h1", "h2"});
  lost.root.time = silent + std::chrono::milliseconds(10500);
  const json hang = summary_of(dir + "/h.json", 0, RoundReport{}, lost.root, lost.summary)["root_cause"];
  const RoundReport report = failed_round(dir);
  const json worker = summary_of(dir + "/w.json", 1, report, worker_root_cause(*report.root_cause(), 1, "gpu2"),
                                 "words")["root_cause"];
  for (const auto& [key, value] : hang.items()) CHECK(worker.contains(key));
  CHECK(hang["kind"] == "node_lost");
  CHECK(hang["reason"] == "node 2 (h2) lost: no heartbeat for 10 s");
  CHECK(hang["node_rank"] == 0);
  CHECK(hang["rank"].is_null());
  CHECK(hang["summary"] == lost.summary);
  // The node that stopped answering, since when, and for how long when it was found lost.
  CHECK(hang["lost_node"] == 2);
  CHECK(hang["lost_host"] == "h2");
  CHECK(hang["silent_since"] == 1800000000.0);
  CHECK(hang["silent_for"] == 10.5);
  for (const char* member : {"lost_node", "lost_host", "silent_since", "silent_for"}) CHECK(worker[member].is_null());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a success has no root cause, whatever record is handed over") {
  const std::string dir = temp_dir();
  RunRecorder recorder(RunRecorderOptions{"", {dir + "/s.json"}, "job", "h"});
  RoundView view;
  const RoundReport none;
  const std::optional<RootCause> stale = node_root_cause(RootCause::Kind::Hang, 0, "h", "old");
  recorder.on_event(JobEnded{view, 0, none, stale, "old"});
  CHECK(read_json(dir + "/s.json")["root_cause"].is_null());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("a hang's root cause carries its collective as members, every failed round its times") {
  const std::string dir = temp_dir();
  HungCollective c;
  c.finding = "hang";
  c.group = "0";
  c.group_desc = "default_pg";
  c.group_ranks = {0, 1};
  c.seq = 2;
  c.op = "gloo:barrier";
  c.calls = {{"gloo:barrier", "", {0}, "/t/hang.py:8 <module>"}};
  c.waiting = {0};
  c.missing = {1};
  c.lines = {{0, "/t/hang.py:8 <module>"}, {1, "/t/hang.py:6 <module>"}};
  const NodeStop stop = hang_failure("hang: rank 0 waited in gloo:barrier #2", "", 0, "h0", c);
  RunRecorder recorder(RunRecorderOptions{"", {dir + "/s.json"}, "job", "h0"});
  RoundView view;
  const auto before = std::chrono::system_clock::now();
  recorder.on_event(RoundJoined{view});
  const FailedRound failed{0, 124, 0, stop.root, 0, "", {}};
  recorder.on_event(RoundFailed{view, failed});
  const auto after = std::chrono::system_clock::now();
  recorder.on_event(JobEnded{view, 124, RoundReport{}, stop.root, stop.summary});
  const json summary = read_json(dir + "/s.json");
  const json& got = summary["root_cause"]["collective"];
  CHECK(got["finding"] == "hang");
  CHECK(got["group"] == "0");
  CHECK(got["group_desc"] == "default_pg");
  CHECK(got["group_ranks"] == json::array({0, 1}));
  CHECK(got["seq"] == 2);
  CHECK(got["p2p"] == false);
  CHECK(got["op"] == "gloo:barrier");
  CHECK(got["name"] == "gloo:barrier #2");
  CHECK(got["waiting"] == json::array({0}));
  CHECK(got["missing"] == json::array({1}));
  CHECK(got["calls"] ==
        json::parse(R"([{"op": "gloo:barrier", "input": "", "ranks": [0], "line": "/t/hang.py:8 <module>"}])"));
  CHECK(got["lines"] == json::parse(R"({"0": "/t/hang.py:8 <module>", "1": "/t/hang.py:6 <module>"})"));
  // The round's entry: the same record, and when it began and ended.
  REQUIRE(summary["rounds"].size() == 1);
  const json& round = summary["rounds"][0];
  CHECK(round["root_cause"]["collective"] == got);
  const double from = std::chrono::duration<double>(before.time_since_epoch()).count();
  const double to = std::chrono::duration<double>(after.time_since_epoch()).count();
  CHECK(round["started"].get<double>() >= from - 0.001);
  CHECK(round["ended"].get<double>() <= to + 0.001);
  CHECK(round["ended"].get<double>() >= round["started"].get<double>());
  CHECK(round["duration"].get<double>() ==
        Approx(round["ended"].get<double>() - round["started"].get<double>()).margin(1e-4));
  // A failure of another kind has the member, null.
  RunRecorder other(RunRecorderOptions{"", {dir + "/i.json"}, "job", "h0"});
  other.on_event(JobEnded{view, 130, RoundReport{}, interrupted_stop(0, "h0", 2).root, "int"});
  const json interrupted = read_json(dir + "/i.json")["root_cause"];
  CHECK(interrupted.contains("collective"));
  CHECK(interrupted["collective"].is_null());
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("stragglers found and recovered are event-log lines, the summary keeps the run's slowest") {
  const std::string dir = temp_dir();
  RunRecorder recorder(RunRecorderOptions{dir + "/events.jsonl", {dir + "/summary.json"}, "job", "h0"});
  RoundView view;
  view.round = 2;
  recorder.on_event(RoundJoined{view});
  StragglerScores first;
  first.scored_at = 100;
  first.ranks.push_back({3, 1, "h1", 48.0, 0.31, true, 90.0, {{100.0, 48.0}}});
  first.ranks.push_back({1, 0, "h0", 2.0, 0.01, false, std::nullopt, {{100.0, 2.0}}});
  first.nodes.push_back({1, "h1", 30.0, false, std::nullopt});
  const std::vector<StragglerChange> found{{true, false, 3, 1, "h1", 48.0, 0.31, 10.0}};
  recorder.on_event(StragglersScored{view, first, found});
  StragglerScores later = first;
  later.scored_at = 110;
  later.ranks[0] = {3, 1, "h1", 3.0, 0.02, false, std::nullopt, {{110.0, 3.0}}};
  const std::vector<StragglerChange> gone{{false, false, 3, 1, "h1", 3.0, 0.02, 20.0}};
  recorder.on_event(StragglersScored{view, later, gone});
  recorder.on_event(JobEnded{view, 0, RoundReport{}, std::nullopt, ""});

  std::ifstream log(dir + "/events.jsonl");
  std::vector<json> lines;
  for (std::string line; std::getline(log, line);) lines.push_back(json::parse(line));
  std::vector<json> straggler_lines;
  for (const json& l : lines)
    if (l["event"].get<std::string>().rfind("straggler", 0) == 0) straggler_lines.push_back(l);
  REQUIRE(straggler_lines.size() == 2);
  CHECK(straggler_lines[0]["event"] == "straggler");
  CHECK(straggler_lines[0]["round"] == 2);
  CHECK(straggler_lines[0]["rank"] == 3);
  CHECK(straggler_lines[0]["kind"] == "rank");
  CHECK(straggler_lines[0]["message"] ==
        "rank 3 on node 1 (h1) enters collectives 48 ms late, 31% of a step, for 10 s");
  CHECK(straggler_lines[1]["event"] == "straggler_recovered");
  CHECK(straggler_lines[1]["for_s"] == 20.0);

  const json s = read_json(dir + "/summary.json")["stragglers"];
  CHECK(s["mode"] == "warn");
  REQUIRE(s["slowest_ranks"].size() == 2);
  CHECK(s["slowest_ranks"][0]["rank"] == 3);
  CHECK(s["slowest_ranks"][0]["lateness_ms"] == 48.0);  // its worst, not its last
  CHECK(s["slowest_ranks"][0]["straggler"] == true);
  CHECK(s["slowest_nodes"][0]["node"] == 1);
}

TEST_CASE("a run never scored has null stragglers in its summary") {
  const std::string dir = temp_dir();
  RoundReport none;
  CHECK(summary_of(dir + "/s.json", 0, none, std::nullopt, "")["stragglers"].is_null());
}
