// The failure summary (failure_summary.hpp) from a round's data (round_report.hpp): torchrun's
// layout (program, host, node rank, rank, exit code or signal, pid, error file), the worker's last
// stderr lines, the exception and formatted traceback from the error file when the worker wrote
// one (torch's @record format, parsed as JSON; a malformed file is named and the stderr lines
// stay), the ModuleNotFoundError hint naming the interpreter, the other sections inside the frame,
// and what a node prints when another node's failure (or its own hang) came first.
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/oom_check.hpp"
#include "launcher/report/round_report.hpp"

#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <csignal>
#include <ctime>
#include <fstream>
#include <string>

#include "common/rank_ranges.hpp"

namespace {

using ddp::launcher::end_of_round_summary;
using ddp::launcher::failure_summary;
using ddp::launcher::FailureContext;
using ddp::launcher::RankState;
using ddp::launcher::RoundEnd;
using ddp::launcher::RoundReport;
using ddp::launcher::WorkerResult;

WorkerResult failed_worker() {
  WorkerResult w;
  w.local_rank = 1;
  w.rank = 5;
  w.pid = 4242;
  w.exit_code = 3;
  w.stderr_tail = {"Traceback (most recent call last):", "ValueError: bad batch"};
  return w;
}

FailureContext context(const std::string& program, const std::string& host, int node) {
  FailureContext c;
  c.program = program;
  c.host = host;
  c.node_rank = node;
  return c;
}

// The summary of a round in which only `w` failed (its signal explained by `note`).
std::string describe_failure(const WorkerResult& w, const FailureContext& c, const std::string& note = "") {
  RoundReport report;
  report.add(w, RankState::Failed, note);
  return failure_summary(report, c);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("failure summary: torchrun's layout and the last stderr lines", "[summary]") {
  const std::string s = describe_failure(failed_worker(), context("train.py", "gpu07", 2));
  CHECK(has(s, "train.py FAILED"));
  CHECK(has(s, "  host      : gpu07\n"));
  CHECK(has(s, "  node rank : 2\n"));
  CHECK(has(s, "  rank      : 5 (local_rank: 1)\n"));
  CHECK(has(s, "  exitcode  : 3 (pid: 4242)\n"));
  CHECK(has(s, "  error_file: <N/A> (the worker wrote none: use @record on its main)\n"));
  CHECK(has(s, "  last stderr lines:\n    Traceback (most recent call last):\n    ValueError: bad batch\n"));
  CHECK_FALSE(has(s, "hint"));
}

TEST_CASE("failure summary: last stderr lines written long before the exit say how long", "[summary]") {
  WorkerResult w = failed_worker();
  w.stderr_quiet = std::chrono::milliseconds(40200);  // a warning at start, then 40 s of silence
  CHECK(has(describe_failure(w, context("train.py", "h", 0)),
            "  last stderr lines (the last one 40.2 s before it exited):\n    Traceback (most recent call last):\n"));
  w.stderr_quiet = std::chrono::milliseconds(4900);  // around the failure: as they are
  CHECK(has(describe_failure(w, context("train.py", "h", 0)), "  last stderr lines:\n"));
}

TEST_CASE("failure summary: a signal is named", "[summary]") {
  WorkerResult w = failed_worker();
  w.exit_code = 128 + SIGSEGV;
  w.term_signal = SIGSEGV;
  CHECK(has(describe_failure(w, context("./train", "h", 0)), "exitcode  : 139 (died of SIGSEGV)"));
}

namespace {
// describe_failure() of failed_worker() with an error file holding `content`.
std::string with_error_file(const std::string& content) {
  char path[] = "/tmp/ddp_error_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << content;
  WorkerResult w = failed_worker();
  w.error_file = path;
  const std::string s = describe_failure(w, context("train.py", "h", 0));
  ::unlink(path);
  return s;
}
}  // namespace

TEST_CASE("failure summary: the exception and traceback from torch's @record error file", "[summary]") {
  const std::string s = with_error_file(
      R"({"message": {"message": "ValueError: bad batch 7", "extraInfo": {"py_callstack": )"
      R"("Traceback (most recent call last):\n  File \"train.py\", line 3, in main\n    raise ValueError\n)"
      R"(ValueError: bad batch 7\n", "timestamp": "1700000000"}}})");
  CHECK(has(s, "  error     : ValueError: bad batch 7\n"));
  CHECK(has(s,
            "  traceback :\n    Traceback (most recent call last):\n      File \"train.py\", line 3, in main\n"
            "        raise ValueError\n    ValueError: bad batch 7\n"));
  CHECK_FALSE(has(s, "last stderr lines"));  // the record explains it; the tail is the fallback
  SECTION("a plain string message") {
    CHECK(has(with_error_file(R"({"message": "boom"})"), "  error     : boom\n"));
  }
  SECTION("not JSON: named, escaped, and the stderr lines stay") {
    const std::string bad = with_error_file("oops\x1b[31m");
    CHECK(has(bad, "not an error record (oops\\x1b[31m)"));
    CHECK(has(bad, "last stderr lines"));
  }
  SECTION("a named file the worker never wrote reads as <N/A>") {
    WorkerResult w = failed_worker();
    w.error_file = "/nonexistent/error.json";
    CHECK(has(describe_failure(w, context("train.py", "h", 0)), "error_file: <N/A>"));
  }
}

TEST_CASE("failure summary: a missing module names the interpreter that ran the worker", "[summary]") {
  WorkerResult w = failed_worker();
  w.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  FailureContext python = context("train.py", "h", 0);
  python.python = {"/usr/bin/python3", "python3 on PATH"};
  CHECK(has(describe_failure(w, python),
            "  hint      : the worker ran /usr/bin/python3 (python3 on PATH); install the module for that "
            "interpreter, or choose another with PYTHON_EXEC\n"));
  SECTION("not for a program that is not Python") {
    CHECK_FALSE(has(describe_failure(w, context("./train", "h", 0)), "hint"));
  }
}

TEST_CASE("failure summary: an out-of-memory kill is named with the signal", "[summary][oom]") {
  WorkerResult w = failed_worker();
  w.exit_code = 137;
  w.term_signal = SIGKILL;
  CHECK(has(describe_failure(w, context("./train", "h", 0), "killed by the out-of-memory killer"),
            "exitcode  : 137 (died of SIGKILL: killed by the out-of-memory killer)"));
}

TEST_CASE("oom_kill_in_log finds the kernel's record of that pid, not older ones or other pids", "[oom]") {
  const std::string log =
      "6,1,100,-;Linux version\n"
      "3,2,200,-;Out of memory: Killed process 4242 (python3) total-vm:1kB, anon-rss:65280kB, file-rss:1kB\n"
      "3,3,900,-;Memory cgroup out of memory: Killed process 4243 (python3) total-vm:5kB, anon-rss:2048kB\n"
      "3,4,950,-;Killed process 77 (x)\n";
  CHECK(ddp::launcher::oom_kill_in_log(log, 4242, 0) == 65280);
  CHECK_FALSE(ddp::launcher::oom_kill_in_log(log, 4242, 300));  // before the job: pids are reused
  CHECK(ddp::launcher::oom_kill_in_log(log, 4243, 300) == 2048);
  CHECK(ddp::launcher::oom_kill_in_log(log, 77, 0) == -1);
  CHECK_FALSE(ddp::launcher::oom_kill_in_log(log, 424, 0));
}

namespace {

// A failed rank whose error file says `message`, recorded at `timestamp` (seconds).
WorkerResult raised(int rank, const std::string& message, long long timestamp, std::vector<std::string>& files) {
  WorkerResult w = failed_worker();
  w.rank = rank;
  w.local_rank = rank;
  w.exit_code = 1;
  char path[] = "/tmp/ddp_error_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << R"({"message": {"message": ")" << message
                      << R"(", "extraInfo": {"py_callstack": "Traceback (most recent call last):\n  File \"t.py\"\n)"
                      << message << R"(\n", "timestamp": ")" << timestamp << R"("}}})";
  files.push_back(path);
  w.error_file = path;
  return w;
}

}  // namespace

TEST_CASE("round report: rank ranges", "[summary]") {
  using ddp::rank_ranges;
  using ddp::ranks_phrase;
  CHECK(rank_ranges({7, 0, 1, 2, 3, 5, 8, 3}) == "0-3,5,7-8");
  CHECK(rank_ranges({}) == "");
  CHECK(ranks_phrase({4}) == "rank 4");
  CHECK(ranks_phrase({0, 1, 2, 3, 4, 5, 6, 7}) == "ranks 0-7 (8 ranks)");
}

TEST_CASE("round report: the earliest failure by its own timestamp is the root cause, identical failures merge",
          "[summary]") {
  std::vector<std::string> files;
  RoundReport report;
  // Rank 3 is seen first, but rank 5 raised a second earlier (its error file says so).
  report.add(raised(3, "RuntimeError: peer gone", 1700000001, files), RankState::Failed);
  report.add(raised(5, "ValueError: boom", 1700000000, files), RankState::Failed);
  for (int r : {0, 1, 2, 4, 6, 7}) report.add(raised(r, "ValueError: boom", 1700000002, files), RankState::Failed);
  WorkerResult killed = failed_worker();
  killed.rank = 8;
  killed.exit_code = 128 + SIGTERM;
  killed.term_signal = SIGTERM;
  report.add(killed, RankState::Stopped);
  killed.rank = 9;
  report.add(killed, RankState::Stopped);
  REQUIRE(report.root_cause() != nullptr);
  CHECK(report.root_cause()->worker.rank == 5);
  const std::string s = failure_summary(report, context("t.py", "h", 0));
  INFO(s);
  CHECK(has(s, "Root cause (the earliest failure):\n"));
  CHECK(has(s, "  rank      : 5 (local_rank: 5)\n"));
  CHECK(has(s, "  error     : ValueError: boom\n"));
  CHECK(has(s,
            "Other failures (by what they say):\n"
            "  rank 3: exitcode 1: RuntimeError: peer gone\n"
            "  ranks 0-2,4,6-7 (6 ranks): exitcode 1: ValueError: boom (as the root cause)\n"));
  CHECK(has(s, "Stopped by ddplaunch (not failed):\n  ranks 8-9 (2 ranks): ended by SIGTERM\n"));
  // One traceback: the root cause's.
  CHECK(s.find("Traceback") == s.rfind("Traceback"));
  for (const auto& f : files) ::unlink(f.c_str());
}

TEST_CASE("round report: no failure, no summary, another node's cause comes first, this node's ranks after",
          "[summary]") {
  RoundReport report;
  WorkerResult ok = failed_worker();
  ok.exit_code = 0;
  report.add(ok, RankState::Succeeded);
  CHECK(report.root_cause() == nullptr);
  CHECK(failure_summary(report, context("t.py", "h", 0)).empty());
  WorkerResult killed = failed_worker();
  killed.exit_code = 128 + SIGTERM;
  killed.term_signal = SIGTERM;
  report.add(killed, RankState::Stopped);
  const auto remote = ddp::launcher::Outcome::failure(1, "node 1's report", 1);
  const auto end = end_of_round_summary(report, context("t.py", "h", 0), RoundEnd{remote, {}, {}, {"h", "h1"}});
  const std::string& s = end.text;
  // An older launcher's outcome has no record: the root cause names its node, and no more.
  REQUIRE(end.root);
  CHECK(end.root->kind == ddp::launcher::RootCause::Kind::Reported);
  CHECK(end.root->node == 1);
  CHECK(end.root->host == "h1");
  CHECK(end.root_text == "node 1's report");
  CHECK(s ==
        "node 1's report\nOn this node (node 0 on h):\nStopped by ddplaunch (not failed):\n"
        "  rank 5: ended by SIGTERM\n");
}

TEST_CASE("node failures: the record round-trips, anything else is ignored", "[summary]") {
  using ddp::launcher::decode_node_failure;
  using ddp::launcher::encode_node_failure;
  using ddp::launcher::NodeFailure;
  const NodeFailure f{3, std::chrono::system_clock::time_point(std::chrono::milliseconds(1795587795123)),
                      "line 1\nline 2"};
  const auto back = decode_node_failure(3, encode_node_failure(f));
  REQUIRE(back);
  CHECK(back->time == f.time);
  CHECK(back->summary == "line 1\nline 2");
  CHECK(back->node == 3);
  for (const std::string bad : {"", "success", "ddplaunch-failure 1 12x\n", "ddplaunch-failure 1 -5\nx",
                                "ddplaunch-failure 2 5\nx", "ddplaunch-failure 1 5"}) {
    CHECK_FALSE(decode_node_failure(0, bad));
  }
}

TEST_CASE("round report: another node's earlier failure is the root cause, whoever reported first", "[summary]") {
  using ddp::launcher::NodeFailure;
  std::vector<std::string> files;
  RoundReport report;
  report.add(raised(4, "RuntimeError: Connection reset by peer", 1700000005, files), RankState::Failed);
  const auto published = ddp::launcher::Outcome::failure(1, "node 0's report", 0);  // this node, first
  // Node 2's rank failed 3 s earlier by its own time, but its launcher published later.
  const NodeFailure earlier{2, std::chrono::system_clock::time_point(std::chrono::seconds(1700000002)),
                            "ValueError: the real cause"};
  const std::vector<std::string> hosts{"h", "h1", "gpu2"};
  const std::string s =
      end_of_round_summary(report, context("t.py", "h", 0), RoundEnd{published, earlier, {}, hosts}).text;
  INFO(s);
  CHECK(s.rfind("ddplaunch: the earliest failure by its own time was on node 2 (gpu2) (node 0 reported first):\n"
                "ValueError: the real cause\nOn this node (node 0 on h):\nOther failures (by what they say):\n"
                "  rank 4: exitcode 1: RuntimeError: Connection reset by peer\n",
                0) == 0);
  // A later one elsewhere changes nothing: this node's own failure is the root cause.
  const NodeFailure later{2, std::chrono::system_clock::time_point(std::chrono::seconds(1700000009)), "later"};
  const auto mine = end_of_round_summary(report, context("t.py", "h", 0), RoundEnd{published, later, {}, hosts});
  const std::string& t = mine.text;
  CHECK(t.find("Root cause (the earliest failure):") != std::string::npos);
  // The record is this node's root rank, whatever the words say.
  REQUIRE(mine.root);
  CHECK(mine.root->kind == ddp::launcher::RootCause::Kind::Worker);
  CHECK(mine.root->rank == 4);
  CHECK(mine.root->node == 0);
  CHECK(mine.root->error_type == "RuntimeError");
  CHECK(t.find("later") == std::string::npos);
  for (const auto& f : files) ::unlink(f.c_str());
}

TEST_CASE("failure summary: the whole text, word for word, inside its 60-column frame", "[summary]") {
  std::vector<std::string> files;
  RoundReport report;
  report.add(raised(0, "ValueError: boom", 1700000000, files), RankState::Failed);
  report.add(raised(1, "ValueError: boom", 1700000001, files), RankState::Failed);
  WorkerResult killed = failed_worker();
  killed.rank = 2;
  killed.exit_code = 128 + SIGTERM;
  killed.term_signal = SIGTERM;
  report.add(killed, RankState::Stopped);
  const std::time_t t = 1700000000;
  std::tm local{};
  ::localtime_r(&t, &local);
  char when[64];
  std::strftime(when, sizeof(when), "%Y-%m-%d_%H:%M:%S", &local);
  const std::string frame(60, '='), divider(60, '-');
  const std::string expected = fmt::format(
      "{0}\nt.py FAILED\n{1}\n"
      "Root cause (the earliest failure):\n"
      "  time      : {2}\n"
      "  host      : gpu0\n"
      "  node rank : 1\n"
      "  rank      : 0 (local_rank: 0)\n"
      "  exitcode  : 1 (pid: 4242)\n"
      "  error     : ValueError: boom\n"
      "  traceback :\n    Traceback (most recent call last):\n      File \"t.py\"\n    ValueError: boom\n"
      "  error_file: {3}\n{1}\n"
      "Other failures (by what they say):\n"
      "  rank 1: exitcode 1: ValueError: boom (as the root cause)\n"
      "Stopped by ddplaunch (not failed):\n"
      "  rank 2: ended by SIGTERM\n{0}",
      frame, divider, when, files[0]);
  CHECK(failure_summary(report, context("t.py", "gpu0", 1)) == expected);
  // The error file was read once, when the rank exited: the summary needs it no more.
  for (const auto& f : files) ::unlink(f.c_str());
  CHECK(has(failure_summary(report, context("t.py", "gpu0", 1)), "  error     : ValueError: boom\n"));
}

TEST_CASE("round report: this node's hang, when it came first, leads the summary like another node's", "[summary]") {
  using ddp::launcher::NodeFailure;
  std::vector<std::string> files;
  RoundReport report;
  report.add(raised(4, "RuntimeError: Connection reset by peer", 1700000005, files), RankState::Failed);
  const auto remote = ddp::launcher::Outcome::failure(1, "node 1's report", 1);  // node 1 published first
  const NodeFailure hang{0, std::chrono::system_clock::time_point(std::chrono::seconds(1700000001)),
                         "ddplaunch: hang: \x1b[31m"};
  const NodeFailure other{2, std::chrono::system_clock::time_point(std::chrono::seconds(1700000003)), "later"};
  const auto end =
      end_of_round_summary(report, context("t.py", "h", 0), RoundEnd{remote, other, hang, {"h", "h1", "h2"}});
  const std::string& s = end.text;
  CHECK(s ==
        "ddplaunch: the earliest failure by its own time was on node 0 (h) (node 1 reported first):\n"
        "ddplaunch: hang: \\x1b[31m\nOn this node (node 0 on h):\nOther failures (by what they say):\n"
        "  rank 4: exitcode 1: RuntimeError: Connection reset by peer\n");
  SECTION("this node's own failure came first, though another node reported first") {
    const std::string t =
        end_of_round_summary(report, context("t.py", "h", 0), RoundEnd{remote, {}, {}, {"h", "h1", "h2"}}).text;
    CHECK(t.find("Root cause (the earliest failure):") != std::string::npos);
    CHECK(has(t, std::string(60, '=') +
                     "\n(node 1 reported its failure first; by their own times this node's came earlier)"));
  }
  for (const auto& f : files) ::unlink(f.c_str());
}

TEST_CASE("another node's failure, a hang and the event log's reason are worded here too", "[summary]") {
  using ddp::launcher::hang_failure;
  using ddp::launcher::Outcome;
  using ddp::launcher::reported_failure;
  using ddp::launcher::summary_first_line;
  CHECK(reported_failure(Outcome::failure(1, "boom\x1b[0m", 1), {"h0", "gpu\x07"}) ==
        "ddplaunch: stopping: a failure reported by node 1 (gpu\\x07):\nboom\\x1b[0m");
  CHECK(reported_failure(Outcome::failure(1, "boom", 3), {"h0"}) ==
        "ddplaunch: stopping: a failure reported by node 3:\nboom");
  CHECK(reported_failure(Outcome::failure(1, "boom", -1), {"h0"}) == "ddplaunch: stopping: a failure:\nboom");
  const auto hang = hang_failure("hang: rank 1\nstacks", "/run/h.txt", 2, "gpu2");
  CHECK(hang.summary == "ddplaunch: hang: rank 1\nstacks");
  CHECK(hang.root.kind == ddp::launcher::RootCause::Kind::Hang);
  CHECK(hang.root.reason == "hang: rank 1");
  CHECK(hang.root.node == 2);
  CHECK(hang.root.host == "gpu2");
  // The report's collective, when it names one, is the record's.
  CHECK_FALSE(hang.root.collective);
  ddp::launcher::HungCollective c;
  c.seq = 4;
  c.op = "gloo:all_reduce";
  c.missing = {1};
  const auto named = hang_failure("hang: rank 1\nstacks", "", 2, "gpu2", c);
  REQUIRE(named.root.collective);
  CHECK(named.root.collective->seq == 4);
  CHECK(named.root.collective->missing == std::vector<int>{1});
  const std::string cut = hang_failure(std::string(600 * 1024, 'x'), "", 2, "gpu2").summary;
  CHECK(cut.substr(0, 512 * 1024) == "ddplaunch: " + std::string(512 * 1024 - 11, 'x'));
  CHECK(cut.substr(512 * 1024) == "\n... (cut at 512 KiB; the whole report is in no file on node 2)");
  CHECK(summary_first_line(std::string(60, '=') + "\nt.py FAILED\n---") == "t.py FAILED");
  CHECK(summary_first_line("ddplaunch: stopping: a failure:\nboom") == "ddplaunch: stopping: a failure:");
  CHECK(summary_first_line("") == "");
}
