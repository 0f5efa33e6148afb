// One running launcher as this machine's job registry holds it (job_registry.hpp): where its
// job's store is, which job it is, and enough to tell the user which job is which. What
// `ddplaunch --dump_stacks` without flags reads, chooses from, and names. Never the job secret:
// only whether there is one. Everything here is pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ddp::launcher {

struct JobRecord {
  int pid = 0;                        // the launcher's
  unsigned long long proc_start = 0;  // its start time, /proc/<pid>/stat field 22: tells a reused pid
  long long started_ms = 0;           // wall clock when its workers started (ms since the epoch)
  std::string run_id;                 // --rdzv_id (or the random one of a single-node job)
  std::string master_addr;            // where the store is dialled
  int port = 0;                       // the store's real port
  int nnodes = 1;                     // the round's node count when it registered
  int node_rank = 0;                  // this launcher's group rank then
  bool hosts_store = false;           // this launcher hosts the store
  bool secret = false;                // the job has a job secret (--dump_stacks then needs it too)
  std::string cwd;                    // the launcher's working directory
  std::string command;                // the program and its arguments, shortened (kMaxCommandChars)
  std::string status_socket;          // its status endpoint (status/status_endpoint.hpp); "": none

  // One JSON object. Never throws for a record made here.
  std::string to_json() const;
  // nullopt for text that is not such an object (another program's file, a torn write).
  static std::optional<JobRecord> from_json(const std::string& text);
  // The same job as `other`: the same store (address, port) and run id.
  bool same_job(const JobRecord& other) const;
};

inline constexpr std::size_t kMaxCommandChars = 120;
// `program args...` joined by spaces, cut at kMaxCommandChars (ending in "...").
std::string short_command(const std::string& program, const std::vector<std::string>& args);

// What --dump_stacks and --status ask without flags: the only job, else the only one started in
// the caller's working directory `caller_cwd`; with none or several there, no guess: `ambiguous`
// holds the jobs to choose from (those started in `caller_cwd`, or all when none was), newest
// first. A job with several launchers on this machine (a multi-node job on one host) counts once,
// by its store's host when that is here, else its newest record.
struct JobChoice {
  std::optional<JobRecord> chosen;  // nullopt: no job, or ambiguous
  std::vector<JobRecord> others;    // the jobs not chosen, newest first
  std::vector<JobRecord> ambiguous;
};
JobChoice choose_job(std::vector<JobRecord> live, const std::string& caller_cwd);

// "job 'x' at 127.0.0.1:41233 (pid 4242, started 3 s ago: train.py --lr 0.1, in /home/me/exp)",
// the age from `now_ms` (ms since the epoch).
std::string describe_job(const JobRecord& job, long long now_ms);

// The flags that make --dump_stacks ask `job` and no other: --master_port and --rdzv_id, and
// --master_addr unless it is 127.0.0.1, the default (values shell-quoted when needed).
std::string selecting_flags(const JobRecord& job);

}  // namespace ddp::launcher
