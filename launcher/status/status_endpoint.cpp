// See status_endpoint.hpp.
#include "launcher/status/status_endpoint.hpp"

#include <boost/asio/post.hpp>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "launcher/rdzv/hosted_store.hpp"
#include "launcher/status/status_access.hpp"
#include "launcher/status/status_json.hpp"

namespace ddp::launcher {

StatusIdentity status_identity(const LaunchConfig& c, const std::string& host) {
  return StatusIdentity{c.run_id, host, c.node_rank, c.max_restarts};
}

std::string status_socket_path(const std::string& run_dir) {
  return run_dir + "/status.sock";
}

std::string status_tcp_host(const LaunchConfig& c, bool hosts_store) {
  if (hosts_store) return store_bind_host(c);
  return c.local_addr;
}

std::unique_ptr<StatusServer> serve_status(const LaunchConfig& c, EffectiveConfig& eff, const StatusBoard& board,
                                           boost::asio::io_context& agent_io, bool hosts_store, JobPageParts page) {
  StatusServerOptions o;
  o.socket_path = status_socket_path(eff.log_root);
  if (c.status_port >= 0) {
    o.tcp_port = c.status_port;
    o.tcp_host = status_tcp_host(c, hosts_store);
  }
  o.post_to_agent = [&agent_io](std::function<void()> probe) { boost::asio::post(agent_io, std::move(probe)); };
  o.start_on_dial = &agent_io;  // the agent destroys it on that loop's thread, after the loop ran
  o.token = page_token(c.rdzv_secret, c.run_id);
  if (PageStacks* stacks = page.stacks) {
    o.stack = [stacks](int rank, StatusServerOptions::StackDone done) { stacks->request(rank, std::move(done)); };
  }
  std::function<std::string()> status = [&board] { return status_json(board.snapshot()); };
  if (StatusExchange* exchange = page.exchange) status = [exchange] { return exchange->status(); };
  std::unique_ptr<StatusServer> server;
  try {
    server = std::make_unique<StatusServer>(o, status);
    eff.status_socket = o.socket_path;
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    log::warning("{}; ddplaunch --status does not reach this launcher", e.what());
    if (!o.tcp_port) return nullptr;
    o.socket_path.clear();
    server = std::make_unique<StatusServer>(o, status);
  }
  if (o.tcp_port) {
    const std::string base = "http://" + rendezvous::format_endpoint(o.tcp_host.empty() ? eff.host : o.tcp_host,
                                                                     static_cast<std::uint16_t>(server->tcp_port()));
    log::info("status: {}/status, the job's page: {}/{}", base, base, o.token.empty() ? "" : "?token=" + o.token);
    if (page.exchange) page.exchange->set_page_url(base + "/");
  }
  return server;
}

}  // namespace ddp::launcher
