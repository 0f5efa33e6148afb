// See etcd_config.hpp.
#include "launcher/etcd/etcd_config.hpp"

#include <fmt/format.h>

#include "common/host_port.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

constexpr std::uint16_t kEtcdPort = 2379;

std::vector<std::string> etcd_endpoints(const std::string& text) {
  const HostPortRules member{
      .name = "--rdzv_endpoint",
      .fix = "give the etcd members as HOST[:PORT],... (port 2379 by default), e.g. 10.0.0.5:2379",
      .default_port = kEtcdPort};
  std::vector<std::string> out;
  for (const std::string& item : split_list(text)) {
    const HostPort e = parse_host_port(item, member);
    out.push_back(rendezvous::format_endpoint(e.host, *e.port));
  }
  if (out.empty()) {
    throw UsageError(
        "--rdzv_backend etcd-v3 needs the etcd members: --rdzv_endpoint HOST:2379[,HOST:2379...] (the same on every "
        "node)");
  }
  return out;
}

void apply_etcd_auth(LaunchConfig& c, const EnvLookup& env) {
  const auto conf = [&](const char* key) {
    const auto it = c.rdzv_conf.find(key);
    return it == c.rdzv_conf.end() ? std::string() : it->second;
  };
  const std::string protocol = conf("protocol");
  if (!protocol.empty() && protocol != "http" && protocol != "https") {
    throw UsageError(fmt::format("--rdzv_conf protocol={} is not http or https", protocol));
  }
  c.etcd_ca_file = conf("cacert");
  c.etcd_cert_file = conf("cert");
  c.etcd_key_file = conf("key");
  c.etcd_tls = protocol == "https" || !c.etcd_ca_file.empty() || !c.etcd_cert_file.empty();
  if (c.etcd_cert_file.empty() != c.etcd_key_file.empty()) {
    throw UsageError("--rdzv_conf cert= and key= go together (the client certificate and its private key); give both");
  }
  if (c.etcd_tls && protocol == "http") {
    throw UsageError("--rdzv_conf protocol=http with TLS keys (cacert, cert, key); drop protocol or use https");
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
    throw UsageError(
        fmt::format("--rdzv_conf user={} needs a password: --rdzv_conf password_file=PATH (mode 600) or {}",
                    c.etcd_user, kEtcdPasswordEnv));
  }
}

}  // namespace

void configure_etcd(LaunchConfig& c, const EnvLookup& env) {
  c.etcd_endpoints = etcd_endpoints(c.rdzv_endpoint);
  apply_etcd_auth(c, env);
}

EtcdClientOptions etcd_client_options(const LaunchConfig& c, const std::vector<std::string>& endpoints,
                                      std::chrono::milliseconds timeout) {
  EtcdClientOptions o;
  o.endpoints = endpoints;
  o.timeout = timeout;
  o.user = c.etcd_user;
  o.password = c.etcd_password;
  return o;
}

std::string etcd_prefix(const LaunchConfig& c) {
  return "/ddplaunch/" + c.run_id + "/";
}

}  // namespace ddp::launcher
