// See etcd_config.hpp.
#include "launcher/etcd_config.hpp"

#include <fmt/format.h>

#include "launcher/flag_parsers.hpp"
#include "launcher/job_secret.hpp"

namespace ddp::launcher {
namespace {

constexpr int kEtcdPort = 2379;
constexpr const char* kEtcdKeys[] = {"user", "password_file", "protocol", "cacert", "cert", "key"};

std::vector<std::string> etcd_endpoints(const std::string& text) {
  std::vector<std::string> out;
  for (const std::string& item : split_list(text)) {
    const Endpoint e = parse_endpoint(item);
    const std::string host = e.host.find(':') != std::string::npos ? "[" + e.host + "]" : e.host;
    out.push_back(fmt::format("{}:{}", host, e.port.value_or(kEtcdPort)));
  }
  if (out.empty()) {
    throw UsageError(
        "--rdzv_backend etcd-v3 needs the etcd members: --rdzv_endpoint HOST:2379[,HOST:2379...] (the same on every "
        "node)");
  }
  return out;
}

void apply_etcd_auth(LaunchConfig& c, const EnvLookup& env) {
  for (const char* tls : {"cacert", "cert", "key"}) {
    if (c.rdzv_conf.count(tls)) {
      throw UsageError(fmt::format(
          "--rdzv_conf {}=...: ddplaunch does not speak TLS to etcd yet; reach etcd over http (protocol=http) on a "
          "trusted network, with user= and password_file= if etcd has authentication enabled",
          tls));
    }
  }
  if (const auto it = c.rdzv_conf.find("protocol"); it != c.rdzv_conf.end() && it->second != "http") {
    throw UsageError(fmt::format("--rdzv_conf protocol={}: ddplaunch reaches etcd over http only (protocol=http)",
                                 it->second));
  }
  const auto user = c.rdzv_conf.find("user");
  const auto file = c.rdzv_conf.find("password_file");
  const auto from_env = env(kEtcdPasswordEnv);
  if (file != c.rdzv_conf.end() && from_env) {
    throw UsageError(fmt::format("both {} and --rdzv_conf password_file={} give the etcd password; use one of them",
                                 kEtcdPasswordEnv, file->second));
  }
  if (user == c.rdzv_conf.end()) {
    if (file != c.rdzv_conf.end() || from_env) {
      throw UsageError(fmt::format("an etcd password is given ({}) but no user; add --rdzv_conf user=NAME",
                                   from_env ? kEtcdPasswordEnv : "--rdzv_conf password_file"));
    }
    return;
  }
  c.etcd_user = user->second;
  if (file != c.rdzv_conf.end()) {
    c.etcd_password = read_secret_file("--rdzv_conf password_file", file->second, "the etcd password");
  } else if (from_env) {
    c.etcd_password = *from_env;
  } else {
    throw UsageError(fmt::format(
        "--rdzv_conf user={} needs a password: --rdzv_conf password_file=PATH (mode 600) or {}", c.etcd_user,
        kEtcdPasswordEnv));
  }
}

}  // namespace

void apply_rdzv_backend(LaunchConfig& c, const EnvLookup& env, bool master_port_given) {
  const std::string& b = c.rdzv_backend;
  if (b == "etcd" || b == "etcd-v2") {
    throw UsageError(fmt::format(
        "--rdzv_backend={} speaks etcd's v2 API, which etcd 3.6 removed; use --rdzv_backend etcd-v3 (etcd's v3 "
        "API, the same --rdzv_endpoint)",
        b));
  }
  if (b != "static" && b != "c10d" && b != "etcd-v3") {
    throw UsageError(fmt::format("--rdzv_backend={} is unknown; use static, c10d or etcd-v3", b));
  }
  if (!c.uses_etcd()) {
    for (const char* key : kEtcdKeys) {
      if (c.rdzv_conf.count(key)) {
        throw UsageError(fmt::format("--rdzv_conf {} applies to --rdzv_backend etcd-v3 only (this job uses {})", key, b));
      }
    }
    return;
  }
  c.etcd_endpoints = etcd_endpoints(c.rdzv_endpoint);
  apply_etcd_auth(c, env);
  if (!master_port_given) c.master_port = 0;  // the workers' store: a free port on group rank 0
}

EtcdClientOptions etcd_client_options(const LaunchConfig& c, std::chrono::milliseconds timeout) {
  EtcdClientOptions o;
  o.endpoints = c.etcd_endpoints;
  o.timeout = timeout;
  o.user = c.etcd_user;
  o.password = c.etcd_password;
  return o;
}

std::string etcd_prefix(const LaunchConfig& c) {
  return "/ddplaunch/" + c.run_id + "/";
}

}  // namespace ddp::launcher
