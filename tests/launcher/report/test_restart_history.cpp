// The words about restarts (restart_history.hpp): the short cause read back from a round's
// summary (short_cause, failure_summary.hpp), the notice printed before a restart, every failed
// round in the final summary, the note after a cured job, and the no-progress breaker's stop.
#include "launcher/report/restart_history.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "launcher/rdzv/outcome.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/round_report.hpp"

namespace {

using ddp::launcher::FailedRound;
using ddp::launcher::RestartHistory;
using ddp::launcher::short_cause;

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string summary_of(int exit_code, int term_signal, std::vector<std::string> stderr_tail) {
  ddp::launcher::WorkerResult w;
  w.rank = 3;
  w.local_rank = 1;
  w.pid = 77;
  w.exit_code = exit_code;
  w.term_signal = term_signal;
  w.stderr_tail = std::move(stderr_tail);
  ddp::launcher::RoundReport report;
  report.add(w, ddp::launcher::RankState::Failed);
  ddp::launcher::FailureContext c;
  c.program = "train.py";
  c.host = "gpu2";
  c.node_rank = 1;
  return ddp::launcher::failure_summary(report, c);
}

}  // namespace

TEST_CASE("short cause: rank, node, host, exit code and the error's last line", "[restarts]") {
  const std::string s = summary_of(1, 0, {"Traceback (most recent call last):", "ValueError: boom", ""});
  CHECK(short_cause(s) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 1: ValueError: boom");
}

TEST_CASE("short cause: a signal stays, the pid goes", "[restarts]") {
  const std::string s = summary_of(137, 9, {});
  CHECK(short_cause(s) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 137 (died of SIGKILL)");
}

TEST_CASE("short cause: another node's report, a lost node", "[restarts]") {
  const auto outcome = ddp::launcher::Outcome::failure(1, summary_of(2, 0, {"oops"}), 1);
  const std::string reported = ddp::launcher::reported_failure(outcome, {"gpu1", "gpu2"});
  CHECK(short_cause(reported) == "rank 3 (local_rank: 1) on node 1 (gpu2): exitcode 2: oops");
  CHECK(short_cause(ddp::launcher::lost_node_stop("node 1 (gpu2) lost: no heartbeat for 10 s")) ==
        "node 1 (gpu2) lost: no heartbeat for 10 s; stopped the workers on this node");
}

TEST_CASE("restart history: the notice, every round at the end, the breaker's stop", "[restarts]") {
  RestartHistory h;
  CHECK(h.section().empty());
  CHECK(h.cured_note().empty());
  h.add(FailedRound{0, 1, 1, "rank 3 on node 1 (gpu2): exitcode 1: boom", "", {}});
  CHECK(h.restart_notice(0, 0) == "round 0 failed: rank 3 on node 1 (gpu2): exitcode 1: boom");
  CHECK(h.section().empty());  // one round: the summary above says it all
  CHECK(has(h.cured_note(), "succeeded after 1 failed round(s)"));
  CHECK(has(h.cured_note(), "  round 0: rank 3 on node 1 (gpu2): exitcode 1: boom"));
  h.add(FailedRound{1,
                    1,
                    1,
                    "rank 3 on node 1 (gpu2): exitcode 1: boom",
                    "none",
                    {"node 0: iteration 100 (before: 100)", "node 1: nothing measured"}});
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
}
