// Volcano's `pytorch` job plugin (volcano-sh/volcano, pkg/controllers/job/plugins/distributed-
// framework/pytorch/pytorch.go) gives every container of the job's pods:
//   MASTER_ADDR  the master pod's DNS name, "<job>-master-0.<job>" (or its hostname.subdomain);
//   MASTER_PORT  the plugin's --port, 23456 by default;
//   WORLD_SIZE   the number of master and worker pods: nodes, not processes;
//   RANK         0 for the master pod, the pod's index + 1 for a worker pod: a node rank;
// and no PET_* variable. The plugin forces Volcano's `svc` plugin, which adds VC_<TASK>_HOSTS and
// VC_<TASK>_NUM for every task (VC_MASTER_NUM, VC_WORKER_NUM with the default task names); the
// optional `env` plugin adds VC_TASK_INDEX and VK_TASK_INDEX. One launcher per pod reads them as
// nnodes / node_rank / the store's address; the workers get their own RANK and WORLD_SIZE
// (every process's), never the pod's.
#pragma once

#include "ddplaunch/common/env_lookup.hpp"
#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Whether this pod was set up by Volcano's pytorch plugin: WORLD_SIZE, RANK, MASTER_ADDR and
// MASTER_PORT set, no PET_NNODES or PET_NODE_RANK (Kubeflow's), and one of Volcano's own marks:
// VC_MASTER_NUM or VC_WORKER_NUM (the svc plugin, default task names), VC_TASK_INDEX or
// VK_TASK_INDEX (the env plugin). Pure.
bool under_volcano(const EnvLookup& env);

// Sets min/max nodes from WORLD_SIZE, node_rank from RANK, and, unless given on the command line
// (`addr_given`, `port_given`), master_addr and master_port from MASTER_ADDR and MASTER_PORT.
// Logs one info line saying so. Throws UsageError naming a variable that is not a whole number,
// or a RANK outside 0..WORLD_SIZE-1. Call only when under_volcano(env).
void apply_volcano_environment(const EnvLookup& env, bool addr_given, bool port_given, LaunchConfig& config);

}  // namespace ddp::launcher
