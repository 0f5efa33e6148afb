// See job_lifetime.hpp.
#include "launcher/workers/job_lifetime.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>

#include "common/child_process.hpp"
#include "common/format_duration.hpp"
#include "common/kernel_files.hpp"
#include "common/log.hpp"
#include "launcher/workers/reaper.hpp"

namespace ddp::launcher {
namespace {

// "ddplaunch-<pid>-<run id>", the run id cut to what a path component may safely hold.
std::string cgroup_name(const std::string& run_id) {
  std::string name = "ddplaunch-" + std::to_string(::getpid()) + "-";
  for (const char c : run_id.substr(0, 64))
    name += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ? c : '_';
  return name;
}

// The parent pid in a /proc/<pid>/stat line, -1 if unreadable. "pid (comm) state ppid ...":
// comm may hold spaces and parentheses, so fields are counted from the last ')'.
pid_t parent_in_stat(const std::string& stat) {
  const auto close = stat.rfind(')');
  char state = 0;
  int ppid = -1;
  if (close == std::string::npos || std::sscanf(stat.c_str() + close + 1, " %c %d", &state, &ppid) != 2) return -1;
  return ppid;
}

// The parent of `pid` (its /proc/<pid>/stat), -1 when it is gone or unreadable.
pid_t parent_of(const std::string& pid) {
  return parent_in_stat(read_kernel_file(AT_FDCWD, ("/proc/" + pid + "/stat").c_str()));
}

}  // namespace

std::optional<std::vector<pid_t>> listed_children(pid_t parent) {
  // CONFIG_PROC_CHILDREN: each task's `children` file (Linux 3.5). Without it, nothing is listed.
  static const bool available = ::access("/proc/thread-self/children", R_OK) == 0;
  if (!available) return std::nullopt;
  const std::string tasks = "/proc/" + std::to_string(parent) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (!dir) return std::nullopt;
  std::vector<pid_t> out;
  // A thread's children: those it made and the orphans it was handed as the (sub)reaper.
  while (const dirent* d = ::readdir(dir)) {
    if (!std::isdigit(static_cast<unsigned char>(d->d_name[0]))) continue;
    for_each_pid_in_file(::dirfd(dir), (std::string(d->d_name) + "/children").c_str(),
                         [&](pid_t pid) { out.push_back(pid); });
  }
  ::closedir(dir);
  return out;
}

std::vector<pid_t> scanned_children(pid_t parent) {
  std::vector<pid_t> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (const dirent* d = ::readdir(proc)) {
    if (!std::isdigit(static_cast<unsigned char>(d->d_name[0]))) continue;
    if (parent_of(d->d_name) == parent) out.push_back(static_cast<pid_t>(std::atoi(d->d_name)));
  }
  ::closedir(proc);
  return out;
}

std::vector<pid_t> children_of(pid_t parent) {
  if (auto listed = listed_children(parent)) return std::move(*listed);
  return scanned_children(parent);
}

JobLifetime::JobLifetime(const JobLifetimeOptions& o) : grace_(o.grace) {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    log::debug("cannot become a child subreaper ({}); orphans of workers go to init", std::strerror(errno));
  if (!o.use_cgroup)
    log::debug("no cgroup for this job (turned off); stray processes are found through process groups only");
  if (o.use_cgroup) {
    std::string why_not;
    cgroup_ = JobCgroup::create(cgroup_name(o.run_id), &why_not);
    if (cgroup_) {
      log::debug("workers run in cgroup {}", cgroup_->path());
    } else {
      log::debug("no cgroup for this job ({}); stray processes are found through process groups only", why_not);
    }
  }
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0)
    throw Error(std::string("cannot create the reaper's socket pair: ") + std::strerror(errno));
  reaper_args_ = ReaperArgs{.socket = fds[1], .launcher_end = fds[0], .cgroup = cgroup(), .grace = o.grace};
  const pid_t pid = start_reaper(reaper_args_, reaper_stack_);
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    if (cgroup_) cgroup_->remove();
    throw Error(std::string("cannot start the reaper process: ") + std::strerror(e) +
                (e == EAGAIN ? "; " + process_limit_hint() : ""));
  }
  ::close(fds[1]);
  socket_ = fds[0];
  reaper_ = pid;
}

JobLifetime::~JobLifetime() {
  finish();
}

std::vector<pid_t> JobLifetime::adopted_candidates() const {
  // With a cgroup every orphan of the job is one of its members: a few files, not all of /proc.
  if (!cgroup_in_use()) return children_of(::getpid());
  std::vector<pid_t> out;
  for (const pid_t pid : cgroup_->pids()) {
    if (parent_of(std::to_string(pid)) == ::getpid()) out.push_back(pid);
  }
  return out;
}

void JobLifetime::send(char op, pid_t pgid, bool now) {
  if (socket_ < 0) return;
  held_.push_back(ReaperMessage{op, static_cast<std::int32_t>(pgid)});
  if (now || !cgroup_in_use()) flush();
}

void JobLifetime::flush() {
  if (held_.empty() || socket_ < 0) return;
  // One datagram per message (SOCK_SEQPACKET), all in one call: the reaper wakes once.
  std::vector<iovec> iov(held_.size());
  std::vector<mmsghdr> msgs(held_.size());
  for (std::size_t i = 0; i < held_.size(); ++i) {
    iov[i] = iovec{&held_[i], sizeof(ReaperMessage)};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  std::size_t sent = 0;
  while (sent < msgs.size()) {
    // MSG_NOSIGNAL: a reaper that died must not kill us with SIGPIPE.
    const int n = ::sendmmsg(socket_, msgs.data() + sent, static_cast<unsigned>(msgs.size() - sent), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      log::warning("the reaper process {} is gone ({}); processes the workers leave behind may survive the job",
                   reaper_, std::strerror(errno));
      ::close(socket_);
      socket_ = -1;
      break;
    }
    sent += static_cast<std::size_t>(n);
  }
  held_.clear();
}

void JobLifetime::adopt(ProcessSet& set) {
  if (cgroup_in_use()) set.place_in_cgroup(*cgroup_);
}

void JobLifetime::worker_started(pid_t pid, const ProcessSet& set) {
  if (cgroup_in_use() && !set.in_cgroup()) {
    cgroup_dropped_ = true;  // ProcessSet said why, once
    send('N', 0, true);
  }
  send('W', pid);
}

void JobLifetime::worker_exited(pid_t pid) {
  // ESRCH: the worker left nothing in its group; nothing to do.
  ::kill(-pid, SIGTERM);
  send('E', pid);
}

void JobLifetime::reap_orphans() {
  for (;;) {
    siginfo_t info{};
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) return;
    if (ProcessSet::owns(info.si_pid) || info.si_pid == reaper_) break;
    // An orphan that exited: ours to reap.
    ::waitpid(info.si_pid, nullptr, WNOHANG);
  }
  // The first exited child is a worker its set keeps as a zombie (or the reaper): look past it.
  for (const pid_t pid : adopted_candidates()) {
    if (!ProcessSet::owns(pid) && pid != reaper_) ::waitpid(pid, nullptr, WNOHANG);
  }
}

void JobLifetime::end_job() {
  if (reaper_ < 0 || job_ended_) return;
  job_ended_ = true;
  // Without a cgroup, orphans that left their worker's process group (a setsid daemon whose
  // parent exited) are found as our children: the reaper treats their groups as the workers'
  // ones. With one, the reaper signals every member anyway.
  const pid_t own_group = ::getpgrp();
  if (!cgroup_in_use()) {
    for (const pid_t pid : children_of(::getpid())) {
      const pid_t pgid = ::getpgid(pid);
      if (pid != reaper_ && pgid > 1 && pgid != own_group) send('W', pgid);
    }
  }
  send('F', 0, true);
}

void JobLifetime::finish() {
  if (reaper_ < 0) return;
  end_job();
  // Said once the launcher waits, with its own signal handling gone (a Ctrl-C now ends it, and
  // its end of file makes the reaper kill at once), not when the reaper was told.
  log::debug("stopping what the workers left behind (SIGTERM, SIGKILL after {})", format_seconds(grace_));
  // Reap whatever exits until the reaper itself does: the orphans it kills are our children, and
  // their zombies would keep their process groups alive. The socket stays open meanwhile: if we
  // die now (a second Ctrl-C), its end of file tells the reaper to kill at once.
  for (;;) {
    const pid_t pid = ::waitpid(-1, nullptr, 0);
    if (pid == reaper_ || (pid < 0 && errno == ECHILD)) break;
  }
  if (socket_ >= 0) ::close(socket_);
  socket_ = -1;
  reaper_ = -1;
}

}  // namespace ddp::launcher
