// vfork + exec, or clone3 into the job's cgroup + exec; see child_process.hpp.
//
// The child makes only system calls between the fork and execve: no allocation, no locks, no C++
// objects. Everything it needs (argv, envp as C arrays) is built before. After vfork the child
// shares the parent's memory: a failed step is written to `failure` and read after vfork returns,
// which it does only once the child has exec'd or exited. After clone3 (CLONE_VFORK without
// CLONE_VM: the same wait, a copy-on-write address space) the failure comes back through a
// close-on-exec pipe instead: end of file there means the exec succeeded.
#include "common/child_process.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
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

// Child side of the fork: system calls only. Returns only on failure, with `f` filled in.
// `report_fd` (>= 0, also in `keep`) survives the descriptor closing but not the exec.
void exec_child(const ChildOptions& o, const std::vector<int>& keep, char* const* argv, char* const* envp, pid_t parent,
                volatile Failure& f, int report_fd = -1) {
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
  // (Not needed when clone3 created it there: then cgroup_procs_fd is -1.)
  if (o.cgroup_procs_fd >= 0 && ::write(o.cgroup_procs_fd, "0", 1) != 1) return fail(kCgroupStep);
  if (!move_fd(o.stdout_fd, 1)) return fail("dup2 (stdout)");
  if (!move_fd(o.stderr_fd, 2)) return fail("dup2 (stderr)");
  if (const int e = close_descriptors_except(keep.data(), keep.size()); e != 0) {
    errno = e;
    return fail("closing inherited descriptors");
  }
  if (report_fd >= 0 && ::fcntl(report_fd, F_SETFD, FD_CLOEXEC) != 0) return fail("fcntl (report pipe)");
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

bool is_fork_step(const char* step) {
  return std::strcmp(step, "vfork") == 0 || std::strcmp(step, "clone3") == 0;
}

std::string describe(const std::string& exe, const char* step, int e) {
  std::string text = "cannot start '" + exe + "': " + step + ": " + std::strerror(e);
  if (e == EAGAIN && is_fork_step(step)) text += "; " + process_limit_hint();
  return text;
}

// Set once clone3 turned out to lack CLONE_INTO_CGROUP (Linux before 5.7: ENOSYS or EINVAL).
std::atomic<bool> no_clone_into_cgroup{false};

struct Prepared {
  std::vector<std::string> arg_strings, env_strings;
  std::vector<char*> argv, envp;
  std::vector<int> keep;
};

Prepared prepare(const ChildOptions& o) {
  Prepared p;
  p.arg_strings = o.argv.empty() ? std::vector<std::string>{o.exe} : o.argv;
  for (auto& a : p.arg_strings) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.env_strings.reserve(o.env.size());
  for (const auto& [k, v] : o.env) p.env_strings.push_back(k + "=" + v);
  for (auto& e : p.env_strings) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  p.keep = o.keep_fds;
  std::sort(p.keep.begin(), p.keep.end());
  p.keep.erase(std::unique(p.keep.begin(), p.keep.end()), p.keep.end());
  p.keep.erase(std::remove_if(p.keep.begin(), p.keep.end(), [](int fd) { return fd <= 2; }), p.keep.end());
  return p;
}

// clone3(CLONE_VFORK | CLONE_INTO_CGROUP): the child is born in the cgroup. Joining by a write to
// cgroup.procs migrates a process, and the kernel's first migration after a quiet spell waits for
// an RCU grace period (cgroup_threadgroup_rwsem): about 7 ms per launch on the benchmark machine,
// as much as starting 16 workers. Returns the pid, or -1 with errno (ENOSYS/EINVAL: unsupported).
// The parent resumes once the child has exec'd or exited; `failure` is what the child reported.
pid_t clone_into_cgroup(const ChildOptions& o, const Prepared& p, pid_t parent, Failure& failure) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return -1;
  std::vector<int> keep = p.keep;  // the report pipe survives the descriptor closing
  keep.insert(std::upper_bound(keep.begin(), keep.end(), report[1]), report[1]);
  clone_args args{};
  args.flags = CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(o.cgroup_fd);
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) {
    Failure f;
    exec_child(o, keep, p.argv.data(), p.envp.data(), parent, f, report[1]);
    // Step names are string literals: the same addresses in the parent's copy of the program.
    [[maybe_unused]] const ssize_t n = ::write(report[1], &f, sizeof f);
    ::_exit(kExitExecFailed);
  }
  const int clone_errno = errno;
  ::close(report[1]);
  if (pid > 0) {
    Failure f;
    ssize_t n;
    while ((n = ::read(report[0], &f, sizeof f)) < 0 && errno == EINTR) {
    }
    if (n == static_cast<ssize_t>(sizeof f)) failure = f;
  }
  ::close(report[0]);
  errno = clone_errno;
  return static_cast<pid_t>(pid);
}

// vfork: the child shares our memory until exec, so its failure is read from `shared` after
// vfork returns. A function of its own: nothing of the caller's lives across the vfork.
pid_t vfork_child(const ChildOptions& o, const Prepared& p, pid_t parent, Failure& failure) {
  volatile Failure shared;
  const pid_t pid = ::vfork();
  if (pid == 0) {
    exec_child(o, p.keep, p.argv.data(), p.envp.data(), parent, shared);
    ::_exit(kExitExecFailed);
  }
  const int vfork_errno = errno;
  failure.step = shared.step;
  failure.error_number = shared.error_number;
  errno = vfork_errno;
  return pid;
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

bool StartError::process_limit() const {
  return errno_ == EAGAIN && is_fork_step(step_);
}

pid_t start_child(const ChildOptions& options) {
  const Prepared p = prepare(options);
  // All signals blocked across the fork, so that no handler of ours runs in the child (on our
  // memory, after vfork) before the child has reset it.
  sigset_t all, old_mask;
  ::sigfillset(&all);
  if (const int e = ::pthread_sigmask(SIG_SETMASK, &all, &old_mask); e != 0)
    throw StartError(options.exe, "pthread_sigmask", e);
  const pid_t parent = ::getpid();
  const char* fork_step = "vfork";
  Failure failure;
  pid_t pid = -1;
  int fork_errno = 0;
  if (options.cgroup_fd >= 0 && !no_clone_into_cgroup.load()) {
    ChildOptions o = options;
    o.cgroup_procs_fd = -1;  // born in the cgroup
    fork_step = "clone3";
    pid = clone_into_cgroup(o, p, parent, failure);
    fork_errno = errno;
    if (pid < 0 && (fork_errno == ENOSYS || fork_errno == EINVAL)) {
      no_clone_into_cgroup = true;
    } else if (pid < 0 && fork_errno != EAGAIN && fork_errno != ENOMEM) {
      // The cgroup refused the child (EACCES, EBUSY, ...): as a failed cgroup.procs write.
      fork_step = kCgroupStep;
    }
  }
  if (options.cgroup_fd < 0 || no_clone_into_cgroup.load()) {
    fork_step = "vfork";
    pid = vfork_child(options, p, parent, failure);
    fork_errno = errno;
  }
  // Restoring a mask we just read cannot fail.
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) throw StartError(options.exe, fork_step, fork_errno);
  if (failure.step != nullptr) {
    int status = 0;
    // The child has _exit'ed already (the fork returns after that): this does not block.
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    throw StartError(options.exe, failure.step, failure.error_number);
  }
  return pid;
}

}  // namespace ddp
