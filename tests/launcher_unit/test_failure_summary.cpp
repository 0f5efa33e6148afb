// describe_failure(): torchrun's layout (program, host, node rank, rank, exit code or signal, pid,
// error file), the worker's last stderr lines, the exception and formatted traceback from the
// error file when the worker wrote one (torch's @record format, parsed as JSON; a malformed file
// is named and the stderr lines stay), and the ModuleNotFoundError hint naming the interpreter.
#include "launcher/failure_summary.hpp"
#include "launcher/oom_check.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <string>

namespace {

using ddp::launcher::describe_failure;
using ddp::launcher::FailureContext;
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

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("failure summary: torchrun's layout and the last stderr lines", "[summary]") {
  const std::string s = describe_failure(failed_worker(), FailureContext{"train.py", "gpu07", 2, {}, ""});
  CHECK(has(s, "train.py FAILED"));
  CHECK(has(s, "  host      : gpu07\n"));
  CHECK(has(s, "  node rank : 2\n"));
  CHECK(has(s, "  rank      : 5 (local_rank: 1)\n"));
  CHECK(has(s, "  exitcode  : 3 (pid: 4242)\n"));
  CHECK(has(s, "  error_file: <N/A> (the worker wrote none: use @record on its main)\n"));
  CHECK(has(s, "  last stderr lines:\n    Traceback (most recent call last):\n    ValueError: bad batch\n"));
  CHECK_FALSE(has(s, "hint"));
}

TEST_CASE("failure summary: a signal is named", "[summary]") {
  WorkerResult w = failed_worker();
  w.exit_code = 128 + SIGSEGV;
  w.term_signal = SIGSEGV;
  CHECK(has(describe_failure(w, FailureContext{"./train", "h", 0, {}, ""}), "exitcode  : 139 (died of SIGSEGV)"));
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
  const std::string s = describe_failure(w, FailureContext{"train.py", "h", 0, {}, ""});
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
    CHECK(has(describe_failure(w, FailureContext{"train.py", "h", 0, {}, ""}), "error_file: <N/A>"));
  }
}

TEST_CASE("failure summary: a missing module names the interpreter that ran the worker", "[summary]") {
  WorkerResult w = failed_worker();
  w.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  const FailureContext python{"train.py", "h", 0, {"/usr/bin/python3", "python3 on PATH"}, ""};
  CHECK(has(describe_failure(w, python),
            "  hint      : the worker ran /usr/bin/python3 (python3 on PATH); install the module for that "
            "interpreter, or choose another with PYTHON_EXEC\n"));
  SECTION("not for a program that is not Python") {
    CHECK_FALSE(has(describe_failure(w, FailureContext{"./train", "h", 0, {}, ""}), "hint"));
  }
}

TEST_CASE("failure summary: an out-of-memory kill is named with the signal", "[summary][oom]") {
  WorkerResult w = failed_worker();
  w.exit_code = 137;
  w.term_signal = SIGKILL;
  CHECK(has(describe_failure(w, FailureContext{"./train", "h", 0, {}, "killed by the out-of-memory killer"}),
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
