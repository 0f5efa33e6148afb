// Two store-backed watchers that run beside a round of the job, each on its own connection:
//   - the outcome watcher parks a WAIT on the round's "outcome" key (an encoded Outcome, see
//     outcome.hpp: set by the first failure anywhere, or by the last node to succeed) and reports
//     its raw value once, undecoded;
//   - the liveness thread reports a node of the round that is gone (or the store itself failing).
//     By default a beater thread sets this node's heartbeat (a sequence number) every interval on
//     a connection of its own, and the liveness thread reads the others' every interval on
//     another, and reports a node whose heartbeat stood still for longer than the timeout,
//     counting only time in which this launcher's own check ran on time (a check that woke late,
//     or whose store reply came late, blames nobody); the etcd rendezvous uses a lease per node
//     instead (etcd_node_lease.hpp), through JobMonitorOptions::liveness.
// Callbacks run on the monitor's threads; the agent posts them to its loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

// Opens a new connection to the job's store (already prefixed for the job). Each monitor
// thread gets its own (three with the default liveness), so a parked WAIT or a slow reply does
// not hold up the others.
using StoreConnector = std::function<std::shared_ptr<rendezvous::Store>()>;

// A node of the round found gone; `store_lost` when it took the job's store with it.
struct NodeLoss {
  std::string message;  // e.g. "lost node 1: no heartbeat for 10 s"
  bool store_lost = false;
  int node = -1;  // the node that stopped answering (-1: the store, or not known)
  // When it went silent: its last heartbeat seen (within one interval); the epoch when not known.
  std::chrono::system_clock::time_point silent_since{};
};

// How the nodes of a round learn that one of them is gone.
class NodeLiveness {
 public:
  virtual ~NodeLiveness() = default;
  // Blocks: shows this node alive and watches the others until a node is lost (returned) or
  // interrupt() (nullopt). Throws ddp::Error when the store fails.
  virtual std::optional<NodeLoss> run() = 0;
  // Makes run() return promptly, also when called before it. Thread-safe, non-blocking.
  virtual void interrupt() = 0;
  // A watched node that has stopped answering but is not lost yet: silent since before `t`, its
  // heartbeat standing still for at least two intervals, still silent or back for at most a
  // heartbeat timeout before `t` (the earliest such node); nullopt when
  // none is, or when this liveness cannot tell (etcd's leases only say when one ran out). Unlike
  // the loss, this counts every second, late checks too: it only says which failure came first
  // (a rank that failed of the silence), it stops nothing. Thread-safe, non-blocking.
  virtual std::optional<NodeLoss> silent_before(std::chrono::system_clock::time_point t) const {
    (void)t;
    return std::nullopt;
  }
};

// A node's last heartbeat when it left the job early with its workers all succeeded (the exit
// barrier's bound, agent/agent_exit_barrier.cpp): the others stop watching it rather than count
// it lost.
inline constexpr std::string_view kLeftBeat = "left";

struct JobMonitorOptions;
// Makes the liveness of one round; called on the monitor's thread (it may block, and throw
// ddp::Error).
using LivenessFactory = std::function<std::unique_ptr<NodeLiveness>(const JobMonitorOptions&)>;

struct JobMonitorOptions {
  std::string outcome_key;       // e.g. "r0/outcome"
  std::string heartbeat_prefix;  // e.g. "r0/hb/"
  int node = 0;                  // this node's group rank
  int nnodes = 1;                // heartbeats run only when > 1
  // Only nodes 0..watched-1 are checked (the active ones; a standby's loss stops nothing);
  // 0: all nnodes. Every node beats.
  int watched = 0;
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{10000};
  // Empty: heartbeat values in the job's store, on a connection of their own.
  LivenessFactory liveness;
  // What the watcher names when its store fails, e.g. "lost the store on node 0".
  std::string store_lost = "lost the store on node 0";
};

class JobMonitor {
 public:
  using OnOutcome = std::function<void(const std::string& value)>;
  using OnLost = std::function<void(const NodeLoss& loss)>;

  // Starts the threads. Never blocks.
  JobMonitor(StoreConnector connect, JobMonitorOptions options, OnOutcome on_outcome, OnLost on_lost);
  // stop() and join.
  ~JobMonitor();
  JobMonitor(const JobMonitor&) = delete;
  JobMonitor& operator=(const JobMonitor&) = delete;

  // Makes both threads end and joins them. After it returns no callback runs. The outcome watcher
  // only wakes when the outcome key is set or its store call fails: stop() calls
  // Store::interrupt() on the watcher's connection, which breaks a TCP connection but does
  // nothing to an in-process store (MemoryStore), so with one callers set the key first or
  // stop() blocks until they do. The agent always sets it first. Idempotent.
  void stop();

  // NodeLiveness::silent_before() of the running liveness; nullopt before it runs. Thread-safe.
  std::optional<NodeLoss> silent_before(std::chrono::system_clock::time_point t) const;

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::thread watcher_;
  std::thread liveness_;
};

}  // namespace ddp::launcher
