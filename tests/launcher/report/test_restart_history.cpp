// The words about restarts (restart_history.hpp): the short cause made from a round's root-cause
// record (short_cause, failure_summary.hpp; never from printed text), the notice printed before a
// restart, every failed round in the final summary, the note after a cured job, and the
// no-progress breaker's stop.
#include "launcher/report/restart_history.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "launcher/rdzv/outcome.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/root_cause_of.hpp"
#include "launcher/report/round_report.hpp"

namespace {

using ddp::launcher::FailedRound;
using ddp::launcher::RestartHistory;
using ddp::launcher::RootCause;
using ddp::launcher::short_cause;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Rank 3 (local rank 1) of node 1 on gpu2, as that node's report makes its record.
RootCause record_of(int exit_code, int term_signal, std::vector<std::string> stderr_tail) {
  ddp::launcher::WorkerResult w;
  w.rank = 3;
  w.local_rank = 1;
  w.pid = 77;
  w.exit_code = exit_code;
  w.term_signal = term_signal;
  w.stderr_tail = std::move(stderr_tail);
  ddp::launcher::RoundReport report;
  report.add(w, ddp::launcher::RankState::Failed);
  return ddp::launcher::worker_root_cause(*report.root_cause(), 1, "gpu2");
}

FailedRound failed(int round, std::string reason, std::string progress = "",
                   std::vector<std::string> progress_nodes = {}) {
  RootCause root = ddp::launcher::node_root_cause(RootCause::Kind::Hang, 0, "gpu1", std::move(reason));
  return FailedRound{round, 1, 1, root, 0, std::move(progress), std::move(progress_nodes)};
}

}  // namespace

TEST_CASE("short cause: rank, node, host, exit code and the error's last line", "[restarts]") {
  const RootCause r = record_of(1, 0, {"Traceback (most recent call last):", "ValueError: boom", ""});
  CHECK(short_cause(r, 0) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 1: ValueError: boom");
  CHECK(short_cause(r, 1) == short_cause(r, 0));  // a rank's failure reads the same on every node
}

TEST_CASE("short cause: a signal stays, the pid goes", "[restarts]") {
  CHECK(short_cause(record_of(137, 9, {}), 1) ==
        "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 137 (died of SIGKILL)");
}

TEST_CASE("short cause: another node's record after the wire, a lost node here and there", "[restarts]") {
  // What node 1 sends is what node 0 words: the record crosses in the outcome, the text is not read.
  const auto sent = ddp::launcher::Outcome::failure(2, "any words at all", 1, record_of(2, 0, {"oops"}));
  const auto got = ddp::launcher::Outcome::decode(sent.encode());
  REQUIRE(got.root_cause);
  CHECK(short_cause(*got.root_cause, 0) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 2: oops");
  const auto lost = ddp::launcher::lost_node_stop(
      ddp::launcher::NodeLoss{"node 1 (gpu2) lost: no heartbeat for 10 s", false}, 0, "gpu1", {});
  CHECK(lost.summary == "ddplaunch: node 1 (gpu2) lost: no heartbeat for 10 s; stopped the workers on this node");
  CHECK(short_cause(lost.root, 0) == "node 1 (gpu2) lost: no heartbeat for 10 s; stopped the workers on this node");
  CHECK(short_cause(lost.root, 2) == "a failure reported by node 0 (gpu1): node 1 (gpu2) lost: no heartbeat for 10 s");
}

TEST_CASE("restart history: the notice, every round at the end, the breaker's stop", "[restarts]") {
  RestartHistory h;
  CHECK(h.section().empty());
  CHECK(h.cured_note().empty());
  h.add(failed(0, "rank 3 on node 1 (gpu2): exitcode 1: boom"));
  CHECK(h.restart_notice(0, 0) == "round 0 failed: rank 3 on node 1 (gpu2): exitcode 1: boom");
  CHECK(h.section().empty());  // one round: the summary above says it all
  CHECK(has(h.cured_note(), "succeeded after 1 failed round(s)"));
  CHECK(has(h.cured_note(), "  round 0: rank 3 on node 1 (gpu2): exitcode 1: boom"));
  h.add(failed(1, "rank 3 on node 1 (gpu2): exitcode 1: boom", "none",
               {"node 0: iteration 100 (before: 100)", "node 1: nothing measured"}));
  const std::string notice = h.restart_notice(1, 2);
  CHECK(has(notice, "round 1 failed: rank 3"));
  CHECK(has(notice, "progress in round 1: none (1 of 2 restarts in a row without progress)"));
  CHECK(has(notice, "\n  node 0: iteration 100 (before: 100)"));
  const std::string section = h.section();
  CHECK(has(section, "Every round's failure (2 rounds, oldest first):\n  round 0: rank 3"));
  CHECK(has(section, "  round 1: rank 3 on node 1 (gpu2): exitcode 1: boom [progress: none]\n"));
  const std::string stop = h.no_progress_stop(2, 2);
  CHECK(has(stop, "2 restarts in a row made no progress (--max_no_progress_restarts=2)"));
  CHECK(has(stop, "exits 123: do not requeue"));
  CHECK(has(stop, "      node 1: nothing measured\n"));
  CHECK(stop.rfind(ddp::launcher::summary_frame() + "\n", 0) == 0);  // the summary's own frame

}
