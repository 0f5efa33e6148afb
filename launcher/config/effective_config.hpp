// What a node settles once, before its first round (agent/node_setup.hpp), and every part uses
// from then on instead of recomputing it from the LaunchConfig. Plain data.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "launcher/config/python_interpreter.hpp"

namespace ddp::launcher {

class EtcdJobLease;

struct EffectiveConfig {
  std::string host;                 // this machine's host name, for messages and the rank map
  int port = 0;                     // the store's real port (node 0 may have bound port 0)
  std::string log_root;             // this run's <--log_dir or /tmp>/<run_id>_<random> (node_setup.cpp)
  bool temporary_log_root = false;  // it holds only the error files: removed after a success
  long long open_files_limit = -1;  // before hosting the store raised it; workers get it back
  PythonInterpreter python;         // runs a .py program or -m module (python_interpreter.hpp)
  // --rdzv_backend etcd-v3: the job's lease in etcd, shared by this launcher's connections (made
  // at the first connect); nullptr otherwise.
  std::shared_ptr<EtcdJobLease> etcd_lease;
  // etcd-v3: where the etcd client connects: the members, or with TLS the proxy's loopback ports.
  std::vector<std::string> etcd_endpoints;
};

}  // namespace ddp::launcher
