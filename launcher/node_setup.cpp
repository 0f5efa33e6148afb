// See node_setup.hpp.
#include "launcher/node_setup.hpp"

#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

#include "common/host_name.hpp"
#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "launcher/worker_spec.hpp"

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

std::string log_root_for(const LaunchConfig& c) {
  if (!c.log_dir.empty() || !(any_streams(c.redirects) || any_streams(c.tee))) return c.log_dir;
  // torchrun's behaviour: redirected streams need files, so without --log_dir make a directory.
  char tmpl[] = "/tmp/ddplaunch_XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    throw Error("cannot create a log directory under /tmp for --redirects/--tee; pass --log_dir");
  }
  log::info("worker logs go to {} (pass --log_dir to choose)", tmpl);
  return tmpl;
}

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
  s.effective.log_root = log_root_for(c);
  if (o.host_store && c.node_rank == 0) {
    // Every worker of the job (all nodes) holds a connection to this store.
    s.effective.open_files_limit = raise_open_file_limit();
    rendezvous::TcpStoreServerOptions so;
    so.port = static_cast<std::uint16_t>(c.master_port);
    // A single node's workers all dial --master_addr on this host: bind only there (loopback by
    // default), not on every interface. Multi-node stores listen on every interface, as torchrun's.
    if (c.max_nodes == 1) so.host = c.master_addr;
    so.log = [](std::string_view line) { log::info("store: {}", line); };
    try {
      s.server = std::make_unique<rendezvous::TcpStoreServer>(so);
    } catch (const rendezvous::BindError& e) {
      throw UsageError(e.what());
    }
    s.effective.port = s.server->port();
    s.server->start();
  }
  return s;
}

StoreConnector store_connector(const LaunchConfig& c, const EffectiveConfig& eff) {
  rendezvous::TcpStoreClientOptions o;
  o.host = c.master_addr;
  o.port = static_cast<std::uint16_t>(eff.port);
  o.connect_timeout = c.rdzv_timeout;
  o.timeout = std::max<std::chrono::milliseconds>(c.heartbeat_timeout, std::chrono::seconds(1));
  return [o] { return std::make_shared<rendezvous::TcpStoreClient>(o); };
}

}  // namespace ddp::launcher
