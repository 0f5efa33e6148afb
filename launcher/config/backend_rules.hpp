// What a rendezvous backend's rounds are like, as plain data: the rules the rounds
// (rdzv/job_round.hpp, rdzv/round_joiner.hpp), the hosted store (rdzv/hosted_store.hpp), the
// machine's job registry (status/job_registry.hpp) and validate() (cli/validate.hpp) ask of it,
// so that none of them asks which backend it is. Each backend gives its rules
// (RendezvousBackend's BackendKind, rdzv/rendezvous_backend.hpp), known before it connects: the
// command line copies the chosen backend's into LaunchConfig::rdzv_rules. The defaults are the
// built-in store's (a LaunchConfig made without the command line, as in tests, meets there).
#pragma once

#include <string_view>

namespace ddp::launcher {

struct BackendRules {
  // Node 0 hosts the one store the launchers meet in and the workers dial, at --master_addr:
  // --master_port: it is what --dump_stacks reaches and what the job registry records, one node
  // reaches it in process, and --master_port 0 (a free port) is for one node only. False: the
  // launchers meet elsewhere (`meeting_place`), and each round's group rank 0 hosts a fresh
  // workers' store and publishes its address: it listens on every interface unless --rdzv_conf
  // bind says otherwise, on a free port unless --master_port is given.
  bool node0_hosts_store = true;
  // What messages call the place the launchers meet when node 0 does not host it: the endpoint
  // of a round reads "<meeting_place> <--rdzv_endpoint>" ("etcd 10.0.0.5:2379"). "" with
  // node0_hosts_store: node 0's store, "host:port".
  std::string_view meeting_place;
  // Group ranks follow the order in which nodes arrive (--node_rank is not needed); false: a
  // static round's ranks are the --node_rank values (--rank_by_arrival still asks for arrival).
  bool ranks_by_arrival = false;
  // Every node that comes to a round with the job (its start or a restart) may close an elastic
  // round, once (a compare-set); a node that arrived late may not. False: only node 0.
  bool any_node_closes = false;
  // Every round forms the elastic way, even for --nnodes=N (MIN = MAX): the nodes that excluded
  // themselves are named, and a node's health failure is told as an elastic one.
  bool always_elastic = false;
  // Flags the backend does not work with; validate() names the backend and the fix.
  bool refuses_active_nodes = false;
  bool refuses_standalone = false;
  bool refuses_dump_stacks = false;

  bool operator==(const BackendRules&) const = default;
};

}  // namespace ddp::launcher
