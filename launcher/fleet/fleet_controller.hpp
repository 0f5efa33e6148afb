// The controller's event loop once the preflight has passed (fleet_launch.hpp, steps 4 to 6):
// one ssh per host, all started at once, each handed its channel's header; their lines relayed
// whole; stop signals turned into messages on the channels, then into their end, then into
// SIGKILL of ssh; a static job's lost host (or node 0's, or node 0 failing) stopping the rest;
// the job's exit code at the end.
// Runs on the calling thread; not thread-safe.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/config/launch_config.hpp"
#include "launcher/fleet/host_command.hpp"
#include "launcher/fleet/ssh_session.hpp"

namespace ddp::launcher {

struct FleetControllerOptions {
  FleetPlan plan;           // the hosts and what their commands share, master_port settled
  std::string secret;       // this launch's job secret
  Environment forwarded;    // what every host's launcher is given (forwarded_env.hpp)
  Environment ssh_env;      // ssh's own environment
};

class FleetController {
 public:
  FleetController(const LaunchConfig& config, FleetControllerOptions options);

  // Starts every host's ssh and blocks until all have ended. Returns the job's exit code: node
  // 0's launcher's unless ssh to it failed (255), then another node's; 1 when the job was
  // stopped for a lost host (any host of a static job, node 0's of an elastic one) or every
  // connection was lost. Throws StartError when ssh cannot be
  // started.
  int run();

 private:
  void on_host_end(std::size_t index, int code);
  void on_stop_signal(int signo);
  void tell_all(int signo);
  void wait_children();
  void wait_stops();
  int exit_code() const;

  const LaunchConfig& config_;
  FleetControllerOptions options_;
  boost::asio::io_context io_;
  boost::asio::signal_set children_{io_, SIGCHLD};
  boost::asio::signal_set stops_{io_, SIGINT, SIGTERM, SIGHUP};
  boost::asio::steady_timer escalate_{io_};
  std::vector<std::unique_ptr<SshSession>> sessions_;
  std::size_t ended_ = 0;
  int stop_signals_ = 0;
  bool told_to_stop_ = false;  // every host was told to stop (a signal, a lost host, node 0 failed)
  bool lost_host_ = false;  // a static job's host lost its ssh connection: the job was stopped for it
};

}  // namespace ddp::launcher
