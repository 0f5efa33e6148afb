// ddplaunch-store: runs the TCPStore server alone in the foreground, for debugging, benchmarks
// and users who host the store on a separate machine. Prints the bound address, stops cleanly
// on SIGINT/SIGTERM (exit 0), exits 2 with a one-line message on bad flags or a taken port.
// Every rank holds a connection, so it raises its soft descriptor limit to the hard one at start
// (a common soft limit of 1024 would otherwise stop it near 1000 ranks).
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <boost/asio/signal_set.hpp>

#include "rendezvous/error.hpp"
#include "rendezvous/exit_codes.hpp"
#include "rendezvous/open_file_limit.hpp"
#include "rendezvous/tcp_store_server.hpp"

int main(int argc, char** argv) {
  namespace rdzv = ddp::rendezvous;
  CLI::App app{"ddplaunch-store: a standalone PyTorch-compatible TCPStore server"};
  rdzv::TcpStoreServerOptions options;
  options.host = "";
  int port = 29500;
  bool quiet = false;
  app.add_option("--host", options.host, "address to listen on (default: every address, IPv6 and IPv4)");
  app.add_option("--port", port, "TCP port (0 picks a free one)")->check(CLI::Range(0, 65535))->capture_default_str();
  app.add_option("--backlog", options.backlog, "listen backlog (default: net.core.somaxconn)")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("-q,--quiet", quiet, "do not log closed connections");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "ddplaunch-store: " << e.what() << "; see --help\n";
    return ddp::kExitUsage;
  }
  options.port = static_cast<std::uint16_t>(port);
  rdzv::raise_open_file_limit();
  if (quiet) options.log = [](std::string_view) {};
  try {
    rdzv::TcpStoreServer server(options);
    boost::asio::signal_set signals(server.context(), SIGINT, SIGTERM);
    signals.async_wait([&](const boost::system::error_code& ec, int signo) {
      if (ec) return;
      std::cerr << "ddplaunch-store: " << (signo == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
      server.stop();
    });
    std::cout << "ddplaunch-store: listening on " << server.address() << std::endl;
    server.run();
    return ddp::kExitOk;
  } catch (const rdzv::BindError& e) {
    std::cerr << "ddplaunch-store: " << e.what() << "\n";
    return ddp::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "ddplaunch-store: " << e.what() << "\n";
    return ddp::kExitFailure;
  }
}
