// See rdzv_backend_choice.hpp.
#include "launcher/cli/rdzv_backend_choice.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "launcher/config/rdzv_conf.hpp"

namespace ddp::launcher {
namespace {

// "a, b or c": every name of every backend, in order.
std::string known_names(const std::vector<BackendKind>& backends) {
  std::vector<std::string_view> names;
  for (const BackendKind& kind : backends) names.insert(names.end(), kind.names.begin(), kind.names.end());
  std::string out;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

}  // namespace

const BackendKind* find_backend(const std::vector<BackendKind>& backends, const std::string& name) {
  const auto it = std::find_if(backends.begin(), backends.end(), [&](const BackendKind& kind) {
    return std::find(kind.names.begin(), kind.names.end(), name) != kind.names.end();
  });
  return it == backends.end() ? nullptr : &*it;
}

void apply_rdzv_backend(LaunchConfig& c, const EnvLookup& env, bool master_port_given,
                        const std::vector<BackendKind>& backends) {
  const std::string& name = c.rdzv_backend;
  for (const BackendKind& kind : backends) {
    if (std::find(kind.refused_names.begin(), kind.refused_names.end(), name) != kind.refused_names.end()) {
      throw UsageError(fmt::format("--rdzv_backend={} {}", name, kind.refused_why));
    }
  }
  const BackendKind* kind = find_backend(backends, name);
  if (!kind) throw UsageError(fmt::format("--rdzv_backend={} is unknown; use {}", name, known_names(backends)));
  c.rdzv_rules = kind->rules;
  check_rdzv_conf_backend(c);
  if (kind->configure) kind->configure(c, env);
  // The workers' store of each round: a free port on its group rank 0, which publishes it.
  if (!c.rdzv_rules.node0_hosts_store && !master_port_given) c.master_port = 0;
}

}  // namespace ddp::launcher
