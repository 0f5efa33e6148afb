// The collective-hang report from progress snapshots: which collective, who waits in it since
// when, who never entered it (and what it did last), who publishes nothing; and the JSON a node
// answers with, read back as it was written, a stranger's value read as nothing.
#include "launcher/watch/collective_hang.hpp"
#include "launcher/watch/hang_record.hpp"

#include <catch2/catch.hpp>

using ddp::CollectiveKind;
using ddp::CollectiveProgress;
using ddp::launcher::RankProgress;

namespace {

constexpr std::int64_t kSecond = 1000000000;
constexpr std::int64_t kNow = 1795600000 * kSecond;  // 2026-11-25 09:46:40 UTC

RankProgress rank(int r, int node, char state, std::uint64_t entered, std::uint64_t completed,
                  std::int64_t entered_ago_s, std::int64_t completed_ago_s) {
  RankProgress p;
  p.rank = r;
  p.node = node;
  p.host = "gpu" + std::to_string(node);
  p.pid = 100 + r;
  p.state = state;
  p.progress.pid = p.pid;
  p.progress.entered = entered;
  p.progress.completed = completed;
  p.progress.kind = CollectiveKind::Allreduce;
  p.progress.bytes = 4 * 1024 * 1024;
  p.progress.entered_ns = kNow - entered_ago_s * kSecond;
  p.progress.completed_ns = kNow - completed_ago_s * kSecond;
  return p;
}

}  // namespace

TEST_CASE("the report names the collective, the waiting ranks and the one that never entered", "[collective_hang]") {
  const std::vector<RankProgress> ranks{
      rank(2, 1, 'T', 56, 56, 9, 8),  // stopped after #56
      rank(0, 0, 'S', 57, 56, 7, 8),
      rank(1, 0, 'S', 57, 56, 6, 8),
  };
  const std::string text = ddp::launcher::describe_hang(ranks, kNow);
  CHECK(text ==
        "Collective #57 (allreduce, 4.0 MiB) never completed:\n"
        "  rank 0 (node 0 on gpu0, pid 100, sleeping (waiting for an event)): waiting in it for 7.0 s (since "
        "09:46:33.000 UTC)\n"
        "  rank 1 (node 0 on gpu0, pid 101, sleeping (waiting for an event)): waiting in it for 6.0 s (since "
        "09:46:34.000 UTC)\n"
        "  rank 2 (node 1 on gpu1, pid 102, stopped (SIGSTOP or a job-control signal)): never entered it; its last, "
        "allreduce #56, completed 8.0 s ago\n"
        "Never entered collective #57: rank 2 (node 1 on gpu1)\n");
}

TEST_CASE("the hang as a record: #N, the op, who waits, who never entered", "[collective_hang]") {
  const std::vector<RankProgress> ranks{rank(2, 1, 'T', 56, 56, 9, 8), rank(0, 0, 'S', 57, 56, 7, 8),
                                        rank(1, 0, 'S', 57, 56, 6, 8)};
  const auto c = ddp::launcher::hung_collective(ranks);
  REQUIRE(c);
  CHECK(c->finding == "hang");
  CHECK(c->group == "0");
  CHECK(c->seq == 57);
  CHECK(c->op == "allreduce");
  CHECK(c->group_ranks == std::vector<int>{0, 1, 2});
  CHECK(c->waiting == std::vector<int>{0, 1});
  CHECK(c->missing == std::vector<int>{2});
  REQUIRE(c->calls.size() == 1);
  CHECK(c->calls[0].input == "4.0 MiB");
  CHECK(c->calls[0].ranks == std::vector<int>{0, 1});
  // No rank on the runtime: no record.
  RankProgress python = rank(0, 0, 'S', 0, 0, 0, 0);
  python.progress.pid = 0;
  CHECK_FALSE(ddp::launcher::hung_collective({python}));
}

TEST_CASE("a Flight Recorder finding as a record: every field carried, none for no finding", "[collective_hang]") {
  using namespace ddp::launcher;
  FrFinding f;
  CHECK_FALSE(hung_collective(f));
  f.kind = FrFindingKind::Desync;
  f.group_name = "1";
  f.group_desc = "tp";
  f.group_ranks = {0, 1};
  f.seq = 2;
  f.op = "gloo:barrier";
  f.waiting = {0, 1};
  f.calls = {{"gloo:barrier", "", {0}, "/t/a.py:8 <module>"}, {"gloo:all_reduce", "[8] Float", {1}, "/t/a.py:9 f"}};
  f.lines = {{0, "/t/a.py:8 <module>"}, {1, "/t/a.py:9 f"}};
  const auto c = hung_collective(f);
  REQUIRE(c);
  CHECK(c->finding == "desync");
  CHECK(c->group == "1");
  CHECK(c->group_desc == "tp");
  CHECK(c->group_ranks == std::vector<int>{0, 1});
  CHECK(c->seq == 2);
  CHECK(c->op == "gloo:barrier");
  CHECK(c->waiting == std::vector<int>{0, 1});
  CHECK(c->missing.empty());
  REQUIRE(c->calls.size() == 2);
  CHECK(c->calls[1].op == "gloo:all_reduce");
  CHECK(c->calls[1].input == "[8] Float");
  CHECK(c->calls[1].ranks == std::vector<int>{1});
  CHECK(c->calls[1].line == "/t/a.py:9 f");
  CHECK(c->lines == f.lines);
  f.kind = FrFindingKind::Stuck;
  f.never_entered = {3};
  CHECK(hung_collective(f)->finding == "stuck");
  CHECK(hung_collective(f)->missing == std::vector<int>{3});
}

TEST_CASE("a rank stuck in an earlier collective, one without progress and one with none yet", "[collective_hang]") {
  RankProgress silent = rank(3, 1, 'S', 0, 0, 0, 0);
  silent.progress = CollectiveProgress{};  // a program not built on the runtime
  const std::vector<RankProgress> ranks{
      rank(0, 0, 'S', 12, 11, 5, 6),
      rank(1, 0, 'R', 11, 10, 20, 21),  // a mismatch: still in #11
      rank(2, 1, 'S', 0, 0, 0, 0),
      silent,
  };
  const std::string text = ddp::launcher::describe_hang(ranks, kNow);
  CHECK(text.find("rank 1 (node 0 on gpu0, pid 101, running): never entered it; it has been waiting in allreduce "
                  "#11 for 20.0 s") != std::string::npos);
  CHECK(text.find("rank 3 (node 1 on gpu1, pid 103, sleeping (waiting for an event)): publishes no progress") !=
        std::string::npos);
  CHECK(text.find("rank 2 (node 1 on gpu1, pid 102, sleeping (waiting for an event)): never entered it; it "
                  "entered no collective at all") != std::string::npos);
  CHECK(text.find("Never entered collective #12: rank 1 (node 0 on gpu0), rank 2 (node 1 on gpu1)\n") !=
        std::string::npos);
  CHECK(ddp::launcher::describe_hang({silent}, kNow).find("No rank publishes collective progress") == 0);
}

TEST_CASE("many ranks that never entered are listed as ranges", "[collective_hang]") {
  std::vector<RankProgress> ranks{rank(0, 0, 'S', 9, 8, 5, 6)};
  for (int r = 1; r < 12; ++r) ranks.push_back(rank(r, r / 4, 'S', 8, 8, 7, 6));
  CHECK(ddp::launcher::describe_hang(ranks, kNow).find("Never entered collective #9: ranks 1-11 (11 ranks)\n") !=
        std::string::npos);
}

TEST_CASE("a node's answer reads back as written, a stranger's value as nothing", "[collective_hang]") {
  RankProgress silent = rank(3, 1, 0, 0, 0, 0, 0);
  silent.progress = CollectiveProgress{};
  const std::vector<RankProgress> written{rank(2, 1, 'T', 56, 56, 9, 8), silent};
  const std::vector<RankProgress> read = ddp::launcher::decode_progress(ddp::launcher::encode_progress(written));
  REQUIRE(read.size() == 2);
  CHECK(read[0].rank == 2);
  CHECK(read[0].host == "gpu1");
  CHECK(read[0].state == 'T');
  CHECK(read[0].progress.attached());
  CHECK(read[0].progress.entered == 56);
  CHECK(read[0].progress.entered_ns == written[0].progress.entered_ns);
  CHECK(read[0].progress.kind == CollectiveKind::Allreduce);
  CHECK(read[0].taken_ns == 0);
  CHECK_FALSE(read[1].progress.attached());
  CHECK(read[1].state == 0);
  CHECK(ddp::launcher::decode_progress("not json").empty());
  CHECK(ddp::launcher::decode_progress("{\"rank\": 1}").empty());
  CHECK(ddp::launcher::decode_progress("[{\"rank\": \"x\"}, 5]").empty());
}

TEST_CASE("sizes read as people write them", "[collective_hang]") {
  CHECK(ddp::launcher::byte_size(512) == "512 B");
  CHECK(ddp::launcher::byte_size(69120) == "67.5 KiB");
  CHECK(ddp::launcher::byte_size(4u << 20) == "4.0 MiB");
  CHECK(ddp::launcher::byte_size(3ull << 30) == "3.0 GiB");
}

TEST_CASE("a --dump_stacks answer says what each rank on the runtime is doing in one line", "[collective_hang]") {
  RankProgress silent = rank(3, 1, 'S', 0, 0, 0, 0);
  silent.progress = CollectiveProgress{};
  const std::string text = ddp::launcher::describe_progress(
      {rank(0, 0, 'S', 57, 56, 3, 4), rank(1, 0, 'R', 56, 56, 1, 1), rank(2, 1, 'S', 0, 0, 0, 0), silent}, kNow);
  CHECK(text ==
        "  rank 0: in allreduce #57 (4.0 MiB) for 3.0 s\n"
        "  rank 1: last allreduce #56 completed 1.0 s ago\n"
        "  rank 2: no collective yet\n");  // rank 3 (a Python worker, say) publishes none: not said
  CHECK(ddp::launcher::describe_progress({silent}, kNow).empty());
}

TEST_CASE("times are relative to when each node took its snapshot", "[collective_hang]") {
  RankProgress late = rank(1, 1, 'S', 56, 56, 9, 8);
  late.taken_ns = kNow - 2 * kSecond;  // node 1 answered 2 s before this report is written
  const std::string text = ddp::launcher::describe_progress({rank(0, 0, 'S', 57, 56, 3, 4), late}, kNow);
  CHECK(text.find("  rank 0: in allreduce #57 (4.0 MiB) for 3.0 s\n") != std::string::npos);
  CHECK(text.find("  rank 1: last allreduce #56 completed 6.0 s ago\n") != std::string::npos);
}
