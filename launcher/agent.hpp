// The per-node agent: rendezvous → start workers → monitor → tear down / restart → exit code.
//
// Threads: the main thread runs one Asio event loop that owns the workers (SIGCHLD, their pipes,
// forwarded signals, the shutdown timer). Blocking store calls run elsewhere: the rendezvous on
// a helper thread, the job-outcome watcher (a parked WAIT on the round's "outcome" key) and the
// heartbeat thread each on their own store connection, posting events to the loop.
// Node 0 also hosts the TcpStoreServer on its own thread.
#pragma once

#include "launcher/launch_config.hpp"

namespace ddp::launcher {

// Runs the job described by `config` (validated) and returns the process exit code:
// 0 success; the root-cause worker's code, or 128+N if it died of signal N; 130 after SIGINT
// (128+N for another handled signal); 2 for configuration conflicts between nodes; 1 when a
// peer launcher was lost or the store failed. Prints the failure summary on stderr.
int run_agent(const LaunchConfig& config);

// --dry-run: the rank map (this node's view, assuming every node has this nproc), each worker's
// command and environment, on stdout. Returns 0.
int print_dry_run(const LaunchConfig& config);

}  // namespace ddp::launcher
