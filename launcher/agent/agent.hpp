// The per-node agent: rendezvous → start workers → monitor → tear down / restart → exit code.
//
// Threads: the calling thread runs one Asio event loop that owns the worker group (through a
// ProcessContext), forwarded signals and the shutdown timer. Blocking store calls run elsewhere:
// the rendezvous on a helper thread, the outcome watcher and the heartbeats in a JobMonitor,
// each posting events to the loop. Node 0 also hosts the TcpStoreServer on its own thread.
//
// Per round r (restarts and elastic membership changes start a new round):
//   1. join the round (node_rendezvous.hpp) and get the rank map;
//   2. start the workers and the JobMonitor;
//   3. the first local failure compare-sets "r<r>/outcome" to a failure Outcome (outcome.hpp:
//      code, summary, origin node) and stops the local workers (SIGTERM, --shutdown_timeout,
//      SIGKILL); every other node sees the outcome and stops its workers too;
//   4. a node whose workers all exited 0 sets "r<r>/done/<g>"; one that then sees every node's
//      record sets a success Outcome (job_round.hpp, count_in). A node exits 0 only on a success while its own workers
//      all exited 0; a malformed outcome, or a success while its workers run, stops it with exit 1;
//      one that waits longer than --exit_barrier_timeout for the others leaves with exit 0, its
//      last heartbeat saying so, unless it hosts their store (agent_exit_barrier.cpp);
//   5. after a failure, each node prints its short cause and, with --max_no_progress_restarts, the
//      nodes agree whether the round made progress, on a helper thread (agent_restarts.cpp,
//      progress_exchange.hpp, progress_exchange_thread.hpp);
//      K restarts in a row without progress end the job on every node (kExitNoProgress);
//   6. after a failure, with restarts left, every node goes to round r+1; otherwise it exits,
//      through the exit barrier (job_round.hpp, leave_job): the store's host waits, bounded, until
//      the others have read the outcome and counted out, unless a node or the store was lost.
// Where a round stands on this node (joining, running, succeeded, stopping, over) and why it
// stops are kept by a RoundStatus (round_status.hpp), which checks every transition.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/agent/node_setup.hpp"
#include "launcher/agent/progress_exchange_thread.hpp"
#include "launcher/agent/progress_tracker.hpp"
#include "launcher/agent/round_status.hpp"
#include "common/exit_codes.hpp"
#include "launcher/agent/straggler_watch.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/events/round_events.hpp"
#include "launcher/events/run_recorder.hpp"
#include "launcher/rdzv/job_monitor.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/rendezvous_backend.hpp"
#include "launcher/rdzv/round_joiner.hpp"
#include "launcher/rdzv/round_keys.hpp"
#include "launcher/rdzv/self_exclusion.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/report/node_failures.hpp"
#include "launcher/report/oom_check.hpp"
#include "launcher/report/restart_history.hpp"
#include "launcher/report/round_report.hpp"
#include "launcher/status/job_registry.hpp"
#include "launcher/status/page_stacks.hpp"
#include "launcher/status/status_board.hpp"
#include "launcher/status/status_exchange.hpp"
#include "launcher/status/status_server.hpp"
#include "launcher/watch/held_workers.hpp"
#include "launcher/watch/worker_watch.hpp"
#include "launcher/workers/console_writer.hpp"
#include "launcher/workers/process_context.hpp"

namespace ddp::launcher {

// What the agent talks to; defaults are the real ones. Tests pass an in-memory store and a
// fake process context.
struct AgentDeps {
  std::function<std::unique_ptr<ProcessContext>(boost::asio::io_context&, OutputPolicy)> processes;
  // How the launchers meet (rdzv/rendezvous_backend.hpp); default: the built-in store
  // (StoreBackend), over connect_root when that is given.
  BackendFactory backend;
  // New connection to the store root (un-prefixed) for the built-in store; default: a
  // TcpStoreClient to the master. Tests pass an in-memory store.
  StoreConnector connect_root;
  // Whether the backend may host a store (node 0's TcpStoreServer; off in tests).
  bool host_store = true;
  // Whether to check the program and addresses before starting (off for fake processes).
  bool preflight = true;
  // Runs before every round on the join thread; a node that fails it exits 69 (rdzv/self_exclusion.hpp).
  // Default: the node's health checks (health/node_health.hpp) when `preflight`, else none.
  HealthGate health;
  // The job's lifetime (workers/job_lifetime.hpp; main's), where the default health gate runs the
  // site's command as it runs the workers; null: the command in its own process group only.
  JobLifetime* lifetime = nullptr;
  // Called once when the event loop has ended and no worker needs watching any more (the last
  // one was reaped, or was sent SIGKILL): main's JobLifetime then has its reaper end the job while
  // the agent tears down (status endpoint, run directory, leaving the job). Never blocks.
  std::function<void()> workers_done;
  // More listeners of the round's events (events/round_events.hpp), after the agent's own (the
  // event log and summary, the live status); each must outlive the agent.
  std::vector<RoundListener*> listeners;
};

// The agent of one node: one Asio event loop (the calling thread of run()) that owns the round
// state, the worker group, forwarded signals and the shutdown timer; helper threads (the
// RoundJoiner, the JobMonitor, the no-progress exchange, the hosted store) only post events to it. Not thread-safe: one
// run() per object. run_agent() is the way to use it.
class Agent {
 public:
  // Sets the log sink to this agent's console writer (until destruction). Does not block.
  Agent(const LaunchConfig& config, AgentDeps deps);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  // Runs the job on this node; see run_agent().
  int run();

 private:
  std::string key(const std::string& name) const { return round_prefix(view_.round) + name; }
  // A connection for the monitor of a running round, bounded by the heartbeat timeout.
  std::shared_ptr<rendezvous::Store> connect_job();
  // Posts an event from a helper thread; it is dropped if the round it belongs to is over.
  void post_for_round(int round, std::function<void()> event);

  bool prepare();
  // The timeouts' nesting warnings, and their table (config/failure_budget.hpp) with --log_level
  // info or debug, or --failure_budget.
  void say_timeouts() const;
  void wait_signals();
  void on_signal(int signo);
  void start_round();
  void on_joined(const JoinedRound& joined);
  // Whether this node stands by in the joined round (--active_nodes): then it has set the round
  // up without workers, to wait for the outcome; else it says so if it stood by before
  // (`was_standby`; agent_standby.cpp).
  bool stands_by(bool was_standby);
  void start_monitor();
  // agent_stragglers.cpp: makes the watch (prepare), starts it with the round's workers, stops it
  // with the round (without waiting for its threads), and shows its scores.
  void prepare_stragglers();
  void watch_stragglers(const std::vector<WorkerSpec>& specs, const std::vector<int>& pids);
  void stop_stragglers();
  void on_stragglers(const StragglerScores& scores, const std::vector<StragglerChange>& changes);
  // --stragglers=exclude|replace: this node, flagged, excludes itself from the next round (the
  // gate's answer), and with replace stops the round after --straggler_replace_after.
  void act_on_stragglers(const StragglerScores& scores);
  HealthGate straggler_gate(HealthGate inner);
  // Records the job in this machine's registry (--dump_stacks, --status find it), once: in the
  // first round this node takes part in, with workers or standing by; starts the status server
  // first when prepare() did not (no --status_port).
  void register_once();
  void on_worker_exit(const WorkerResult& w);
  // Whether a worker that ended after the round began to stop was stopped by us (our signals, or
  // the forwarded stopping signal) rather than failing on its own.
  bool stopped_by_us(const WorkerResult& w) const;
  // The failure context of this node's workers.
  FailureContext failure_context() const;
  // The summary printed when the round ends, and its root cause as a record: the local report
  // when the root cause is ours, else the other node's report followed by what happened here.
  RoundSummary final_summary(const Outcome& cause) const;
  void on_outcome(const std::string& value);
  void on_lost(const NodeLoss& loss);
  // --hang_timeout's report: logged when suspected; a collective hang fails the job (kExitHang).
  void on_hang(const HangReport& report);
  // Records this node's failure for the other nodes (node_failures.hpp), when there are others;
  // a store that cannot take it is said once on the console.
  void publish_failure(const NodeFailure& failure);
  // Stops the round for `cause` (the first one wins): tells the other nodes when `publish`,
  // signals the local workers, and SIGKILLs them after --shutdown_timeout (--preemption_grace
  // when the launcher received a stopping signal).
  void stop_round(Outcome cause, bool restartable, bool publish);
  // agent_held.cpp: sends the workers SIGKILL and, if some are still there --unkillable_timeout
  // later (on_held), names them, gives up on them and keeps this host out of the job.
  void kill_workers();
  void on_held();
  // After a round whose workers the kernel held: the job ends here with kExitUnkillable; when the
  // other nodes go on to another round (`restarting`), this node joins it only to exclude itself
  // there (held_gate), so that they learn at once that it is out.
  void leave_held(bool restarting);
  // The health gate of every round: a node whose workers the kernel held excludes itself (its
  // line for the others, rdzv/self_exclusion.hpp); else `inner`, when given. Runs on the join thread.
  HealthGate held_gate(HealthGate inner);
  // The code the job ends with: kExitUnkillable once the kernel held a worker, else `code`.
  int unless_held(int code) const { return held_.empty() ? code : kExitUnkillable; }
  // --preemption_grace when the launcher received SIGTERM (a preemption), else `otherwise`.
  std::chrono::milliseconds preemption_grace_or(std::chrono::milliseconds otherwise) const;
  void check_round_end();
  // This node's workers all succeeded and others' run on: waits --exit_barrier_timeout on the
  // loop (the status endpoint and /healthz answer meanwhile), then leave_early() (agent_exit_barrier.cpp).
  void start_exit_barrier();
  void leave_early();
  void end_round();
  // agent_restarts.cpp: keeps the round's process context (its handlers may still be queued) and
  // frees those of the rounds before that have settled (ProcessContext::settled), so that the
  // contexts kept, each woken by every SIGCHLD, do not pile up with the restarts.
  void retire_processes();
  // agent_restarts.cpp: the restart loop's part of end_round. Records the failed round (its root
  // cause from `summary`, the round's summary) and, for a round that may restart with
  // --max_no_progress_restarts, agrees with the other nodes on its progress off the loop
  // (progress_exchange_thread.hpp: until every node has measured, up to --shutdown_timeout +
  // --heartbeat_timeout + 2 s). `collectives`: how far this node's collectives got. Then calls
  // `then` on the loop with whether the breaker stops the job (not when a signal ended it first).
  void note_failed_round(const Outcome& cause, const RoundSummary& summary, std::optional<long long> collectives,
                         std::function<void(bool breaker_trips)> then);
  void settle_progress(std::optional<long long> collectives, std::function<void(std::optional<ProgressVerdict>)> then);
  // Prints the short cause and "restarting the job (restart i of N)", then starts the next round.
  void restart_job();
  // Prints the final summary (`summary`, the list of every failed round, the breaker's stop when
  // it tripped) and ends with `code`.
  void end_job(const std::string& summary, int code);
  // Compare-sets the round's outcome; returns the value now in the store ("" if unreachable).
  std::string publish(const Outcome& outcome, bool quiet = false);
  void finish(int code);
  // Removes this run's directory when it holds only error files (no --log_dir, no redirects).
  void discard_error_files();

  // A copy: prepare() turns a guessed store host into a client when another launcher on this
  // machine already hosts the store (LaunchConfig::store_host_guessed).
  LaunchConfig c_;
  AgentDeps deps_;
  ConsoleWriter console_;
  boost::asio::io_context io_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer kill_timer_;
  boost::asio::steady_timer held_timer_;  // --unkillable_timeout after SIGKILL
  boost::asio::steady_timer exit_barrier_timer_;  // --exit_barrier_timeout (agent_exit_barrier.cpp)
  boost::asio::steady_timer straggler_timer_;     // starts a round's straggler watch (agent_stragglers.cpp)
  EffectiveConfig eff_;                         // resolved once by prepare()
  std::unique_ptr<RendezvousBackend> backend_;  // made by prepare(); the joiner refers to it
  std::unique_ptr<RoundJoiner> joiner_;         // made by prepare(); owns the store connections
  ProgressExchangeThread exchange_{io_};        // the no-progress verdict, agreed off the loop

  RoundView view_;                         // the round as this node sees it: every event carries it
  LogFileTally log_tally_;                 // lines that missed their log files (reported at the end)
  OomWitness oom_;                         // tells an out-of-memory kill from another SIGKILL
  StoreConnector connect_running_;         // the monitor's connections (see connect_job)
  RoundReport report_;                     // every local worker's end in this round
  RoundEvents events_;                     // the listeners of the round's events: recorder_, the board, deps_'
  std::unique_ptr<RunRecorder> recorder_;  // --event_log, --summary_json (made by prepare())
  int signal_sent_ = 0;                    // what stop_round sent the workers last
  std::unique_ptr<WorkerWatch> watch_;     // timers, hangs, stacks (made by prepare())
  std::unique_ptr<StragglerWatch> stragglers_;  // straggler detection (none with --stragglers=off)
  // Why this node leaves the next round (exclude, replace): set on the loop, taken by the health
  // gate on the join thread.
  std::shared_ptr<StragglerExclusion> straggler_excluded_ = std::make_shared<StragglerExclusion>();
  bool straggler_host_noted_ = false;
  RoundStatus status_;                     // the round's state, its root cause and a stopping signal received
  std::unique_ptr<ProcessContext> procs_;
  std::vector<std::unique_ptr<ProcessContext>> retired_;  // not settled yet, or the last round's
  std::unique_ptr<JobMonitor> monitor_;
  // This machine's record of the job (status/job_registry.hpp): set in the first round this node
  // takes part in (register_once; nullptr with etcd). Declared after io_, so it goes first.
  std::optional<std::unique_ptr<JobRegistration>> registration_;
  // The live status (status/): a listener of this loop's events, served on the server's own thread.
  // The server is made by prepare() with --status_port, else by register_once() (after the
  // workers start: off the path to their exec); it goes before the watch.
  StatusBoard status_board_;
  // With --status_port, the job's page's parts (status/status_exchange.hpp, page_stacks.hpp);
  // declared before the server, which calls them, so they go after it.
  std::unique_ptr<StatusExchange> status_exchange_;
  std::unique_ptr<PageStacks> page_stacks_;
  std::unique_ptr<StatusServer> status_server_;
  std::optional<int> exit_code_;
  std::optional<NodeFailure> hang_;  // this round's collective hang, as this node's failure
  std::string python_hook_dir_;      // the Python workers' hook (python_hook.hpp); "": none
  // This round stopped for a lost node or store: what the other nodes are told (no exit barrier).
  std::optional<Outcome> lost_;
  std::optional<ProgressTracker> progress_;  // this node's measures for the breaker (made by prepare())
  std::optional<ProgressVerdict> verdict_;   // the breaker's verdict on the round that just failed
  bool progress_file_warned_ = false;        // an unusable --progress_file is said once
  RestartHistory history_;                   // every failed round of the job
  std::optional<RoundSummary> round_end_;    // the last failed round's words and root cause (JobEnded's)
  std::map<int, std::pair<int, int>> round_workers_;  // this round's workers: pid → (rank, local rank)
  std::vector<HeldWorker> held_;               // workers the kernel held after SIGKILL (this host is out)
  std::mutex held_mutex_;                      // held_line_ is read by the join thread's gate
  std::string held_line_;                      // held_'s line for the other nodes
};

// Runs the job described by `config` (validated) on this node and returns the exit code:
// 0 success; the root-cause worker's code, or 128+N if it died of signal N; 130 after SIGINT
// (128+N for another stopping signal); 2 for bad usage or conflicting nodes; 69 when this node, or
// a node the job cannot run without, failed its health checks before a round; 1 when a peer
// launcher or the store was lost. Prints the failure summary on stderr. Blocks until done.
int run_agent(const LaunchConfig& config, AgentDeps deps = {});

}  // namespace ddp::launcher
