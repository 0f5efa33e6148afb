// See env_lookup.hpp.
#include "ddplaunch/common/env_lookup.hpp"

#include <cstdlib>

extern char** environ;

namespace ddp {

EnvLookup process_env() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_env(Environment env) {
  return [env = std::move(env)](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

Environment current_environment() {
  Environment env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string kv(*e);
    const auto eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace ddp
