// run_site_command(): exit 0 passes; another code, a signal or the timeout fails with the first
// line of output in the summary and the last lines kept (bounded); the whole process group goes
// on a timeout or a cancel; the environment given is the command's.
#include "launcher/health/site_command.hpp"

#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/cancel_event.hpp"
#include "ddplaunch/common/env_lookup.hpp"

namespace {

using namespace ddp::launcher;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// Whether a process of group `group` still runs (a zombie does not), from /proc/<pid>/stat.
bool group_runs(pid_t group) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream fields(line.substr(line.rfind(')') + 1));
    char state = 0;
    pid_t parent = 0, pgid = 0;
    if (fields >> state >> parent >> pgid && pgid == group && state != 'Z') return true;
  }
  return false;
}

}  // namespace

TEST_CASE("a command that exits 0 passes") {
  const CheckResult r = run_site_command("echo fine", ddp::current_environment(), 10s);
  CHECK(r.verdict == CheckResult::Verdict::Healthy);
  CHECK(r.name == "command 'echo fine'");
  CHECK(r.summary.rfind("exit 0 in ", 0) == 0);
}

TEST_CASE("a failing command names its code and first line, and keeps its last lines") {
  const CheckResult r =
      run_site_command("echo 'disk /scratch is read-only'; echo detail >&2; exit 3", ddp::current_environment(), 10s);
  CHECK(r.failed());
  CHECK(r.summary == "exited with 3: disk /scratch is read-only");
  CHECK(r.output == std::vector<std::string>{"disk /scratch is read-only", "detail"});
}

TEST_CASE("the output kept is bounded: the first line and the last lines") {
  const CheckResult r = run_site_command("i=0; while [ $i -lt 5000 ]; do echo line$i; i=$((i+1)); done; exit 1",
                                         ddp::current_environment(), 10s);
  CHECK(r.summary == "exited with 1: line0");
  REQUIRE(r.output.size() == kOutputLines);
  CHECK(r.output.back() == "line4999");
}

TEST_CASE("a command past its timeout fails, and its process group is gone") {
  const auto start = Clock::now();
  const CheckResult r = run_site_command("echo started; sleep 30 & sleep 30", ddp::current_environment(), 300ms);
  CHECK(Clock::now() - start < 5s);
  CHECK(r.failed());
  CHECK(r.summary == "timed out after 0.3 s: started");
}

TEST_CASE("a command killed by a signal says which, and one without output says only that") {
  CheckResult r = run_site_command("kill -USR1 $$", ddp::current_environment(), 10s);
  CHECK(r.summary == "killed by SIGUSR1");
  r = run_site_command("exit 7", ddp::current_environment(), 10s);
  CHECK(r.summary == "exited with 7");
  CHECK(r.output.empty());
}

TEST_CASE("the command sees the environment it is given") {
  const CheckResult r =
      run_site_command("test \"$HEALTH_VAR\" = yes", {{"HEALTH_VAR", "yes"}, {"PATH", "/usr/bin:/bin"}}, 10s);
  CHECK(r.verdict == CheckResult::Verdict::Healthy);
}

TEST_CASE("a cancel ends the wait at once, and the command's process group is gone") {
  // The command says it runs through a FIFO (an event: the read returns once it wrote), then hangs.
  char dir[] = "/tmp/site_command_XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string fifo = std::string(dir) + "/started";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  ddp::CancelEvent cancel;
  pid_t group = -1;
  std::thread canceller([&] {
    std::ifstream in(fifo);  // blocks until the command opens it
    in >> group;
    cancel.cancel();
  });
  const auto start = Clock::now();
  const CheckResult r = run_site_command("echo $$ > " + fifo + "; sleep 30 & sleep 30", ddp::current_environment(), 30s,
                                         SiteCommandControl{&cancel});
  canceller.join();
  ::unlink(fifo.c_str());
  ::rmdir(dir);
  CHECK(Clock::now() - start < 5s);
  CHECK(r.failed());
  CHECK(r.summary.rfind("interrupted after ", 0) == 0);
  // The shell led the group, which was sent SIGKILL: its background sleep dies within moments (no
  // event tells us when a process we did not start exits, so this looks a few times, bounded).
  REQUIRE(group > 0);
  const auto deadline = Clock::now() + 5s;
  while (group_runs(group) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
  CHECK_FALSE(group_runs(group));
}

TEST_CASE("a command given a cancelled event is interrupted as soon as it starts") {
  ddp::CancelEvent cancel;
  cancel.cancel();
  const auto start = Clock::now();
  const CheckResult r = run_site_command("sleep 30", ddp::current_environment(), 30s, SiteCommandControl{&cancel});
  CHECK(Clock::now() - start < 5s);
  CHECK(r.summary.rfind("interrupted after ", 0) == 0);
}
