// signal_name() / parse_signal() (one spelling everywhere) and the exit-code rule from a wait
// status or a signal.
#include "common/signals.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <csignal>

#include "common/exit_codes.hpp"
#include "ddplaunch/common/error.hpp"

namespace {

TEST_CASE("signal_name spells named, real-time and unnamed signals", "[signals]") {
  CHECK(ddp::signal_name(SIGTERM) == "SIGTERM");
  CHECK(ddp::signal_name(SIGKILL) == "SIGKILL");
  CHECK(ddp::signal_name(SIGUSR1) == "SIGUSR1");
  CHECK(ddp::signal_name(SIGRTMIN) == "SIGRTMIN");
  CHECK(ddp::signal_name(SIGRTMIN + 3) == "SIGRTMIN+3");
  CHECK(ddp::signal_name(0) == "signal 0");
  CHECK(ddp::signal_name(200) == "signal 200");
}

TEST_CASE("parse_signal takes names with or without SIG, any case, and numbers", "[signals]") {
  CHECK(ddp::parse_signal("SIGTERM") == SIGTERM);
  CHECK(ddp::parse_signal("term") == SIGTERM);
  CHECK(ddp::parse_signal(" usr1 ") == SIGUSR1);
  CHECK(ddp::parse_signal("15") == 15);
  CHECK(ddp::parse_signal("SIGRTMIN+3") == SIGRTMIN + 3);
  for (int s = 1; s < NSIG; ++s) {
    const std::string name = ddp::signal_name(s);
    // 32 and 33 are glibc's own and have no name: they round-trip only as numbers.
    CHECK(ddp::parse_signal(name.rfind("signal ", 0) == 0 ? std::to_string(s) : name) == s);
  }
  CHECK_THROWS_AS(ddp::parse_signal("SIGNOPE"), ddp::UsageError);
  CHECK_THROWS_WITH(ddp::parse_signal("SIGNOPE"), Catch::Contains("'SIGNOPE'"));
  CHECK_THROWS_AS(ddp::parse_signal("0"), ddp::UsageError);
  CHECK_THROWS_AS(ddp::parse_signal(""), ddp::UsageError);
}

int status_of(void (*body)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    // Catch2's fatal-signal handlers must not run in the child.
    ::signal(SIGSEGV, SIG_DFL);
    body();
    ::_exit(99);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return status;
}

TEST_CASE("exit codes: a child's own code, or 128+N for signal N", "[exit_codes]") {
  CHECK(ddp::exit_code_for_signal(SIGINT) == ddp::kExitInterrupted);
  CHECK(ddp::exit_code_for_signal(SIGTERM) == 143);
  CHECK(ddp::exit_code_from_wait_status(status_of([] { ::_exit(3); })) == 3);
  CHECK(ddp::exit_code_from_wait_status(status_of([] { ::_exit(0); })) == 0);
  CHECK(ddp::exit_code_from_wait_status(status_of([] { ::raise(SIGKILL); })) == 137);
  CHECK(ddp::exit_code_from_wait_status(status_of([] { ::raise(SIGSEGV); })) == 139);
}

}  // namespace
