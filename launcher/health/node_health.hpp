// A node's health checks before every rendezvous round (its first and every restart), in order:
//   1. log directory: the run's directory is writable and has --health_min_free_mb free (disk_check.hpp);
//   2. program: the program, or the Python interpreter and the script, can run (the preflight of
//      workers/worker_spec.hpp, check_program, run again: a disk or mount may have gone since);
//   3. GPUs: the visible devices answer, without uncorrectable ECC errors, through NVML; skipped
//      without GPUs (gpu_check.hpp);
//   4. command: --health_check CMD, when given (site_command.hpp).
// A node that fails any of them does not join the round (rdzv/self_exclusion.hpp says what the
// other nodes then do) and exits 69 (kExitUnhealthy).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/health/check_result.hpp"
#include "launcher/health/disk_check.hpp"
#include "launcher/health/gpu_devices.hpp"
#include "launcher/health/site_command.hpp"
#include "launcher/rdzv/self_exclusion.hpp"

namespace ddp::launcher {

struct NodeHealthOptions {
  std::function<std::unique_ptr<GpuDevices>()> gpus;  // default: NvmlDevices, made for each round
  std::chrono::milliseconds command_timeout = kHealthCommandTimeout;
  Environment env;                  // CUDA_VISIBLE_DEVICES and the command's environment; default: this process's
  JobLifetime* lifetime = nullptr;  // where the command runs (site_command.hpp); null: its own group only
};

// Keeps references to `config` and `effective` (they must outlive it). Not thread-safe: one check
// at a time (the agent's join thread).
class NodeHealth {
 public:
  NodeHealth(const LaunchConfig& config, const EffectiveConfig& effective, NodeHealthOptions options = {});
  // Runs every check before round `round` and returns their results in order. Blocks up to the
  // command's timeout, or until `cancel` (may be null) fires: then the command is killed and
  // fails ("interrupted after ..."). Never throws.
  std::vector<CheckResult> run(int round, const CancelEvent* cancel = nullptr);
  // run(), then: nullopt when none failed, else why this node does not join (the reason names
  // the first failed check; the report lists them all). Logs the passes (info with
  // --health_check, else debug). Usable as a HealthGate.
  std::optional<SelfExclusion> check(int round, const CancelEvent* cancel = nullptr);

 private:
  const LaunchConfig& config_;
  const EffectiveConfig& effective_;
  NodeHealthOptions options_;
};

// What --dry-run prints: one line per check that would run before every round, with what it
// checks (the GPU check as it would find this machine now). `log_base` is the directory the
// run's directory will be made in. Blocks for NVML; never throws.
std::vector<std::string> describe_health_checks(const LaunchConfig& config, const std::string& log_base);

}  // namespace ddp::launcher
