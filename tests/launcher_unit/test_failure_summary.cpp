// describe_failure(): torchrun's layout (program, host, node rank, rank, exit code or signal, pid,
// error file), the worker's last stderr lines, the error file's contents when the worker wrote
// one, and the ModuleNotFoundError hint naming the interpreter.
#include "launcher/failure_summary.hpp"

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
  const std::string s = describe_failure(failed_worker(), FailureContext{"train.py", "gpu07", 2, {}});
  CHECK(has(s, "train.py FAILED"));
  CHECK(has(s, "  host      : gpu07\n"));
  CHECK(has(s, "  node rank : 2\n"));
  CHECK(has(s, "  rank      : 5 (local_rank: 1)\n"));
  CHECK(has(s, "  exitcode  : 3 (pid: 4242)\n"));
  CHECK(has(s, "  error_file: <N/A>\n"));
  CHECK(has(s, "  last stderr lines:\n    Traceback (most recent call last):\n    ValueError: bad batch\n"));
  CHECK_FALSE(has(s, "hint"));
}

TEST_CASE("failure summary: a signal is named", "[summary]") {
  WorkerResult w = failed_worker();
  w.exit_code = 128 + SIGSEGV;
  w.term_signal = SIGSEGV;
  CHECK(has(describe_failure(w, FailureContext{"./train", "h", 0, {}}), "exitcode  : 139 (died of SIGSEGV)"));
}

TEST_CASE("failure summary: the error file's contents when the worker wrote one", "[summary]") {
  char path[] = "/tmp/ddp_error_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << R"({"message": "boom"})";
  WorkerResult w = failed_worker();
  w.error_file = path;
  const std::string s = describe_failure(w, FailureContext{"train.py", "h", 0, {}});
  ::unlink(path);
  CHECK(has(s, std::string("  error_file: ") + path + "\n{\"message\": \"boom\"}"));
  SECTION("a named file the worker never wrote reads as <N/A>") {
    w.error_file = "/nonexistent/error.json";
    CHECK(has(describe_failure(w, FailureContext{"train.py", "h", 0, {}}), "error_file: <N/A>"));
  }
}

TEST_CASE("failure summary: a missing module names the interpreter that ran the worker", "[summary]") {
  WorkerResult w = failed_worker();
  w.stderr_tail = {"ModuleNotFoundError: No module named 'torch'"};
  const FailureContext python{"train.py", "h", 0, {"/usr/bin/python3", "python3 on PATH"}};
  CHECK(has(describe_failure(w, python),
            "  hint      : the worker ran /usr/bin/python3 (python3 on PATH); install the module for that "
            "interpreter, or choose another with PYTHON_EXEC\n"));
  SECTION("not for a program that is not Python") {
    CHECK_FALSE(has(describe_failure(w, FailureContext{"./train", "h", 0, {}}), "hint"));
  }
}
