// See forwarded_env.hpp.
#include "launcher/fleet/forwarded_env.hpp"

#include <algorithm>
#include <sstream>

#include <fmt/format.h>

#include "ddplaunch/common/error.hpp"
#include "launcher/config/private_env.hpp"

namespace ddp::launcher {
namespace {

bool forwarded_by_default(const std::string& name) {
  const auto starts = [&name](std::string_view prefix) { return name.rfind(prefix, 0) == 0; };
  return std::any_of(std::begin(kForwardedPrefixes), std::end(kForwardedPrefixes), starts) ||
         std::find(std::begin(kForwardedNames), std::end(kForwardedNames), name) != std::end(kForwardedNames);
}

// The controller hands the hosts a fresh secret of its own: a local one never goes.
bool is_private(const std::string& name) { return name == kSecretEnv; }

}  // namespace

Environment forwarded_environment(const Environment& local, const std::vector<std::string>& exports,
                                  const std::string& env_file_text, const std::string& env_file) {
  Environment out;
  for (const auto& [name, value] : local) {
    if (forwarded_by_default(name)) out[name] = value;
  }
  for (const std::string& name : exports) {
    if (const auto it = local.find(name); it != local.end()) out[name] = it->second;
  }
  std::istringstream lines(env_file_text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const auto first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos || eq == first) {
      throw UsageError(fmt::format("--env_file {} line {}: '{}' is not NAME=VALUE; write one NAME=VALUE a line",
                                   env_file, number, line));
    }
    out[line.substr(first, eq - first)] = line.substr(eq + 1);
  }
  for (auto it = out.begin(); it != out.end();) it = is_private(it->first) ? out.erase(it) : std::next(it);
  return out;
}

}  // namespace ddp::launcher
