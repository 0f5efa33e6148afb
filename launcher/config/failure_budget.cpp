// See failure_budget.hpp.
#include "launcher/config/failure_budget.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "common/format_duration.hpp"

namespace ddp::launcher {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

milliseconds clamped(milliseconds v, milliseconds lo, milliseconds hi) { return std::clamp(v, lo, hi); }

std::string value_of(const Environment& env, const char* name) {
  const auto it = env.find(name);
  return it == env.end() ? std::string() : it->second;
}

// "off" for 0, else "30 s".
std::string seconds_or_off(milliseconds v) { return v.count() > 0 ? format_seconds(v) : "off"; }

// The hang as the launcher or the workers' watchdog sees it first.
FailureClass hang_class(const TimeoutsInForce& t) {
  if (t.hang.count() > 0 && t.hang < t.collective) {
    return {"hang", t.hang + t.shutdown, true,
            "--hang_timeout (the launcher names the rank that never entered the collective), then --shutdown_timeout"};
  }
  return {"hang", t.collective + t.shutdown, true,
          "the collective timeout (the workers' watchdog aborts), then --shutdown_timeout"};
}

// A node that is up but wedged (a GPU or driver call that does not return): the watchdog itself
// may be stuck, so only --hang_timeout or NCCL's heartbeat monitor sees it; a worker the kernel
// holds then costs --unkillable_timeout before the host is let go.
FailureClass sick_class(const TimeoutsInForce& t) {
  const milliseconds tail = t.shutdown + t.unkillable;
  // Whichever of the two sees it first.
  if (t.hang.count() > 0 && (t.nccl_heartbeat.count() == 0 || t.hang <= t.nccl_heartbeat)) {
    return {"sick node", t.hang + tail, true,
            "--hang_timeout, --shutdown_timeout, --unkillable_timeout if the kernel holds a worker; the health "
            "checks keep it out of the next round"};
  }
  if (t.nccl_heartbeat.count() > 0) {
    return {"sick node", t.nccl_heartbeat + tail, true,
            "NCCL's heartbeat monitor (a stuck watchdog), --shutdown_timeout, --unkillable_timeout if the kernel "
            "holds a worker; the health checks keep it out of the next round"};
  }
  return {"sick node", milliseconds(0), false,
          "not detected: no --hang_timeout and NCCL's heartbeat monitor is off (TORCH_NCCL_ENABLE_MONITORING=0)"};
}

}  // namespace

BudgetSettings settings_for_budget(milliseconds budget) {
  BudgetSettings s;
  const milliseconds tenth = budget / 10;
  // Half the budget, but below the collective timeout, so the launcher's report comes first.
  s.hang_timeout = std::min(budget / 2, milliseconds(kTorchCollectiveTimeout) - seconds(60));
  s.heartbeat_timeout = clamped(tenth, seconds(5), seconds(60));
  s.shutdown_timeout = clamped(tenth, seconds(1), seconds(30));
  s.unkillable_timeout = clamped(tenth, seconds(5), seconds(60));
  s.nccl_heartbeat_s = std::max<long long>(60, std::chrono::duration_cast<seconds>(budget).count());
  return s;
}

TimeoutsInForce timeouts_in_force(const LaunchConfig& c, const Environment& env) {
  TimeoutsInForce t;
  t.nccl_heartbeat_source = "torch's default";
  if (value_of(env, kNcclMonitoringVar) == "0") {
    t.nccl_heartbeat = milliseconds(0);
    t.nccl_heartbeat_source = std::string(kNcclMonitoringVar) + "=0";
  } else if (const std::string text = value_of(env, kNcclHeartbeatVar); !text.empty()) {
    long long s = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), s);
    if (ec == std::errc() && end == text.data() + text.size() && s > 0) {
      t.nccl_heartbeat = seconds(s);
      t.nccl_heartbeat_source = std::string(kNcclHeartbeatVar) + "=" + text;
    } else {
      t.nccl_heartbeat_source = fmt::format("{}={} is not a whole number of seconds: torch's default",
                                            kNcclHeartbeatVar, text);
    }
  }
  t.hang = c.hang_timeout;
  t.heartbeat = c.heartbeat_timeout;
  t.heartbeat_interval = c.heartbeat_interval;
  t.rdzv = c.rdzv_timeout;
  t.last_call = c.last_call_timeout;
  t.shutdown = c.shutdown_timeout;
  t.preemption = c.preemption_grace;
  t.unkillable = c.unkillable_timeout;
  t.max_restarts = c.max_restarts;
  t.budget = c.failure_budget;
  return t;
}

std::vector<FailureClass> detection_times(const TimeoutsInForce& t) {
  return {{"crash", t.shutdown, true, "at once (the worker's exit), then --shutdown_timeout for the others to stop"},
          hang_class(t),
          {"lost node", t.heartbeat + t.shutdown, true, "--heartbeat_timeout, then --shutdown_timeout"},
          sick_class(t)};
}

std::vector<std::string> nesting_warnings(const TimeoutsInForce& t) {
  std::vector<std::string> out;
  const std::string collective = format_seconds(t.collective);
  if (t.hang.count() > 0 && t.hang >= t.collective) {
    out.push_back(fmt::format(
        "timeouts do not nest: --hang_timeout={} is not shorter than the collective timeout ({}, torch's default), "
        "so the workers' watchdog ends a hang before the launcher can name the rank; use a --hang_timeout below {}",
        format_seconds(t.hang), collective, collective));
  }
  if (t.hang.count() > 0 && t.hang <= t.preemption) {
    out.push_back(fmt::format(
        "timeouts do not nest: --hang_timeout={} is not longer than --preemption_grace={}, the time a checkpoint is "
        "given, so ranks that wait in a collective while one saves would be called hung; use a --hang_timeout longer "
        "than a checkpoint's pause",
        format_seconds(t.hang), format_seconds(t.preemption)));
  }
  if (t.heartbeat >= t.collective) {
    out.push_back(fmt::format(
        "timeouts do not nest: --heartbeat_timeout={} is not shorter than the collective timeout ({}), so a lost "
        "node shows on the others as a timed-out collective first; use a --heartbeat_timeout below {}",
        format_seconds(t.heartbeat), collective, collective));
  }
  if (t.budget.count() > 0) {
    for (const FailureClass& f : detection_times(t)) {
      if (!f.detected || f.worst <= t.budget) continue;
      out.push_back(fmt::format(
          "timeouts do not nest: a {} can take {} to detect and stop, over --failure_budget={} (a value set alone "
          "wins over the budget: {})",
          f.name, format_seconds(f.worst), format_seconds(t.budget), f.how));
    }
  }
  return out;
}

std::vector<std::string> describe_timeouts(const TimeoutsInForce& t) {
  std::vector<std::string> out;
  out.push_back(t.budget.count() > 0 ? fmt::format("timeouts in force (--failure_budget={}):", format_seconds(t.budget))
                                     : std::string("timeouts in force:"));
  const auto row = [&out](const std::string& name, const std::string& value, const std::string& note) {
    out.push_back(fmt::format("  {:<22} {:<8} {}", name, value, note));
  };
  row("collective timeout", format_seconds(t.collective),
      "torch's default for NCCL (a script's init_process_group(timeout=) overrides it)");
  row("NCCL heartbeat", seconds_or_off(t.nccl_heartbeat), t.nccl_heartbeat_source);
  row("--hang_timeout", seconds_or_off(t.hang), t.hang.count() > 0 ? "" : "the collective timeout ends a hang");
  row("--heartbeat_timeout", format_seconds(t.heartbeat), "a beat every " + format_seconds(t.heartbeat_interval));
  row("--rdzv_timeout", format_seconds(t.rdzv), "last call " + format_seconds(t.last_call));
  row("--shutdown_timeout", format_seconds(t.shutdown), "SIGTERM to SIGKILL after a failure");
  row("--preemption_grace", format_seconds(t.preemption), "SIGTERM to SIGKILL after a preemption");
  row("--unkillable_timeout", format_seconds(t.unkillable), "after SIGKILL, then the host is out (exit 71)");
  row("--max_restarts", std::to_string(t.max_restarts), "");
  out.push_back("worst case to detect a failure and stop the round:");
  milliseconds round{0};
  for (const FailureClass& f : detection_times(t)) {
    row(f.name, f.detected ? format_seconds(f.worst) : "never", f.how);
    if (f.name != "sick node") round = std::max(round, f.worst);
  }
  out.push_back(fmt::format("the job gives up after at most {} ({} round(s) of at most {} each, plus a rendezvous per "
                            "restart)",
                            format_seconds(round * (t.max_restarts + 1)), t.max_restarts + 1, format_seconds(round)));
  // Trailing spaces of rows with no note.
  for (std::string& line : out) line.erase(line.find_last_not_of(' ') + 1);
  return out;
}

}  // namespace ddp::launcher
