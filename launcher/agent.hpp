// The per-node agent: rendezvous → start workers → monitor → tear down / restart → exit code.
//
// Threads: the calling thread runs one Asio event loop that owns the worker group (through a
// ProcessContext), forwarded signals and the shutdown timer. Blocking store calls run elsewhere:
// the rendezvous on a helper thread, the outcome watcher and the heartbeats in a JobMonitor,
// each posting events to the loop. Node 0 also hosts the TcpStoreServer on its own thread.
//
// Per round r (restarts and elastic membership changes start a new round):
//   1. join the round (node_rendezvous.hpp) and get the rank map;
//   2. start the workers and the JobMonitor;
//   3. the first local failure publishes "r<r>/outcome" = "failure <code>\n<summary>" and stops
//      the local workers (SIGTERM, --shutdown_timeout, SIGKILL); every other node sees the
//      outcome and stops its workers too;
//   4. a node whose workers all exited 0 increments "r<r>/succeeded"; the last one sets the
//      outcome to "success";
//   5. after a failure, with restarts left, every node goes to round r+1; otherwise it exits.
#pragma once

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>

#include "launcher/job_monitor.hpp"
#include "launcher/launch_config.hpp"
#include "launcher/process_context.hpp"

namespace ddp::launcher {

// What the agent talks to; defaults are the real ones. Tests pass an in-memory store and a
// fake process context.
struct AgentDeps {
  std::function<std::unique_ptr<ProcessContext>(boost::asio::io_context&, OutputPolicy)> processes;
  // New connection to the store root (un-prefixed); default: a TcpStoreClient to the master.
  StoreConnector connect_root;
  // Whether node 0 hosts a TcpStoreServer at --master_addr:--master_port (off in tests).
  bool host_store = true;
  // Whether to check the program and addresses before starting (off for fake processes).
  bool preflight = true;
};

// Runs the job described by `config` (validated) on this node and returns the exit code:
// 0 success; the root-cause worker's code, or 128+N if it died of signal N; 130 after SIGINT
// (128+N for another stopping signal); 2 for bad usage or conflicting nodes; 1 when a peer
// launcher or the store was lost. Prints the failure summary on stderr. Blocks until done.
int run_agent(const LaunchConfig& config, AgentDeps deps = {});

// --dry-run: the rank map (this node's view, every node with this nproc), each worker's command
// and the environment ddplaunch sets, on stdout. Returns 0.
int print_dry_run(const LaunchConfig& config);

}  // namespace ddp::launcher
