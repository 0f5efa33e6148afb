// Straggler detection's rule (launcher/watch/lateness_scorer.hpp) on made-up entry times: a rank
// late in every step is flagged after `persist` scorings and recovers; one slow step, a rank late
// once or ranks that jitter raise nothing; a node whose ranks are late together is flagged; the
// records round-trip through their wire forms (launcher/rdzv/stragglers.hpp).
#include "launcher/watch/lateness_scorer.hpp"

#include <random>

#include <catch2/catch.hpp>

using namespace ddp::launcher;

namespace {

constexpr std::int64_t kMs = 1000000;
constexpr std::int64_t kStart = 1800000000LL * 1000000000LL;  // some unix time, in ns

// `ranks` ranks, one all_reduce per 100 ms step from step `from` to `to`; `late(rank, step)` ms late.
template <class Late>
std::vector<EntryTime> steps(int ranks, int from, int to, Late late) {
  std::vector<EntryTime> out;
  for (int s = from; s < to; ++s) {
    for (int r = 0; r < ranks; ++r) {
      out.push_back({r, "0", s + 1, kStart + s * 100 * kMs + static_cast<std::int64_t>(late(r, s) * kMs),
                     "gloo:all_reduce[1000]"});
    }
  }
  return out;
}

std::map<int, RankPlace> places(int ranks, int per_node) {
  std::map<int, RankPlace> out;
  for (int r = 0; r < ranks; ++r) out[r] = {r / per_node, "h" + std::to_string(r / per_node)};
  return out;
}

double at(int step) {
  return static_cast<double>(kStart) / 1e9 + step * 0.1;
}

// Scores a run of `total` steps every 100 steps (10 s); the window is 30 s (300 steps).
template <class Late>
std::vector<StragglerChange> run(LatenessScorer& scorer, int ranks, int per_node, int total, Late late,
                                 StragglerScores* last = nullptr) {
  std::vector<StragglerChange> changes;
  for (int s = 0; s < total; s += 100) {
    scorer.add(steps(ranks, s, s + 100, late));
    StragglerScores scores = scorer.score(at(s + 100), places(ranks, per_node), changes);
    if (last) *last = scores;
  }
  return changes;
}

}  // namespace

TEST_CASE("a rank late in every step is flagged after two scorings, with its lateness and step fraction") {
  LatenessScorer scorer({});
  StragglerScores last;
  const auto changes = run(
      scorer, 4, 2, 400, [](int r, int) { return r == 3 ? 40.0 : 0.0; }, &last);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].found);
  CHECK(changes[0].rank == 3);
  CHECK(changes[0].node == 1);
  CHECK(changes[0].for_s == Approx(10.0));
  CHECK(changes[0].lateness_ms == Approx(40.0));
  REQUIRE(changes[0].step_fraction);
  CHECK(*changes[0].step_fraction == Approx(0.4).epsilon(0.01));
  CHECK(describe(changes[0]) == "rank 3 on node 1 (h1) enters collectives 40 ms late, 40% of a step, for 10 s");
  REQUIRE(last.ranks.size() == 4);
  CHECK(last.ranks[3].straggler);
  CHECK_FALSE(last.ranks[2].straggler);
  CHECK(last.ranks[3].history.size() == 4);
  CHECK_FALSE(last.nodes[1].straggler);  // one of its two ranks: not the node
}

TEST_CASE("a straggler that catches up is said to recover after two scorings on time") {
  LatenessScorer scorer({});
  const auto changes = run(scorer, 2, 1, 1200, [](int r, int s) { return r == 1 && s < 400 ? 40.0 : 0.0; });
  REQUIRE(changes.size() >= 2);
  CHECK(changes.back().found == false);
  CHECK(changes.back().rank == 1);
  CHECK_THAT(describe(changes.back()), Catch::Matchers::StartsWith("rank 1 on node 1 (h1) is no longer late"));
}

TEST_CASE("one slow step, a rank slow once and jitter raise nothing") {
  LatenessScorer scorer({});
  std::mt19937 random(7);
  std::normal_distribution<double> jitter(0.0, 3.0);
  StragglerScores last;
  const auto changes = run(
      scorer, 4, 2, 1200,
      [&](int r, int s) {
        if (s == 350) return 5000.0;                      // a checkpoint on every rank
        if (r == 2 && s >= 500 && s < 510) return 900.0;  // a garbage collection: ten steps slow once
        return jitter(random);
      },
      &last);
  CHECK(changes.empty());
  for (const RankLateness& r : last.ranks) CHECK_FALSE(r.straggler);
}

TEST_CASE("lateness below the absolute or the relative threshold is not flagged") {
  LatenessScorer scorer({});
  CHECK(run(scorer, 2, 1, 600, [](int r, int) { return r == 1 ? 15.0 : 0.0; }).empty());  // < 20 ms
  LatenessOptions o;
  o.min_fraction = 0.5;  // 50% of a 100 ms step
  LatenessScorer strict(o);
  CHECK(run(strict, 2, 1, 600, [](int r, int) { return r == 1 ? 40.0 : 0.0; }).empty());
}

TEST_CASE("a node whose ranks are late together is flagged in one line") {
  LatenessScorer scorer({});
  StragglerScores last;
  const auto changes = run(
      scorer, 4, 2, 400,
      [](int r, int) {
        return r >= 2 ? 60.0 : 0.0; /* 30 ms past the median of four */
      },
      &last);
  REQUIRE(changes.size() == 1);
  CHECK(changes[0].is_node);
  CHECK(changes[0].node == 1);
  CHECK_THAT(describe(changes[0]), Catch::Matchers::StartsWith("node 1 (h1) enters collectives"));
  CHECK(last.nodes[1].straggler);
  CHECK_FALSE(last.nodes[0].straggler);
  CHECK(last.ranks[2].straggler);
  CHECK(last.nodes[1].lateness_ms == Approx(30.0));
}

TEST_CASE("a collective not every rank of its group entered yet is not counted") {
  LatenessScorer scorer({});
  auto entries = steps(2, 0, 100, [](int, int) { return 0.0; });
  entries.push_back({0, "0", 101, kStart + 101 * 100 * kMs, "gloo:all_reduce[1000]"});  // rank 1 not there yet
  scorer.add(entries);
  std::vector<StragglerChange> changes;
  const StragglerScores s = scorer.score(at(101), places(2, 1), changes);
  CHECK(s.ranks[0].lateness_ms == Approx(0.0));
}

TEST_CASE("entries and scores round-trip through their wire forms") {
  NodeEntries e{1, "h1", {{3, "0", 12, 1234567890123, "gloo:all_reduce[10]"}, {2, "runtime", 4, 99, "allreduce 40"}}};
  const auto back = decode_entries(encode_entries(e));
  REQUIRE(back);
  CHECK(back->node == 1);
  CHECK(back->host == "h1");
  REQUIRE(back->entries.size() == 2);
  CHECK(back->entries[0].entered_ns == 1234567890123);
  CHECK(back->entries[1].signature == "allreduce 40");
  CHECK_FALSE(decode_entries("something else"));

  StragglerScores s;
  s.window_s = 30;
  s.ranks.push_back({3, 1, "h1", 48.0, 0.31, true, 1800000000.0, {{1800000010.0, 48.0}}});
  s.ranks.push_back({2, 1, "h1", 1.0, std::nullopt, false, std::nullopt, {}});
  s.nodes.push_back({1, "h1", 24.5, false, std::nullopt});
  const auto scores = decode_scores(encode_scores(s));
  REQUIRE(scores);
  CHECK(straggler_json(*scores) == straggler_json(s));
  CHECK(straggler_json(node_view(s, 0)).find("\"ranks\":[]") != std::string::npos);
  CHECK_FALSE(decode_scores("ddplaunch-stragglers 1\n{not json"));
}

TEST_CASE("with two collectives per step, a rank's lateness is its delay per step, not half of it") {
  // Each step: all_reduce[1000] after the work (rank 1 late by 40 ms), then all_reduce[1], which
  // every rank enters together.
  std::vector<EntryTime> entries;
  for (int s = 0; s < 300; ++s) {
    for (int r = 0; r < 3; ++r) {
      const std::int64_t t = kStart + s * 100 * kMs;
      entries.push_back({r, "0", 2 * s + 1, t + (r == 1 ? 40 : 0) * kMs, "gloo:all_reduce[[1000]]"});
      entries.push_back({r, "0", 2 * s + 2, t + 45 * kMs, "gloo:all_reduce[[1]]"});
    }
  }
  LatenessScorer scorer({});
  scorer.add(entries);
  std::vector<StragglerChange> changes;
  scorer.score(at(300), places(3, 3), changes);
  const StragglerScores s = scorer.score(at(300), places(3, 3), changes);
  CHECK(s.ranks[1].lateness_ms == Approx(40.0));
  REQUIRE(s.ranks[1].step_fraction);
  CHECK(*s.ranks[1].step_fraction == Approx(0.4));
  CHECK(s.ranks[1].straggler);
  CHECK(s.ranks[0].lateness_ms == Approx(0.0));
}
