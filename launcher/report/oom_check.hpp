// Whether the kernel's out-of-memory killer killed a worker: the most common and least understood
// SIGKILL on training nodes. Two witnesses, the precise one first:
//   1. /dev/kmsg (root, or kernel.dmesg_restrict=0): the kernel logs "Killed process <pid>
//      (<comm>) total-vm:…kB, anon-rss:…kB, …" for every OOM kill, before the signal lands, so the
//      record is there when the worker is reaped. Records older than the witness are ignored
//      (pids are reused).
//   2. The oom_kill count of the launcher's memory cgroup, which holds the workers: cgroup v2
//      memory.events, or v1 memory.oom_control. A rise during the job, with a SIGKILL nobody
//      here sent, says the OOM killer probably killed it (the cgroup may hold other processes).
// Not thread-safe; used by the agent's loop thread. Reads files only; never blocks for long,
// never throws.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace ddp::launcher {

class OomWitness {
 public:
  // Notes the current time and the cgroup counter's value.
  OomWitness();
  // For a worker that died of SIGKILL: "killed by the out-of-memory killer (anon-rss 61 MiB at
  // death)" or "probably killed by the out-of-memory killer (…)"; nullopt when neither witness
  // saw an OOM kill.
  std::optional<std::string> explain(pid_t pid) const;

 private:
  long long started_us_ = 0;  // CLOCK_MONOTONIC, as /dev/kmsg stamps its records
  std::string counter_file_;  // memory.events or memory.oom_control; "" when none
  long long counter_at_start_ = 0;
};

// The "Killed process <pid>" record's anon-rss in KiB in the kernel log text `records` (one
// record per line, /dev/kmsg format "prio,seq,usec,flags;text"), at or after `since_us`;
// nullopt when there is none, -1 when the record has no anon-rss. Pure.
std::optional<long long> oom_kill_in_log(const std::string& records, pid_t pid, long long since_us);

}  // namespace ddp::launcher
