// This user's running jobs on this machine, so that `ddplaunch --dump_stacks` without flags finds
// a job whose store took a free port. Each launcher (not with etcd) writes one record
// (job_record.hpp), <dir>/<pid>.json, a second after its first round's workers have started (off
// the launch path: JobRegistration), and removes it when it exits, however its agent ends (success, failure, a handled
// signal, an exception). A launcher killed by SIGKILL leaves its record: readers ignore and remove
// a record whose pid is gone or now belongs to another process (its start time in /proc/<pid>/stat
// differs).
//
// The directory is $XDG_RUNTIME_DIR/ddplaunch/jobs when XDG_RUNTIME_DIR names a directory this
// user owns and may write, else /tmp/ddplaunch-<uid>/jobs (the fallback). Both levels are made
// 0700; a level that is not a directory (a symlink included), that another user owns, or that
// group or others may write is refused: another user could otherwise plant records that send
// --dump_stacks to a store of theirs, or read who runs what.
//
// The caller of --dump_stacks or --status may see another XDG_RUNTIME_DIR than the job's (sudo,
// docker exec, cron, ssh without a user session): a launcher whose registry is not the fallback
// writes its record in the fallback too, and readers look in every place (every_for_user()).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/common/error.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/status/job_record.hpp"

namespace ddp::launcher {

// The registry's directory is unusable; the message names it and why.
class RegistryError : public Error {
 public:
  using Error::Error;
};

// The registry in one directory. Methods block only for a few file system calls; thread-safe (each
// call works on the file system alone).
class JobRegistry {
 public:
  explicit JobRegistry(std::string dir) : dir_(std::move(dir)) {}
  // This user's registry (above), as `env` gives XDG_RUNTIME_DIR.
  static JobRegistry for_user(const EnvLookup& env);
  // /tmp/ddplaunch-<uid>/jobs, where every launcher of this user registers (above).
  static JobRegistry fallback();
  // Every place a job of this user can register, each once: for_user(env),
  // /run/user/<uid>/ddplaunch/jobs (a user session's XDG_RUNTIME_DIR) and the fallback.
  static std::vector<JobRegistry> every_for_user(const EnvLookup& env);
  const std::string& dir() const { return dir_; }

  // Makes the directory and its parent (0700) where missing and checks both (above). Throws
  // RegistryError.
  void prepare() const;
  // Writes `record` as <dir>/<pid>.json, whole or not at all (a reader never sees half of it), 0600.
  // Returns the path. Throws RegistryError. Call prepare() first.
  std::string add(const JobRecord& record) const;
  // The records of running launchers, in no order; removes stale ones (above) and ignores files
  // that are not records. No directory: none. Throws RegistryError for a directory that fails
  // prepare()'s checks.
  std::vector<JobRecord> running() const;

 private:
  std::string dir_;
};

// The records of running launchers in every one of `registries`, each launcher once, in no order.
// A registry that fails prepare()'s checks adds its error to `refused` (one line naming it and
// why) and no record: another place may still hold the job. Blocks for file system calls only.
std::vector<JobRecord> running_jobs(const std::vector<JobRegistry>& registries, std::vector<std::string>& refused);

// "a, b and c" of the registries' directories, for messages.
std::string describe_dirs(const std::vector<JobRegistry>& registries);

// The start time of process `pid` (field 22 of /proc/<pid>/stat, clock ticks after boot);
// nullopt when there is no such process.
std::optional<unsigned long long> process_start_ticks(int pid);

// One launcher's record while it lives. Made when the workers of its first round have started: it
// says at once, on the store's host, where the store is (`job store on 127.0.0.1:41233 (ddplaunch
// --dump_stacks finds this job)`), and writes the record kRegisterAfter later on `io`'s loop, as
// the stacks watcher starts then too (watch/stacks_request.hpp): a job shorter than that, such as
// the launch benchmark's, pays for no file. An unusable registry is then one warning line naming
// the flags that reach the job instead. The record goes in this user's registry and in the
// fallback (above); one that cannot is one warning line saying where it went. The destructor
// cancels the write or removes the files.
// Loop thread only; never throws (but what Asio's timer throws).
class JobRegistration {
 public:
  JobRegistration(boost::asio::io_context& io, JobRecord record);
  ~JobRegistration();
  JobRegistration(const JobRegistration&) = delete;
  JobRegistration& operator=(const JobRegistration&) = delete;

 private:
  void write();

  boost::asio::steady_timer timer_;
  JobRecord record_;
  std::vector<std::string> paths_;  // none until written
};

inline constexpr std::chrono::seconds kRegisterAfter{1};

// This launcher's record (round 0's `group_rank`, `nnodes`; the store's real port from
// `effective`) as a registration on `io`; nullptr with a backend where node 0 hosts no store
// (BackendRules::node0_hosts_store: etcd), whose jobs --dump_stacks does not reach. Does not block.
std::unique_ptr<JobRegistration> register_job(boost::asio::io_context& io, const LaunchConfig& config,
                                              const EffectiveConfig& effective, int group_rank, int nnodes,
                                              bool hosts_store);

}  // namespace ddp::launcher
