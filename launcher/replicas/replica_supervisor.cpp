// The layout's launcher; see replica_supervisor.hpp.
#include "launcher/replicas/replica_supervisor.hpp"

#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <csignal>

#include <fmt/format.h>

#include "common/child_process.hpp"
#include "common/exit_codes.hpp"
#include "common/find_executable.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "launcher/replicas/replica_layout.hpp"

namespace ddp::launcher {
namespace {

constexpr int kStoppingSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};

bool is_stopping(int signo) {
  for (int s : kStoppingSignals)
    if (s == signo) return true;
  return false;
}

// SIGCHLD, the stopping signals and --signals_to_handle: the signals run() waits for.
sigset_t waited_signals(const LaunchConfig& c) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  for (int s : kStoppingSignals) sigaddset(&set, s);
  for (int s : c.signals_to_handle) sigaddset(&set, s);
  return set;
}

std::string describe_status(int status) {
  return WIFSIGNALED(status) ? "was killed by " + signal_name(WTERMSIG(status))
                             : fmt::format("exited with code {}", WEXITSTATUS(status));
}

}  // namespace

ReplicaSupervisor::ReplicaSupervisor(ReplicaSupervisorOptions options)
    : o_(std::move(options)), groups_(static_cast<std::size_t>(o_.config.replicas.count)) {
  const ReplicaGroups& r = o_.config.replicas;
  url_ = lighthouse_url(r, o_.env);
  if (!r.starts_lighthouse()) return;
  lighthouse_argv_ = lighthouse_argv(r);
  const std::string& program = lighthouse_argv_.front();
  lighthouse_exe_ = program.find('/') == std::string::npos ? find_on_path(program) : program;
  if (lighthouse_exe_.empty()) {
    throw UsageError(fmt::format(
        "--lighthouse: '{}' is not on PATH; install torchft here (pip install torchft), give the lighthouse's "
        "path, or --lighthouse none with TORCHFT_LIGHTHOUSE naming one that runs elsewhere",
        program));
  }
}

int ReplicaSupervisor::run() {
  const sigset_t waited = waited_signals(o_.config);
  sigprocmask(SIG_BLOCK, &waited, nullptr);  // children start with an empty mask (child_process.hpp)
  try {
    if (!lighthouse_exe_.empty()) start_lighthouse();
    for (int i = 0; i < o_.config.replicas.count; ++i) start_group(i);
  } catch (const StartError&) {
    forward(SIGKILL);
    for (Group& g : groups_) {
      if (g.pid > 0) ::waitpid(g.pid, nullptr, 0);  // killed: returns at once
    }
    stop_lighthouse();
    throw;
  }
  log::info("replica groups: {} launchers (restarts: {} each), lighthouse {} ({})", o_.config.replicas.count,
            o_.config.max_restarts, url_, lighthouse_ > 0 ? fmt::format("pid {}", lighthouse_) : "started elsewhere");
  while (running_groups() > 0) {
    siginfo_t info{};
    const int signo = sigwaitinfo(&waited, &info);
    if (signo == SIGCHLD) {
      reap();
    } else if (signo > 0) {
      if (is_stopping(signo) && !stopping_)
        log::warning("{} received: stopping {} replica groups", signal_name(signo), running_groups());
      stopping_ = stopping_ || is_stopping(signo);
      forward(signo);
    }  // EINTR: a signal we do not wait for, handled by its default action; wait again
  }
  stop_lighthouse();
  return exit_code();
}

void ReplicaSupervisor::start_lighthouse() {
  ChildOptions child;
  child.exe = lighthouse_exe_;
  child.argv = lighthouse_argv_;
  child.env = o_.env;
  lighthouse_ = start_child(child);
  log::info("lighthouse started (pid {}): {} {}", lighthouse_, o_.config.replicas.lighthouse,
            fmt::format("--bind 127.0.0.1:{}", o_.config.replicas.lighthouse_port));
}

void ReplicaSupervisor::start_group(int index) {
  ChildOptions child;
  child.exe = o_.self;
  child.argv = o_.argv;
  child.env = group_environment(o_.env, o_.config.replicas, index, url_);
  groups_[static_cast<std::size_t>(index)].pid = start_child(child);
}

void ReplicaSupervisor::reap() {
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    if (pid == lighthouse_) {
      lighthouse_ended(status);
      continue;
    }
    for (std::size_t i = 0; i < groups_.size(); ++i) {
      if (groups_[i].pid != pid) continue;
      groups_[i].code = exit_code_from_wait_status(status);
      const int code = *groups_[i].code;
      log::write(code == kExitOk ? log::Level::Info : log::Level::Warning,
                 fmt::format("replica group {} (launcher pid {}) ended with code {}{}", i, pid, code,
                             running_groups() > 0 ? "; the other groups keep running" : ""));
    }
  }
}

void ReplicaSupervisor::lighthouse_ended(int status) {
  lighthouse_ = -1;
  if (stopping_ || running_groups() == 0) return;
  if (lighthouse_restarts_ >= o_.config.max_restarts) {
    log::error("the lighthouse {} {} times (--max_restarts={}); stopping the replica groups: check its output above",
               describe_status(status), lighthouse_restarts_ + 1, o_.config.max_restarts);
    lighthouse_failed_ = true;
    stopping_ = true;
    forward(SIGTERM);
    return;
  }
  ++lighthouse_restarts_;
  log::warning("the lighthouse {}; starting it again ({} of --max_restarts={})", describe_status(status),
               lighthouse_restarts_, o_.config.max_restarts);
  start_lighthouse();
}

void ReplicaSupervisor::forward(int signo) {
  for (const Group& g : groups_) {
    // ESRCH: it ended after the last reap; the next SIGCHLD reaps it.
    if (g.pid > 0 && !g.code) ::kill(g.pid, signo);
  }
}

void ReplicaSupervisor::stop_lighthouse() {
  if (lighthouse_ <= 0) return;
  ::kill(-lighthouse_, SIGTERM);  // its process group (child_process.hpp); ESRCH: already gone
  sigset_t child;
  sigemptyset(&child);
  sigaddset(&child, SIGCHLD);
  const auto deadline = std::chrono::steady_clock::now() + o_.config.shutdown_timeout;
  int status = 0;
  while (::waitpid(lighthouse_, &status, WNOHANG) == 0) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) {
      log::warning("the lighthouse (pid {}) outlived SIGTERM by {}; killing it", lighthouse_,
                   format_seconds(o_.config.shutdown_timeout));
      ::kill(-lighthouse_, SIGKILL);
      ::waitpid(lighthouse_, &status, 0);
      break;
    }
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    const timespec wait{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    sigtimedwait(&child, nullptr, &wait);  // a SIGCHLD, or the deadline: look again
  }
  lighthouse_ = -1;
}

int ReplicaSupervisor::running_groups() const {
  int n = 0;
  for (const Group& g : groups_) n += g.pid > 0 && !g.code ? 1 : 0;
  return n;
}

int ReplicaSupervisor::exit_code() const {
  for (const Group& g : groups_)
    if (g.code && *g.code != kExitOk) return *g.code;
  return lighthouse_failed_ ? kExitFailure : kExitOk;
}

}  // namespace ddp::launcher
