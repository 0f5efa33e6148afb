// What keeps anything a worker started from outliving the job, on the launcher's side.
//
// Created once by main before any thread starts, it
//   - makes the launcher a child subreaper (PR_SET_CHILD_SUBREAPER), so a worker's orphaned
//     descendants (a background job, a daemon after its double fork) become our children: they
//     are reaped as they exit (reap_orphans) and found again at the end (finish);
//   - creates the job's cgroup v2 (job_cgroup.hpp) when the machine lets us, which every worker
//     joins before exec; otherwise it says so once at debug level and relies on process groups;
//   - starts the reaper (reaper.hpp), which acts on the messages sent here and, if the launcher
//     dies (even by SIGKILL), kills everything left at once.
// On a worker's exit, the rest of its process group gets SIGTERM now and SIGKILL after the grace
// (--shutdown_timeout). finish() (also run by the destructor) ends the job: SIGTERM to what is
// left, the grace, SIGKILL, the cgroup removed; it returns when the reaper is done, so nothing
// of the job is left when the launcher exits. The site's health check (health/site_command.hpp)
// is placed and watched the same way as a worker.
// Not thread-safe: the agent's loop thread (and main) only; but the health check calls adopt(),
// worker_started(), worker_exited() and flush() on the join thread, which runs while no worker
// starts or runs (before a round's workers start, after the last one of the round before ended),
// beside the loop's reap_orphans() only.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "common/job_cgroup.hpp"
#include "common/process_set.hpp"
#include "launcher/workers/reaper.hpp"

namespace ddp::launcher {

struct JobLifetimeOptions {
  std::string run_id;                       // part of the cgroup's name
  std::chrono::milliseconds grace{30'000};  // --shutdown_timeout
  bool use_cgroup = true;                   // false: process groups only
};

class JobLifetime {
 public:
  // Blocks for the reaper's start and the cgroup's creation (a fraction of a millisecond). Throws
  // Error when the reaper cannot be started (with the RLIMIT_NPROC hint when the fork says
  // EAGAIN). Call it while the process has one thread (the reaper starts as a copy of it, or on
  // its memory).
  explicit JobLifetime(const JobLifetimeOptions& options);
  ~JobLifetime();
  JobLifetime(const JobLifetime&) = delete;
  JobLifetime& operator=(const JobLifetime&) = delete;

  // The job's cgroup, or null when process groups are all there is.
  const JobCgroup* cgroup() const { return cgroup_ ? &*cgroup_ : nullptr; }
  pid_t reaper_pid() const { return reaper_; }

  // Makes the children `set` starts join the job's cgroup.
  void adopt(ProcessSet& set);
  // A worker (leader of process group `pid`), or the health check, was started by `set`; watch
  // its group.
  void worker_started(pid_t pid, const ProcessSet& set);
  // A worker exited (not reaped yet, so its group's number is still ours): SIGTERM the rest of
  // its group now, SIGKILL after the grace. Never blocks.
  void worker_exited(pid_t pid);
  // Reaps every exited child that no ProcessSet owns (adopted orphans). Never blocks; call it
  // on SIGCHLD.
  void reap_orphans();
  // Sends the reaper the messages held back. While the job's cgroup is in use, the messages of a
  // batch (every worker's start, the exits of one SIGCHLD) are held and sent at once at its end,
  // so the reaper wakes once per batch, not twice per worker: should the launcher die
  // meanwhile, the reaper kills the whole cgroup anyway. Without a cgroup every message goes at
  // once. Never blocks.
  void flush();
  // Tells the reaper that the job is over (it stops what the workers left, as described above),
  // without waiting for it: finish() waits. Call it once no worker needs watching any more (the
  // ProcessSets may still hold their zombies: nothing is reaped here). Never blocks. Idempotent.
  void end_job();
  // end_job() unless done, then blocks up to the grace plus a few seconds, reaping every child
  // meanwhile, until the reaper exits. Call it after every ProcessSet is gone. Idempotent.
  void finish();

 private:
  // Queues a message (sent by flush(), or now when `now` or without a cgroup).
  void send(char op, pid_t pgid = 0, bool now = false);
  bool cgroup_in_use() const { return cgroup_ && !cgroup_dropped_; }
  // Our children that may be adopted orphans: the cgroup's members whose parent we are, or
  // (without a cgroup) every child of ours.
  std::vector<pid_t> adopted_candidates() const;

  std::optional<JobCgroup> cgroup_;
  std::chrono::milliseconds grace_;
  std::atomic<bool> cgroup_dropped_{false};  // written by worker_started, read by reap_orphans
  ReaperArgs reaper_args_;                   // read by the reaper until finish() has reaped it
  ReaperStack reaper_stack_;                 // likewise
  pid_t reaper_ = -1;
  bool job_ended_ = false;           // end_job() sent the reaper its last message
  int socket_ = -1;                  // our end; closed by finish()
  std::vector<ReaperMessage> held_;  // see flush()
};

// The pids whose parent is `parent`: listed_children() where the kernel has the `children` files,
// else scanned_children(). Never throws; empty when /proc is unreadable.
std::vector<pid_t> children_of(pid_t parent);
// From each of `parent`'s threads' /proc/<parent>/task/<tid>/children (a few small reads);
// nullopt when the kernel lacks those files (CONFIG_PROC_CHILDREN) or `parent` is gone.
std::optional<std::vector<pid_t>> listed_children(pid_t parent);
// From every process's /proc/<pid>/stat (a read per process on the machine).
std::vector<pid_t> scanned_children(pid_t parent);

}  // namespace ddp::launcher
