// See node_setup.hpp.
#include "launcher/agent/node_setup.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/host_name.hpp"
#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "launcher/etcd/etcd_config.hpp"
#include "launcher/etcd/etcd_store.hpp"
#include "launcher/etcd/etcd_tls_process.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/rdzv/hosted_store.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace ddp::launcher {
namespace {

// Resolves a host name or address once up front, so a typo fails in milliseconds with exit 2
// instead of after the rendezvous timeout.
void check_resolvable(const std::string& host, const char* flag) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string bare = rendezvous::unbracket_host(host);
  const int rc = bare.empty() ? EAI_NONAME : ::getaddrinfo(bare.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    throw UsageError(std::string(flag) + "=" + host + " cannot be resolved (" + gai_strerror(rc) +
                     "); use an IP address or a host name this machine resolves (IPv6 in brackets: [::1])");
  }
  ::freeaddrinfo(result);
}

bool any_streams(const StreamSelection& sel) {
  return sel.all != 0 ||
         std::any_of(sel.per_rank.begin(), sel.per_rank.end(), [](const auto& kv) { return kv.second != 0; });
}

// This run's own directory, <base>/<run_id>_<random> as torchrun names it, so that a second run
// with the same --log_dir never overwrites the first's logs. The base is --log_dir, else /tmp:
// every worker gets an error file (TORCHELASTIC_ERROR_FILE) there, as torchrun's
// /tmp/torchelastic_*; redirected or teed streams without --log_dir go there too. Sets
// `temporary` when the directory only holds error files (removed after a success).
std::string log_root_for(const LaunchConfig& c, bool& temporary) {
  const bool streams = any_streams(c.redirects) || any_streams(c.tee);
  temporary = c.log_dir.empty() && !streams;
  const std::string base = c.log_dir.empty() ? "/tmp" : c.log_dir;
  std::error_code ec;
  std::filesystem::create_directories(base, ec);
  std::string tmpl = base + "/" + c.run_id + "_XXXXXX";
  if (ec || ::mkdtemp(tmpl.data()) == nullptr) {
    const int err = ec ? ec.value() : errno;
    throw UsageError(
        fmt::format("cannot create a log directory under {}: {}; pass a writable --log_dir", base, std::strerror(err)));
  }
  if (!temporary) log::info("logs: {}", tmpl);
  return tmpl;
}

// Each etcd call's bound: a member that does not answer within it is as lost as a store.
std::chrono::milliseconds etcd_call_timeout(const LaunchConfig& c) {
  return std::max<std::chrono::milliseconds>(c.heartbeat_timeout, std::chrono::seconds(1));
}

// The job's keys in etcd outlive its last launcher by this much at least (etcd_job_lease.hpp).
constexpr std::chrono::milliseconds kJobLeaseTtl{std::chrono::seconds(10)};

}  // namespace

NodeSetup set_up_node(const LaunchConfig& c, const NodeSetupOptions& o) {
  NodeSetup s;
  s.effective.host = host_name();
  if (s.effective.host.empty()) s.effective.host = "localhost";
  s.effective.port = c.master_port;
  s.effective.python = choose_python(current_environment(), own_executable());
  if (o.preflight) {
    check_program(c, s.effective.python);
    check_resolvable(c.master_addr, "--master_addr");
    if (!c.local_addr.empty()) check_resolvable(c.local_addr, "--local_addr");
  }
  // Every worker of the job (all nodes) holds a connection to the store's host; with etcd, any
  // node may become it.
  if (o.host_store && (c.node_rank == 0 || c.uses_etcd())) s.effective.open_files_limit = raise_open_file_limit();
  if (o.host_store && c.node_rank == 0 && !c.uses_etcd()) {
    s.server = host_job_store(c);
    s.effective.port = s.server->port();
  }
  if (c.uses_etcd()) {
    s.effective.etcd_endpoints = c.etcd_tls ? start_etcd_tls_proxy(c) : c.etcd_endpoints;
    s.effective.etcd_lease = std::make_shared<EtcdJobLease>(
        etcd_client_options(c, s.effective.etcd_endpoints, etcd_call_timeout(c)), etcd_prefix(c),
        std::chrono::duration_cast<std::chrono::seconds>(std::max<std::chrono::milliseconds>(c.heartbeat_timeout, kJobLeaseTtl)));
  }
  // Last: nothing after it can fail and leave the directory behind.
  s.effective.log_root = log_root_for(c, s.effective.temporary_log_root);
  return s;
}

StoreConnector store_connector(const LaunchConfig& c, const EffectiveConfig& eff,
                               std::optional<std::chrono::milliseconds> connect_timeout) {
  if (c.uses_etcd()) {
    EtcdStoreOptions o;
    o.client = etcd_client_options(c, eff.etcd_endpoints, etcd_call_timeout(c));
    o.prefix = etcd_prefix(c);
    return [o, lease = eff.etcd_lease]() mutable {
      o.lease = lease->id();
      return std::make_shared<EtcdStore>(o);
    };
  }
  rendezvous::TcpStoreClientOptions o;
  o.host = c.master_addr;
  o.port = static_cast<std::uint16_t>(eff.port);
  o.connect_timeout = connect_timeout.value_or(c.rdzv_timeout);
  o.timeout = std::max<std::chrono::milliseconds>(c.heartbeat_timeout, std::chrono::seconds(1));
  // A node started before node 0 listens says so about every 10 s instead of staying silent for
  // up to --rdzv_timeout. DDPLAUNCH_STATUS_INTERVAL (seconds) changes the interval (tests).
  o.on_waiting = [](const std::string& line) { log::info("{}", line); };
  if (const char* v = std::getenv("DDPLAUNCH_STATUS_INTERVAL")) {
    if (const auto interval = parse_seconds(v)) o.waiting_interval = std::max(*interval, std::chrono::milliseconds(10));
  }
  return [o] { return std::make_shared<rendezvous::TcpStoreClient>(o); };
}

}  // namespace ddp::launcher
