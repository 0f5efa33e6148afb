// How many CPUs this process may run on, for --nproc_per_node=cpu and auto without GPUs: the
// CPUs of its affinity mask (taskset, a container's cpuset), capped by the CPU bandwidth limit of
// its cgroup (v2 cpu.max, v1 cpu.cfs_quota_us over cpu.cfs_period_us; the tightest of its own
// cgroup and every ancestor that is mounted), rounded down, at least 1. A limit of 1.5 CPUs gives
// 1 worker, as Rust's available_parallelism and Go's automaxprocs count. torchrun counts the
// host's CPUs instead (os.cpu_count()), which starts far too many workers in a small container.
#pragma once

#include <optional>
#include <string>

namespace ddp::launcher {

struct CpuBudget {
  int online = 1;               // CPUs online on the host
  int affinity = 1;             // CPUs in this process's affinity mask
  std::optional<double> quota;  // the tightest cgroup limit, in CPUs; nullopt: unlimited
  std::string quota_file;       // the file that set it, e.g. /sys/fs/cgroup/job/cpu.max

  // min(affinity, floor(quota)), at least 1.
  int usable() const;
  // One line for the log, e.g. "2 of 8 CPUs (affinity: 4; cgroup limit 2.5 CPUs in .../cpu.max)".
  std::string describe() const;
};

// Where the budget is read from; tests point these at fake trees.
struct CpuBudgetSources {
  std::string mountinfo = "/proc/self/mountinfo";
  std::string cgroup = "/proc/self/cgroup";
  bool read_affinity = true;  // false: affinity = online (tests)
};

// Reads the budget. Never throws: an unreadable file or limit counts as no limit. Blocks only on
// reading /proc and the cgroup files.
CpuBudget read_cpu_budget(const CpuBudgetSources& sources = {});

}  // namespace ddp::launcher
