// Where a launcher's status endpoint listens, and starting it (status_server.hpp) for the agent:
//   - always the unix socket <run dir>/status.sock (the run's directory is 0700); its path goes
//     into this machine's job registry (status/job_registry.hpp), where `ddplaunch --status` finds it;
//   - with --status_port=PORT, TCP as well: on the launcher that hosts the store, the address
//     the store binds (rdzv/hosted_store.hpp: --rdzv_conf bind, else --master_addr for one node,
//     ...); on the others, --local_addr if given, else every interface; with the job's page at
//     `/` (docs/job-page.md), which needs the page's token when the job has a secret
//     (status_access.hpp).
#pragma once

#include <memory>
#include <string>

#include <boost/asio/io_context.hpp>

#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/status/page_stacks.hpp"
#include "launcher/status/status_board.hpp"
#include "launcher/status/status_exchange.hpp"
#include "launcher/status/status_server.hpp"

namespace ddp::launcher {

// The board's fixed part for this launcher. Pure.
StatusIdentity status_identity(const LaunchConfig& config, const std::string& host);

// The socket's path in the run's directory. Pure.
std::string status_socket_path(const std::string& run_dir);

// The TCP address --status_port listens on (above); "" for every interface. Blocks only for a
// name lookup (store_bind_host).
std::string status_tcp_host(const LaunchConfig& config, bool hosts_store);

// What the job's page adds to the board with --status_port (nullptr: not made); both must outlive
// the server.
struct JobPageParts {
  StatusExchange* exchange = nullptr;  // the other nodes' documents (node 0), node 0's page (others)
  PageStacks* stacks = nullptr;        // GET /stack
};

// Starts serving `board` (which must outlive the server) and records the socket in
// `effective.status_socket`; /healthz probes `agent_io`'s loop. With --status_port, logs
// "status: http://HOST:PORT/status, the job's page: http://HOST:PORT/?token=TOKEN" (no token
// without a job secret) and gives the page's URL to `page.exchange`. A unix socket that cannot be made is one warning (the job
// runs without it, and nullptr is returned without TCP). Throws UsageError when the TCP port
// cannot be bound.
std::unique_ptr<StatusServer> serve_status(const LaunchConfig& config, EffectiveConfig& effective,
                                           const StatusBoard& board, boost::asio::io_context& agent_io,
                                           bool hosts_store, JobPageParts page = {});

}  // namespace ddp::launcher
