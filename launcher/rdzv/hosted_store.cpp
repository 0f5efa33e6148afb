// See hosted_store.hpp.
#include "launcher/rdzv/hosted_store.hpp"

#include <algorithm>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "common/log.hpp"
#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "launcher/rdzv/job_secret.hpp"

namespace ddp::launcher {
namespace {

// The addresses `host` (a name) resolves to here; none when it does not resolve.
std::vector<boost::asio::ip::address> addresses_of(const std::string& host) {
  boost::asio::io_context io;
  boost::asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, "", ec);
  std::vector<boost::asio::ip::address> out;
  if (!ec) {
    for (const auto& r : results) out.push_back(r.endpoint().address());
  }
  return out;
}

// Whether `host` (a name) resolves only to loopback addresses on this machine.
bool resolves_to_loopback_only(const std::string& host) {
  const auto addresses = addresses_of(host);
  return !addresses.empty() &&
         std::all_of(addresses.begin(), addresses.end(), [](const auto& a) { return a.is_loopback(); });
}

// Whether only this machine reaches `host`: a loopback address, or a name that resolves only to
// loopback. "" (every interface) is reachable from everywhere.
bool loopback_only(const std::string& host) {
  if (host.empty()) return false;
  const std::string bare = rendezvous::unbracket_host(host);
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(bare, ec);
  if (!ec) return address.is_loopback();
  return resolves_to_loopback_only(bare);
}

}  // namespace

void warn_without_secret(const LaunchConfig& c, const std::string& store_host, int port) {
  if (c.max_nodes < 2 || !c.rdzv_secret.empty() || !c.rdzv_rules.node0_hosts_store || loopback_only(store_host)) {
    return;
  }
  log::warning(
      "no job secret: any host that can reach the store at {} can join this job as a node before the round forms "
      "and poison the workers' results; give every node the same secret (DDPLAUNCH_RDZV_TOKEN or --rdzv_conf "
      "token_file, see docs/security.md)",
      rendezvous::format_endpoint(store_host.empty() ? "*" : store_host, port));
}

// Where node 0's store listens: --rdzv_conf bind=ADDR ("*": every interface); for one node,
// --master_addr (loopback by default), since all the workers dial it on this host; for several,
// the address --master_addr resolves to here, except a host name that resolves only to loopback
// here (Debian maps its own name to 127.0.1.1), which the other nodes resolve to another
// address: every interface then, as torchrun; and a name that does not resolve here (yet).
// A round's workers' store (a backend where node 0 hosts none, BackendRules): every interface
// unless bind says otherwise, since the workers dial the address the host published (with
// etcd-v3, the one it reaches etcd from).
std::string store_bind_host(const LaunchConfig& c) {
  if (const auto it = c.rdzv_conf.find("bind"); it != c.rdzv_conf.end()) return it->second == "*" ? "" : it->second;
  if (!c.rdzv_rules.node0_hosts_store) return "";
  if (c.max_nodes == 1) return c.master_addr;
  boost::system::error_code ec;
  const std::string bare = rendezvous::unbracket_host(c.master_addr);
  boost::asio::ip::make_address(bare, ec);
  if (ec && bare != "localhost" && addresses_of(bare).empty()) {
    // A Kubernetes service name published only once the pod is ready (Trainer's
    // <job>-node-0-0.<job>): every interface, as torchrun's store listens.
    log::info(
        "--master_addr={} does not resolve on this host (yet); the store listens on every interface (choose "
        "one with --rdzv_conf bind=ADDR)",
        c.master_addr);
    return "";
  }
  if (ec && bare != "localhost" && resolves_to_loopback_only(bare)) {
    log::info(
        "--master_addr={} resolves to loopback on this host; the store listens on every interface (choose one "
        "with --rdzv_conf bind=ADDR)",
        c.master_addr);
    return "";
  }
  return c.master_addr;
}

std::unique_ptr<rendezvous::TcpStoreServer> host_job_store(const LaunchConfig& c) {
  rendezvous::TcpStoreServerOptions so;
  so.port = static_cast<std::uint16_t>(c.master_port);
  so.host = store_bind_host(c);
  so.log = [](std::string_view line) { log::info("store: {}", line); };
  so.auth = store_auth(c.rdzv_secret);
  if (const auto it = c.rdzv_conf.find("store_memory"); it != c.rdzv_conf.end()) {
    so.memory_budget = parse_bytes(it->second).value();  // checked by apply_rdzv_conf
  }
  std::unique_ptr<rendezvous::TcpStoreServer> server;
  try {
    server = std::make_unique<rendezvous::TcpStoreServer>(so);
  } catch (const rendezvous::BindError& e) {
    if (c.store_host_guessed && dynamic_cast<const rendezvous::AddressInUseError*>(&e)) throw StoreHostTaken(e.what());
    if (c.max_nodes == 1 || c.rdzv_conf.count("bind") || !c.rdzv_rules.node0_hosts_store) throw UsageError(e.what());
    throw UsageError(std::string(e.what()) +
                     "; node 0 runs on the host --master_addr names, or choose the address with --rdzv_conf "
                     "bind=ADDR (bind=* for every interface)");
  }
  // One node's store has no one to serve before its workers: its own launcher reaches it in
  // process, and the store's thread starts once a wait needs it or a worker dials it
  // (StoreBackend::meet_workers_store). Others' launchers may dial it at once.
  if (c.max_nodes > 1 || !c.rdzv_rules.node0_hosts_store) server->start();
  warn_without_secret(c, so.host, server->port());
  return server;
}

}  // namespace ddp::launcher
