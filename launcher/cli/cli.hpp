// ddplaunch's command line (CLI11): torchrun's flags in both spellings, PET_<NAME> environment
// defaults, and everything after the program passed through untouched.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/nvidia_driver.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// What the command line asked for: a launch, or an early exit (--help, --version) with text.
struct ParsedCommandLine {
  LaunchConfig config;
  std::optional<std::string> early_exit_text;  // print to stdout and exit 0
};

// Parses and validates. Throws UsageError (one line naming the value and the fix).
// Slurm: without explicit --nnodes/--node_rank/--master_addr, SLURM_* variables fill them in.
// --rdzv_backend chooses among `backends` (launcher/backends.hpp: rendezvous_backends()).
// `nvidia_driver` says whether an NVIDIA driver is here, for --nproc_per_node=gpu/auto; tests fake it.
ParsedCommandLine parse_command_line(int argc, const char* const* argv, const EnvLookup& env,
                                     const std::vector<BackendKind>& backends,
                                     const NvidiaDriverProbe& nvidia_driver = nvidia_driver_missing);

}  // namespace ddp::launcher
