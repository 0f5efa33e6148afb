// One cgroup v2 per job, so that everything a worker starts can be killed at once, including
// processes that left the worker's process group or session (setsid, daemons).
//
// Where: the cgroup v2 hierarchy is found in /proc/self/mountinfo (fstype cgroup2: often
// /sys/fs/cgroup, on hybrid systems /sys/fs/cgroup/unified), our own cgroup in /proc/self/cgroup
// ("0::/path"). The job's cgroup is created as a child of our own cgroup when we may (a process
// can only be moved to where its writer may write the common ancestor's cgroup.procs, and a
// delegated subtree is usually ours), else directly under the hierarchy's root. A new child
// cgroup has no controllers enabled, so the "no internal processes" rule never stops a worker
// from joining it, while we stay in our own cgroup.
// How: children are created in it (clone3 CLONE_INTO_CGROUP with dir_fd(), ChildOptions::cgroup_fd)
// or, on kernels before 5.7, join by writing "0" to cgroup.procs before exec;
// kill() writes 1 to cgroup.kill (Linux 5.14), which kills every member, forks in flight
// included; remove() rmdirs it once empty. Zombies do not count as members.
// The calls on a made cgroup (pids() excepted) allocate nothing and leave errno alone (raw system
// calls): the reaper makes them while it may run on the launcher's memory (reaper.hpp).
// Not thread-safe; the object is movable and holds three descriptors (close-on-exec).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/cgroup_mounts.hpp"  // cgroup2_mount_point(), own_cgroup2_path()
#include "common/kernel_files.hpp"

namespace ddp {

class JobCgroup {
 public:
  // Creates the cgroup `name` (a single path component) as described above. Returns nullopt
  // and sets `why_not` when cgroup v2 is not mounted, not writable, or lacks cgroup.kill.
  // Never throws for these; blocks only on the file system.
  static std::optional<JobCgroup> create(const std::string& name, std::string* why_not);

  JobCgroup(JobCgroup&& other) noexcept;
  JobCgroup& operator=(JobCgroup&& other) noexcept;
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;
  // Closes the descriptors; does not remove the cgroup (remove() does).
  ~JobCgroup();

  const std::string& path() const { return path_; }
  // An O_RDONLY descriptor on the cgroup's directory (clone3's CLONE_INTO_CGROUP takes it).
  int dir_fd() const { return dir_fd_; }
  // An O_WRONLY descriptor on cgroup.procs: a process writing "0" to it joins the cgroup.
  int procs_fd() const { return procs_fd_; }
  // An O_RDONLY descriptor on cgroup.events: poll it for POLLPRI, then call populated().
  int events_fd() const { return events_fd_; }

  // The members' pids (cgroup.procs); empty when it cannot be read.
  std::vector<pid_t> pids() const;
  // visit(pid) for each member, as cgroup.procs lists them; false when it cannot be read.
  template <class Visit>
  bool for_each_member(Visit&& visit) const {
    return for_each_pid_in_file(dir_fd_, "cgroup.procs", visit);
  }
  // Whether any process is in the cgroup (cgroup.events "populated"). False when unreadable.
  bool populated() const;
  // Sends `signo` to every member, one by one (a process forked meanwhile may be missed; kill()
  // has no such race). Never blocks.
  void signal(int signo) const;
  // SIGKILLs every member through cgroup.kill. Returns false if the write failed.
  bool kill() const;
  // Blocks until the cgroup is empty (waking on cgroup.events changes) or `timeout` passed;
  // returns whether it is empty.
  bool wait_empty(std::chrono::milliseconds timeout) const;
  // rmdir; true when it is gone. Fails (EBUSY) while members remain.
  bool remove() const;

 private:
  JobCgroup(std::string path, int dir_fd, int procs_fd, int events_fd)
      : path_(std::move(path)), dir_fd_(dir_fd), procs_fd_(procs_fd), events_fd_(events_fd) {}
  void close_fds();

  std::string path_;
  int dir_fd_ = -1;
  int procs_fd_ = -1;
  int events_fd_ = -1;
};

}  // namespace ddp
