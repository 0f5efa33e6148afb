// The site's own health check, --health_check CMD: run through /bin/sh -c, exit 0 = healthy. Its
// time is bounded (kHealthCommandTimeout, 120 s: enough for a quick DCGM diagnostic, `dcgmi diag
// -r 1`; no flag to tune), and its output (stdout and stderr together) is kept bounded: the
// first line, for the other nodes, and the last kOutputLines lines, for this node's report.
// Like the workers, the command runs where the job's lifetime (workers/job_lifetime.hpp) finds
// everything it starts: in the job's cgroup, its process group watched by the reaper; so a daemon
// it leaves behind ends with the job, and nothing of it outlives a launcher that was killed.
#pragma once

#include <chrono>
#include <string>

#include "common/cancel_event.hpp"
#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/health/check_result.hpp"
#include "launcher/workers/job_lifetime.hpp"

namespace ddp::launcher {

inline constexpr std::chrono::seconds kHealthCommandTimeout{120};
inline constexpr std::size_t kOutputLines = 20;

// Who else has a say over the command while it runs; both may be null.
struct SiteCommandControl {
  // Its cancel() ends the wait at once: the command's group is killed (SIGKILL) and the check
  // fails ("interrupted after ..."). The agent cancels on SIGINT, SIGTERM, SIGHUP and SIGQUIT.
  const CancelEvent* cancel = nullptr;
  // The job's lifetime: the command joins the job's cgroup and its group is watched as a worker's
  // (JobLifetime::adopt, worker_started, worker_exited). Null: a process group only.
  JobLifetime* lifetime = nullptr;
};

// Runs `command` with environment `env` in its own process group and waits for it, at most
// `timeout`: then the group is killed (SIGKILL) and the check fails ("timed out after ..."). A
// command that cannot be started fails the check too. Failed results carry the first line of
// output in the summary and the last lines in `output`. Blocks (until the command ends, the
// timeout, or control.cancel); never throws; thread-safe as `control.lifetime` allows (see
// JobLifetime: calls from the join thread are fine while no worker starts or runs).
CheckResult run_site_command(const std::string& command, const Environment& env,
                             std::chrono::milliseconds timeout = kHealthCommandTimeout,
                             const SiteCommandControl& control = {});

}  // namespace ddp::launcher
