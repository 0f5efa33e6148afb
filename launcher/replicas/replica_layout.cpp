// TorchFT's layout as data; see replica_layout.hpp.
#include "launcher/replicas/replica_layout.hpp"

#include <fmt/format.h>

namespace ddp::launcher {

namespace {
constexpr const char* kDefaultLinePrefix = "[${rank}]:";  // LaunchConfig's
}

LaunchConfig group_config(const LaunchConfig& layout) {
  LaunchConfig c = layout;
  const int i = layout.replicas.index;
  DDP_ASSERT(i >= 0 && i < layout.replicas.count,
             fmt::format("group_config for group {} of {}", i, layout.replicas.count));
  if (c.master_port > 0) c.master_port += i;
  if (c.status_port > 0) c.status_port += i;
  c.run_id = fmt::format("{}-replica{}", c.run_id, i);
  if (!c.log_dir.empty()) c.log_dir = fmt::format("{}/replica_{}", c.log_dir, i);
  c.summary_json = group_file(c.summary_json, i);
  c.event_log = group_file(c.event_log, i);
  c.progress_file = group_file(c.progress_file, i);
  c.progress_from_collectives = false;
  if (c.line_prefix_template == kDefaultLinePrefix) c.line_prefix_template = fmt::format("[replica_{}/${{rank}}]:", i);
  return c;
}

std::string group_file(const std::string& path, int group) {
  if (path.empty()) return path;
  const std::size_t slash = path.rfind('/');
  const std::size_t dot = path.rfind('.');
  const bool has_extension = dot != std::string::npos && dot > (slash == std::string::npos ? 0 : slash + 1);
  const std::string stem = has_extension ? path.substr(0, dot) : path;
  const std::string extension = has_extension ? path.substr(dot) : "";
  return fmt::format("{}.replica_{}{}", stem, group, extension);
}

std::string lighthouse_url(const ReplicaGroups& replicas, const Environment& env) {
  const auto given = env.find(kTorchftLighthouseEnv);
  if (!replicas.starts_lighthouse() && given != env.end() && !given->second.empty()) return given->second;
  return fmt::format("http://127.0.0.1:{}", replicas.lighthouse_port);
}

Environment group_environment(Environment env, const ReplicaGroups& replicas, int group, const std::string& url) {
  env[kReplicaGroupEnv] = std::to_string(group);
  env[kReplicaGroupIdEnv] = std::to_string(group);
  env[kNumReplicaGroupsEnv] = std::to_string(replicas.count);
  env[kTorchftLighthouseEnv] = url;
  return env;
}

std::vector<std::string> lighthouse_argv(const ReplicaGroups& replicas) {
  std::vector<std::string> argv;
  const std::string& text = replicas.lighthouse;
  for (std::size_t at = text.find_first_not_of(" \t"); at != std::string::npos;) {
    const std::size_t end = text.find_first_of(" \t", at);
    argv.push_back(text.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? end : text.find_first_not_of(" \t", end);
  }
  argv.push_back("--bind");
  argv.push_back(fmt::format("127.0.0.1:{}", replicas.lighthouse_port));
  return argv;
}

std::string describe_layout(const LaunchConfig& layout, const Environment& env) {
  const ReplicaGroups& r = layout.replicas;
  std::string out = fmt::format("replica groups: {}, each its own launcher and restart domain ({} restarts each)\n",
                                r.count, layout.max_restarts);
  if (r.starts_lighthouse()) {
    std::string command;
    for (const std::string& a : lighthouse_argv(r)) command += (command.empty() ? "" : " ") + a;
    out += fmt::format("lighthouse (supervised, ended with the job): {}\n", command);
  } else {
    out += "lighthouse: started elsewhere (--lighthouse none)\n";
  }
  const std::string url = lighthouse_url(r, env);
  for (int i = 0; i < r.count; ++i) {
    LaunchConfig g = layout;
    g.replicas.index = i;
    g = group_config(g);
    out += fmt::format("group {}: store port {}, run id {}, {}={} {}={} {}={}\n", i,
                       g.master_port > 0 ? std::to_string(g.master_port) : "free", g.run_id, kReplicaGroupIdEnv, i,
                       kNumReplicaGroupsEnv, r.count, kTorchftLighthouseEnv, url);
  }
  return out;
}

}  // namespace ddp::launcher
