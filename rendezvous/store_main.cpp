// ddplaunch-store: runs the TCPStore server alone in the foreground, for debugging, benchmarks
// and users who host the store on a separate machine. Prints the bound address, stops cleanly
// on SIGINT/SIGTERM (exit 0), exits 2 with a one-line message on bad flags (e.g. a --memory_budget
// that is not a size of at least 1 MiB) or a taken port.
// Every rank holds a connection, so it raises its soft descriptor limit to the hard one at start
// (a common soft limit of 1024 would otherwise stop it near 1000 ranks).
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "common/signals.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "rendezvous/memory_budget.hpp"

int main(int argc, char** argv) {
  namespace rdzv = ddp::rendezvous;
  namespace log = ddp::log;
  log::set_program("ddplaunch-store");
  CLI::App app{"ddplaunch-store: a standalone PyTorch-compatible TCPStore server"};
  rdzv::TcpStoreServerOptions options;
  options.host = "";
  int port = 29500;
  bool quiet = false;
  app.add_option("--host", options.host, "address to listen on (default: every address, IPv6 and IPv4)");
  app.add_option("--port", port, "TCP port (0 picks a free one)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--backlog", options.backlog, "listen backlog (default: net.core.somaxconn)")
      ->check(CLI::NonNegativeNumber);
  std::size_t memory_budget = options.memory_budget;
  app.add_option("--memory_budget,--memory-budget", memory_budget,
                 "memory for stored data, partial requests and unsent replies together, e.g. 512MiB or 2G "
                 "(default 1GiB, at least 1MiB); the client that would pass it is disconnected")
      ->transform(CLI::AsSizeValue(false))
      ->check(
          [](const std::string& bytes) -> std::string {
            // After the transform: a plain number of bytes.
            if (std::stoull(bytes) >= rdzv::MemoryBudget::kMinLimit) return "";
            return "the store's memory budget must be at least 1MiB, got " + bytes + " bytes";
          },
          "at least 1MiB");
  app.add_flag("-q,--quiet", quiet, "do not log closed connections");
  std::string log_level;
  app.add_option("--log_level,--log-level", log_level,
                 "debug, info, warning or error (default info, or DDPLAUNCH_LOG_LEVEL)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    log::error("{}; see --help", e.what());
    return ddp::kExitUsage;
  }
  try {
    log::set_level_from_env();
    if (!log_level.empty()) log::set_level(log::parse_level(log_level));
  } catch (const ddp::UsageError& e) {
    log::error("{}", e.what());
    return ddp::kExitUsage;
  }
  options.port = static_cast<std::uint16_t>(port);
  options.memory_budget = memory_budget;
  ddp::raise_open_file_limit();
  if (quiet) options.log = [](std::string_view) {};
  try {
    rdzv::TcpStoreServer server(options);
    boost::asio::signal_set signals(server.context(), SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      log::info("{}, stopping", ddp::signal_name(signo));
      server.stop();
    });
    std::cout << "ddplaunch-store: listening on " << server.address() << std::endl;
    server.run();
    return ddp::kExitOk;
  } catch (const rdzv::BindError& e) {
    log::error("{}", e.what());
    return ddp::kExitUsage;
  } catch (const std::exception& e) {
    log::error("{}", e.what());
    return ddp::kExitFailure;
  }
}
