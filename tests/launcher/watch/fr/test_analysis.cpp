// The verdicts on real records (fixtures/capture_fr.py) and on made-up ones for what gloo does not
// record (p2p ops) or cannot be made to do on demand (a collective every member waits in), the
// report's key phrases, the call sites from the tracebacks, unknown ranks, and the codec's round trip.
#include "launcher/watch/fr/analysis.hpp"

#include <catch2/catch.hpp>

#include "launcher/watch/fr/codec.hpp"
#include "tests/launcher/watch/fr/fixtures.hpp"

using namespace std::chrono_literals;
using namespace ddp::launcher;

namespace {

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A rank of the default group of `world` ranks whose entries are `ops` (#1, #2, ...), the last
// `open` of them not completed, each made 10 s before the snapshot.
RankFr made_up(int rank, std::vector<std::string> ops, int open, bool p2p = false) {
  constexpr std::int64_t kTaken = 1795600000LL * 1000000000;
  RankFr r;
  r.rank = rank;
  r.host = "vm";
  r.pid = 100 + rank;
  r.reachable = true;
  r.taken_ns = kTaken;
  r.fr.valid = true;
  auto& g = r.fr.groups["0"];
  g.id = g.name = "0";
  g.desc = "default_pg";
  for (std::size_t i = 0; i < ops.size(); ++i) {
    FrEntry e;
    e.group_id = e.group_name = "0";
    e.p2p = p2p;
    (p2p ? e.p2p_seq : e.seq) = static_cast<long long>(i + 1);
    e.op = ops[i];
    e.sizes = "[8]";
    e.dtypes = "Float";
    e.completed = i + open < ops.size();
    e.created_ns = kTaken - 10000000000LL;
    r.fr.entries.push_back(e);
    if (!p2p) g.last_enqueued = static_cast<long long>(i + 1);
    if (!p2p && e.completed) g.last_completed = g.last_enqueued;
  }
  return r;
}

}  // namespace

TEST_CASE("hang2: rank 1 never entered all_reduce #4, where rank 0 waits", "[fr_analysis]") {
  const auto ranks = fr_fixtures::ranks("hang2", 2);
  const FrFinding f = analyse_flight_records(ranks, 3s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.group_name == "0");
  CHECK(f.seq == 4);
  CHECK(f.op == "gloo:all_reduce");
  CHECK(f.group_ranks == std::vector<int>{0, 1});
  CHECK(f.waiting == std::vector<int>{0});
  CHECK(f.never_entered == std::vector<int>{1});
  INFO(f.text);
  CHECK(f.text.rfind("Collective #4 of process group 0 (the default group, ranks 0-1) never completed: "
                     "gloo:all_reduce, input [1000] "
                     "Float\n  rank 0 (node 0 on vm, pid 100): waiting in it for ",
                     0) == 0);
  CHECK(has(f.text, "  rank 1 (node 0 on vm, pid 101): never entered it; its last, gloo:all_reduce #3, completed\n"));
  CHECK(has(f.text, "Never entered collective #4: rank 1 (node 0 on vm), at:\n  File \""));
  CHECK(has(f.text, "capture_fr.py\", line "));  // the frame of its time.sleep(600), not torch's frames
  CHECK(has(f.text, " in worker\n"));
  CHECK_FALSE(has(f.text, "site-packages"));
  // Not yet waited long enough: nothing.
  CHECK(analyse_flight_records(ranks, 60s, 0).kind == FrFindingKind::None);
}

TEST_CASE("hang2 as fields: the call site's op, its ranks, and each named rank's Python line", "[fr_analysis]") {
  const FrFinding f = analyse_flight_records(fr_fixtures::ranks("hang2", 2), 3s, 0);
  CHECK(f.group_desc == "default_pg");
  CHECK_FALSE(f.p2p);
  REQUIRE(f.calls.size() == 1);
  CHECK(f.calls[0].op == "gloo:all_reduce");
  CHECK(f.calls[0].input == "[1000] Float");
  CHECK(f.calls[0].ranks == std::vector<int>{0});
  // Rank 1's line: its time.sleep(600) in the fixture's worker, as file:line function.
  REQUIRE(f.lines.count(1));
  INFO(f.lines.at(1));
  CHECK(f.lines.at(1).find("capture_fr.py:") != std::string::npos);
  CHECK(f.lines.at(1).size() > 7);
  CHECK(f.lines.at(1).substr(f.lines.at(1).size() - 7) == " worker");
}

TEST_CASE("a Python line as file:line function, from either form of frame", "[fr_analysis]") {
  CHECK(python_line("  File \"/tmp/fr/hang.py\", line 8 in <module>\n  File \"x\", line 1 in f") ==
        "/tmp/fr/hang.py:8 <module>");
  CHECK(python_line("/tmp/fr/hang.py:12 in worker") == "/tmp/fr/hang.py:12 worker");
  CHECK(python_line("something else") == "something else");
  CHECK(python_line("").empty());
}

TEST_CASE("hang4: three wait, one never entered", "[fr_analysis]") {
  const FrFinding f = analyse_flight_records(fr_fixtures::ranks("hang4", 4), 1s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.waiting == std::vector<int>{0, 1, 2});
  CHECK(f.never_entered == std::vector<int>{3});
  CHECK(has(f.text, "(the default group, ranks 0-3)"));
}

TEST_CASE("desync4: rank 1 calls all_gather as #4 where the others all_reduce", "[fr_analysis]") {
  const FrFinding f = analyse_flight_records(fr_fixtures::ranks("desync4", 4), 1s, 0);
  REQUIRE(f.kind == FrFindingKind::Desync);
  CHECK(f.seq == 4);
  CHECK(f.waiting == std::vector<int>{0, 1, 2, 3});
  INFO(f.text);
  CHECK(has(f.text,
            "Collective #4 of process group 0 (the default group, ranks 0-3) differs between ranks (a desync):\n"));
  CHECK(has(f.text, "  gloo:all_gather, input [1000] -> [4, 1000] Float: rank 1, at:\n    File \""));
  CHECK(has(f.text, "  gloo:all_reduce, input [1000] Float: ranks 0,2-3 (3 ranks), rank 0 at:\n    File \""));
  CHECK(has(f.text, "  rank 1 (node 0 on vm, pid 101): waiting in gloo:all_gather for "));
  // As fields: each call site's op, its ranks and where the first of them called it.
  REQUIRE(f.calls.size() == 2);
  CHECK(f.calls[0].op == "gloo:all_gather");
  CHECK(f.calls[0].input == "[1000] -> [4, 1000] Float");
  CHECK(f.calls[0].ranks == std::vector<int>{1});
  CHECK(f.calls[1].op == "gloo:all_reduce");
  CHECK(f.calls[1].ranks == std::vector<int>{0, 2, 3});
  for (const FrCall& call : f.calls) CHECK(call.line.find("capture_fr.py:") != std::string::npos);
  CHECK(f.lines.size() == 4);
}

TEST_CASE("subgroup4: the hang in new_group([1, 3]), its global ranks, not the default group", "[fr_analysis]") {
  const FrFinding f = analyse_flight_records(fr_fixtures::ranks("subgroup4", 4), 1s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.group_name == "1");
  CHECK(f.group_id == "1");  // rank 1's pg_id
  CHECK(f.group_ranks == std::vector<int>{1, 3});
  CHECK(f.seq == 3);
  CHECK(f.waiting == std::vector<int>{1});
  CHECK(f.never_entered == std::vector<int>{3});
  CHECK(has(f.text, "Collective #3 of process group 1 (ranks 1,3) never completed"));
  CHECK(has(f.text, "its last, gloo:all_reduce #2, completed"));
}

TEST_CASE("p2p2: gloo records no send/recv, so a rank waiting in recv is not found", "[fr_analysis]") {
  CHECK(analyse_flight_records(fr_fixtures::ranks("p2p2", 2), 1s, 0).kind == FrFindingKind::None);
}

TEST_CASE("a p2p op never completed: its op, and the others' last p2p op", "[fr_analysis]") {
  const std::vector<RankFr> ranks{made_up(0, {"nccl:send", "nccl:recv"}, 1, true), made_up(1, {"nccl:recv"}, 0, true)};
  const FrFinding f = analyse_flight_records(ranks, 5s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.op == "nccl:recv");
  CHECK(f.seq == 2);
  INFO(f.text);
  CHECK(has(f.text,
            "Point-to-point nccl:recv (p2p #2) of process group 0 (the default group, ranks 0-1) never completed"));
  CHECK(has(f.text, "rank 1 (node 0 on vm, pid 101): its last point-to-point op, nccl:recv (p2p #1), completed"));
}

TEST_CASE("every member in the collective, none completed: stuck", "[fr_analysis]") {
  const std::vector<RankFr> ranks{made_up(0, {"nccl:all_reduce", "nccl:barrier"}, 1),
                                  made_up(1, {"nccl:all_reduce", "nccl:barrier"}, 1)};
  const FrFinding f = analyse_flight_records(ranks, 5s, 0);
  REQUIRE(f.kind == FrFindingKind::Stuck);
  CHECK(f.seq == 2);
  CHECK(f.never_entered.empty());
  CHECK(has(f.text, "never completed, though every member entered it: nccl:barrier"));
}

TEST_CASE("a member without a record is unknown, never guessed", "[fr_analysis]") {
  std::vector<RankFr> ranks = fr_fixtures::ranks("hang2", 2);
  // No answer now, but a record from an earlier answer: used, and said to be as of then.
  ranks[1].reachable = false;
  ranks[1].why_not = "as of its last answer; it no longer answers: no answer from /run/w1.sock";
  FrFinding f = analyse_flight_records(ranks, 1s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.never_entered == std::vector<int>{1});
  CHECK(has(f.text,
            "never entered it; its last, gloo:all_reduce #3, completed (as of its last answer; it no longer "
            "answers: no answer from /run/w1.sock)"));
  // No answer and no record: unknown.
  ranks[1].fr = FrSnapshot{};
  ranks[1].why_not = "no answer from /run/w1.sock to fr_trace_json within 2000 ms";
  f = analyse_flight_records(ranks, 1s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.never_entered.empty());
  CHECK(has(f.text, "rank 1 (node 0 on vm, pid 101): unknown: no answer from /run/w1.sock"));
  CHECK(has(f.text, "\nrank 0 (node 0 on vm) waits at:\n"));
  ranks.pop_back();  // not even given: still a member of the default group? unknown, by its rank
  f = analyse_flight_records(ranks, 1s, 0);
  CHECK(f.group_ranks == std::vector<int>{0, 1});  // pg_config says the default group's ranks
  CHECK(has(f.text, "  rank 1: unknown: not among the snapshots\n"));
}

TEST_CASE("the codec keeps what the analysis needs, bounded", "[fr_analysis]") {
  for (const auto& [scenario, world] :
       std::vector<std::pair<std::string, int>>{{"hang4", 4}, {"desync4", 4}, {"subgroup4", 4}}) {
    INFO(scenario);
    const auto ranks = fr_fixtures::ranks(scenario, world);
    const std::string wire = encode_rank_fr(ranks);
    CHECK(wire.size() < 2500u * ranks.size());
    const auto back = decode_rank_fr(wire);
    REQUIRE(back.size() == ranks.size());
    const FrFinding a = analyse_flight_records(ranks, 1s, 0), b = analyse_flight_records(back, 1s, 0);
    CHECK(a.kind == b.kind);
    CHECK(a.text == b.text);
  }
  CHECK(decode_rank_fr("garbage").empty());
  CHECK(decode_rank_fr("[{\"rank\":1}]").empty());
}

TEST_CASE("describe_flight_records: a line per rank, per group", "[fr_analysis]") {
  std::vector<RankFr> ranks = fr_fixtures::ranks("subgroup4", 4);
  ranks[2].reachable = false;
  ranks[2].why_not = "no worker server";
  const std::string text = describe_flight_records(ranks, 0);
  INFO(text);
  CHECK(has(text,
            "  rank 1: group 0 (the default group): last gloo:all_reduce #2 completed; group 1: in "
            "gloo:all_reduce #3 for 5.0 s; group 2: last gloo:broadcast #1 completed\n"));
  CHECK(has(text, "  rank 2: no flight record (no worker server)\n"));
}

TEST_CASE("a desync in sizes counts only for ops whose inputs must match", "[fr_analysis]") {
  std::vector<RankFr> ranks{made_up(0, {"nccl:all_reduce"}, 1), made_up(1, {"nccl:all_reduce"}, 1)};
  ranks[1].fr.entries[0].sizes = "[4]";
  FrFinding f = analyse_flight_records(ranks, 5s, 0);
  REQUIRE(f.kind == FrFindingKind::Desync);
  CHECK(has(f.text, "  nccl:all_reduce, input [4] Float: rank 1\n"));  // no traceback: no call site
  CHECK(has(f.text, "  nccl:all_reduce, input [8] Float: rank 0\n"));
  for (RankFr& r : ranks) r.fr.entries[0].op = "nccl:all_to_all";
  f = analyse_flight_records(ranks, 5s, 0);
  CHECK(f.kind == FrFindingKind::Stuck);
  CHECK(analyse_flight_records(ranks, 11s, 0).kind == FrFindingKind::None);  // waited 10 s only
}

TEST_CASE("a sub-group whose record says its global ranks: a member with nothing of it never entered",
          "[fr_analysis]") {
  std::vector<RankFr> ranks{made_up(0, {"nccl:all_reduce"}, 0), made_up(1, {"nccl:all_reduce"}, 0),
                            made_up(2, {"nccl:all_reduce"}, 0)};
  FrEntry e = ranks[0].fr.entries[0];
  e.group_id = "1";
  e.group_name = "7";
  e.completed = false;
  ranks[0].fr.entries.push_back(e);
  auto& g = ranks[0].fr.groups["1"];
  g.id = "1";
  g.name = "7";
  g.desc = "tp";
  g.ranks = {0, 2};
  g.last_enqueued = 1;
  const FrFinding f = analyse_flight_records(ranks, 5s, 0);
  REQUIRE(f.kind == FrFindingKind::Hang);
  CHECK(f.group_name == "7");
  CHECK(f.group_ranks == std::vector<int>{0, 2});
  CHECK(f.never_entered == std::vector<int>{2});
  CHECK(has(f.text, "Collective #1 of process group 7 (tp, ranks 0,2) never completed"));
  CHECK(has(f.text, "  rank 2 (node 0 on vm, pid 102): never entered it; it entered no collective of this group\n"));
}
