// The reaper process; see reaper.hpp. Single-threaded, blocking, no Asio: it must keep working
// when everything else in the launcher is gone. Raw system calls only, nothing from the heap.
#include "launcher/workers/reaper.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>

#include "common/child_process.hpp"
#include "common/clone_shared.hpp"
#include "common/raw_syscall.hpp"

namespace ddp::launcher {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A message, or 0 at end of file, or a negative errno.
long receive(int socket, ReaperMessage& m, int flags) {
  return raw_syscall(SYS_recvfrom, socket, reinterpret_cast<long>(&m), sizeof m, flags, 0, 0);
}

// The watched process groups and when to SIGKILL each (unset: not armed), in a mapping of the
// table's own grown by mremap: the launcher's heap is not ours to use. A group the table has no
// room for (no memory left) is not watched: with a cgroup, cgroup.kill still takes it.
class GroupTable {
 public:
  struct Group {
    pid_t pgid;
    bool armed;
    Clock::time_point kill_at;
  };

  Group* begin() { return groups_; }
  Group* end() { return groups_ + size_; }
  const Group* begin() const { return groups_; }
  const Group* end() const { return groups_ + size_; }

  // The group `pgid`, added (not armed) if new; null when there is no room.
  Group* find_or_add(pid_t pgid) {
    for (Group& g : *this)
      if (g.pgid == pgid) return &g;
    if (size_ == capacity_ && !grow()) return nullptr;
    groups_[size_] = Group{pgid, false, {}};
    return &groups_[size_++];
  }
  // Removes `g` (order is not kept).
  void erase(Group* g) { *g = groups_[--size_]; }
  void clear() { size_ = 0; }

 private:
  bool grow() {
    const std::size_t bytes = capacity_ * sizeof(Group);
    const std::size_t more = capacity_ == 0 ? 4096 : 2 * bytes;
    const long at = groups_ == nullptr ? raw_syscall(SYS_mmap, 0, static_cast<long>(more), PROT_READ | PROT_WRITE,
                                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                                       : raw_syscall(SYS_mremap, reinterpret_cast<long>(groups_),
                                                     static_cast<long>(bytes), static_cast<long>(more), MREMAP_MAYMOVE);
    if (at < 0 && at > -4096) return false;  // a negative errno, not an address
    groups_ = reinterpret_cast<Group*>(at);
    capacity_ = more / sizeof(Group);
    return true;
  }

  Group* groups_ = nullptr;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
};

class ReaperLoop {
 public:
  ReaperLoop(int socket, const JobCgroup* cgroup, milliseconds grace)
      : socket_(socket), cgroup_(cgroup), grace_(grace) {}

  // Reads messages until 'F' (true) or end of file (false), SIGKILLing expired groups meanwhile.
  bool read_messages() {
    for (;;) {
      pollfd p{socket_, POLLIN, 0};
      raw_poll(&p, 1, timeout_ms(next_deadline()));
      kill_expired();
      if (!(p.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ReaperMessage m;
      const long n = receive(socket_, m, 0);
      if (n == -EINTR) continue;
      if (n != static_cast<long>(sizeof m)) return false;  // end of file: the launcher is gone
      switch (m.op) {
        case 'W':
          groups_.find_or_add(m.pgid);
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
    for (auto& g : groups_) {
      if (g.armed) continue;  // SIGTERMed by the launcher already, its own deadline runs
      signal_group(g.pgid, SIGTERM);
      g.armed = true;
      g.kill_at = deadline;
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
      raw_poll(p, 2, wait);
      if (p[0].revents != 0) {
        ReaperMessage m;
        if (receive(socket_, m, MSG_DONTWAIT) == 0) return;  // the launcher is gone
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
      for (const auto& g : groups_) raw_syscall(SYS_kill, -g.pgid, SIGKILL);
    }
    groups_.clear();
  }

 private:
  void arm(pid_t pgid, Clock::time_point at) {
    GroupTable::Group* g = groups_.find_or_add(pgid);
    if (g == nullptr) return;
    if (!g->armed || at < g->kill_at) g->kill_at = at;
    g->armed = true;
  }

  std::optional<Clock::time_point> next_deadline() const {
    std::optional<Clock::time_point> next;
    for (const auto& g : groups_)
      if (g.armed && (!next || g.kill_at < *next)) next = g.kill_at;
    return next;
  }

  static int timeout_ms(std::optional<Clock::time_point> at) {
    if (!at) return -1;
    const auto left = std::chrono::duration_cast<milliseconds>(*at - Clock::now()).count() + 1;
    return static_cast<int>(std::clamp<long long>(left, 0, 60'000));
  }

  void kill_expired() {
    const auto now = Clock::now();
    for (GroupTable::Group* g = groups_.begin(); g != groups_.end();) {
      if (g->armed && g->kill_at <= now) {
        signal_group(g->pgid, SIGKILL);
        groups_.erase(g);  // the last one moved here: look at it next
      } else {
        ++g;
      }
    }
  }

  // With a cgroup, only its members in the group: a group number reused outside the job is
  // never hit. ESRCH (already gone) is ignored on both paths: nothing left to signal.
  void signal_group(pid_t pgid, int signo) const {
    if (!cgroup_) {
      raw_syscall(SYS_kill, -pgid, signo);
      return;
    }
    cgroup_->for_each_member([&](pid_t pid) {
      if (raw_syscall(SYS_getpgid, pid) == pgid) raw_syscall(SYS_kill, pid, signo);
    });
  }

  bool all_gone() const {
    if (cgroup_) return !cgroup_->populated();
    for (const auto& g : groups_)
      if (raw_syscall(SYS_kill, -g.pgid, 0) == 0) return false;
    return true;
  }

  int socket_;
  const JobCgroup* cgroup_;
  milliseconds grace_;
  GroupTable groups_;
};

void detach_from_terminal() {
  raw_syscall(SYS_setpgid, 0, 0);
  raw_syscall(SYS_prctl, PR_SET_NAME, reinterpret_cast<long>("ddplaunch-reap"));
  // Every signal a user or a batch system may send to all of the job's processes (pkill -USR1
  // ddplaunch, scancel --signal, Slurm's --signal warning) is ignored: only the launcher's death
  // or its last message ends the reaper.
  for (const int sig :
       {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU, SIGUSR1, SIGUSR2, SIGALRM})
    raw_set_disposition(sig, SIG_IGN);
  raw_unblock_signals();  // start_reaper blocked them across the clone
  // Nothing to say, and it must not keep the launcher's stdout or stderr open after the launcher
  // is gone (whoever reads them would wait for it).
  const long null = raw_syscall(SYS_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR);
  if (null < 0) return;
  for (int fd = 0; fd <= 2; ++fd)
    if (fd != null) raw_syscall(SYS_dup3, null, fd, 0);
  if (null > 2) raw_syscall(SYS_close, null);
}

// clone_shared's entry.
void reaper_entry(void* args) {
  run_reaper(*static_cast<const ReaperArgs*>(args));
}

// Whether the running kernel is `major`.`minor` or later (its release, as uname says it).
bool kernel_at_least(int major, int minor) {
  utsname u{};
  int have_major = 0, have_minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &have_major, &have_minor) != 2) return false;
  return have_major > major || (have_major == major && have_minor >= minor);
}

}  // namespace

ReaperStack::~ReaperStack() {
  if (base_ != nullptr) ::munmap(base_, kGuard + kSize);
}

bool ReaperStack::map() {
  if (base_ != nullptr) return true;
  void* at = ::mmap(nullptr, kGuard + kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (at == MAP_FAILED) return false;
  base_ = static_cast<char*>(at);
  ::mprotect(base_, kGuard, PROT_NONE);  // an overflow faults instead of writing our memory
  return true;
}

pid_t start_reaper(const ReaperArgs& args, ReaperStack& stack) {
  const AllSignalsBlocked blocked;  // until the reaper has set its own dispositions
  static const bool may_share = kRawSyscalls && kernel_at_least(5, 16);
  if (may_share && stack.map()) {
    // CLONE_CLEAR_SIGHAND: the launcher's handlers are not the reaper's (they would run on our
    // memory); it starts with every caught signal at its default, ignored ones stay ignored.
    clone_args clone{};
    clone.flags = CLONE_CLEAR_SIGHAND;
    clone.exit_signal = SIGCHLD;
    const pid_t pid = clone_shared(clone, stack.base(), stack.size(), reaper_entry, const_cast<ReaperArgs*>(&args));
    if (pid >= 0 || (errno != ENOSYS && errno != EINVAL)) return pid;
    // No clone_shared here (a sanitizer build) or no clone3: a fork.
  }
  const pid_t pid = ::fork();
  if (pid == 0) run_reaper(args);
  return pid;
}

void run_reaper(const ReaperArgs& args) {
  raw_syscall(SYS_close, args.launcher_end);
  detach_from_terminal();
  ReaperLoop loop(args.socket, args.cgroup, args.grace);
  if (loop.read_messages()) loop.terminate();
  loop.kill_all();
  if (args.cgroup) {
    args.cgroup->wait_empty(std::chrono::seconds(5));
    args.cgroup->remove();
  }
  raw_syscall(SYS_exit_group, 0);
  __builtin_unreachable();
}

}  // namespace ddp::launcher
