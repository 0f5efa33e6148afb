// Starting ddplaunch-etcd-tls (etcd_tls_proxy.hpp), the TLS proxy to etcd, from the launcher: it
// is found beside the ddplaunch executable, started with a parent-death signal (it dies with
// the launcher, and the job's teardown stops it with the rest), and its one line of output names
// the loopback ports the etcd client then uses instead of the members.
#pragma once

#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// What the proxy is started for: any TLS endpoint the launcher talks plain HTTP to through it
// (etcd's members; Kubeflow Trainer's status endpoint, kubeflow/progress_reporter.hpp).
struct TlsProxyStart {
  std::vector<std::string> members;  // "host:port" each
  std::string ca_file;               // "": the system's trusted certificates
  std::string cert_file, key_file;   // a client certificate ("": none)
  std::string purpose = "TLS to etcd";  // for messages: "<purpose> needs ddplaunch-etcd-tls beside ..."
};

// Blocks until the proxy listens (at most 10 s). Returns "127.0.0.1:PORT" for each member, in
// order. Throws UsageError when the proxy is missing or refuses its files (its own message is on
// stderr above), Error when it does not answer.
std::vector<std::string> start_tls_proxy(const TlsProxyStart& start);

// start_tls_proxy for config.etcd_endpoints with --rdzv_conf's TLS files.
std::vector<std::string> start_etcd_tls_proxy(const LaunchConfig& config);

}  // namespace ddp::launcher
