// For tests of the launcher's command line: parse_command_line() on a list of arguments and a
// fake environment (fake_env.hpp), called as main() calls it (with every backend). Link
// ddp_launcher.
#pragma once

#include <string>
#include <vector>

#include "launcher/backends.hpp"
#include "launcher/cli/cli.hpp"
#include "tests/support/fake_env.hpp"
#include "tests/support/usage_error_of.hpp"

namespace ddp::testing {

using Args = std::vector<std::string>;

// A machine with an NVIDIA driver, so that CUDA_VISIBLE_DEVICES's GPUs count (as on a GPU node);
// tests of the machine without one pass no_nvidia_driver.
inline std::string nvidia_driver_present() {
  return "";
}
inline std::string no_nvidia_driver() {
  return "no NVIDIA driver: no /dev/nvidiactl";
}

// argv = "ddplaunch" followed by `args`, null-terminated as the kernel passes it. Throws what
// parse_command_line throws.
inline launcher::ParsedCommandLine parse_full(const Args& args, const FakeEnv& env = {},
                                              const launcher::NvidiaDriverProbe& driver = nvidia_driver_present) {
  std::vector<const char*> argv{"ddplaunch"};
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return launcher::parse_command_line(static_cast<int>(argv.size()) - 1, argv.data(), lookup(env),
                                      launcher::rendezvous_backends(), driver);
}

inline launcher::LaunchConfig parse(const Args& args, const FakeEnv& env = {}) {
  return parse_full(args, env).config;
}

// The UsageError message for `args`, or a marker saying what happened instead.
inline std::string usage_error(const Args& args, const FakeEnv& env = {},
                               const launcher::NvidiaDriverProbe& driver = nvidia_driver_present) {
  return usage_error_of([&] { parse_full(args, env, driver); });
}

}  // namespace ddp::testing
