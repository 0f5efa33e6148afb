// vfork + exec; see child_process.hpp.
//
// The child shares the parent's memory until execve, so between vfork and execve it only makes
// system calls: no allocation, no locks, no C++ objects. Everything it needs (argv, envp as C
// arrays) is built before the vfork. A failed step is written to `failure` (shared memory) and
// read after vfork returns, which it does only once the child has exec'd or exited.
#include "common/child_process.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "common/close_descriptors.hpp"
#include "common/exit_codes.hpp"

namespace ddp {
namespace {

struct Failure {
  const char* step = nullptr;
  int error_number = 0;
};

// Makes `fd` the child's descriptor `target`, without close-on-exec. Child side of vfork only.
bool move_fd(int fd, int target) {
  if (fd < 0) return true;
  if (fd == target) return ::fcntl(fd, F_SETFD, 0) == 0;
  return ::dup2(fd, target) == target;
}

// Child side of vfork: system calls only. Returns only on failure, with `f` filled in.
void exec_child(const ChildOptions& o, const std::vector<int>& keep, char* const* argv, char* const* envp, pid_t parent,
                volatile Failure& f) {
  const auto fail = [&](const char* step) {
    f.step = step;
    f.error_number = errno;
  };
  // Caught handlers would run the parent's code on the parent's memory: back to the default.
  // Ignored signals stay ignored, as exec keeps them (nohup's SIGHUP reaches the workers too).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (::sigaction(sig, nullptr, &sa) != 0) continue;  // EINVAL: a number glibc reserves
    if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) continue;
    sa = {};
    sa.sa_handler = SIG_DFL;
    if (::sigaction(sig, &sa, nullptr) != 0) return fail("sigaction");
  }
  // Before anything it could start: a child that is in the cgroup takes its children with it.
  if (o.cgroup_procs_fd >= 0 && ::write(o.cgroup_procs_fd, "0", 1) != 1) return fail("cgroup.procs");
  if (!move_fd(o.stdout_fd, 1)) return fail("dup2 (stdout)");
  if (!move_fd(o.stderr_fd, 2)) return fail("dup2 (stderr)");
  if (const int e = close_descriptors_except(keep.data(), keep.size()); e != 0) {
    errno = e;
    return fail("closing inherited descriptors");
  }
  if (::setpgid(0, 0) != 0) return fail("setpgid");
  if (::prctl(PR_SET_PDEATHSIG, o.death_signal) != 0) return fail("prctl(PR_SET_PDEATHSIG)");
  // The parent died before prctl took effect: give up now instead of running orphaned.
  if (::getppid() != parent) {
    errno = ESRCH;
    return fail("getppid (the parent is gone)");
  }
  if (rlimit files{}; o.open_files_limit >= 0) {
    if (::getrlimit(RLIMIT_NOFILE, &files) != 0) return fail("getrlimit");
    if (static_cast<rlim_t>(o.open_files_limit) < files.rlim_cur) {
      files.rlim_cur = static_cast<rlim_t>(o.open_files_limit);
      if (::setrlimit(RLIMIT_NOFILE, &files) != 0) return fail("setrlimit");
    }
  }
  sigset_t none;
  ::sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return fail("sigprocmask");
  ::execve(o.exe.c_str(), argv, envp);
  fail("execve");
}

std::string describe(const std::string& exe, const char* step, int e) {
  std::string text = "cannot start '" + exe + "': " + step + ": " + std::strerror(e);
  if (e == EAGAIN && std::strcmp(step, "vfork") == 0) text += "; " + process_limit_hint();
  return text;
}

}  // namespace

std::string process_limit_hint() {
  rlimit procs{};
  std::string value = "unknown";
  if (::getrlimit(RLIMIT_NPROC, &procs) == 0)
    value = procs.rlim_cur == RLIM_INFINITY ? "unlimited" : std::to_string(procs.rlim_cur);
  return fmt::format(
      "the process limit is reached (RLIMIT_NPROC = {} for this user, `ulimit -u`; or the cgroup's pids.max); "
      "raise it (ulimit -u, /etc/security/limits.conf) or start fewer processes",
      value);
}

StartError::StartError(const std::string& exe, const char* step, int error_number)
    : Error(describe(exe, step, error_number)), step_(step), errno_(error_number) {}

pid_t start_child(const ChildOptions& o) {
  std::vector<std::string> arg_strings = o.argv.empty() ? std::vector<std::string>{o.exe} : o.argv;
  std::vector<char*> argv;
  for (auto& a : arg_strings) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  env_strings.reserve(o.env.size());
  for (const auto& [k, v] : o.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<int> keep = o.keep_fds;
  std::sort(keep.begin(), keep.end());
  keep.erase(std::unique(keep.begin(), keep.end()), keep.end());
  keep.erase(std::remove_if(keep.begin(), keep.end(), [](int fd) { return fd <= 2; }), keep.end());

  // All signals blocked across the vfork, so that no handler of ours runs in the child on our
  // memory before the child has reset it.
  sigset_t all, old_mask;
  ::sigfillset(&all);
  if (const int e = ::pthread_sigmask(SIG_SETMASK, &all, &old_mask); e != 0)
    throw StartError(o.exe, "pthread_sigmask", e);
  const pid_t parent = ::getpid();
  volatile Failure failure;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    exec_child(o, keep, argv.data(), envp.data(), parent, failure);
    ::_exit(kExitExecFailed);
  }
  const int vfork_errno = errno;
  // Restoring a mask we just read cannot fail.
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) throw StartError(o.exe, "vfork", vfork_errno);
  if (failure.step != nullptr) {
    int status = 0;
    // The child has _exit'ed already (vfork returns after that): this does not block.
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw StartError(o.exe, failure.step, failure.error_number);
  }
  return pid;
}

}  // namespace ddp
