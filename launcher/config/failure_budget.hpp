// The failure-detection budget: every timeout in force for a job (the launcher's flags, and the
// collective timeout and NCCL heartbeat as its workers will see them), the worst case to detect
// each class of failure and stop the round, and one line for each pair that does not nest.
// `--failure_budget` sets a sensible set from one duration; a value set alone wins over it.
// Printed at start (with --log_level info or debug, or a budget) and by --dry-run
// (docs/failure-budget.md). Everything here is pure and thread-safe; nothing throws.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// torch's defaults, as a worker sees them when nothing overrides them.
inline constexpr std::chrono::seconds kTorchCollectiveTimeout{600};  // an NCCL process group's timeout
inline constexpr std::chrono::seconds kTorchNcclHeartbeat{1800};     // TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC
inline constexpr const char* kNcclHeartbeatVar = "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC";
inline constexpr const char* kNcclMonitoringVar = "TORCH_NCCL_ENABLE_MONITORING";

// What --failure_budget=B sets, for the values not given alone: every failure class is then
// detected and its round stopped within B (a hang within B/2 + B/10, a lost node within B/5).
struct BudgetSettings {
  std::chrono::milliseconds hang_timeout{0};        // B/2, below torch's collective timeout
  std::chrono::milliseconds heartbeat_timeout{0};   // B/10 within 5..60 s
  std::chrono::milliseconds shutdown_timeout{0};    // B/10 within 1..30 s
  std::chrono::milliseconds unkillable_timeout{0};  // B/10 within 5..60 s
  long long nccl_heartbeat_s = 0;                   // B, at least 60 s (the workers' environment)
};
BudgetSettings settings_for_budget(std::chrono::milliseconds budget);

// Every timeout in force, and where the workers' two come from.
struct TimeoutsInForce {
  std::chrono::milliseconds collective{kTorchCollectiveTimeout};
  std::chrono::milliseconds nccl_heartbeat{kTorchNcclHeartbeat};  // 0: the monitor is off
  std::string nccl_heartbeat_source;  // "TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=300", "torch's default"...
  std::chrono::milliseconds hang{0};  // --hang_timeout; 0: off
  std::chrono::milliseconds heartbeat{0};
  std::chrono::milliseconds heartbeat_interval{0};
  std::chrono::milliseconds rdzv{0};
  std::chrono::milliseconds last_call{0};
  std::chrono::milliseconds shutdown{0};
  std::chrono::milliseconds preemption{0};
  std::chrono::milliseconds unkillable{0};
  int max_restarts = 0;
  std::chrono::milliseconds budget{0};  // --failure_budget; 0: none
};
// From the launch configuration and the environment the workers get (an unreadable
// TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC counts as torch's default, as torch reads it).
TimeoutsInForce timeouts_in_force(const LaunchConfig& c, const Environment& worker_env);

// The worst case from a failure to this round's workers stopped, for one class of failure.
struct FailureClass {
  std::string name;                 // "crash", "hang", "lost node", "sick node"
  std::chrono::milliseconds worst;  // 0 with `detected` false: nothing detects it
  bool detected = true;
  std::string how;
};
std::vector<FailureClass> detection_times(const TimeoutsInForce& t);

// One line per pair that does not nest (each names the values and a fix); [] when all nest.
std::vector<std::string> nesting_warnings(const TimeoutsInForce& t);

// The table: the timeouts, then the worst case per class and when the job gives up; lines
// without a trailing newline.
std::vector<std::string> describe_timeouts(const TimeoutsInForce& t);

}  // namespace ddp::launcher
