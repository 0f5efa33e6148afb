// Unit tests of children_of (launcher/workers/job_lifetime.hpp): the children of a process, from
// the kernel's `children` files and from a scan of /proc, which must agree.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "launcher/workers/job_lifetime.hpp"

namespace {

bool has(const std::vector<pid_t>& pids, pid_t pid) {
  return std::find(pids.begin(), pids.end(), pid) != pids.end();
}

pid_t sleeping_child() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  return pid;
}

}  // namespace

TEST_CASE("children_of: the children of every thread, listed and scanned alike", "[lifetime]") {
  using ddp::launcher::children_of;
  using ddp::launcher::listed_children;
  using ddp::launcher::scanned_children;
  std::vector<pid_t> mine = {sleeping_child()};
  // One made by another thread: its parent is this process all the same.
  std::thread([&mine] { mine.push_back(sleeping_child()); }).join();
  REQUIRE(mine[0] > 0);
  REQUIRE(mine[1] > 0);

  const auto scanned = scanned_children(::getpid());
  const auto found = children_of(::getpid());
  for (const pid_t pid : mine) {
    CHECK(has(scanned, pid));
    CHECK(has(found, pid));
  }
  if (const auto listed = listed_children(::getpid())) {
    for (const pid_t pid : mine) CHECK(has(*listed, pid));
    CHECK(listed->size() == scanned.size());
  } else {
    WARN("this kernel has no /proc/<pid>/task/<tid>/children: the scan is all there is");
  }
  CHECK_FALSE(has(children_of(::getpid()), ::getpid()));

  for (const pid_t pid : mine) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
  const auto after = children_of(::getpid());
  for (const pid_t pid : mine) CHECK_FALSE(has(after, pid));
  CHECK_FALSE(listed_children(999999999).has_value());  // no such process
}
