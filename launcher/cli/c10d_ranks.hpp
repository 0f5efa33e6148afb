// torchrun's c10d rendezvous without node ranks, as Kubeflow's elastic PyTorchJob starts it: every
// pod gets the same PET_RDZV_ENDPOINT (<job>-worker-0:<port>) and PET_NNODES, and no node rank.
// The node the endpoint names hosts the store (torchrun's rule: its host name, or one of its
// addresses); the nodes rank in order of arrival, the store's host first
// (LaunchConfig::rank_by_arrival).
#pragma once

#include <string>

#include "launcher/config/launch_config.hpp"

namespace ddp::launcher {

// Whether `host` (a name or an IP literal, IPv6 without brackets) is this machine: "localhost", a
// loopback address, this machine's host name (short or full), or an address of one of its
// interfaces (bindable here). Blocks for one name lookup at most; a name that does not resolve
// (yet: a Kubernetes service published late) is another machine. Never throws.
bool names_this_machine(const std::string& host);

// For --rdzv_backend c10d with several nodes and no node rank given: sets rank_by_arrival, and
// node_rank to 0 when master_addr (the endpoint's host) names this machine, else 1 (a
// placeholder: ranks come from arrival). Logs which. Never throws.
void apply_c10d_ranks(LaunchConfig& config);

}  // namespace ddp::launcher
