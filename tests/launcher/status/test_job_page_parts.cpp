// The job page's pure parts: the token (derived from the secret and run id; none without a
// secret), a request's target and where a token may come from, a rank's part of a node's stacks
// answer, node 0's document with the others' (a document that is not JSON becomes null).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "launcher/status/job_status_json.hpp"
#include "launcher/status/page_stacks.hpp"
#include "launcher/status/status_access.hpp"

namespace {

using namespace ddp::launcher;
using nlohmann::json;

TEST_CASE("the page's token comes from the secret and the run id, and none without a secret") {
  const std::string t = page_token("0123456789abcdef0123", "job1");
  CHECK(t.size() == 32);
  CHECK(t.find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(page_token("0123456789abcdef0123", "job1") == t);
  CHECK(page_token("0123456789abcdef0123", "job2") != t);
  CHECK(page_token("another secret 012345", "job1") != t);
  CHECK(page_token("", "job1").empty());
}

TEST_CASE("a target's path and query, escapes decoded, the first of a repeated key kept") {
  const RequestTarget r = parse_target("/stack?rank=3&token=a%2Fb+c&rank=4&flag");
  CHECK(r.path == "/stack");
  CHECK(r.query.at("rank") == "3");
  CHECK(r.query.at("token") == "a/b c");
  CHECK(r.query.at("flag").empty());
  CHECK(parse_target("/").query.empty());
  CHECK(parse_target("/x?bad=%zz%4").query.at("bad") == "%zz%4");
}

TEST_CASE("a token is taken from the query or a Bearer header, and nothing else passes") {
  const std::string token = "00112233445566778899aabbccddeeff";
  CHECK(has_token("", parse_target("/status"), ""));
  CHECK(has_token(token, parse_target("/status?token=" + token), ""));
  CHECK(has_token(token, parse_target("/status"), "Bearer " + token));
  CHECK_FALSE(has_token(token, parse_target("/status"), ""));
  CHECK_FALSE(has_token(token, parse_target("/status?token=" + token.substr(1)), ""));
  CHECK_FALSE(has_token(token, parse_target("/status"), "Basic " + token));
  CHECK_FALSE(has_token(token, parse_target("/status?token="), "Bearer "));
}

TEST_CASE("a rank's part of a node's stacks answer") {
  const std::string answer =
      "rank 2 (pid 20):\n(py-spy)\nThread 1:\n  f\n\nThread 2:\n  g\n\n"
      "rank 3 (pid 30):\n(eu-stack)\n#0 x\n\nnote: no Python lines for rank 3\n";
  CHECK(rank_stack(answer, 2) == "rank 2 (pid 20):\n(py-spy)\nThread 1:\n  f\n\nThread 2:\n  g\n\n");
  CHECK(rank_stack(answer, 3) == "rank 3 (pid 30):\n(eu-stack)\n#0 x\n\nnote: no Python lines for rank 3\n");
  CHECK(rank_stack(answer, 4).empty());
  CHECK(rank_stack("=== node 1 (h) ===\nrank 12 (pid 5):\nx\n", 2).empty());
}

TEST_CASE("node 0's document lists every other node, null where none or not JSON") {
  const std::string own = "{\"job_id\":\"j\",\"round\":1}\n";
  const json doc = json::parse(job_status_json(own, {{1, "{\"round\":1}"}, {2, "not json"}}, 4));
  CHECK(doc["job_id"] == "j");
  REQUIRE(doc["other_nodes"].size() == 3);
  CHECK(doc["other_nodes"][0] == json{{"group_rank", 1}, {"status", {{"round", 1}}}});
  CHECK(doc["other_nodes"][1]["status"].is_null());
  CHECK(doc["other_nodes"][2] == json{{"group_rank", 3}, {"status", nullptr}});
  CHECK(json::parse(with_job_page(own, "http://h:1/"))["job_page"] == "http://h:1/");
  CHECK(json::parse(with_job_page(own, ""))["job_page"].is_null());
}

}  // namespace
