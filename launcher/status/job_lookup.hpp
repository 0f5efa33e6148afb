// How `ddplaunch --dump_stacks` and `ddplaunch --status` find a job when no flag names one: every
// place a job of this user can register (JobRegistry::every_for_user, job_registry.hpp), each
// launcher once, then choose_job (job_record.hpp) by the caller's working directory. When that
// leaves several jobs, the caller lists them and exits 2 instead of asking one it guessed: the
// caller's XDG_RUNTIME_DIR (sudo, docker exec, cron) says nothing about which job is meant.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/status/job_record.hpp"

namespace ddp::launcher {

struct JobLookup {
  JobChoice choice;
  std::string places;  // the directories looked in, for messages ("A, B and C")
};

// Looks in every place for `env`, keeps the records `keep` accepts, and chooses by `caller_cwd`.
// A place that cannot be read safely (another user's, writable by others) is one warning line
// each, and skipped. Blocks for file system calls only; never throws.
JobLookup look_up_job(const EnvLookup& env, const std::string& caller_cwd,
                      const std::function<bool(const JobRecord&)>& keep);

// When `lookup` is ambiguous: one error line saying why no job was asked and the fix, then one per
// job (newest first): "job 'x' at 127.0.0.1:41233 (pid 4242, started 3 s ago: train.py, in
// /home/me/exp); choose it with ddplaunch --dump_stacks --master_port 41233 --rdzv_id x", where
// `client` is the caller's flag and `pick(job)` the arguments that choose it. Returns kExitUsage.
int report_ambiguous(const JobLookup& lookup, const std::string& caller_cwd, std::string_view client,
                     const std::function<std::string(const JobRecord&)>& pick);

// This process's working directory; "" when it was removed.
std::string caller_cwd();

// Wall-clock milliseconds since the epoch, as JobRecord::started_ms.
long long wall_clock_ms();

}  // namespace ddp::launcher
