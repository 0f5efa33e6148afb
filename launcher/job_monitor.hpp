// Two store-backed watchers that run beside a round of the job, each on its own connection:
//   - the outcome watcher parks a WAIT on the round's "outcome" key (an encoded Outcome, see
//     outcome.hpp: set by the first failure anywhere, or by the last node to succeed) and reports
//     its raw value once, undecoded;
//   - the heartbeat thread sets this node's heartbeat (a sequence number) every interval and
//     reports a node whose heartbeat stood still for longer than the timeout (or the store itself
//     failing).
// Callbacks run on the monitor's threads; the agent posts them to its loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "ddplaunch/rendezvous/store.hpp"

namespace ddp::launcher {

// Opens a new connection to the job's store (already prefixed for the job). Each monitor
// thread gets its own, so a parked WAIT does not hold up the others.
using StoreConnector = std::function<std::shared_ptr<rendezvous::Store>()>;

struct JobMonitorOptions {
  std::string outcome_key;       // e.g. "r0/outcome"
  std::string heartbeat_prefix;  // e.g. "r0/hb/"
  int node = 0;                  // this node's group rank
  int nnodes = 1;                // heartbeats run only when > 1
  std::chrono::milliseconds interval{1000};
  std::chrono::milliseconds timeout{10000};
};

class JobMonitor {
 public:
  using OnOutcome = std::function<void(const std::string& value)>;
  using OnLost = std::function<void(const std::string& message, bool store_lost)>;

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

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
  std::thread watcher_;
  std::thread heartbeat_;
};

}  // namespace ddp::launcher
