// See process_set.hpp.
#include "common/process_set.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>

#include "common/exit_codes.hpp"
#include "common/log.hpp"

namespace ddp {
namespace {

// Every pid started by a ProcessSet and not reaped yet, process-wide (see owns()).
std::mutex owned_mutex;
std::set<pid_t>& owned() {
  static std::set<pid_t> pids;
  return pids;
}

void own(pid_t pid, bool yes) {
  std::lock_guard<std::mutex> lock(owned_mutex);
  if (yes) {
    owned().insert(pid);
  } else {
    owned().erase(pid);
  }
}

}  // namespace

bool ProcessSet::owns(pid_t pid) {
  std::lock_guard<std::mutex> lock(owned_mutex);
  return owned().count(pid) != 0;
}

ProcessSet::~ProcessSet() {
  signal_all(SIGKILL);
  for (Child& c : children_) {
    if (c.reaped) continue;
    // Just sent SIGKILL (or ended already): returns promptly.
    while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.reaped = true;
    own(c.pid, false);
  }
}

std::size_t ProcessSet::start(ChildOptions options) {
  pid_t pid = -1;
  if (noted_) options.caught_signals = &*noted_;
  std::unique_ptr<PendingChild> pending;
  const auto begin = [&] {
    if (noted_) {  // in a batch: StartBatch::finish() waits for the exec
      pending = begin_child(options);
      pid = pending->pid();
    } else {
      pid = start_child(options);
    }
  };
  if (cgroup_fd_ < 0) {
    begin();
  } else {
    options.cgroup_fd = cgroup_fd_;
    options.cgroup_procs_fd = cgroup_procs_fd_;
    try {
      begin();
    } catch (const StartError& e) {
      if (std::strcmp(e.step(), kCgroupStep) != 0) throw;
      log::debug("cannot place workers in the job's cgroup ({}); using process groups only",
                 std::strerror(e.error_number()));
      cgroup_fd_ = cgroup_procs_fd_ = -1;
      options.cgroup_fd = options.cgroup_procs_fd = -1;
      begin();
    }
  }
  own(pid, true);
  children_.push_back(Child{pid});
  if (pending) pending_.emplace_back(children_.size() - 1, std::move(pending));
  return children_.size() - 1;
}

ProcessSet::StartBatch::StartBatch(ProcessSet& set) : set_(set) {
  set_.noted_ = signals_with_handlers();
}

ProcessSet::StartBatch::~StartBatch() {
  try {
    finish();
  } catch (const StartError&) {
    // The failed children are reaped; the caller is unwinding already.
  }
  set_.noted_.reset();
}

void ProcessSet::StartBatch::finish() {
  std::optional<StartFailed> first;
  for (auto& [index, child] : set_.pending_) {
    try {
      child->wait();
    } catch (const StartError& e) {
      // Reaped by wait(): the set must neither report it nor signal its number again.
      Child& c = set_.children_[index];
      c.ended = c.reaped = true;
      own(c.pid, false);
      if (!first) first.emplace(index, e);
    }
  }
  set_.pending_.clear();
  if (first) throw *first;
}

void ProcessSet::signal_all(int signo) {
  for (const Child& c : children_) {
    // ESRCH: the group is empty (the child ended and left nothing behind); nothing to do.
    if (!c.reaped) ::kill(-c.pid, signo);
  }
}

std::vector<pid_t> ProcessSet::abandon_running() {
  std::vector<pid_t> out;
  for (Child& c : children_) {
    if (c.ended) continue;
    c.ended = c.reaped = true;
    own(c.pid, false);
    out.push_back(c.pid);
  }
  return out;
}

void ProcessSet::signal_each(int signo) {
  for (const Child& c : children_) {
    // Not seen ended, so not reaped: the pid is still this child's.
    if (!c.ended) ::kill(c.pid, signo);
  }
}

std::vector<ProcessSet::Exit> ProcessSet::collect() {
  std::vector<Exit> out;
  for (std::size_t i = 0; i < children_.size(); ++i) {
    Child& c = children_[i];
    if (c.ended) continue;
    siginfo_t info{};
    int r;
    while ((r = ::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT)) < 0 && errno == EINTR) {
    }
    if (r == 0 && info.si_pid == 0) continue;  // still running
    c.ended = true;
    Exit e;
    e.index = i;
    e.pid = c.pid;
    if (r != 0) {
      // ECHILD: someone else (a waitpid(-1) elsewhere in the process) took its status.
      c.reaped = true;
      own(c.pid, false);
      e.exit_code = kExitFailure;
    } else if (info.si_code == CLD_EXITED) {
      e.exit_code = info.si_status;
    } else {
      e.term_signal = info.si_status;
      e.exit_code = exit_code_for_signal(info.si_status);
    }
    out.push_back(e);
  }
  return out;
}

std::size_t ProcessSet::running() const {
  return static_cast<std::size_t>(
      std::count_if(children_.begin(), children_.end(), [](const Child& c) { return !c.ended; }));
}

void ProcessSet::reap() {
  for (Child& c : children_) {
    if (!c.ended || c.reaped) continue;
    // Ended (collect() saw it), so this does not block.
    while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.reaped = true;
    own(c.pid, false);
  }
}

}  // namespace ddp
