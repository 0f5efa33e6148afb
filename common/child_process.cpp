// vfork + exec, or clone3 into the job's cgroup + exec; see child_process.hpp.
//
// The child makes only raw system calls between the fork and execve: no allocation, no locks, no
// C++ objects, no errno. Everything it needs (argv, envp as C arrays) is built before (Prepared).
// start_child's forks (vfork, clone3 with CLONE_VFORK) return only once the child has exec'd or
// exited; a failed step comes back through a close-on-exec pipe (ReportPipe), or in our memory
// from a child known to share it. begin_child does not wait: its child runs beside us on our
// memory until its exec, and PendingChild::wait() sees it leave (CLONE_CHILD_CLEARTID).
#include "common/child_process.hpp"

#include <fcntl.h>
#include <linux/futex.h>
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
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "common/clone_shared.hpp"
#include "common/close_descriptors.hpp"
#include "common/exit_codes.hpp"
#include "common/raw_syscall.hpp"

namespace ddp {
namespace {

struct Failure {
  const char* step = nullptr;
  int error_number = 0;
};

// Makes `fd` the child's descriptor `target`, without close-on-exec. Child side only: returns 0
// or the failed call's result (a negative errno).
long move_fd(int fd, int target) {
  if (fd < 0) return 0;
  if (fd == target) return raw_syscall(SYS_fcntl, fd, F_SETFD, 0);
  const long r = raw_syscall(SYS_dup3, fd, target, 0);
  return r < 0 ? r : 0;
}

// Everything the child reads, built before the fork and owned by the parent until the child has
// exec'd or exited (the child may run on our memory meanwhile: the options it came from may be
// gone by then).
struct Prepared {
  std::string exe;
  std::vector<std::string> arg_strings, env_strings;
  std::vector<char*> argv, envp;
  std::vector<int> keep;  // sorted, without stdio, with the report pipe's write end
  pid_t parent = 0;
  int stdin_fd = -1, stdout_fd = -1, stderr_fd = -1;
  long long open_files_limit = -1;
  int death_signal = SIGKILL;
  bool new_session = false;
  std::optional<sigset_t> caught;  // ChildOptions::caught_signals; none: looked up in the child
  int report_fd = -1;              // the write end of the report pipe: kept through the closing, not the exec
  volatile Failure* shared_report = nullptr;  // without a pipe: where a child on our memory reports
  int procs_fd = -1;                          // cgroup.procs to join before exec (-1: none, or born in the cgroup)
  std::vector<unsigned long> cpu_mask;        // a cpu_set_t of the child's CPUs (ChildOptions::cpus); empty: none
};

// Child side of the fork: raw system calls only (raw_syscall.hpp: errno and the rest of the
// parent thread's TLS stay untouched, as a child that runs beside us on our memory needs).
// Returns only on failure, with `f` filled in.
void exec_child(const Prepared& p, volatile Failure& f) {
  const auto fail = [&](const char* step, long result) {
    f.step = step;
    f.error_number = static_cast<int>(-result);
  };
  // Caught handlers would run the parent's code on the parent's memory: back to the default.
  // Ignored signals stay ignored, as exec keeps them (nohup's SIGHUP reaches the workers too).
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    if (p.caught) {
      if (::sigismember(&*p.caught, sig) != 1) continue;
    } else {
      KernelSigaction now;
      // Fails (EINVAL) for a number glibc reserves: nothing to reset there.
      if (raw_get_disposition(sig, now) != 0) continue;
      if (now.handler == SIG_DFL || now.handler == SIG_IGN) continue;
    }
    if (const long r = raw_set_disposition(sig, SIG_DFL); r != 0) return fail("sigaction", r);
  }
  long r = 0;
  // Before anything it could start: a child that is in the cgroup takes its children with it.
  // (Not needed when clone3 created it there: then cgroup_procs_fd is -1.)
  if (p.procs_fd >= 0 && (r = raw_syscall(SYS_write, p.procs_fd, reinterpret_cast<long>("0"), 1)) != 1)
    return fail(kCgroupStep, r < 0 ? r : -EIO);
  if ((r = move_fd(p.stdin_fd, 0)) != 0) return fail("dup2 (stdin)", r);
  if ((r = move_fd(p.stdout_fd, 1)) != 0) return fail("dup2 (stdout)", r);
  if ((r = move_fd(p.stderr_fd, 2)) != 0) return fail("dup2 (stderr)", r);
  if (const int e = close_descriptors_except(p.keep.data(), p.keep.size()); e != 0)
    return fail("closing inherited descriptors", -e);
  if (p.report_fd >= 0 && (r = raw_syscall(SYS_fcntl, p.report_fd, F_SETFD, FD_CLOEXEC)) != 0)
    return fail("fcntl (report pipe)", r);
  // setsid returns the new session's id (our pid); it makes us the leader of a new group as well.
  if (p.new_session) {
    if ((r = raw_syscall(SYS_setsid)) < 0) return fail("setsid", r);
  } else if ((r = raw_syscall(SYS_setpgid, 0, 0)) != 0) {
    return fail("setpgid", r);
  }
  if ((r = raw_syscall(SYS_prctl, PR_SET_PDEATHSIG, p.death_signal)) != 0) return fail("prctl(PR_SET_PDEATHSIG)", r);
  // The parent died before prctl took effect: give up now instead of running orphaned.
  if (raw_syscall(SYS_getppid) != p.parent) return fail("getppid (the parent is gone)", -ESRCH);
  if (p.open_files_limit >= 0) {
    rlimit files{};
    if ((r = raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, 0, reinterpret_cast<long>(&files))) != 0)
      return fail("getrlimit", r);
    if (static_cast<rlim_t>(p.open_files_limit) < files.rlim_cur) {
      files.rlim_cur = static_cast<rlim_t>(p.open_files_limit);
      if ((r = raw_syscall(SYS_prlimit64, 0, RLIMIT_NOFILE, reinterpret_cast<long>(&files), 0)) != 0)
        return fail("setrlimit", r);
    }
  }
  if (!p.cpu_mask.empty() &&
      (r = raw_syscall(SYS_sched_setaffinity, 0, static_cast<long>(p.cpu_mask.size() * sizeof(unsigned long)),
                       reinterpret_cast<long>(p.cpu_mask.data()))) != 0)
    return fail("sched_setaffinity", r);
  if ((r = raw_unblock_signals()) != 0) return fail("sigprocmask", r);
  r = raw_syscall(SYS_execve, reinterpret_cast<long>(p.exe.c_str()), reinterpret_cast<long>(p.argv.data()),
                  reinterpret_cast<long>(p.envp.data()));
  fail("execve", r);
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
  p.exe = o.exe;
  p.stdin_fd = o.stdin_fd;
  p.stdout_fd = o.stdout_fd;
  p.stderr_fd = o.stderr_fd;
  p.open_files_limit = o.open_files_limit;
  p.death_signal = o.death_signal;
  p.new_session = o.new_session;
  if (o.caught_signals) p.caught = *o.caught_signals;
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
[[noreturn]] void run_child(const Prepared& p) {
  volatile Failure f;
  exec_child(p, f);
  const Failure copy{f.step, f.error_number};
  if (p.report_fd >= 0) {
    raw_syscall(SYS_write, p.report_fd, reinterpret_cast<long>(&copy), sizeof copy);
  } else {
    p.shared_report->step = copy.step;
    p.shared_report->error_number = copy.error_number;
  }
  raw_syscall(SYS_exit_group, kExitExecFailed);
  __builtin_unreachable();
}

// The child's calls (exec_child, close_descriptors_except's 4 KiB buffer) need a few KiB.
constexpr std::size_t kChildStack = 64 * 1024;

// clone_shared's entry: the child's whole life before its exec.
void run_prepared(void* prepared) {
  run_child(*static_cast<const Prepared*>(prepared));
}

// clone3's arguments for a child born in the cgroup `cgroup_fd` (in ours when it is -1) that signals
// SIGCHLD when it ends, with `flags` added.
clone_args child_clone_args(int cgroup_fd, std::uint64_t flags) {
  clone_args args{};
  args.flags = flags;
  args.exit_signal = SIGCHLD;
  if (cgroup_fd >= 0) {
    args.flags |= CLONE_INTO_CGROUP;
    args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  }
  return args;
}

// clone3(CLONE_VFORK | CLONE_INTO_CGROUP): the child is born in the cgroup. Joining by a write to
// cgroup.procs migrates a process, and the kernel's first migration after a quiet spell waits for
// an RCU grace period (cgroup_threadgroup_rwsem): about 7 ms per launch on the benchmark machine,
// as much as starting 16 workers. Returns the pid, or -1 with errno (ENOSYS/EINVAL: unsupported).
// Like vfork, it returns once the child has exec'd or exited. The child shares our memory
// (clone_shared.hpp: no page tables copied, no copy-on-write faults after) and runs on a stack of
// its own; where that is not available it gets a copy of our memory, as from fork.
pid_t clone_into_cgroup(const ChildOptions& o, const Prepared& p) {
  clone_args args = child_clone_args(o.cgroup_fd, CLONE_VFORK);
  if (p.report_fd < 0) {
    const std::unique_ptr<char[]> stack(new char[kChildStack]);
    return clone_shared(args, stack.get(), kChildStack, run_prepared, const_cast<Prepared*>(&p));
  }
  const long pid = ::syscall(SYS_clone3, &args, sizeof args);
  if (pid == 0) run_child(p);
  return static_cast<pid_t>(pid);
}

// vfork: a function of its own, so that nothing of the caller's lives across it.
pid_t vfork_child(const Prepared& p) {
  const pid_t pid = ::vfork();
  if (pid == 0) run_child(p);
  return pid;
}

}  // namespace

AllSignalsBlocked::AllSignalsBlocked() {
  sigset_t all;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &old_);  // a full set, SIG_SETMASK: cannot fail
}

AllSignalsBlocked::~AllSignalsBlocked() {
  ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
}

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
  const char* fork_step = nullptr;  // the step that failed, with fork_errno
  pid_t pid = -1;
  int fork_errno = 0;
  std::optional<AllSignalsBlocked> blocked(std::in_place);  // across the fork
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
      pid = vfork_child(p);
      fork_step = "vfork";
    } else {
      fork_step = "pipe2";
    }
    fork_errno = errno;
  }
  blocked.reset();
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

struct PendingChild::State {
  Prepared prepared;
  std::unique_ptr<char[]> stack;
  volatile Failure report;
  // CLONE_CHILD_CLEARTID: the kernel writes 0 here and wakes its futex when the child leaves our
  // memory (its exec, or its exit).
  alignas(4) volatile pid_t left = -1;
};

PendingChild::PendingChild() = default;

PendingChild::~PendingChild() {
  if (waited_) return;
  try {
    wait();
  } catch (const StartError&) {
    // Reaped in wait(); nobody asked.
  }
}

void PendingChild::wait() {
  if (waited_) return;
  waited_ = true;
  if (!state_) return;
  State& s = *state_;
  for (pid_t now; (now = s.left) != 0;) {
    // The kernel's wake at the child's exec or exit is a shared futex (not FUTEX_PRIVATE_FLAG).
    // EAGAIN (the word changed first) and EINTR: look again.
    ::syscall(SYS_futex, const_cast<pid_t*>(&s.left), FUTEX_WAIT, now, nullptr, nullptr, 0);
  }
  const Failure failure{s.report.step, s.report.error_number};
  const std::string exe = s.prepared.exe;
  state_.reset();  // the child has left our memory
  if (failure.step == nullptr) return;
  int status = 0;
  // The child has exited (it left our memory by _exit): this does not block.
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  throw StartError(exe, failure.step, failure.error_number);
}

namespace {

// Whether a child may run beside us on our memory: raw system calls (no errno) and close_range
// (its fallbacks read /proc with calls of their own, fine but slower; kernels before 5.9).
bool children_may_run_beside_us() {
  static const bool may = kRawSyscalls && raw_syscall(SYS_close_range, ~0U, ~0U, 0) == 0;
  return may;
}

}  // namespace

std::unique_ptr<PendingChild> begin_child(const ChildOptions& options) {
  std::unique_ptr<PendingChild> child(new PendingChild);
  // A child that joins its cgroup by a write to cgroup.procs (no CLONE_INTO_CGROUP) is
  // start_child's: that write waits for an RCU grace period, which a vfork hides best.
  const bool joins_by_write = options.cgroup_fd < 0 ? options.cgroup_procs_fd >= 0 : no_clone_into_cgroup.load();
  if (joins_by_write || !children_may_run_beside_us()) {
    child->pid_ = start_child(options);
    child->waited_ = true;
    return child;
  }
  child->state_ = std::make_unique<PendingChild::State>();
  PendingChild::State& s = *child->state_;
  s.prepared = prepare(options, &s.report);
  s.prepared.procs_fd = -1;  // born in the cgroup, or in none
  s.stack.reset(new char[kChildStack]);
  clone_args args = child_clone_args(options.cgroup_fd, CLONE_CHILD_CLEARTID);
  args.child_tid = reinterpret_cast<std::uint64_t>(&s.left);
  pid_t pid = -1;
  int e = 0;
  {
    const AllSignalsBlocked blocked;  // across the fork
    pid = clone_shared(args, s.stack.get(), kChildStack, run_prepared, &s.prepared);
    e = errno;
  }
  if (pid < 0) {
    child->state_.reset();  // no child runs on it
    // No clone_shared or no CLONE_INTO_CGROUP here: start_child finds the way that works.
    if (e == ENOSYS || e == EINVAL) {
      child->pid_ = start_child(options);
      child->waited_ = true;
      return child;
    }
    const bool cgroup_refused = options.cgroup_fd >= 0 && e != EAGAIN && e != ENOMEM;
    throw StartError(options.exe, cgroup_refused ? kCgroupStep : "clone3", e);
  }
  child->pid_ = pid;
  return child;
}

}  // namespace ddp
