// See torchrun_env.hpp.
#include "launcher/cli/torchrun_env.hpp"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "common/log.hpp"
#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {
namespace {

// torchrun copies only tee'd streams into the filtered files (its PContext tails tee_stdouts).
void warn_without_tee(const LaunchConfig& c, int bit, const char* flag) {
  const bool any_tee =
      (c.tee.all & bit) != 0 || std::any_of(c.tee.per_rank.begin(), c.tee.per_rank.end(),
                                            [bit](const auto& rank_mask) { return (rank_mask.second & bit) != 0; });
  if (!any_tee) {
    log::warning("{} copies lines of tee'd streams only and --tee tees no {}; add --tee {} (or 3)", flag,
                 bit == 1 ? "stdout" : "stderr", bit);
  }
}

// A duration torchrun takes from a flag, else from an environment variable, else a default.
std::chrono::milliseconds flag_or_variable(const std::string& flag, const char* flag_name, const char* variable,
                                           std::chrono::milliseconds fallback, const EnvLookup& env) {
  if (!flag.empty()) {
    const auto ms = parse_seconds(flag);
    DDP_ASSERT(ms, std::string(flag_name) + " was not validated: '" + flag + "'");
    return *ms;
  }
  const auto text = env(variable);
  if (!text) return fallback;
  const auto ms = parse_seconds(*text);
  if (!ms) throw UsageError(fmt::format("{}={} is not {}; fix it or unset it", variable, *text, kSecondsExpected));
  return *ms;
}

}  // namespace

std::chrono::milliseconds shutdown_timeout_from(const std::string& flag, const EnvLookup& env) {
  return flag_or_variable(flag, "--shutdown_timeout", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT", std::chrono::seconds(30), env);
}

std::chrono::milliseconds exit_barrier_timeout_from(const std::string& flag, const EnvLookup& env) {
  return flag_or_variable(flag, "--exit_barrier_timeout", "TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT",
                          std::chrono::seconds(300), env);
}

std::string level_from_loglevel(const std::string& loglevel) {
  std::string name;
  for (char ch : loglevel) name.push_back(static_cast<char>(std::toupper(static_cast<unsigned char>(ch))));
  if (name == "DEBUG" || name == "NOTSET") return "debug";
  if (name == "INFO") return "info";
  if (name == "WARNING" || name == "WARN") return "warning";
  if (name == "ERROR" || name == "CRITICAL" || name == "FATAL") return "error";
  throw UsageError(
      fmt::format("LOGLEVEL={} is not a level torchrun knows; use DEBUG, INFO, WARNING, ERROR or "
                  "CRITICAL, or unset it",
                  loglevel));
}

void apply_torchrun_knobs(const CommandLineValues& v, const EnvLookup& env, LaunchConfig& c) {
  if (v.logs_specs) {
    throw UsageError(fmt::format(
        "--logs_specs={} names a Python LogsSpecs plugin, which ddplaunch cannot load; use --log_dir DIR with "
        "--redirects/--tee, --local_ranks_filter and --log_line_prefix_template",
        *v.logs_specs));
  }
  if (v.line_prefix_template) {
    c.line_prefix_template = *v.line_prefix_template;
  } else if (const auto tpl = env("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"); tpl && !tpl->empty()) {
    c.line_prefix_template = *tpl;  // torchrun: `args.log_line_prefix_template or os.getenv(...)`
  }
  if (v.duplicate_stdout_filters) {
    c.duplicate_stdout_filters = parse_line_filters(*v.duplicate_stdout_filters);
    warn_without_tee(c, 1, "--duplicate_stdout_filters");
  }
  if (v.duplicate_stderr_filters) {
    c.duplicate_stderr_filters = parse_line_filters(*v.duplicate_stderr_filters);
    warn_without_tee(c, 2, "--duplicate_stderr_filters");
  }
  // /dev/stderr opened for appending (run_recorder.cpp) never truncates a stderr redirected to a file.
  if (v.event_log_handler == "console" && c.event_log.empty()) c.event_log = "/dev/stderr";
  const auto own_level = env("DDPLAUNCH_LOG_LEVEL");
  if (const auto loglevel = env("LOGLEVEL");
      c.log_level.empty() && (!own_level || own_level->empty()) && loglevel && !loglevel->empty()) {
    c.log_level = level_from_loglevel(*loglevel);
  }
}

}  // namespace ddp::launcher
