// Fork/exec and the poll() loop of SpawnSupervisor. fork + exec rather than posix_spawn because
// the copy must set PR_SET_PDEATHSIG between the two, which posix_spawn cannot do; between fork
// and exec the child only makes async-signal-safe calls (the parent has threads: the store's).
#include "runtime/spawn_supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ddplaunch/spawn.hpp"
#include "rendezvous/error.hpp"

namespace ddp::runtime {
namespace {

using Clock = std::chrono::steady_clock;

// The write end of the live supervisor's self-pipe, read by the signal handler (a lock-free
// atomic is safe to read there); -1 when no supervisor exists.
std::atomic<int> g_signal_pipe{-1};
static_assert(std::atomic<int>::is_always_lock_free);

void write_to_pipe(int signo) {
  const int saved = errno;
  const auto byte = static_cast<unsigned char>(signo);
  const int fd = g_signal_pipe.load();
  // A full pipe already holds plenty of undelivered signals, so losing this one loses nothing.
  if (fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved;
}

std::string signal_name(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

std::string ranks(int n) {
  return std::to_string(n) + (n == 1 ? " rank" : " ranks");
}

std::vector<char*> c_strings(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// In the forked child: async-signal-safe calls only.
[[noreturn]] void exec_child(const char* exe, char* const* argv, char* const* envp, pid_t parent) {
  // Own process group, so that the teardown signals reach whatever the copy starts; death with
  // the parent. If the parent died before prctl took effect, give up instead of running orphaned.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  // Our handlers must not run here (they write into the parent's pipe), and the copy must be
  // stoppable by SIGINT/SIGTERM whatever the parent's mask was.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGINT, &dfl, nullptr);
  ::sigaction(SIGTERM, &dfl, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Asio's sockets (the store's listener and connections) are not close-on-exec; a copy holding
  // another copy's server-side socket would keep that connection half-alive.
  ::close_range(3, ~0U, 0);
  ::execve(exe, argv, envp);
  ::_exit(127);
}

}  // namespace

SpawnSupervisor::SpawnSupervisor(std::chrono::milliseconds grace) : grace_(grace) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0)
    throw SpawnError(std::string("spawn: cannot create the signal pipe: ") + std::strerror(errno));
  pipe_read_ = fds[0];
  pipe_write_ = fds[1];
  int none = -1;
  DDP_ASSERT(g_signal_pipe.compare_exchange_strong(none, pipe_write_),
             "spawn() called while another spawn() is running in this process");
  struct sigaction forward {};
  forward.sa_handler = write_to_pipe;
  ::sigemptyset(&forward.sa_mask);
  forward.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &forward, &old_int_);
  ::sigaction(SIGTERM, &forward, &old_term_);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  ::sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGCHLD, &dfl, &old_chld_);
}

SpawnSupervisor::~SpawnSupervisor() {
  // Only on an early exit (start() or wait() threw) are copies still running here.
  signal_all(SIGKILL);
  reap_all();
  g_signal_pipe.store(-1);
  ::sigaction(SIGINT, &old_int_, nullptr);
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGCHLD, &old_chld_, nullptr);
  ::close(pipe_read_);
  ::close(pipe_write_);
}

void SpawnSupervisor::start(int rank, const std::string& exe, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env) {
  const std::vector<char*> args = c_strings(argv);
  const std::vector<char*> envp = c_strings(env);
  const pid_t parent = ::getpid();
  // Blocked across fork so that the child cannot run our handlers before it resets them.
  sigset_t all, old;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &old);
  const pid_t pid = ::fork();
  if (pid == 0) exec_child(exe.c_str(), args.data(), envp.data(), parent);
  const int fork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (pid < 0)
    throw SpawnError("spawn: cannot start rank " + std::to_string(rank) + ": fork: " + std::strerror(fork_errno) +
                     "; check the process limit (ulimit -u) and free memory");
  // Also here, so that the group exists before we might signal it. Fails with EACCES once the
  // child has exec'd, by which time the child has done it itself.
  ::setpgid(pid, pid);
  // The raw syscall: glibc 2.36's <sys/pidfd.h> declares pidfd_open without C linkage.
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    const int e = errno;
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);  // just killed: returns at once
    throw SpawnError("spawn: cannot watch rank " + std::to_string(rank) + ": pidfd_open: " + std::strerror(e) +
                     "; spawn() needs Linux 5.9 or later");
  }
  children_.push_back(Child{rank, pid, pidfd});
}

int SpawnSupervisor::wait() {
  std::vector<pollfd> fds;
  std::vector<Child*> owners;
  while (running() > 0) {
    fds.assign(1, pollfd{pipe_read_, POLLIN, 0});
    owners.assign(1, nullptr);
    for (Child& c : children_) {
      if (c.exited) continue;
      fds.push_back(pollfd{c.pidfd, POLLIN, 0});
      owners.push_back(&c);
    }
    int timeout_ms = -1;
    if (stopping_ && !killed_) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(kill_at_ - Clock::now()).count();
      timeout_ms = static_cast<int>(std::clamp<long long>(left, 0, 60'000));
    }
    if (::poll(fds.data(), fds.size(), timeout_ms) < 0) {
      if (errno == EINTR) continue;  // our own handler ran; its byte is in the pipe
      throw SpawnError(std::string("spawn: poll: ") + std::strerror(errno));
    }
    if (fds[0].revents != 0) {
      unsigned char buf[64];
      ssize_t n;
      while ((n = ::read(pipe_read_, buf, sizeof buf)) > 0)
        for (ssize_t i = 0; i < n; ++i) on_signal(buf[i]);
    }
    for (std::size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents != 0) on_exit(*owners[i]);
    if (stopping_ && !killed_ && running() > 0 && Clock::now() >= kill_at_) {
      std::fprintf(stderr, "spawn: %s still running %lld ms after the stop signal; sending SIGKILL\n",
                   ranks(running()).c_str(), static_cast<long long>(grace_.count()));
      signal_all(SIGKILL);
      killed_ = true;
    }
  }
  reap_all();
  return result_;
}

void SpawnSupervisor::on_exit(Child& child) {
  // WNOWAIT leaves the copy a zombie until reap_all(): until then its pid, which is also its
  // process group's id, cannot be reused, so signalling the group stays safe and still reaches
  // what the copy left behind in it.
  siginfo_t info{};
  const int r = ::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED | WNOHANG | WNOWAIT);
  if (r == 0 && info.si_pid == 0) return;  // not ended after all
  child.exited = true;
  ::close(child.pidfd);
  child.pidfd = -1;
  int code = 0;
  std::string how;
  if (r != 0) {
    // ECHILD: someone else (a waitpid(-1) in another thread) reaped it and took its status.
    child.reaped = true;
    code = 1;
    how = "ended, but its exit status was collected by another thread";
  } else if (info.si_code == CLD_EXITED) {
    code = info.si_status;
    how = "exited with code " + std::to_string(code);
  } else {
    code = 128 + info.si_status;
    how = "was killed by signal " + std::to_string(info.si_status) + " (" + signal_name(info.si_status) + ")";
  }
  if (code == 0 || stopping_) return;
  result_ = code;
  const int others = running();
  const std::string stop = others == 0   ? "no other rank is running"
                           : others == 1 ? "stopping the other rank"
                                         : "stopping the other " + ranks(others);
  std::fprintf(stderr, "spawn: rank %d (pid %d) %s; %s\n", child.rank, static_cast<int>(child.pid), how.c_str(),
               stop.c_str());
  begin_stop(SIGTERM);
}

void SpawnSupervisor::on_signal(int signo) {
  if (stopping_) {
    if (!killed_ && running() > 0) {
      std::fprintf(stderr, "spawn: received %s while stopping; sending SIGKILL to %s\n", signal_name(signo).c_str(),
                   ranks(running()).c_str());
      signal_all(SIGKILL);
      killed_ = true;
    }
    return;
  }
  result_ = 128 + signo;
  std::fprintf(stderr, "spawn: received %s; forwarding it to %s\n", signal_name(signo).c_str(),
               ranks(running()).c_str());
  begin_stop(signo);
}

void SpawnSupervisor::begin_stop(int signo) {
  stopping_ = true;
  kill_at_ = Clock::now() + grace_;
  signal_all(signo);
}

void SpawnSupervisor::signal_all(int signo) {
  for (const Child& c : children_) {
    // ESRCH: the group is empty (the copy was reaped elsewhere and left nothing behind).
    if (!c.reaped) ::kill(-c.pid, signo);
  }
}

int SpawnSupervisor::running() const {
  return static_cast<int>(std::count_if(children_.begin(), children_.end(), [](const Child& c) { return !c.exited; }));
}

void SpawnSupervisor::reap_all() {
  for (Child& c : children_) {
    if (c.reaped) continue;
    // Every copy has ended (or was just sent SIGKILL by the destructor), so this returns promptly.
    while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.reaped = true;
    c.exited = true;
    if (c.pidfd >= 0) ::close(c.pidfd);
    c.pidfd = -1;
  }
}

}  // namespace ddp::runtime
