// ProcessSet: exits collected with their codes and signals, signal_all reaching what an ended
// child left in its group, reap() and the destructor leaving nothing behind. Exits are awaited
// through SIGCHLD (sigtimedwait), the event the set's owners use, never by polling.
#include "common/process_set.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <vector>

#include "common/job_cgroup.hpp"
#include "tests/support/test_cgroup.hpp"

namespace {

using namespace std::chrono_literals;

// Blocks SIGCHLD for the test's lifetime so that sigtimedwait receives it.
struct ChildSignal {
  sigset_t set{}, old{};
  ChildSignal() {
    ::sigemptyset(&set);
    ::sigaddset(&set, SIGCHLD);
    ::pthread_sigmask(SIG_BLOCK, &set, &old);
  }
  ~ChildSignal() { ::pthread_sigmask(SIG_SETMASK, &old, nullptr); }
};

// Collects until `n` exits were seen or `timeout` passed, waking on SIGCHLD.
std::vector<ddp::ProcessSet::Exit> wait_exits(ddp::ProcessSet& set, ChildSignal& sig, std::size_t n,
                                              std::chrono::milliseconds timeout = 10s) {
  std::vector<ddp::ProcessSet::Exit> all;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    for (const auto& e : set.collect()) all.push_back(e);
    if (all.size() >= n) return all;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= 0s) return all;
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000L};
    ::sigtimedwait(&sig.set, nullptr, &ts);  // EAGAIN at the deadline, EINTR: loop again
  }
}

ddp::ChildOptions sh(const std::string& script) {
  ddp::ChildOptions o;
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", script};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  return o;
}

// Starts `script` in `set`; returns the pid it prints first (of a process it started).
pid_t start_printing_pid(ddp::ProcessSet& set, const std::string& script) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  auto o = sh(script);
  o.stdout_fd = fds[1];
  set.start(o);
  ::close(fds[1]);
  char buf[32] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  REQUIRE(n > 0);
  return static_cast<pid_t>(std::stol(buf));
}

bool gone(pid_t pid) {
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

TEST_CASE("ProcessSet: exit codes and signals, reported once each", "[process_set]") {
  ChildSignal sig;
  ddp::ProcessSet set;
  const auto a = set.start(sh("exit 3"));
  const auto b = set.start(sh("kill -TERM $$"));
  const auto c = set.start(sh("exit 0"));
  CHECK(set.size() == 3);
  const auto exits = wait_exits(set, sig, 3);
  REQUIRE(exits.size() == 3);
  for (const auto& e : exits) {
    CHECK(e.pid == set.pid(e.index));
    if (e.index == a) CHECK((e.exit_code == 3 && e.term_signal == 0));
    if (e.index == b) CHECK((e.exit_code == 143 && e.term_signal == SIGTERM));
    if (e.index == c) CHECK((e.exit_code == 0 && e.term_signal == 0));
  }
  CHECK(set.running() == 0);
  CHECK(set.collect().empty());
  set.reap();
  for (std::size_t i = 0; i < set.size(); ++i) CHECK(::waitpid(set.pid(i), nullptr, WNOHANG) == -1);
}

TEST_CASE("ProcessSet: signal_all reaches every running group", "[process_set]") {
  ChildSignal sig;
  ddp::ProcessSet set;
  set.start(sh("exec sleep 60"));
  set.start(sh("exec sleep 60"));
  CHECK(set.running() == 2);
  set.signal_all(SIGTERM);
  const auto exits = wait_exits(set, sig, 2);
  REQUIRE(exits.size() == 2);
  for (const auto& e : exits) CHECK(e.term_signal == SIGTERM);
}

TEST_CASE("ProcessSet: an ended child's leftovers in its group still get signal_all", "[process_set]") {
  // As a subreaper, the orphaned grandchild becomes ours, so its end is an event we can wait for.
  REQUIRE(::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0);
  ChildSignal sig;
  ddp::ProcessSet set;
  const pid_t leftover = start_printing_pid(set, "sleep 60 & echo $!; exit 0");
  const auto exits = wait_exits(set, sig, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].exit_code == 0);
  CHECK_FALSE(gone(leftover));
  set.signal_all(SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(leftover, &status, 0) == leftover);
  CHECK(WIFSIGNALED(status));
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST_CASE("ProcessSet: signal_each reaches the child, not the rest of its group", "[process_set]") {
  ChildSignal sig;
  ddp::ProcessSet set;
  // The child handles SIGUSR1 by exiting 7; its background job (same group) would die of it.
  const pid_t helper = start_printing_pid(set, "trap 'exit 7' USR1; sleep 60 & echo $!; while :; do sleep 0.05; done");
  set.signal_each(SIGUSR1);
  const auto exits = wait_exits(set, sig, 1);
  REQUIRE(exits.size() == 1);
  CHECK(exits[0].exit_code == 7);
  CHECK_FALSE(gone(helper));  // its group was not signalled
  set.signal_all(SIGKILL);
}

TEST_CASE("ProcessSet: the destructor kills and reaps whatever is left", "[process_set]") {
  pid_t pid = -1;
  {
    ddp::ProcessSet set;
    pid = set.pid(set.start(sh("exec sleep 60")));
    CHECK_FALSE(gone(pid));
  }
  CHECK(gone(pid));  // killed and reaped: not even a zombie
}

TEST_CASE("ProcessSet: a child that cannot start leaves the set unchanged", "[process_set]") {
  ddp::ProcessSet set;
  ddp::ChildOptions o;
  o.exe = "/nonexistent";
  CHECK_THROWS_AS(set.start(o), ddp::StartError);
  CHECK(set.size() == 0);
  CHECK(set.running() == 0);
}

}  // namespace

TEST_CASE("ProcessSet: a child started in a batch keeps none of our handlers", "[process_set]") {
  struct sigaction handler {};
  handler.sa_handler = [](int) {};
  struct sigaction old_usr1 {};
  REQUIRE(::sigaction(SIGUSR1, &handler, &old_usr1) == 0);
  ddp::ProcessSet set;
  std::string out;
  {
    ddp::ProcessSet::StartBatch batch = set.batch();
    int fds[2];
    REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    auto o = sh("exec cat /proc/self/status");  // cat installs no handler of its own
    o.stdout_fd = fds[1];
    set.start(o);
    batch.finish();
    ::close(fds[1]);
    char buf[4096];
    for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
    ::close(fds[0]);
  }
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  CHECK_THAT(out, Catch::Contains("SigCgt:\t0000000000000000"));
}

TEST_CASE("ProcessSet: a batch in the job's cgroup names the child that could not start", "[process_set]") {
  auto cgroup = ddp::testing::test_cgroup("batch");
  if (!cgroup) return;
  ChildSignal sig;
  ddp::ProcessSet set;
  set.place_in_cgroup(*cgroup);
  std::size_t first = 0, last = 0;
  {
    ddp::ProcessSet::StartBatch batch = set.batch();
    first = set.start(sh("exit 0"));
    auto missing = sh("");
    missing.exe = "/nonexistent/program";
    // Where children run beside us, start() returns before the child's exec fails and finish()
    // names it; elsewhere (sanitizer builds) start() throws at once, the set unchanged.
    std::optional<std::size_t> pending_failure;
    try {
      pending_failure = set.start(missing);
    } catch (const ddp::StartError& e) {
      CHECK(std::string(e.step()) == "execve");
      CHECK(e.error_number() == ENOENT);
    }
    last = set.start(sh("exit 4"));
    if (pending_failure) {
      try {
        batch.finish();
        FAIL("finish did not throw");
      } catch (const ddp::ProcessSet::StartFailed& e) {
        CHECK(e.index() == *pending_failure);
        CHECK(std::string(e.step()) == "execve");
        CHECK(e.error_number() == ENOENT);
      }
    }
  }
  // The two that started end as they should; the one that did not is never reported.
  auto exits = wait_exits(set, sig, 2);
  REQUIRE(exits.size() == 2);
  CHECK(set.collect().empty());
  std::sort(exits.begin(), exits.end(), [](const auto& a, const auto& b) { return a.index < b.index; });
  CHECK(exits[0].index == first);
  CHECK(exits[0].exit_code == 0);
  CHECK(exits[1].index == last);
  CHECK(exits[1].exit_code == 4);
  set.reap();
  CHECK(cgroup->wait_empty(std::chrono::seconds(5)));
  CHECK(cgroup->remove());
}

TEST_CASE("ProcessSet: abandon_running gives up on a child the kernel holds, and the destructor does not wait for it",
          "[process_set]") {
  ChildSignal sig;
  pid_t held = -1;
  const auto start = std::chrono::steady_clock::now();
  {
    ddp::ProcessSet set;
    set.start(sh("exit 0"));
    set.start(sh("exec sleep 30"));  // stands for a process in state D: it does not exit
    REQUIRE(wait_exits(set, sig, 1).size() == 1);
    const std::vector<pid_t> given_up = set.abandon_running();
    REQUIRE(given_up.size() == 1);
    held = given_up[0];
    CHECK(set.running() == 0);
    CHECK_FALSE(ddp::ProcessSet::owns(held));
    CHECK(set.collect().empty());
  }  // the destructor neither signals nor waits for it
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(::kill(held, 0) == 0);  // still running: nobody sent it SIGKILL
  ::kill(held, SIGKILL);
  CHECK(::waitpid(held, nullptr, 0) == held);
}
