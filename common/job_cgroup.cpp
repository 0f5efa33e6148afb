// See job_cgroup.hpp.
#include "common/job_cgroup.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "common/kernel_files.hpp"
#include "common/raw_syscall.hpp"

namespace ddp {
namespace {

// Makes `dir`, opens it, its cgroup.procs and cgroup.events; "" or the reason it failed.
std::string make_at(const std::string& dir, int* dir_fd, int* procs, int* events) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return fmt::format("mkdir {}: {}", dir, std::strerror(errno));
  const auto undo = [&](const char* what) {
    const std::string why = fmt::format("{} in {}: {}", what, dir, std::strerror(errno));
    ::rmdir(dir.c_str());  // best effort: we made it, and it is empty
    return why;
  };
  if (::access((dir + "/cgroup.kill").c_str(), W_OK) != 0) return undo("cgroup.kill (Linux 5.14 or later)");
  *dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (*dir_fd < 0) return undo("open");
  *procs = ::openat(*dir_fd, "cgroup.procs", O_WRONLY | O_CLOEXEC);
  if (*procs < 0) {
    ::close(*dir_fd);
    return undo("cgroup.procs");
  }
  *events = ::openat(*dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC);
  if (*events < 0) {
    ::close(*procs);
    ::close(*dir_fd);
    return undo("cgroup.events");
  }
  return "";
}

}  // namespace

std::optional<JobCgroup> JobCgroup::create(const std::string& name, std::string* why_not) {
  const std::string mount = cgroup2_mount_point();
  if (mount.empty()) {
    *why_not = "no cgroup v2 hierarchy is mounted";
    return std::nullopt;
  }
  std::string own = own_cgroup2_path();
  if (own == "/") own.clear();
  std::vector<std::string> parents;
  if (!own.empty()) parents.push_back(mount + own);
  parents.push_back(mount);
  std::string reasons;
  for (const std::string& parent : parents) {
    int dir_fd = -1, procs = -1, events = -1;
    const std::string dir = parent + "/" + name;
    const std::string why = make_at(dir, &dir_fd, &procs, &events);
    if (why.empty()) return JobCgroup(dir, dir_fd, procs, events);
    reasons += (reasons.empty() ? "" : "; ") + why;
  }
  *why_not = reasons;
  return std::nullopt;
}

JobCgroup::JobCgroup(JobCgroup&& o) noexcept
    : path_(std::move(o.path_)),
      dir_fd_(std::exchange(o.dir_fd_, -1)),
      procs_fd_(std::exchange(o.procs_fd_, -1)),
      events_fd_(std::exchange(o.events_fd_, -1)) {}

JobCgroup& JobCgroup::operator=(JobCgroup&& o) noexcept {
  if (this != &o) {
    close_fds();
    path_ = std::move(o.path_);
    dir_fd_ = std::exchange(o.dir_fd_, -1);
    procs_fd_ = std::exchange(o.procs_fd_, -1);
    events_fd_ = std::exchange(o.events_fd_, -1);
  }
  return *this;
}

JobCgroup::~JobCgroup() {
  close_fds();
}

void JobCgroup::close_fds() {
  if (dir_fd_ >= 0) ::close(std::exchange(dir_fd_, -1));
  if (procs_fd_ >= 0) ::close(std::exchange(procs_fd_, -1));
  if (events_fd_ >= 0) ::close(std::exchange(events_fd_, -1));
}

std::vector<pid_t> JobCgroup::pids() const {
  std::vector<pid_t> out;
  for_each_member([&](pid_t pid) { out.push_back(pid); });
  return out;
}

bool JobCgroup::populated() const {
  // Read through events_fd_ itself: that read is what re-arms its POLLPRI (kernfs notes which
  // change each open file has seen), so wait_empty() sleeps until the next change.
  char buf[256];
  const long n = raw_syscall(SYS_pread64, events_fd_, reinterpret_cast<long>(buf), sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  return std::strstr(buf, "populated 1") != nullptr;
}

void JobCgroup::signal(int signo) const {
  // ESRCH: it exited since cgroup.procs was read; nothing to do.
  for_each_member([signo](pid_t pid) { raw_syscall(SYS_kill, pid, signo); });
}

bool JobCgroup::kill() const {
  const long fd = raw_syscall(SYS_openat, dir_fd_, reinterpret_cast<long>("cgroup.kill"), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = raw_syscall(SYS_write, fd, reinterpret_cast<long>("1"), 1) == 1;
  raw_syscall(SYS_close, fd);
  return ok;
}

bool JobCgroup::wait_empty(std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (!populated()) return true;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    // cgroup.events signals every change of "populated" with POLLPRI.
    pollfd p{events_fd_, POLLPRI, 0};
    raw_poll(&p, 1, static_cast<int>(left.count()));
  }
}

bool JobCgroup::remove() const {
  const long r = raw_syscall(SYS_unlinkat, AT_FDCWD, reinterpret_cast<long>(path_.c_str()), AT_REMOVEDIR);
  return r == 0 || r == -ENOENT;
}

}  // namespace ddp
