// What a node settles once, before its first round: the checks that fail fast (the program, the
// addresses), the log root, and its rendezvous backend (on node 0, the hosted store). The result,
// an EffectiveConfig, is what the agent uses from then on instead of recomputing it.
#pragma once

#include <memory>
#include <string>

#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"

namespace ddp::launcher {

// This run's own directory, <base>/<run_id>_<random> as torchrun names it, so that a second run
// with the same --log_dir never overwrites the first's logs. The base is --log_dir, else $TMPDIR
// or /tmp (LaunchConfig::temp_dir): every worker gets an error file (TORCHELASTIC_ERROR_FILE)
// there, as torchrun's $TMPDIR/torchelastic_*; redirected or teed streams without --log_dir go
// there too.
struct PlannedRunDir {
  std::string base;
  std::string name_template;  // <base>/<run_id>_XXXXXX: set_up_node() makes it with mkdtemp
  bool temporary = false;     // it holds only error files (removed after a success)
};
// Pure; thread-safe.
PlannedRunDir planned_run_dir(const LaunchConfig& config);

// This machine's name as the launcher uses it (the rank map, messages, ${hostname} in the line
// prefix): gethostname(2), "localhost" when it has none. Does not block; thread-safe.
std::string node_host_name();

// The node's settled facts that need no side effect, into `effective`: its name, the port, the
// environment (read once), the Python interpreter and the --numa_binding plan. set_up_node and
// --dry-run both start here. Reads the environment, PATH and the topology; does not block
// otherwise. Throws UsageError for a --numa_binding the machine cannot honour.
void settle_node(const LaunchConfig& config, EffectiveConfig& effective);

struct NodeSetupOptions {
  bool preflight = true;   // check the program and addresses (off for fake processes)
  bool host_store = true;  // the backend may host a store (off in tests that bring their own)
};

// Resolves the effective configuration into `effective`, makes the node's rendezvous backend with
// `backend` (node 0's store or the TLS proxy to etcd start here) and this run's log directory.
// Blocks only for name lookups and what the backend starts. Throws UsageError (exit 2) for a
// program that cannot run, an address that does not resolve, a port already in use, or a log
// directory that cannot be made. The backend keeps a reference to `effective`.
std::unique_ptr<RendezvousBackend> set_up_node(const LaunchConfig& config, const NodeSetupOptions& options,
                                               const BackendFactory& backend, EffectiveConfig& effective);

}  // namespace ddp::launcher
