// torchrun's knobs that ddplaunch maps onto its own rather than runs as torchrun does: the
// environment variables torchrun's agent reads (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE,
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT, TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, LOGLEVEL) and its Python-only flags (--event_log_handler,
// --logs_specs, --start_method, --duplicate_*_filters). A flag given always beats the variable.
#pragma once

#include <chrono>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/cli/cli_options.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// The grace between SIGTERM and SIGKILL: `flag` (--shutdown_timeout or PET_SHUTDOWN_TIMEOUT,
// already checked as seconds) unless empty, else TORCH_ELASTIC_SHUTDOWN_TIMEOUT as torchrun's
// LaunchConfig reads it, else 30 s. Throws UsageError naming the variable for a value that is not
// a number of seconds (torchrun: int(), a ValueError).
std::chrono::milliseconds shutdown_timeout_from(const std::string& flag, const EnvLookup& env);

// The exit barrier's bound, by the same precedence (torchrun PR #195543): `flag`
// (--exit_barrier_timeout or PET_EXIT_BARRIER_TIMEOUT) unless empty, else
// TORCH_ELASTIC_EXIT_BARRIER_TIMEOUT, else 300 s. Throws UsageError as above.
std::chrono::milliseconds exit_barrier_timeout_from(const std::string& flag, const EnvLookup& env);

// ddplaunch's level for torchrun's LOGLEVEL (Python's level names, any case): DEBUG and NOTSET →
// debug, INFO → info, WARNING and WARN → warning, ERROR, CRITICAL and FATAL → error. Throws
// UsageError naming the value and the names torchrun takes.
std::string level_from_loglevel(const std::string& loglevel);

// Applies to `c` what the knobs above ask for:
//   - the console prefix: --log_line_prefix_template (PET_*), else a non-empty
//     TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, else "[${rank}]:";
//   - the duplicate filters (parse_line_filters); a warning when no --tee stream feeds them;
//   - --event_log_handler=console: the event log on stderr, unless --event_log names a file;
//   - LOGLEVEL as --log_level when neither --log_level nor DDPLAUNCH_LOG_LEVEL is set.
// Throws UsageError for --logs_specs (a Python entry point ddplaunch cannot load), naming what
// to use instead, and for a bad LOGLEVEL. Logs a warning; otherwise pure.
void apply_torchrun_knobs(const CommandLineValues& values, const EnvLookup& env, LaunchConfig& c);

}  // namespace ddp::launcher
