// Unit tests of launcher/workers/reaper.hpp: the reaper started as the launcher starts it (on our
// memory where this machine allows it), driven through its socket.
#include "launcher/workers/reaper.hpp"

#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <csignal>
#include <memory>
#include <vector>

namespace {

using ddp::launcher::ReaperArgs;
using ddp::launcher::ReaperMessage;
using ddp::launcher::ReaperStack;

// A child in a process group of its own that waits for a signal.
pid_t waiting_group_leader() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (;;) ::pause();
  }
  ::setpgid(pid, pid);  // whichever runs first
  return pid;
}

// A child in a group of its own that has exited and is kept as a zombie: its group stays taken.
pid_t exited_group_leader() {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    ::_exit(0);
  }
  ::setpgid(pid, pid);  // EACCES/ESRCH once it has exited: it did it itself
  siginfo_t info{};
  ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT);  // exited, not reaped
  return pid;
}

// The status `pid` ended with.
int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

struct Reaper {
  explicit Reaper(std::chrono::milliseconds grace) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0);
    ours = fds[0];
    args = ReaperArgs{.socket = fds[1], .launcher_end = fds[0], .cgroup = nullptr, .grace = grace};
    pid = ddp::launcher::start_reaper(args, stack);
    REQUIRE(pid > 0);
    ::close(fds[1]);
  }
  void send(char op, pid_t pgid = 0) const {
    const ReaperMessage m{op, pgid};
    REQUIRE(::send(ours, &m, sizeof m, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m));
  }
  ~Reaper() { ::close(ours); }

  ReaperStack stack;  // unmapped last: after the test has reaped the reaper
  ReaperArgs args;
  int ours = -1;
  pid_t pid = -1;
};

}  // namespace

TEST_CASE("reaper: 'F' ends what is left of the watched groups, and its failed calls leave our errno alone",
          "[reaper]") {
  const pid_t worker = waiting_group_leader();
  const pid_t gone = exited_group_leader();
  reap(gone);  // its group is empty now: signalling it fails (ESRCH) in the reaper
  Reaper reaper(std::chrono::milliseconds(2000));
  reaper.send('W', worker);
  reaper.send('W', gone);
  errno = 0;
  reaper.send('F');
  const int status = reap(worker);  // SIGTERM from the reaper, at once
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
  const int reaper_status = reap(reaper.pid);  // it sees both groups empty and exits
  CHECK((WIFEXITED(reaper_status) && WEXITSTATUS(reaper_status) == 0));
  // The reaper may have run on our memory with our thread's TLS: its ESRCHs are not ours.
  CHECK(errno == 0);
}

TEST_CASE("reaper: more groups than its table's first mapping holds are all watched", "[reaper]") {
  const pid_t first = waiting_group_leader();
  std::vector<pid_t> exited;
  for (int i = 0; i < 300; ++i) exited.push_back(exited_group_leader());  // 256 fit the first mapping
  const pid_t last = waiting_group_leader();
  Reaper reaper(std::chrono::milliseconds(100));
  reaper.send('W', first);
  for (const pid_t pgid : exited) reaper.send('W', pgid);
  reaper.send('W', last);
  reaper.send('F');
  for (const pid_t pid : {first, last}) {
    const int status = reap(pid);
    CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM));
  }
  // The zombies keep their groups until the grace has passed: SIGKILL, then the reaper exits.
  const int reaper_status = reap(reaper.pid);
  CHECK((WIFEXITED(reaper_status) && WEXITSTATUS(reaper_status) == 0));
  for (const pid_t pid : exited) reap(pid);
}

TEST_CASE("reaper: the launcher's end of file kills a watched group at once", "[reaper]") {
  const pid_t worker = waiting_group_leader();
  auto reaper = std::make_unique<Reaper>(std::chrono::milliseconds(60'000));
  reaper->send('W', worker);
  const pid_t reaper_pid = reaper->pid;
  ::close(reaper->ours);  // as if the launcher had died
  reaper->ours = -1;
  const int status = reap(worker);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));  // not SIGTERM and a 60 s grace
  const int reaper_status = reap(reaper_pid);
  CHECK((WIFEXITED(reaper_status) && WEXITSTATUS(reaper_status) == 0));
}
