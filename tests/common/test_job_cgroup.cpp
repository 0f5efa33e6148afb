// JobCgroup: creation where the process lives (or under the root), a child joining it before
// exec, signal/kill of every member including one that left its process group, wait_empty on
// cgroup.events, removal. Skips (with the reason) where cgroup v2 is not writable.
#include "common/job_cgroup.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <csignal>
#include <string>

#include "common/child_process.hpp"
#include "tests/support/test_cgroup.hpp"

namespace {

pid_t start_in(const ddp::JobCgroup& cg, const std::string& script) {
  ddp::ChildOptions o;
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.cgroup_fd = cg.dir_fd();
  o.cgroup_procs_fd = cg.procs_fd();
  o.death_signal = SIGKILL;
  return ddp::start_child(o);
}

TEST_CASE("JobCgroup: the hierarchy and our place in it are found", "[cgroup]") {
  if (ddp::cgroup2_mount_point().empty()) {
    WARN("skipped: no cgroup v2 mounted");
    return;
  }
  CHECK(ddp::own_cgroup2_path().rfind('/', 0) == 0);
}

TEST_CASE("JobCgroup: a child joins before exec, kill takes every member, remove", "[cgroup]") {
  auto cg = ddp::testing::test_cgroup("kill");
  if (!cg) return;
  CHECK(cg->path().find(ddp::cgroup2_mount_point()) == 0);
  CHECK_FALSE(cg->populated());
  // The shell starts a daemon in its own session (out of its process group) and then waits.
  const pid_t pid = start_in(*cg, "setsid sleep 300 & exec sleep 300");
  auto pids = cg->pids();
  CHECK(std::find(pids.begin(), pids.end(), pid) != pids.end());
  CHECK(cg->populated());
  CHECK_FALSE(cg->remove());  // EBUSY while members remain
  REQUIRE(cg->kill());
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  // The daemon is not our child: cgroup.events tells when it is gone too.
  CHECK(cg->wait_empty(std::chrono::seconds(5)));
  CHECK(cg->pids().empty());
  CHECK(cg->remove());
}

TEST_CASE("JobCgroup: a child born in the cgroup holds only stdin, stdout and stderr", "[cgroup]") {
  auto cg = ddp::testing::test_cgroup("fds");
  if (!cg) return;
  int out[2];
  REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
  ddp::ChildOptions o;
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", "ls /proc/self/fd; exec sleep 30"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.cgroup_fd = cg->dir_fd();
  o.cgroup_procs_fd = cg->procs_fd();
  o.stdout_fd = out[1];
  // start_child returns once the child has exec'd, not when it exits (the sleep would block it).
  const pid_t pid = ddp::start_child(o);
  ::close(out[1]);
  std::string listing;
  char buf[256];
  // Only the sleeping shell holds the write end once ls is done: read up to "3\n" (ls's own fd).
  while (listing.find("\n3\n") == std::string::npos) {
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    REQUIRE(n > 0);
    listing.append(buf, static_cast<std::size_t>(n));
  }
  ::close(out[0]);
  CHECK(listing == "0\n1\n2\n3\n");
  auto pids = cg->pids();
  CHECK(std::find(pids.begin(), pids.end(), pid) != pids.end());
  REQUIRE(cg->kill());
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(cg->wait_empty(std::chrono::seconds(5)));
  CHECK(cg->remove());
}

TEST_CASE("JobCgroup: signal reaches every member, wait_empty times out while one remains", "[cgroup]") {
  auto cg = ddp::testing::test_cgroup("signal");
  if (!cg) return;
  const pid_t pid = start_in(*cg, "exec sleep 300");
  CHECK_FALSE(cg->wait_empty(std::chrono::milliseconds(50)));
  cg->signal(SIGTERM);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
  CHECK(cg->wait_empty(std::chrono::seconds(5)));
  CHECK(cg->remove());
}

}  // namespace
