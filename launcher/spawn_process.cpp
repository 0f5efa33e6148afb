// vfork + exec for workers; see spawn_process.hpp.
//
// The child shares the launcher's memory until execve, so between vfork and execve it only makes
// system calls: no allocation, no locks, no C++ objects. All signals are blocked across the vfork
// so that no launcher signal handler can run in the child on the launcher's memory; the child puts
// the caught signals back to their defaults before unblocking them.
#include "launcher/spawn_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace ddp::launcher {

namespace {

// Makes `fd` the child's descriptor `target`, without close-on-exec. Child side of vfork only.
bool move_fd(int fd, int target) {
  if (fd < 0) return true;
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

}  // namespace

pid_t spawn_process(const SpawnRequest& r) {
  sigset_t all, old_mask;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_mask);
  const pid_t parent = ::getpid();
  // Written by the child (shared memory) when it cannot exec; read after vfork returns.
  volatile int child_errno = 0;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction sa {};
      if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &sa) != 0) continue;
      if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) continue;
      sa = {};
      sa.sa_handler = SIG_DFL;
      ::sigaction(sig, &sa, nullptr);
    }
    // Own process group (signals reach the whole tree), death with the launcher; if the launcher
    // died before prctl took effect, give up now instead of running orphaned.
    if (!move_fd(r.stdout_fd, 1) || !move_fd(r.stderr_fd, 2) || ::setpgid(0, 0) != 0 ||
        ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
      child_errno = errno;
      ::_exit(127);
    }
    if (::getppid() != parent) ::_exit(127);
    // The launcher may have raised its own limit for the store (open_file_limit.hpp); the worker
    // gets the one it would have had. Best effort, like the raise.
    if (rlimit files{}; r.open_files_limit >= 0 && ::getrlimit(RLIMIT_NOFILE, &files) == 0 &&
                        static_cast<rlim_t>(r.open_files_limit) < files.rlim_cur) {
      files.rlim_cur = static_cast<rlim_t>(r.open_files_limit);
      ::setrlimit(RLIMIT_NOFILE, &files);
    }
    ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
    ::execve(r.exe, r.argv, r.envp);
    child_errno = errno;
    ::_exit(127);
  }
  const int vfork_errno = errno;
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) throw std::system_error(vfork_errno, std::generic_category(), "vfork");
  if (child_errno != 0) {
    int status = 0;
    ::waitpid(pid, &status, 0);  // exited already (_exit before vfork returned): does not block
    throw std::system_error(child_errno, std::generic_category(), r.exe);
  }
  return pid;
}

}  // namespace ddp::launcher
