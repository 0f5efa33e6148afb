// Outcome: the typed round outcome and its wire format, including every malformed value a
// stranger or another program could leave in the key.
#include "launcher/rdzv/outcome.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace {

using ddp::launcher::Outcome;
using ddp::launcher::OutcomeError;
using ddp::launcher::RootCause;

TEST_CASE("outcome: success and failure round-trip", "[outcome]") {
  const Outcome s = Outcome::decode(Outcome::success(2).encode());
  CHECK(s.succeeded());
  CHECK(s.code == 0);
  CHECK(s.origin_node == 2);
  CHECK(s.summary.empty());

  const std::string summary = "=====\nworker FAILED\n  rank : 3\n\nlast line without newline";
  const Outcome f = Outcome::decode(Outcome::failure(139, summary, 1).encode());
  CHECK_FALSE(f.succeeded());
  CHECK(f.code == 139);
  CHECK(f.origin_node == 1);
  CHECK(f.summary == summary);

  CHECK(Outcome::decode(Outcome::failure(1, "", -1).encode()).origin_node == -1);
  CHECK(Outcome::decode(Outcome::failure(1, "", -1).encode()).summary.empty());
  CHECK(Outcome::decode(Outcome::failure(255, "x", ddp::launcher::kMaxNodes).encode()).code == 255);
}

TEST_CASE("outcome: any summary bytes survive, including header-like lines", "[outcome]") {
  const std::string tricky[] = {
      "\n",
      "\n\n\n",
      "ddplaunch-outcome 1 success 0 0\n",  // a header inside the summary is just text
      std::string("nul\0inside", 11),
      "crlf\r\nline\r\n",
      "\xff\xfe not utf-8",
  };
  for (const std::string& summary : tricky) {
    const Outcome o = Outcome::decode(Outcome::failure(7, summary, 3).encode());
    CHECK(o.summary == summary);
    CHECK(o.code == 7);
    CHECK_FALSE(o.succeeded());
  }
}

TEST_CASE("outcome: the encoded form starts with a versioned header line, then the record's line", "[outcome]") {
  CHECK(Outcome::success(0).encode() == "ddplaunch-outcome 2 success 0 0\n\n");
  CHECK(Outcome::failure(3, "boom", 1).encode() == "ddplaunch-outcome 2 failure 3 1\n\nboom");
}

TEST_CASE("outcome: the root cause travels as fields beside the summary", "[outcome]") {
  RootCause root;
  root.kind = RootCause::Kind::Worker;
  root.node = 1;
  root.host = "gpu2";
  root.rank = 3;
  root.local_rank = 1;
  root.exit_code = 1;
  root.error = "ValueError: boom\nsecond line";
  root.error_type = "ValueError";
  root.stderr_tail = {"a", "b\x1b"};
  root.stderr_quiet = std::chrono::milliseconds(40200);
  root.collective_timeout = true;
  root.time = std::chrono::system_clock::time_point(std::chrono::nanoseconds(1764400000123456789LL));
  const Outcome o = Outcome::decode(Outcome::failure(1, "the\nsummary\n", 1, root).encode());
  REQUIRE(o.root_cause);
  CHECK(o.summary == "the\nsummary\n");
  CHECK(o.root_cause->kind == RootCause::Kind::Worker);
  CHECK(o.root_cause->rank == 3);
  CHECK(o.root_cause->local_rank == 1);
  CHECK(o.root_cause->host == "gpu2");
  CHECK(o.root_cause->error == "ValueError: boom\nsecond line");
  CHECK(o.root_cause->stderr_tail == std::vector<std::string>{"a", "b\x1b"});
  CHECK(o.root_cause->stderr_quiet == std::chrono::milliseconds(40200));
  CHECK(o.root_cause->collective_timeout);
  CHECK(o.root_cause->time == root.time);
  CHECK_FALSE(Outcome::decode(Outcome::failure(1, "x", 1).encode()).root_cause);
}

TEST_CASE("outcome: a lost node's record names the silent node and since when it was silent", "[outcome]") {
  RootCause root;
  root.kind = RootCause::Kind::NodeLost;
  root.node = 0;
  root.host = "gpu0";
  root.reason = "lost node 1: no heartbeat for 10 s";
  root.lost_node = 1;
  root.lost_host = "gpu1";
  root.silent_since = std::chrono::system_clock::time_point(std::chrono::nanoseconds(1764400000123456789LL));
  root.time = root.silent_since + std::chrono::seconds(10);
  const Outcome o = Outcome::decode(Outcome::failure(1, "lost", 0, root).encode());
  REQUIRE(o.root_cause);
  CHECK(o.root_cause->kind == RootCause::Kind::NodeLost);
  CHECK(o.root_cause->lost_node == 1);
  CHECK(o.root_cause->lost_host == "gpu1");
  CHECK(o.root_cause->silent_since == root.silent_since);
  CHECK(o.root_cause->time == root.time);
  // Another kind carries none of it; a lost node out of range is not ddplaunch's record.
  root.kind = RootCause::Kind::Hang;
  CHECK(Outcome::decode(Outcome::failure(124, "hang", 0, root).encode()).root_cause->lost_node == -1);
  const std::string forged = ddp::launcher::encode_root_cause(RootCause{}).substr(1);
  CHECK_FALSE(ddp::launcher::decode_root_cause("{\"lost_node\": 99999, " + forged));
  CHECK_FALSE(ddp::launcher::decode_root_cause("{\"silent_since_ns\": -1, " + forged));
  CHECK_FALSE(ddp::launcher::decode_root_cause("{\"lost_host\": 5, " + forged));
}

TEST_CASE("outcome: a hang's record carries its collective, a malformed one is not ddplaunch's", "[outcome]") {
  RootCause root;
  root.kind = RootCause::Kind::Hang;
  root.node = 0;
  root.reason = "desync: ...";
  ddp::launcher::HungCollective c;
  c.finding = "desync";
  c.group = "1";
  c.group_desc = "tp";
  c.group_ranks = {0, 1};
  c.seq = 2;
  c.op = "gloo:barrier";
  c.calls = {{"gloo:barrier", "", {0}, "/t/a.py:8 <module>"}, {"gloo:all_reduce", "[8] Float", {1}, ""}};
  c.waiting = {0, 1};
  c.lines = {{0, "/t/a.py:8 <module>"}};
  root.collective = c;
  const Outcome o = Outcome::decode(Outcome::failure(124, "hang", 0, root).encode());
  REQUIRE(o.root_cause);
  REQUIRE(o.root_cause->collective);
  const auto& d = *o.root_cause->collective;
  CHECK(d.finding == "desync");
  CHECK(d.group == "1");
  CHECK(d.group_desc == "tp");
  CHECK(d.group_ranks == std::vector<int>{0, 1});
  CHECK(d.seq == 2);
  CHECK(d.op == "gloo:barrier");
  REQUIRE(d.calls.size() == 2);
  CHECK(d.calls[1].op == "gloo:all_reduce");
  CHECK(d.calls[1].input == "[8] Float");
  CHECK(d.calls[1].ranks == std::vector<int>{1});
  CHECK(d.calls[0].line == "/t/a.py:8 <module>");
  CHECK(d.waiting == std::vector<int>{0, 1});
  CHECK(d.missing.empty());
  CHECK(d.lines == std::map<int, std::string>{{0, "/t/a.py:8 <module>"}});
  // Unknown members are ignored (a newer launcher's); a member of the wrong type is not ours.
  const std::string line = ddp::launcher::encode_root_cause(root);
  const std::string member = "\"collective\":";
  const std::size_t at = line.find(member);
  REQUIRE(at != std::string::npos);
  // Its collective replaced by `value`, the original kept under a name no launcher reads.
  const auto with = [&](const std::string& value) {
    return std::string(line).replace(at, member.size(), member + value + ",\"renamed\":");
  };
  CHECK(ddp::launcher::decode_root_cause(with("{\"seq\":3,\"new\":[1]}"))->collective->seq == 3);
  CHECK_FALSE(ddp::launcher::decode_root_cause(with("{\"seq\":\"3\"}")));
  CHECK_FALSE(ddp::launcher::decode_root_cause(with("{\"lines\":{\"x\":\"a\"}}")));
  CHECK_FALSE(ddp::launcher::decode_root_cause(with("{\"calls\":[{\"ranks\":[\"0\"]}]}")));
  CHECK_FALSE(ddp::launcher::decode_root_cause(with("[]")));
  // A record without one reads back without one.
  root.collective.reset();
  CHECK_FALSE(Outcome::decode(Outcome::failure(124, "hang", 0, root).encode()).root_cause->collective);
}

TEST_CASE("outcome: an op named as --dump_stacks and --status name it", "[outcome]") {
  CHECK(ddp::launcher::op_name("gloo:barrier", 2) == "gloo:barrier #2");
  CHECK(ddp::launcher::op_name("gloo:send", 3, true) == "gloo:send p2p #3");
}

TEST_CASE("outcome: version 1 (before the record) is still read, as a failure without one", "[outcome]") {
  const Outcome o = Outcome::decode("ddplaunch-outcome 1 failure 3 1\nboom\nmore");
  CHECK(o.code == 3);
  CHECK(o.origin_node == 1);
  CHECK(o.summary == "boom\nmore");
  CHECK_FALSE(o.root_cause);
  CHECK(Outcome::decode("ddplaunch-outcome 1 success 0 0\n").succeeded());
}

TEST_CASE("outcome: malformed values throw, never become a success", "[outcome]") {
  const char* bad[] = {
      "",
      "success",                                   // the old, unauthenticated form
      "failure 3\nsummary",                        // the old failure form
      "ddplaunch-outcome 1 success 0 0",           // no newline after the header
      "ddplaunch-outcome 3 success 0 0\n\n",       // another version
      "ddplaunch-outcome 2 failure 3 1\n",         // version 2 without the record's line
      "ddplaunch-outcome 2 failure 3 1\n{\"kind\": \"worker\", \"rank\": \"x\"}\nboom",  // a mistyped record
      "ddplaunch-outcome 2 failure 3 1\n{\"kind\": \"unheard-of\"}\nboom",       // an unknown kind
      "ddplaunch-outcome 2 failure 3 1\nnot json\nboom",                        // not a record
      "ddplaunch-outcome 2 success 0 0\n{\"kind\": \"worker\"}\n",             // a success with a cause
      "ddplaunch-outcome 1 victory 0 0\n",         // unknown kind
      "ddplaunch-outcome 1 success 3 0\n",         // success must have code 0
      "ddplaunch-outcome 1 failure 0 0\n",         // failure must not have code 0
      "ddplaunch-outcome 1 failure 256 0\n",       // beyond an exit code
      "ddplaunch-outcome 1 failure -1 0\n",        // negative code
      "ddplaunch-outcome 1 failure 3x 0\n",        // not a number
      "ddplaunch-outcome 1 failure 3 -2\n",        // origin below -1
      "ddplaunch-outcome 1 failure 3 99999999\n",  // origin beyond any job
      "ddplaunch-outcome 1 failure 3\n",           // missing origin
      "ddplaunch-outcome 1 failure 3 1 7\n",       // trailing field
      "ddplaunch-outcome 1 failure  3 1\n",        // double space
      "ddplaunch-outcome 1 failure 3 1\r\n",       // CR before the newline
      "ddplaunch-outcome 1 failure +3 1\n",        // sign
      "ddplaunch-outcome 1 failure 3 1 \n",        // trailing space
      "ddplaunch-outcome 1 success 0 0\nhello",    // a success with a summary
      " ddplaunch-outcome 1 success 0 0\n",        // leading space
      "DDPLAUNCH-OUTCOME 1 success 0 0\n",         // case
  };
  for (const char* v : bad) {
    INFO("value: " << v);
    CHECK_THROWS_AS(Outcome::decode(v), OutcomeError);
  }
}

TEST_CASE("outcome: errors quote the value, cut short", "[outcome]") {
  CHECK_THROWS_WITH(Outcome::decode("success"), Catch::Contains("'success'") && Catch::Contains("malformed"));
  const std::string long_value(500, 'x');
  try {
    Outcome::decode(long_value);
    FAIL("decode accepted a malformed value");
  } catch (const OutcomeError& e) {
    CHECK(std::string(e.what()).size() < 250);
  }
  // A stranger's bytes never reach the terminal raw.
  CHECK_THROWS_WITH(Outcome::decode("ddplaunch-outcome 1 failure 999 1\n\x1b[2J\\"),
                    Catch::Contains("999 1\\n\\x1b[2J\\x5c'") && !Catch::Contains("\x1b"));
}

}  // namespace

TEST_CASE("outcome: another node's summary is printed with control bytes escaped", "[outcome]") {
  using ddp::launcher::printable;
  CHECK(printable("Traceback:\n\tValueError: x") == "Traceback:\n\tValueError: x");
  CHECK(printable("\x1b[2Jgotcha\r\x7f") == "\\x1b[2Jgotcha\\x0d\\x7f");
  CHECK(printable("a\\x1b") == "a\\x5cx1b");                       // a literal backslash cannot fake an escape
  CHECK(printable("d\xc3\xa9j\xc3\xa0") == "d\xc3\xa9j\xc3\xa0");  // UTF-8 text is kept
}
