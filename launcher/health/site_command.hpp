// The site's own health check, --health_check CMD: run through /bin/sh -c, exit 0 = healthy. Its
// time is bounded (kHealthCommandTimeout, 120 s: enough for a quick DCGM diagnostic, `dcgmi diag
// -r 1`; no flag to tune), and its output (stdout and stderr together) is kept bounded: the
// first line, for the other nodes, and the last kOutputLines lines, for this node's report.
#pragma once

#include <chrono>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/health/check_result.hpp"

namespace ddp::launcher {

inline constexpr std::chrono::seconds kHealthCommandTimeout{120};
inline constexpr std::size_t kOutputLines = 20;

// Runs `command` with environment `env` in its own process group and waits for it, at most
// `timeout`: then the group is killed (SIGKILL) and the check fails ("timed out after ..."). A
// command that cannot be started fails the check too. Failed results carry the first line of
// output in the summary and the last lines in `output`. Blocks; never throws; thread-safe.
CheckResult run_site_command(const std::string& command, const Environment& env,
                             std::chrono::milliseconds timeout = kHealthCommandTimeout);

}  // namespace ddp::launcher
