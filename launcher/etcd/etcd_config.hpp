// What etcd-v3 takes from the command line and the environment: the etcd members (--rdzv_endpoint
// HOST:2379[,HOST:2379...], port 2379 when left out), the user and password (--rdzv_conf user=NAME,password_file=PATH,
// or the password in DDPLAUNCH_ETCD_PASSWORD; never on the command line), and the job's key prefix in etcd. Pure apart
// from reading the password file; thread-safe.
#pragma once

#include <chrono>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/config/private_env.hpp"
#include "launcher/etcd/etcd_client.hpp"

namespace ddp::launcher {

// Fills in the etcd fields of `c` for --rdzv_backend etcd-v3 (BackendKind::configure, after
// --rdzv_conf is applied). Throws UsageError naming the value and the fix: no endpoints; a user
// without a password or the reverse; cert without key; protocol neither http nor https.
void configure_etcd(LaunchConfig& c, const EnvLookup& env);

// The client options for this job's etcd at `endpoints` (the members, or with TLS the proxy's
// loopback ports: EffectiveConfig::etcd_endpoints), each call bounded by `timeout`.
EtcdClientOptions etcd_client_options(const LaunchConfig& c, const std::vector<std::string>& endpoints,
                                      std::chrono::milliseconds timeout);

// The job's namespace in etcd: "/ddplaunch/<run_id>/" (every key of the job is under it).
std::string etcd_prefix(const LaunchConfig& c);

}  // namespace ddp::launcher
