// Reading the environment through a function, so that everything that depends on it (the
// launcher's command line, a worker's distributed environment) is testable with a fake.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace ddp {

// Returns the variable's value, or nullopt when it is unset.
using EnvLookup = std::function<std::optional<std::string>(const std::string& name)>;

// A whole environment as a map (what a child process is started with).
using Environment = std::map<std::string, std::string>;

// This process's environment (getenv). Reads only; safe while no thread calls setenv.
EnvLookup process_env();

// A lookup over a map, for tests and for children's environments.
EnvLookup map_env(Environment env);

// The current process environment as a map. Same thread-safety as process_env().
Environment current_environment();

}  // namespace ddp
