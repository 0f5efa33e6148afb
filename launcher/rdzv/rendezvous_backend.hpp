// The seam between the agent and how the launchers of a job meet: the built-in store
// (store_backend.hpp: node 0 hosts a TcpStoreServer for launchers and workers alike) or etcd
// (etcd/etcd_backend.hpp). The agent, the rounds and --dump_stacks use only this interface, so
// rounds, outcomes, elastic membership, restarts and the exit barrier are one code path for both,
// and every rule of a backend (leases, their TTLs, who hosts the workers' store) lives in its own
// folder. A backend is a BackendKind (below): its names, its round rules as data
// (config/backend_rules.hpp), what it takes from the command line, and the factory of its
// RendezvousBackend; launcher/backends.cpp lists them.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "ddplaunch/common/env_lookup.hpp"
#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/config/backend_rules.hpp"
#include "launcher/config/effective_config.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/rdzv/job_round.hpp"

namespace ddp::launcher {

// What a node knows when its part of the job ends (after the exit barrier of a success).
struct JobEnd {
  int exit_code = 0;
  bool over = false;        // the job ended for good: a success, or a failure with no restart left
  int next_round = 0;       // the round a late node would wait in
  bool store_host = false;  // this node hosted the job's store (hosts_store())
};

class RendezvousBackend {
 public:
  virtual ~RendezvousBackend() = default;

  // New connections to the store root (un-prefixed), one per call of the connector. Without
  // `connect_timeout` a connect may wait up to --rdzv_timeout for the store to come up; with it,
  // a store that does not answer within it is lost (the monitor of a running round). The
  // connector blocks and throws ddp::Error (ConnectionError, TimeoutError); thread-safe.
  virtual StoreConnector connector(std::optional<std::chrono::milliseconds> connect_timeout) = 0;

  // How the nodes of round `round` learn that one of them is gone: fills in `options`' liveness
  // factory (empty: heartbeats in the job's store) and what a lost store is called. May block for
  // one backend call; throws ddp::Error. Loop thread.
  virtual void set_liveness(JobMonitorOptions& options, int round) = 0;

  // Where the workers of a joined round dial their TCPStore: fills in `joined.master_addr` and
  // `master_port` (left empty: --master_addr and the launcher's store port), hosting the store
  // when this node is the one to. `job` is the job's view of the store; `loop` is the agent's
  // event loop, which may watch the store for the workers' first connection. Blocks up to
  // --rdzv_timeout; throws ddp::Error. Join thread.
  virtual void meet_workers_store(JoinedRound& joined, rendezvous::Store& root, rendezvous::Store& job,
                                  boost::asio::io_context& loop) = 0;

  // Round `round` (> 0) of the job is about to form, and a node of the round before may come back
  // in it from another address (a lost node's launcher started again, as a restarted Kubernetes
  // pod): the built-in store serves new connections from any address until that round forms,
  // when meet_workers_store admits only its nodes again. Others: nothing. Never throws. Join
  // thread.
  virtual void readmit_until_formed(int round) { (void)round; }

  // A round after the first is about to form and this node forms it (node_rendezvous.hpp: node 0
  // of a static round, the host of an elastic one), with every member's workers of the rounds
  // before exited: the workers' keys those left go now, where the workers meet in the launchers'
  // store (workers_keys.hpp), and so do the job's keys of the rounds before `first_round_kept`
  // (round_keys.hpp), which no node reads any more. Built-in store: every key outside the
  // launchers' namespace, and the job's "r<k>/" keys for k < first_round_kept; etcd: nothing
  // (meet_workers_store hosts a fresh workers' store each round). Blocks for a few store calls
  // per key deleted; throws ddp::Error. Join thread.
  virtual void clear_old_keys(int first_round_kept) = 0;

  // Whether this node, as group rank `group_rank`, hosts the job's store: it then waits for the
  // others at the exit barrier. Pure.
  virtual bool hosts_store(int group_rank) const = 0;

  // This node's part of the job ended: what the backend does then (etcd: turns away nodes waiting
  // for a next round and removes the job's keys). Never throws (a failure is logged). Loop thread.
  virtual void end_job(rendezvous::Store& job, const JobEnd& end) = 0;
};

// Makes a node's backend once, before its first round. May start what the backend needs (node
// 0's store, the TLS proxy to etcd) and record it in `effective` (the store's port, the open
// files limit before it was raised). `host_store` is false in tests that bring their own store.
// Throws UsageError (a port in use, a proxy that cannot start).
using BackendFactory = std::function<std::unique_ptr<RendezvousBackend>(const LaunchConfig& config,
                                                                        EffectiveConfig& effective, bool host_store)>;

// One rendezvous backend as the launcher knows it before it runs: enough for the command line to
// check --rdzv_backend and the flags that go with it (cli/rdzv_backend_choice.hpp) and for
// launcher/backends.cpp to make it.
struct BackendKind {
  // The --rdzv_backend values that choose it, in the order messages list them.
  std::vector<std::string_view> names;
  // Values that once chose a backend like it and are refused: "--rdzv_backend=<name> <why>".
  std::vector<std::string_view> refused_names;
  std::string_view refused_why;
  // What its rounds are like (config/backend_rules.hpp); copied into LaunchConfig::rdzv_rules.
  BackendRules rules;
  // Fills in what the backend takes from the command line and the environment (after
  // --rdzv_conf is applied, and its keys checked against the backend); empty: nothing. Throws
  // UsageError naming the value and the fix.
  std::function<void(LaunchConfig& config, const EnvLookup& env)> configure;
  BackendFactory make;
};

}  // namespace ddp::launcher
