// For tests that hand the launcher an environment: a std::map seen through an EnvLookup, so no
// test reads or changes the real environment.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::testing {

using FakeEnv = std::map<std::string, std::string>;

// An EnvLookup over a copy of `env`: a name it lacks is unset (nullopt). Thread-safe.
inline EnvLookup lookup(const FakeEnv& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

}  // namespace ddp::testing
