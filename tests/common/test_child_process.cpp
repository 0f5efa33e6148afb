// start_child(): what a started child gets (own process group, death with the starting thread,
// default handlers, an empty mask, only stdin/stdout/stderr, the given environment and
// descriptor limit) and how each failure is reported (StartError naming the step, child reaped).
#include "common/child_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "common/job_cgroup.hpp"
#include "tests/support/test_cgroup.hpp"

namespace {

using ddp::testing::test_cgroup;

// Runs `sh -c script` through start_child with stdout on a pipe; returns (output, wait status).
std::pair<std::string, int> run_sh(const std::string& script, ddp::ChildOptions o = {}) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", script};
  if (o.env.empty()) o.env = {{"PATH", "/usr/bin:/bin"}};
  o.stdout_fd = fds[1];
  const pid_t pid = ddp::start_child(o);
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    REQUIRE(n > 0);
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return {out, status};
}

std::set<int> numbers(const std::string& text) {
  std::set<int> out;
  std::istringstream in(text);
  for (int n; in >> n;) out.insert(n);
  return out;
}

TEST_CASE("start_child: the child holds only stdin, stdout and stderr", "[child]") {
  // A descriptor the parent holds without close-on-exec, as Asio's sockets are.
  const int leaked = ::dup2(::open("/dev/null", O_RDONLY), 57);
  REQUIRE(leaked == 57);
  // ls opens the directory it lists as its own fd 3.
  const auto [out, status] = run_sh("ls /proc/self/fd");
  ::close(leaked);
  CHECK(WIFEXITED(status));
  CHECK(numbers(out) == std::set<int>{0, 1, 2, 3});
}

TEST_CASE("start_child: a descriptor passed in keep_fds stays, with its number", "[child]") {
  const int leaked = ::dup2(::open("/dev/null", O_RDONLY), 57);
  const int kept = ::dup3(leaked, 58, O_CLOEXEC);
  REQUIRE(kept == 58);
  ddp::ChildOptions o;
  o.keep_fds = {58, 1, 58};  // duplicates and stdio are allowed and ignored
  const auto [out, status] = run_sh("ls /proc/self/fd", o);
  ::close(leaked);
  ::close(kept);
  CHECK(numbers(out) == std::set<int>{0, 1, 2, 3, 58});
}

TEST_CASE("start_child: a fork refused by RLIMIT_NPROC says so, with the limit", "[child]") {
  // In a child that gives up root (root ignores the limit) with a limit of 0 processes.
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    rlimit none{0, 0};
    if (::setrlimit(RLIMIT_NPROC, &none) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(3);
    ddp::ChildOptions o;
    o.exe = "/bin/true";
    try {
      ddp::start_child(o);
    } catch (const ddp::StartError& e) {
      const std::string what = e.what();
      const bool named =
          what.find("RLIMIT_NPROC = 0") != std::string::npos && what.find("ulimit -u") != std::string::npos;
      ::_exit(e.error_number() == EAGAIN && named ? 0 : 1);
    }
    ::_exit(2);
  }
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  if (WEXITSTATUS(status) == 3) {
    WARN("skipped: cannot drop to uid 65534 here (not root)");
    return;
  }
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("start_child: own process group, given environment, exact argv", "[child]") {
  ddp::ChildOptions o;
  o.env = {{"PATH", "/usr/bin:/bin"}, {"ONLY_THIS", "yes"}};
  const auto [out, status] = run_sh("echo $$ $(cut -d' ' -f5 /proc/$$/stat) $ONLY_THIS ${HOME:-nohome}", o);
  std::istringstream in(out);
  long pid = 0, pgid = 0;
  std::string only, home;
  in >> pid >> pgid >> only >> home;
  CHECK(pid == pgid);
  CHECK(only == "yes");
  CHECK(home == "nohome");
}

TEST_CASE("start_child: stdin_fd becomes the child's standard input", "[child]") {
  int in[2];
  REQUIRE(::pipe2(in, O_CLOEXEC) == 0);
  REQUIRE(::write(in[1], "from the parent\n", 16) == 16);
  ::close(in[1]);
  ddp::ChildOptions o;
  o.stdin_fd = in[0];
  const auto [out, status] = run_sh("read line; echo \"got: $line\"", o);
  ::close(in[0]);
  CHECK(out == "got: from the parent\n");
  CHECK(status == 0);
}

TEST_CASE("start_child: new_session makes the child lead a session of its own", "[child]") {
  // /proc/PID/stat fields 5 and 6: process group and session.
  const char* script = "echo $$ $(cut -d' ' -f5,6 /proc/$$/stat)";
  ddp::ChildOptions o;
  const auto read = [&] {
    std::istringstream in(run_sh(script, o).first);
    long pid = 0, pgid = 0, sid = 0;
    in >> pid >> pgid >> sid;
    return std::array<long, 3>{pid, pgid, sid};
  };
  const auto same = read();
  CHECK(same[1] == same[0]);
  CHECK(same[2] == ::getsid(0));
  o.new_session = true;
  const auto own = read();
  CHECK(own[1] == own[0]);
  CHECK(own[2] == own[0]);
}

TEST_CASE("start_child: caught handlers and the blocked mask do not reach the child", "[child]") {
  struct sigaction handler {};
  handler.sa_handler = [](int) {};
  struct sigaction old_usr1 {};
  REQUIRE(::sigaction(SIGUSR1, &handler, &old_usr1) == 0);
  sigset_t block, old_mask;
  ::sigemptyset(&block);
  ::sigaddset(&block, SIGUSR2);
  REQUIRE(::pthread_sigmask(SIG_BLOCK, &block, &old_mask) == 0);
  // The handlers as the parent noted them (ProcessSet::note_handlers), or looked up in the child.
  const sigset_t noted = ddp::signals_with_handlers();
  CHECK(::sigismember(&noted, SIGUSR1) == 1);
  CHECK(::sigismember(&noted, SIGUSR2) == 0);
  ddp::ChildOptions o;
  SECTION("looked up in the child") {}
  SECTION("noted by the parent") { o.caught_signals = &noted; }
  // cat installs no handler of its own (grep would: GNU grep catches SIGSEGV).
  const auto [out, status] = run_sh("exec cat /proc/self/status", o);
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGUSR1, &old_usr1, nullptr);
  CHECK_THAT(out, Catch::Contains("SigBlk:\t0000000000000000"));
  CHECK_THAT(out, Catch::Contains("SigCgt:\t0000000000000000"));
}

TEST_CASE("start_child: the child gets the descriptor limit it is given", "[child]") {
  ddp::ChildOptions o;
  o.open_files_limit = 321;
  const auto [out, status] = run_sh("ulimit -n", o);
  CHECK(out == "321\n");
}

TEST_CASE("start_child: the child dies with the thread that started it", "[child]") {
  pid_t pid = -1;
  std::thread starter([&] {
    ddp::ChildOptions o;
    o.exe = "/bin/sleep";
    o.argv = {"sleep", "60"};
    pid = ddp::start_child(o);
  });
  starter.join();
  REQUIRE(pid > 0);
  int status = 0;
  // Blocks until the parent-death signal has killed it: the event itself, no polling.
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
}

TEST_CASE("start_child: failures name the step and errno, and leave no child", "[child]") {
  ddp::ChildOptions o;
  std::optional<ddp::JobCgroup> cgroup;
  SECTION("started by vfork: the child reports through a pipe") {}
  SECTION("born in a cgroup by clone_shared: the child reports in our memory") {
    cgroup = test_cgroup("report");
    if (!cgroup) return;
    o.cgroup_fd = cgroup->dir_fd();
    o.cgroup_procs_fd = cgroup->procs_fd();
  }
  o.exe = "/nonexistent/program";
  try {
    ddp::start_child(o);
    FAIL("start_child did not throw");
  } catch (const ddp::StartError& e) {
    CHECK(std::string(e.step()) == "execve");
    CHECK(e.error_number() == ENOENT);
    CHECK_THAT(e.what(), Catch::Contains("'/nonexistent/program'") && Catch::Contains("execve"));
  }
  o.exe = "/etc/hostname";  // exists, not executable
  CHECK_THROWS_AS(ddp::start_child(o), ddp::StartError);
  o.exe = "/bin/true";
  o.stdout_fd = 999;  // not open: dup2 fails before exec
  try {
    ddp::start_child(o);
    FAIL("start_child did not throw");
  } catch (const ddp::StartError& e) {
    CHECK(std::string(e.step()) == "dup2 (stdout)");
    CHECK(e.error_number() == EBADF);
  }
  // Every failed child was reaped before the throw.
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
  CHECK(errno == ECHILD);
  // A start after failed ones reports nothing.
  o.stdout_fd = -1;
  const pid_t pid = ddp::start_child(o);
  int status = -1;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  if (cgroup) {
    CHECK(cgroup->wait_empty(std::chrono::seconds(5)));
    CHECK(cgroup->remove());
  }
}

// begin_child's contract, in `o`'s cgroup (or none): the child runs (exit 3 seen by waitpid), and
// one that fails before its exec is reported by wait() (or at once, where children cannot run
// beside us: sanitizer builds), reaped either way, our errno untouched while it ran.
void check_begin_child(ddp::ChildOptions o) {
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", "exit 3"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  const auto started = ddp::begin_child(o);
  started->wait();
  started->wait();  // once is enough; again returns at once
  int status = -1;
  REQUIRE(::waitpid(started->pid(), &status, 0) == started->pid());
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 3));

  o.exe = "/nonexistent/program";
  o.argv.clear();
  errno = 4242;
  try {
    const auto failing = ddp::begin_child(o);
    siginfo_t info{};
    // Until it has exited, without a call that could set errno (waitid succeeds).
    REQUIRE(::waitid(P_PID, static_cast<id_t>(failing->pid()), &info, WEXITED | WNOWAIT) == 0);
    CHECK(errno == 4242);
    failing->wait();
    FAIL("wait() did not throw");
  } catch (const ddp::StartError& e) {
    CHECK(std::string(e.step()) == "execve");
    CHECK(e.error_number() == ENOENT);
  }
  CHECK(::waitpid(-1, nullptr, WNOHANG) == -1);
}

}  // namespace

TEST_CASE("begin_child: a child born in a cgroup execs beside us, and wait() says how it went", "[child]") {
  auto cgroup = test_cgroup("begin");
  if (!cgroup) return;
  ddp::ChildOptions o;
  o.cgroup_fd = cgroup->dir_fd();
  o.cgroup_procs_fd = cgroup->procs_fd();
  check_begin_child(o);
  CHECK(cgroup->wait_empty(std::chrono::seconds(5)));
  CHECK(cgroup->remove());
}

TEST_CASE("begin_child: without a cgroup the child execs beside us too", "[child]") {
  check_begin_child(ddp::ChildOptions{});
}

TEST_CASE("begin_child: a child that joins its cgroup by cgroup.procs is start_child's, exec'd on return", "[child]") {
  auto cgroup = test_cgroup("begin-procs");
  if (!cgroup) return;
  ddp::ChildOptions o;
  o.exe = "/bin/sh";
  o.argv = {"sh", "-c", "exec sleep 30"};
  o.env = {{"PATH", "/usr/bin:/bin"}};
  o.cgroup_procs_fd = cgroup->procs_fd();  // no cgroup_fd: the way of kernels before 5.7
  const auto started = ddp::begin_child(o);
  // Exec'd on return, so a member already.
  const auto pids = cgroup->pids();
  CHECK(std::find(pids.begin(), pids.end(), started->pid()) != pids.end());
  started->wait();
  REQUIRE(cgroup->kill());
  int status = -1;
  REQUIRE(::waitpid(started->pid(), &status, 0) == started->pid());
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  CHECK(cgroup->wait_empty(std::chrono::seconds(5)));
  CHECK(cgroup->remove());
}
