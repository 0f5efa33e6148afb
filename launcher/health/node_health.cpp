// See node_health.hpp.
#include "launcher/health/node_health.hpp"

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/worker_env.hpp"
#include "launcher/health/gpu_check.hpp"
#include "launcher/health/nvml_devices.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {
namespace {

std::optional<std::string> lookup(const Environment& env, const std::string& name) {
  const auto it = env.find(name);
  return it == env.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::uint64_t min_free_bytes(const LaunchConfig& c) {
  return static_cast<std::uint64_t>(c.health_min_free_mb * (1 << 20));
}

const char* verdict_word(const CheckResult& r) {
  switch (r.verdict) {
    case CheckResult::Verdict::Healthy:
      return "ok";
    case CheckResult::Verdict::Skipped:
      return "skipped";
    case CheckResult::Verdict::Failed:
      break;
  }
  return "FAILED";
}

}  // namespace

NodeHealth::NodeHealth(const LaunchConfig& c, const EffectiveConfig& eff, NodeHealthOptions o)
    : config_(c), effective_(eff), options_(std::move(o)) {
  if (!options_.gpus) options_.gpus = [] { return std::make_unique<NvmlDevices>(); };
  if (options_.env.empty()) options_.env = current_environment();
}

std::vector<CheckResult> NodeHealth::run(int round, const CancelEvent* cancel) {
  std::vector<CheckResult> results;
  results.push_back(check_log_directory(effective_.log_root, min_free_bytes(config_)));
  try {
    check_program(config_, effective_.python);
    results.push_back(CheckResult{"program", CheckResult::Verdict::Healthy, config_.program, {}});
  } catch (const Error& e) {
    results.push_back(CheckResult{"program", CheckResult::Verdict::Failed, e.what(), {}});
  }
  results.push_back(check_gpus(*options_.gpus(), lookup(options_.env, worker_env::kCudaVisibleDevices)));
  if (!config_.health_check.empty()) {
    Environment env = options_.env;
    env["DDPLAUNCH_HEALTH_ROUND"] = std::to_string(round);
    env["DDPLAUNCH_NODE_RANK"] = std::to_string(config_.node_rank);
    results.push_back(
        run_site_command(config_.health_check, env, options_.command_timeout, {cancel, options_.lifetime}));
  }
  return results;
}

std::optional<SelfExclusion> NodeHealth::check(int round, const CancelEvent* cancel) {
  const std::vector<CheckResult> results = run(round, cancel);
  const CheckResult* first_failed = nullptr;
  std::string report = fmt::format("health checks before round {} on this node:", round);
  std::string passed;
  for (const CheckResult& r : results) {
    if (r.failed() && !first_failed) first_failed = &r;
    report += fmt::format("\n  {}: {}: {}", r.name, verdict_word(r), r.summary);
    if (r.failed() && !r.output.empty()) {
      report += fmt::format("\n    its output (last {} line(s)):", r.output.size());
      for (const std::string& line : r.output) report += "\n    | " + line;
    }
    passed += fmt::format("{}{}: {}", passed.empty() ? "" : "; ", r.name, r.summary);
  }
  if (!first_failed) {
    if (config_.health_check.empty()) {
      log::debug("health checks passed before round {}: {}", round, passed);
    } else {
      log::info("health checks passed before round {}: {}", round, passed);
    }
    return std::nullopt;
  }
  report += "\nthis node does not join the round (exit 69)";
  return SelfExclusion{fmt::format("health check {} failed: {}", first_failed->name, first_failed->summary), report};
}

std::vector<std::string> describe_health_checks(const LaunchConfig& c, const std::string& log_base) {
  std::vector<std::string> lines{
      fmt::format("log directory: a file can be written under {}, with at least {:g} MiB free", log_base,
                  c.health_min_free_mb),
      "program: " + c.program + " (and the Python interpreter for a script or module) can run"};
  NvmlDevices gpus;
  const CheckResult now = check_gpus(gpus, lookup(current_environment(), worker_env::kCudaVisibleDevices));
  lines.push_back("GPUs: the visible devices answer without uncorrectable ECC errors (NVML); now: " + now.summary);
  if (!c.health_check.empty()) {
    lines.push_back(fmt::format("command: /bin/sh -c '{}' exits 0 within {}", c.health_check,
                                format_whole_seconds(kHealthCommandTimeout)));
  }
  return lines;
}

}  // namespace ddp::launcher
