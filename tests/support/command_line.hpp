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

// argv = "ddplaunch" followed by `args`, null-terminated as the kernel passes it. Throws what
// parse_command_line throws.
inline launcher::ParsedCommandLine parse_full(const Args& args, const FakeEnv& env = {}) {
  std::vector<const char*> argv{"ddplaunch"};
  for (const auto& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  return launcher::parse_command_line(static_cast<int>(argv.size()) - 1, argv.data(), lookup(env),
                                      launcher::rendezvous_backends());
}

inline launcher::LaunchConfig parse(const Args& args, const FakeEnv& env = {}) {
  return parse_full(args, env).config;
}

// The UsageError message for `args`, or a marker saying what happened instead.
inline std::string usage_error(const Args& args, const FakeEnv& env = {}) {
  return usage_error_of([&] { parse_full(args, env); });
}

}  // namespace ddp::testing
