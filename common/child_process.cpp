// vfork + exec, or clone3 into the job's cgroup + exec; see child_process.hpp.
//
// The child makes only system calls between the fork and execve: no allocation, no locks, no C++
// objects. Everything it needs (argv, envp as C arrays) is built before. Both forks (vfork, and
// clone3 with CLONE_VFORK, which copies the address space) return only once the child has exec'd
// or exited; a failed step comes back through a close-on-exec pipe (ReportPipe).
#include "common/child_process.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/clone_shared.hpp"
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

struct Prepared {
  std::vector<std::string> arg_strings, env_strings;
  std::vector<char*> argv, envp;
  std::vector<int> keep;  // sorted, without stdio, with the report pipe's write end
  pid_t parent = 0;
  int report_fd = -1;                   // the write end of the report pipe: kept through the closing, not the exec
  volatile Failure* shared_report = nullptr;  // without a pipe: where a child on our memory reports
  int procs_fd = -1;                    // cgroup.procs to join before exec (-1: none, or born in the cgroup)
  std::vector<unsigned long> cpu_mask;  // a cpu_set_t of the child's CPUs (ChildOptions::cpus); empty: none
};

// Child side of the fork: system calls only. Returns only on failure, with `f` filled in.
void exec_child(const ChildOptions& o, const Prepared& p, volatile Failure& f) {
  const auto fail = [&](const char* step) {
    f.step = step;
    f.error_number = errno;
  };
  // Caught handlers would run the parent's code on the parent's memory: back to the default.
  // Ignored signals stay ignored, as exec keeps them (nohup's SIGHUP reaches the workers too).
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (o.caught_signals) {
      if (::sigismember(o.caught_signals, sig) != 1) continue;
    } else {
      if (::sigaction(sig, nullptr, &sa) != 0) continue;  // EINVAL: a number glibc reserves
      if (sa.sa_handler == SIG_DFL || sa.sa_handler == SIG_IGN) continue;
    }
    sa = {};
    sa.sa_handler = SIG_DFL;
    if (::sigaction(sig, &sa, nullptr) != 0) return fail("sigaction");
  }
  // Before anything it could start: a child that is in the cgroup takes its children with it.
  // (Not needed when clone3 created it there: then cgroup_procs_fd is -1.)
  if (p.procs_fd >= 0 && ::write(p.procs_fd, "0", 1) != 1) return fail(kCgroupStep);
  if (!move_fd(o.stdout_fd, 1)) return fail("dup2 (stdout)");
  if (!move_fd(o.stderr_fd, 2)) return fail("dup2 (stderr)");
  if (const int e = close_descriptors_except(p.keep.data(), p.keep.size()); e != 0) {
    errno = e;
    return fail("closing inherited descriptors");
  }
  if (p.report_fd >= 0 && ::fcntl(p.report_fd, F_SETFD, FD_CLOEXEC) != 0) return fail("fcntl (report pipe)");
  if (::setpgid(0, 0) != 0) return fail("setpgid");
  if (::prctl(PR_SET_PDEATHSIG, o.death_signal) != 0) return fail("prctl(PR_SET_PDEATHSIG)");
  // The parent died before prctl took effect: give up now instead of running orphaned.
  if (::getppid() != p.parent) {
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
  if (!p.cpu_mask.empty() && ::sched_setaffinity(0, p.cpu_mask.size() * sizeof(unsigned long),
                                                 reinterpret_cast<const cpu_set_t*>(p.cpu_mask.data())) != 0)
    return fail("sched_setaffinity");
  sigset_t none;
  ::sigemptyset(&none);
  if (::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) return fail("sigprocmask");
  ::execve(o.exe.c_str(), p.argv.data(), p.envp.data());
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

// Argv and envp as C arrays, and the descriptors to keep: everything the child needs, built
// before the fork. The report goes to `shared_report` (the child shares our memory for certain),
// else through a pipe whose write end use_report_pipe() adds.
Prepared prepare(const ChildOptions& o, volatile Failure* shared_report) {
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
  p.parent = ::getpid();
  p.shared_report = shared_report;
  p.procs_fd = o.cgroup_procs_fd;
  if (!o.cpus.empty()) {
    constexpr std::size_t kBits = 8 * sizeof(unsigned long);
    p.cpu_mask.resize(static_cast<std::size_t>(*std::max_element(o.cpus.begin(), o.cpus.end())) / kBits + 1);
    for (int cpu : o.cpus) p.cpu_mask[cpu / kBits] |= 1UL << (cpu % kBits);
  }
  return p;
}

// The child's report when it may not share our memory: a close-on-exec pipe. The child writes its
// Failure there when a step fails; end of file means the exec succeeded. (After vfork the child
// shares our memory, but a sanitizer or valgrind may turn vfork into fork: the pipe works either
// way.) Step names are string literals: the same addresses in a forked copy of the program. A
// child of clone_shared, which shares our memory for certain, writes its Failure into ours
// instead: four system calls fewer per worker.
class ReportPipe {
 public:
  ReportPipe() {
    if (::pipe2(fds_, O_CLOEXEC) != 0) fds_[0] = fds_[1] = -1;
  }
  ~ReportPipe() {
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  ReportPipe(const ReportPipe&) = delete;
  ReportPipe& operator=(const ReportPipe&) = delete;
  bool ok() const { return fds_[0] >= 0; }
  int child_end() const { return fds_[1]; }
  // Parent side, after the fork returned: what the child reported (step nullptr: it exec'd).
  // Does not block for long: the fork returns only once the child has exec'd or exited.
  Failure read() {
    ::close(fds_[1]);
    fds_[1] = -1;
    Failure f;
    ssize_t n;
    while ((n = ::read(fds_[0], &f, sizeof f)) < 0 && errno == EINTR) {
    }
    return n == static_cast<ssize_t>(sizeof f) ? f : Failure{};
  }

 private:
  int fds_[2];
};

// Child side after either fork: exec, or report the failed step and exit.
[[noreturn]] void run_child(const ChildOptions& o, const Prepared& p) {
  volatile Failure f;
  exec_child(o, p, f);
  const Failure copy{f.step, f.error_number};
  if (p.report_fd >= 0) {
    [[maybe_unused]] const ssize_t n = ::write(p.report_fd, &copy, sizeof copy);
  } else {
    p.shared_report->step = copy.step;
    p.shared_report->error_number = copy.error_number;
  }
  ::_exit(kExitExecFailed);
}

// clone3(CLONE_VFORK | CLONE_INTO_CGROUP): the child is born in the cgroup. Joining by a write to
// cgroup.procs migrates a process, and the kernel's first migration after a quiet spell waits for
// an RCU grace period (cgroup_threadgroup_rwsem): about 7 ms per launch on the benchmark machine,
// as much as starting 16 workers. Returns the pid, or -1 with errno (ENOSYS/EINVAL: unsupported).
// Like vfork, it returns once the child has exec'd or exited. The child shares our memory
// (clone_shared.hpp: no page tables copied, no copy-on-write faults after) and runs on a stack of
// its own; where that is not available it gets a copy of our memory, as from fork.
pid_t clone_into_cgroup(const ChildOptions& o, const Prepared& p) {
  clone_args args{};
  args.flags = CLONE_VFORK | CLONE_INTO_CGROUP;
  args.exit_signal = SIGCHLD;
  args.cgroup = static_cast<std::uint64_t>(o.cgroup_fd);
  if (p.report_fd < 0) {
    struct Entry {
      const ChildOptions* o;
      const Prepared* p;
    } entry{&o, &p};
    // The child's calls (exec_child, close_descriptors_except's 4 KiB buffer) need a few KiB.
    constexpr std::size_t kChildStack = 64 * 1024;
    const std::unique_ptr<char[]> stack(new char[kChildStack]);
    return clone_shared(
        args, stack.get(), kChildStack,
        [](void* e) { run_child(*static_cast<Entry*>(e)->o, *static_cast<Entry*>(e)->p); }, &entry);
  }
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) run_child(o, p);
  return static_cast<pid_t>(pid);
}

// vfork: a function of its own, so that nothing of the caller's lives across it.
pid_t vfork_child(const ChildOptions& o, const Prepared& p) {
  const pid_t pid = ::vfork();
  if (pid == 0) run_child(o, p);
  return pid;
}

}  // namespace

sigset_t signals_with_handlers() {
  sigset_t caught;
  ::sigemptyset(&caught);
  for (int sig = 1; sig < NSIG; ++sig) {
    struct sigaction sa {};
    if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &sa) != 0) continue;
    if (sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN) ::sigaddset(&caught, sig);
  }
  return caught;
}

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
  volatile Failure shared_report;
  Prepared p = prepare(options, &shared_report);
  std::optional<ReportPipe> report;  // made unless the child is known to share our memory
  // Returns false, errno set, when no pipe can be made.
  const auto use_report_pipe = [&] {
    report.emplace();
    if (!report->ok()) return false;
    p.report_fd = report->child_end();
    p.keep.insert(std::upper_bound(p.keep.begin(), p.keep.end(), p.report_fd), p.report_fd);
    return true;
  };
  const bool into_cgroup = options.cgroup_fd >= 0 && !no_clone_into_cgroup.load();
  // All signals blocked across the fork, so that no handler of ours runs in the child (on our
  // memory, after vfork) before the child has reset it.
  sigset_t all, old_mask;
  ::sigfillset(&all);
  if (const int e = ::pthread_sigmask(SIG_SETMASK, &all, &old_mask); e != 0)
    throw StartError(options.exe, "pthread_sigmask", e);
  const char* fork_step = nullptr;  // the step that failed, with fork_errno
  pid_t pid = -1;
  int fork_errno = 0;
  if (into_cgroup) {
    p.procs_fd = -1;  // born in the cgroup
    pid = clone_into_cgroup(options, p);
    if (pid < 0 && errno == ENOSYS && !report) {
      // No clone_shared here (another architecture, a sanitizer build): clone3 copying our memory.
      if (use_report_pipe()) {
        pid = clone_into_cgroup(options, p);
      } else {
        fork_step = "pipe2";
      }
    }
    fork_errno = errno;
    if (pid < 0 && fork_step == nullptr) {
      if (fork_errno == ENOSYS || fork_errno == EINVAL) {
        no_clone_into_cgroup = true;  // Linux before 5.7: vfork below, then cgroup.procs
        p.procs_fd = options.cgroup_procs_fd;
      } else {
        // EAGAIN, ENOMEM: a fork's limits; else the cgroup refused the child (EACCES, EBUSY, ...),
        // as a failed cgroup.procs write.
        fork_step = fork_errno == EAGAIN || fork_errno == ENOMEM ? "clone3" : kCgroupStep;
      }
    }
  }
  if (pid < 0 && fork_step == nullptr) {
    if (report || use_report_pipe()) {
      pid = vfork_child(options, p);
      fork_step = "vfork";
    } else {
      fork_step = "pipe2";
    }
    fork_errno = errno;
  }
  // Restoring a mask we just read cannot fail.
  ::pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  if (pid < 0) throw StartError(options.exe, fork_step, fork_errno);
  const Failure failure = report ? report->read() : Failure{shared_report.step, shared_report.error_number};
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
