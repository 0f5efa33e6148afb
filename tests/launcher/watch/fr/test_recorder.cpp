// The Flight Recorder's JSON from real torch 2.15 gloo runs (fixtures/capture_fr.py): groups joined
// from pg_status and the entries' names (pg_id is process-local), pg_config's ranks used only
// where they are global, the fast parse agreeing with the full one, garbage read as invalid.
#include "launcher/watch/fr/recorder.hpp"

#include <chrono>

#include <catch2/catch.hpp>

#include "tests/launcher/watch/fr/fixtures.hpp"

using ddp::launcher::FrGroup;
using ddp::launcher::FrSnapshot;
using ddp::launcher::parse_fr_status;
using ddp::launcher::parse_fr_trace;

namespace {

void same_groups(const FrSnapshot& a, const FrSnapshot& b) {
  REQUIRE(a.valid);
  REQUIRE(b.valid);
  REQUIRE(a.groups.size() == b.groups.size());
  for (const auto& [id, g] : a.groups) {
    INFO("pg_id " << id);
    const FrGroup& h = b.groups.at(id);
    CHECK(g.id == h.id);
    CHECK(g.name == h.name);
    CHECK(g.desc == h.desc);
    CHECK(g.ranks == h.ranks);
    CHECK(g.last_enqueued == h.last_enqueued);
    CHECK(g.last_started == h.last_started);
    CHECK(g.last_completed == h.last_completed);
  }
}

}  // namespace

TEST_CASE("the fast parse gives the full parse's groups on every fixture", "[flight_recorder]") {
  for (const char* scenario : {"hang2", "hang4", "desync4", "subgroup4", "p2p2"}) {
    for (int r = 0; r < 4; ++r) {
      const std::string doc = fr_fixtures::read(std::string(scenario) + ".r" + std::to_string(r) + ".json");
      if (doc.empty()) continue;
      INFO(scenario << " rank " << r);
      const FrSnapshot fast = parse_fr_status(doc);
      same_groups(fast, parse_fr_trace(doc));
      CHECK(fast.entries.empty());
    }
  }
}

TEST_CASE("a hang's record: the waiting collective, the last completed, the default group's ranks",
          "[flight_recorder]") {
  const FrSnapshot s = parse_fr_trace(fr_fixtures::read("hang2.r0.json"));
  REQUIRE(s.valid);
  REQUIRE(s.groups.size() == 1);
  const FrGroup& g = s.groups.at("0");
  CHECK(g.name == "0");
  CHECK(g.desc == "default_pg");
  CHECK(g.ranks == std::vector<int>{0, 1});
  CHECK(g.last_enqueued == 4);
  CHECK(g.last_completed == 3);
  REQUIRE(s.entries.size() == 4);
  CHECK(s.entries[2].completed);
  const auto& e = s.entries[3];
  CHECK(e.seq == 4);
  CHECK_FALSE(e.completed);
  CHECK_FALSE(e.p2p);
  CHECK(e.op == "gloo:all_reduce");
  CHECK(e.sizes == "[1000]");
  CHECK(e.dtypes == "Float");
  CHECK(e.group_id == "0");
  CHECK(e.group_name == "0");
  CHECK(e.created_ns > 1700000000LL * 1000000000);
  CHECK(e.frames.empty());  // gloo records none
}

TEST_CASE("sub-groups: pg_id is process-local, the name is shared, gloo's pg_config ranks are not used",
          "[flight_recorder]") {
  // capture_fr.py's subgroup4: new_group([1, 3]) is named "1", new_group([0, 1]) "2".
  const FrSnapshot r1 = parse_fr_trace(fr_fixtures::read("subgroup4.r1.json"));
  REQUIRE(r1.groups.size() == 3);
  CHECK(r1.groups.at("1").name == "1");  // made first on rank 1
  CHECK(r1.groups.at("2").name == "2");
  CHECK(r1.groups.at("1").last_enqueued == 3);
  CHECK(r1.groups.at("1").ranks.empty());  // pg_config holds "" → the last group's local ranks only
  const FrSnapshot r0 = parse_fr_trace(fr_fixtures::read("subgroup4.r0.json"));
  CHECK(r0.groups.at("1").name == "2");  // rank 0 is not in [1, 3]: its pg_id 1 is new_group([0, 1])
  CHECK(r0.groups.at("1").desc == "undefined");
  const FrSnapshot r1_desync = parse_fr_trace(fr_fixtures::read("desync4.r1.json"));
  const auto& all_gather = r1_desync.entries.back();
  CHECK(all_gather.op == "gloo:all_gather");
  CHECK(all_gather.sizes == "[1000] -> [4, 1000]");
}

TEST_CASE("frames, when an entry has them, read as file:line in func", "[flight_recorder]") {
  const FrSnapshot s = parse_fr_trace(
      R"({"entries":[{"collective_seq_id":1,"pg_id":0,"process_group":["0","default_pg"],"profiling_name":"nccl:all_reduce",)"
      R"("state":"completed","frames":[{"filename":"train.py","line":12,"name":"step"},{"filename":"train.py","line":40,"name":"<module>"}]}],)"
      R"("pg_config":{"0":{"desc":"default_pg","name":"0","ranks":"[0, 1, 2]"}},"pg_status":{"0":{"last_enqueued_collective":"1"}},"version":"2.10"})");
  REQUIRE(s.valid);
  CHECK(s.entries.at(0).frames == "train.py:12 in step\ntrain.py:40 in <module>\n");
  CHECK(s.entries.at(0).completed);
  CHECK(s.groups.at("0").ranks == std::vector<int>{0, 1, 2});  // keyed by the group's name: global ranks
}

TEST_CASE("garbage is invalid, with a reason, on both paths", "[flight_recorder]") {
  for (const std::string doc :
       std::vector<std::string>{"", "not json", "[1,2]", "{\"entries\":[]}", "{\"pg_config\":{}, \"pg_status\": 3}",
                                std::string("{\"entries\":[{\"pg_id\":0,") + "\"pg_config\":"}) {
    INFO(doc);
    const FrSnapshot full = parse_fr_trace(doc);
    CHECK_FALSE(full.valid);
    CHECK_FALSE(full.error.empty());
    CHECK_FALSE(parse_fr_status(doc).valid);
  }
  const FrSnapshot spaced = parse_fr_status("{ \"entries\" : [ ] , \"pg_status\" : { \"0\" : { } } }");
  CHECK(spaced.valid);  // not laid out as torch writes it: the full parse reads it
  CHECK(spaced.groups.size() == 1);
}

TEST_CASE("a full 2000-entry record: the fast parse agrees and is faster", "[flight_recorder]") {
  const std::string doc = fr_fixtures::big_document(2000);
  REQUIRE(doc.size() > 700000);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const FrSnapshot full = parse_fr_trace(doc);
  const auto t1 = Clock::now();
  const FrSnapshot fast = parse_fr_status(doc);
  const auto t2 = Clock::now();
  CHECK(full.entries.size() == 2000);
  same_groups(fast, full);
  CHECK(t2 - t1 < t1 - t0);
}

TEST_CASE("group descriptions read as words: the default group, nothing for torch's 'undefined'", "[fr_recorder]") {
  CHECK(ddp::launcher::readable_group_desc("default_pg") == "the default group");
  CHECK(ddp::launcher::readable_group_desc("undefined").empty());
  CHECK(ddp::launcher::readable_group_desc("tp_group") == "tp_group");
}
