// What of the controller's environment the hosts' launchers receive: the variables whose names
// start with one of kForwardedPrefixes or equal one of kForwardedNames, those --export names,
// and the NAME=VALUE lines of an env file (DeepSpeed's .deepspeed_env form), which win. Nothing
// else of the local environment leaks, and a local job secret never goes (the controller hands
// the hosts a fresh one of its own; the etcd password only where --export names it). Pure; thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

inline constexpr std::string_view kForwardedPrefixes[] = {"NCCL_", "PYTHON", "CUDA_", "TORCH_", "PET_", "OMP_"};
inline constexpr std::string_view kForwardedNames[] = {"LD_LIBRARY_PATH", "PATH", "VIRTUAL_ENV"};

// The environment to set on every host. `env_file_text` is the env file's contents ("" for
// none), `env_file` its name in errors. Throws UsageError naming the file, line and fix for a
// line that is not NAME=VALUE.
Environment forwarded_environment(const Environment& local, const std::vector<std::string>& exports,
                                  const std::string& env_file_text, const std::string& env_file);

}  // namespace ddp::launcher
