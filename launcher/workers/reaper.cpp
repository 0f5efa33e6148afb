// The reaper process; see reaper.hpp. Single-threaded, blocking, no Asio: it must keep working
// when everything else in the launcher is gone.
#include "launcher/workers/reaper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <map>
#include <optional>

namespace ddp::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class ReaperLoop {
 public:
  ReaperLoop(int socket, const JobCgroup* cgroup, milliseconds grace)
      : socket_(socket), cgroup_(cgroup), grace_(grace) {}

  // Reads messages until 'F' (true) or end of file (false), SIGKILLing expired groups meanwhile.
  bool read_messages() {
    for (;;) {
      pollfd p{socket_, POLLIN, 0};
      ::poll(&p, 1, timeout_ms(next_deadline()));
      kill_expired();
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ReaperMessage m;
      const ssize_t n = ::recv(socket_, &m, sizeof m, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n != static_cast<ssize_t>(sizeof m)) return false;  // end of file: the launcher is gone
      switch (m.op) {
        case 'W':
          groups_.emplace(m.pgid, std::nullopt);
          break;
        case 'E':
          arm(m.pgid, Clock::now() + grace_);
          break;
        case 'N':
          cgroup_ = nullptr;
          break;
        case 'F':
          return true;
        default:
          break;  // not ours; ignore
      }
    }
  }

  // SIGTERM to everything left, then wait for it to go, at most the grace, or until the launcher
  // dies meanwhile (a second Ctrl-C): then the caller kills at once.
  void terminate() {
    const auto deadline = Clock::now() + grace_;
    for (auto& [pgid, kill_at] : groups_) {
      if (kill_at) continue;  // SIGTERMed by the launcher already, its own deadline runs
      signal_group(pgid, SIGTERM);
      kill_at = deadline;
    }
    // An empty cgroup (the usual end: every worker has exited) stays empty (kill_all says why):
    // nothing to read and signal.
    if (cgroup_ && cgroup_->populated()) cgroup_->signal(SIGTERM);
    while (!all_gone() && Clock::now() < deadline) {
      // cgroup.events wakes us when the cgroup empties; process groups have no event for
      // "empty", so without a cgroup they are checked again every 50 ms.
      pollfd p[2] = {{socket_, POLLIN, 0}, {cgroup_ ? cgroup_->events_fd() : -1, POLLPRI, 0}};
      int wait = std::min(cgroup_ ? 1000 : 50, timeout_ms(deadline));
      if (const int next = timeout_ms(next_deadline()); next >= 0) wait = std::min(wait, next);
      ::poll(p, 2, wait);
      if (p[0].revents != 0) {
        ReaperMessage m;
        if (::recv(socket_, &m, sizeof m, MSG_DONTWAIT) == 0) return;  // the launcher is gone
      }
      kill_expired();
    }
  }

  // SIGKILL everything left, wait for the cgroup to empty, remove it.
  void kill_all() {
    // An empty cgroup (the usual end) stays empty: only the launcher, done by now, starts processes
    // in it, and anything a worker started is a member.
    if (cgroup_ && cgroup_->populated() && !cgroup_->kill()) cgroup_->signal(SIGKILL);
    if (!cgroup_) {
      // ESRCH: the group is empty; nothing to do.
      for (const auto& [pgid, kill_at] : groups_) ::kill(-pgid, SIGKILL);
    }
    groups_.clear();
  }

 private:
  void arm(pid_t pgid, Clock::time_point at) {
    auto& kill_at = groups_[pgid];
    if (!kill_at || at < *kill_at) kill_at = at;
  }

  std::optional<Clock::time_point> next_deadline() const {
    std::optional<Clock::time_point> next;
    for (const auto& [pgid, kill_at] : groups_)
      if (kill_at && (!next || *kill_at < *next)) next = kill_at;
    return next;
  }

  static int timeout_ms(std::optional<Clock::time_point> at) {
    if (!at) return -1;
    const auto left = std::chrono::duration_cast<milliseconds>(*at - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
  }

  void kill_expired() {
    const auto now = Clock::now();
    for (auto it = groups_.begin(); it != groups_.end();) {
      if (it->second && *it->second <= now) {
        signal_group(it->first, SIGKILL);
        it = groups_.erase(it);
      } else {
        ++it;
      }
    }
  }

  // With a cgroup, only its members in the group: a group number reused outside the job is
  // never hit. ESRCH (already gone) is ignored on both paths: nothing left to signal.
  void signal_group(pid_t pgid, int signo) const {
    if (!cgroup_) {
      ::kill(-pgid, signo);
      return;
    }
    for (const pid_t pid : cgroup_->pids())
      if (::getpgid(pid) == pgid) ::kill(pid, signo);
  }

  bool all_gone() const {
    if (cgroup_) return !cgroup_->populated();
    for (const auto& [pgid, kill_at] : groups_)
      if (::kill(-pgid, 0) == 0) return false;
    return true;
  }

  int socket_;
  const JobCgroup* cgroup_;
  milliseconds grace_;
  std::map<pid_t, std::optional<Clock::time_point>> groups_;  // pgid → when to SIGKILL it
};

void detach_from_terminal() {
  ::setpgid(0, 0);
  ::prctl(PR_SET_NAME, "ddplaunch-reap");
  // Every signal a user or a batch system may send to all of the job's processes (pkill -USR1
  // ddplaunch, scancel --signal, Slurm's --signal warning) is ignored: only the launcher's death
  // or its last message ends the reaper.
  for (const int sig :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM})
    ::signal(sig, SIG_IGN);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing to say, and it must not keep the launcher's stdout or stderr open after the launcher
  // is gone (whoever reads them would wait for it).
  const int null = ::open("/dev/null", O_RDWR);
  for (int fd = 0; fd <= 2; ++fd) ::dup2(null, fd);
  if (null > 2) ::close(null);
}

}  // namespace

void run_reaper(int socket, const JobCgroup* cgroup, milliseconds grace) {
  detach_from_terminal();
  ReaperLoop loop(socket, cgroup, grace);
  if (loop.read_messages()) loop.terminate();
  loop.kill_all();
  if (cgroup) {
    cgroup->wait_empty(std::chrono::seconds(5));
    cgroup->remove();
  }
  ::_exit(0);
}

}  // namespace ddp::launcher
