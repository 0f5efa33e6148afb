// What a node settles once, before its first round (agent/node_setup.hpp), and every part uses
// from then on instead of recomputing it from the LaunchConfig. Plain data.
#pragma once

#include <string>
#include <vector>

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/cpu_binding.hpp"
#include "launcher/config/python_interpreter.hpp"

namespace ddp::launcher {

struct EffectiveConfig {
  // The launcher's environment, read once: what the workers inherit and what the node's checks
  // and timers read (the launcher never changes its own).
  Environment env;
  std::string host;                 // this machine's host name, for messages and the rank map
  int port = 0;                     // the store's real port (node 0 may have bound port 0)
  std::string log_root;             // this run's <--log_dir or /tmp>/<run_id>_<random> (node_setup.cpp)
  bool temporary_log_root = false;  // it holds only the error files: removed after a success
  long long open_files_limit = -1;  // before hosting the store raised it; workers get it back
  PythonInterpreter python;         // runs a .py program or -m module (python_interpreter.hpp)
  std::string status_socket;        // the live status endpoint's unix socket ("": none; status/)
  // --numa_binding: each local rank's CPUs (topology/numa_plan.hpp); empty: off.
  std::vector<CpuBinding> cpu_bindings;
};

}  // namespace ddp::launcher
