// The agent's event loop and per-round state machine; the protocol is in agent.hpp, the signal
// handling in agent_signals.cpp, the failures (workers, hangs, other nodes) in agent_failures.cpp.
#include "launcher/agent/agent.hpp"

#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/exit_codes.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "common/signals.hpp"
#include "common/worker_env.hpp"
#include "launcher/agent/node_setup.hpp"
#include "launcher/config/failure_budget.hpp"
#include "launcher/health/node_health.hpp"
#include "launcher/rdzv/job_round.hpp"
#include "launcher/rdzv/hosted_store.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/round_joiner.hpp"
#include "launcher/rdzv/store_backend.hpp"
#include "launcher/report/failure_summary.hpp"
#include "launcher/status/status_endpoint.hpp"
#include "launcher/watch/progress_file.hpp"
#include "launcher/workers/python_hook.hpp"

namespace ddp::launcher {

namespace asio = boost::asio;
using rendezvous::Store;

Agent::Agent(const LaunchConfig& c, AgentDeps deps)
    : c_(c), deps_(std::move(deps)), signals_(io_), kill_timer_(io_), held_timer_(io_), exit_barrier_timer_(io_),
      straggler_timer_(io_) {
  // Every launcher line goes through the console writer, in order with the workers' lines.
  log::set_sink([this](log::Level, std::string line) { console_.write(2, std::move(line)); });
}

Agent::~Agent() {
  console_.flush();
  log::set_sink(nullptr);
}

std::shared_ptr<Store> Agent::connect_job() {
  return job_stores(connect_running_(), c_.run_id, c_.rdzv_secret).job;
}

void Agent::post_for_round(int round, std::function<void()> event) {
  asio::post(io_, [this, round, event = std::move(event)] {
    if (round == view_.round && procs_ && status_.live()) event();
  });
}

bool Agent::prepare() {
  try {
    BackendFactory backend = deps_.backend;
    if (!backend) {
      backend = [connect = deps_.connect_root](const LaunchConfig& c, EffectiveConfig& eff, bool host_store) {
        return std::make_unique<StoreBackend>(c, eff, host_store, connect);
      };
    }
    try {
      backend_ = set_up_node(c_, NodeSetupOptions{deps_.preflight, deps_.host_store}, backend, eff_);
    } catch (const StoreHostTaken& e) {
      // torchrun's c10d does the same: a guessed host whose port is taken becomes a client.
      log::info("{}: another launcher on this machine hosts the store; this node joins it", e.what());
      c_.node_rank = 1;
      c_.store_host_guessed = false;
      backend_ = set_up_node(c_, NodeSetupOptions{deps_.preflight, deps_.host_store}, backend, eff_);
    }
    say_timeouts();
    RunRecorderOptions ro{c_.event_log, {}, c_.run_id, eff_.host};
    if (!c_.summary_json.empty()) ro.summary_json.push_back(c_.summary_json);
    if (!eff_.temporary_log_root) ro.summary_json.push_back(eff_.log_root + "/summary.json");
    recorder_ = std::make_unique<RunRecorder>(std::move(ro));
    events_.add(*recorder_);
    events_.add(status_board_);
    for (RoundListener* listener : deps_.listeners) events_.add(*listener);
    WorkerWatchOptions wo;
    wo.run_dir = eff_.log_root;
    wo.temporary_run_dir = eff_.temporary_log_root;
    wo.python = eff_.python.path;
    wo.env = eff_.env;
    wo.host = eff_.host;
    wo.hang_timeout = c_.hang_timeout;
    wo.local_workers = c_.nproc_per_node;
    wo.real_processes = deps_.preflight;
    wo.connect_job = [this] { return connect_job(); };
    if (!c_.worker_server) wo.no_server = "--no_worker_server";
    if (runs_with_python(c_) && c_.worker_server && deps_.preflight) {
      try {
        python_hook_dir_ = install_python_hook(eff_.log_root);
        wo.socket_dir = eff_.log_root;
      } catch (const Error& e) {
        // A full disk, say: the job runs as it would without the hook.
        log::warning("{}; the Python workers run without PyTorch's worker server", e.what());
      }
    }
    watch_ = std::make_unique<WorkerWatch>(io_, std::move(wo), [this](const HangReport& r) { on_hang(r); });
    status_board_.identify(status_identity(c_, eff_.host), {&watch_->progress_table(), watch_->flight_recorders()});
    prepare_stragglers();
    // With --status_port now, so a port in use fails before the rendezvous; else with the
    // registration, after the workers start (register_once): off the path to their exec.
    if (deps_.preflight && c_.status_port >= 0) {
      // The job's page: node 0 gathers the others' status, a stack is asked through the store.
      status_exchange_ = std::make_unique<StatusExchange>(status_board_, StatusExchangeOptions{[this] { return connect_job(); }});
      events_.add(*status_exchange_);
      page_stacks_ = std::make_unique<PageStacks>(status_board_, PageStacksOptions{[this] { return connect_job(); }});
      status_server_ = serve_status(c_, eff_, status_board_, io_, backend_->hosts_store(c_.node_rank),
                                    {status_exchange_.get(), page_stacks_.get()});
    }
  } catch (const UsageError& e) {
    log::error("{}", e.what());
    exit_code_ = kExitUsage;
    return false;
  } catch (const Error& e) {
    log::error("{}", e.what());
    exit_code_ = kExitFailure;
    return false;
  }
  if (!deps_.processes) deps_.processes = make_posix_process_context;
  // The monitor of a running round connects to a store known to be up: one that does not answer
  // within the heartbeat timeout (at least 1 s) is lost (--rdzv_timeout would hold the teardown).
  connect_running_ =
      backend_->connector(std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1)));
  if (!deps_.health && deps_.preflight) {
    NodeHealthOptions ho;
    ho.env = eff_.env;
    ho.lifetime = deps_.lifetime;
    deps_.health = [health = std::make_shared<NodeHealth>(c_, eff_, std::move(ho))](
                       int round, const CancelEvent& cancel) { return health->check(round, &cancel); };
  }
  deps_.health = straggler_gate(std::move(deps_.health));
  joiner_ = std::make_unique<RoundJoiner>(io_, *backend_, c_, eff_, held_gate(deps_.health));
  progress_.emplace(c_.progress_file.empty() ? std::nullopt : std::optional(read_progress_file(c_.progress_file)));
  return true;
}

void Agent::start_round() {
  status_.join();
  events_.emit(RoundJoining{view_.round, view_.restarts});
  joiner_->start(
      view_.round, [this](const JoinedRound& joined) { on_joined(joined); },
      [this](std::exception_ptr error) {
        if (exit_code_) return;  // interrupted meanwhile
        try {
          std::rethrow_exception(error);
        } catch (const NodeUnhealthy& e) {
          log::error("{}", e.what());
          finish(unless_held(kExitUnhealthy));
        } catch (const UsageError& e) {
          log::error("{}", e.what());
          finish(kExitUsage);
        } catch (const std::exception& e) {
          log::error("{}", e.what());
          finish(kExitFailure);
        }
      });
}

void Agent::on_joined(const JoinedRound& joined) {
  if (exit_code_) return;  // interrupted meanwhile
  view_.round = joined.round;
  hang_.reset();
  lost_.reset();
  round_end_.reset();
  view_.restarts += joined.late_rounds;  // the job's restart count, as the members see it
  view_.group_rank = joined.group_rank;
  view_.ranks = joined.ranks;
  const bool was_standby = std::exchange(view_.standby, joined.ranks.is_standby(view_.group_rank));
  events_.emit(RoundJoined{view_});
  if (view_.round == 0 && runs_with_python(c_)) log::info("python: {} ({})", eff_.python.path, eff_.python.reason);
  if (stands_by(was_standby)) return;
  const RoundWorkerContext context{.master_addr = joined.master_addr,
                                   .master_port = joined.master_port,
                                   .timer_file = watch_->timer_file(),
                                   .progress_fd = watch_->progress_fd(),
                                   .python_hook_dir = python_hook_dir_,
                                   .socket_dir = python_hook_dir_.empty() ? std::string() : eff_.log_root};
  const WorkerSpecInputs in =
      worker_spec_inputs(c_, eff_, joined.ranks, view_.group_rank, view_.restarts, context, eff_.env);
  if (!in.base_env.count(worker_env::kOmpNumThreads) && c_.nproc_per_node > 1 && view_.round == 0) {
    log::info("setting OMP_NUM_THREADS=1 for each worker (it was unset and nproc_per_node > 1); set it to tune");
  }
  procs_ = deps_.processes(io_, OutputPolicy{&console_, &log_tally_});
  report_.clear();
  try {
    const std::vector<WorkerSpec> specs = build_worker_specs(in);
    const std::vector<int> pids = procs_->start(specs, [this](const WorkerResult& w) { on_worker_exit(w); });
    events_.emit(WorkersStarted{view_, specs, pids});
    std::map<int, WatchedWorker> workers;
    round_workers_.clear();
    for (std::size_t i = 0; i < pids.size(); ++i) {
      workers[pids[i]] = WatchedWorker{specs[i].rank, static_cast<int>(i)};
      round_workers_[pids[i]] = {specs[i].rank, specs[i].local_rank};
    }
    watch_->started(view_.round, view_.group_rank, view_.nnodes(), std::move(workers));
    watch_stragglers(specs, pids);
    register_once();  // after the workers start
  } catch (const UsageError& e) {
    log::error("{}", e.what());
    NodeStop stop = workers_not_started(view_.group_rank, eff_.host, e.what());
    Outcome cause = Outcome::failure(kExitUsage, std::move(stop.summary), view_.group_rank, std::move(stop.root));
    publish(cause);
    cause.summary.clear();  // logged just above; the other nodes print it
    return stop_round(std::move(cause), false, false);
  }
  status_.run();
  // A static single-node job needs no watcher: every outcome is this agent's own (it publishes
  // failures and success itself) and the store lives in this process. Skipping it saves a thread
  // and a store connection per launch.
  if (c_.max_nodes > 1) start_monitor();
}

void Agent::register_once() {
  // The record is written a second later (status/job_registry.hpp); it names the status socket.
  if (!registration_ && deps_.preflight && !status_server_)
    status_server_ = serve_status(c_, eff_, status_board_, io_, backend_->hosts_store(view_.group_rank));
  if (!registration_ && deps_.preflight)
    registration_ =
        register_job(io_, c_, eff_, view_.group_rank, view_.nnodes(), backend_->hosts_store(view_.group_rank));
}

void Agent::start_monitor() {
  JobMonitorOptions mo;
  mo.outcome_key = key("outcome");
  mo.heartbeat_prefix = key("hb/");
  mo.node = view_.group_rank;
  mo.nnodes = view_.nnodes();
  mo.watched = view_.active_nodes();  // a standby's loss stops no round
  mo.interval = c_.heartbeat_interval;
  mo.timeout = c_.heartbeat_timeout;
  const int round = view_.round;
  backend_->set_liveness(mo, round);
  monitor_ = std::make_unique<JobMonitor>(
      [this] { return connect_job(); }, mo,
      [this, round](const std::string& value) { post_for_round(round, [this, value] { on_outcome(value); }); },
      [this, round](const NodeLoss& loss) { post_for_round(round, [this, loss] { on_lost(loss); }); });
}

std::string Agent::publish(const Outcome& outcome, bool quiet) {
  if (!joiner_->job()) return "";
  try {
    return joiner_->job()->compare_set(key("outcome"), "", outcome.encode());
  } catch (const Error& e) {
    // The store may be gone with node 0; the local teardown goes on regardless.
    if (!quiet) log::warning("could not tell the other nodes: {}", e.what());
    return "";
  }
}

void Agent::stop_round(Outcome cause, bool restartable, bool publish_it) {
  if (!status_.stoppable()) return check_round_end();
  if (publish_it) publish(cause);
  watch_->stopping(!status_.interrupted_by() && cause.code != kExitOk);
  stop_stragglers();
  signal_sent_ = status_.interrupted_by() ? status_.interrupted_by() : SIGTERM;
  events_.emit(RoundStopping{view_, cause, signal_sent_});
  status_.stop(std::move(cause), restartable);
  // A preemption's SIGTERM goes to each worker's main process only: its helpers (DataLoader
  // workers, whose death the loader's SIGCHLD handler turns into an error in the middle of the
  // checkpoint) live on until the main process exits (then the rest of its group gets SIGTERM:
  // JobLifetime::worker_exited) or the grace ends (SIGKILL to the whole group).
  if (status_.interrupted_by() == SIGTERM)
    procs_->notify(SIGTERM);
  else
    procs_->signal(signal_sent_);
  procs_->signal(SIGCONT);  // a stopped worker (SIGSTOP, Ctrl-Z) acts on it now, not at SIGKILL
  // Two graces: a preemption (SIGTERM to the launcher, from Kubernetes or Slurm) gives the workers
  // time to checkpoint; a failure, a restart or a person's Ctrl-C wants them gone soon.
  const std::chrono::milliseconds grace = preemption_grace_or(c_.shutdown_timeout);
  kill_timer_.expires_after(grace);
  kill_timer_.async_wait([this, grace](const boost::system::error_code& ec) {
    if (ec || !procs_ || procs_->running() == 0) return;
    log::info("{} worker(s) still running {} after {}; sending SIGKILL", procs_->running(), format_seconds(grace),
              signal_name(signal_sent_));
    kill_workers();
  });
  check_round_end();
}

void Agent::on_lost(const NodeLoss& loss) {
  const std::string& message = loss.message;
  const bool store_lost = loss.store_lost;
  // With restarts left, a lost node (other than the store's host) ends the round: elastic jobs
  // carry on without it if enough remain; static ones wait for it to come back, from any address
  // (a restarted Kubernetes pod), in the next round (rdzv/static_rejoin.hpp).
  const bool elastic = c_.min_nodes < c_.max_nodes;
  const bool recover =
      !store_lost && (!elastic || view_.nnodes() - 1 >= c_.min_nodes) && view_.restarts < c_.max_restarts;
  if (!status_.stoppable()) return;
  log::warning("{}", lost_node_notice(message, recover, elastic, c_.rdzv_timeout));
  NodeStop stop = lost_node_stop(loss, view_.group_rank, eff_.host, view_.hosts());
  Outcome cause = Outcome::failure(kExitFailure, std::move(stop.summary), view_.group_rank, stop.root);
  // A lost store is told as the round ends (end_round), quietly: it may live on without answering.
  lost_ = Outcome::failure(kExitFailure, message, view_.group_rank, std::move(stop.root));
  if (!store_lost) publish(*lost_);
  stop_round(std::move(cause), recover, false);
}

void Agent::check_round_end() {
  if (!procs_ || procs_->running() > 0) return;
  if (status_.stopping()) return end_round();
  if (status_.state() != RoundState::Running) return;
  // Every local worker succeeded: count this node; the last node declares success. When that is
  // us, act on it now rather than after the outcome watcher has read it back.
  status_.succeed();
  try {
    const Outcome success = Outcome::success(view_.group_rank);
    if (count_in(*joiner_->job(), key(""), view_.group_rank, view_.active_nodes()) &&
        publish(success) == success.encode())
      return finish(kExitOk);
    if (!view_.standby) start_exit_barrier();
  } catch (const Error& e) {
    on_lost(NodeLoss{"the store became unreachable: " + std::string(e.what()), true});
  }
}

void Agent::end_round() {
  status_.end();
  kill_timer_.cancel();
  held_timer_.cancel();
  exit_barrier_timer_.cancel();
  const std::optional<long long> collectives = watch_->collectives_completed();  // ended() empties the table
  watch_->ended();
  stop_stragglers();  // a round that succeeded was not stopped
  // Wake our own watcher if no node published an outcome, then stop the monitor. (Quietly: the
  // store's host may have ended its part of the job already, and then there is nothing to wake.)
  // The value is why this node stopped, never a bare "stopped": node 0, when the others lost it
  // (its launcher stopped, its link cut) while its store lived on, reads it later and says why.
  if (monitor_) publish(lost_.value_or(*status_.cause()), true);
  monitor_.reset();
  retire_processes();
  if (status_.interrupted_by()) return finish(unless_held(exit_code_for_signal(status_.interrupted_by())));
  const Outcome& cause = *status_.cause();  // set by every way into Stopping
  round_end_ = final_summary(cause);
  note_failed_round(cause, *round_end_, collectives, [this, code = cause.code](bool breaker_trips) {
    const bool restarting = status_.restartable() && view_.restarts < c_.max_restarts && !breaker_trips;
    if (!held_.empty()) return leave_held(restarting);
    if (breaker_trips) return end_job(round_end_->text, kExitNoProgress);
    if (restarting) return restart_job();
    end_job(round_end_->text, code);
  });
}

void Agent::discard_error_files() {
  if (!eff_.temporary_log_root) return;
  // Usually empty (workers write an error file only when they fail): one rmdir.
  if (::rmdir(eff_.log_root.c_str()) == 0) return;
  std::error_code ignored;  // a leftover directory in /tmp is no reason to fail the job
  std::filesystem::remove_all(eff_.log_root, ignored);
}

void Agent::finish(int code) {
  if (exit_code_) return;
  exit_code_ = code;
  if (code == kExitOk && !history_.rounds().empty()) log::info("{}", history_.cured_note());
  io_.stop();
}

void Agent::say_timeouts() const {
  const TimeoutsInForce timeouts = timeouts_in_force(c_, eff_.env);
  for (const std::string& warning : nesting_warnings(timeouts)) log::warning("{}", warning);
  // The table when asked for: --log_level info (or debug), or a budget to check.
  if (c_.failure_budget.count() == 0 && c_.log_level.empty()) return;
  for (const std::string& line : describe_timeouts(timeouts)) log::info("{}", line);
}

int Agent::run() {
  for (int s : c_.signals_to_handle) signals_.add(s);
  wait_signals();
  if (!prepare()) return *exit_code_;
  start_round();
  io_.run();
  status_server_.reset();  // before the progress table (the watch) and the run's directory go
  // The same for the page's threads; another node publishes its last status for node 0's page.
  if (status_exchange_) status_exchange_->stop();
  page_stacks_.reset();
  stragglers_.reset();     // reads the progress table
  if (!procs_ && !exit_code_) exit_code_ = kExitFailure;
  watch_.reset();  // the timer pipe goes before the run's directory may
  if (procs_ && procs_->running() > 0) procs_->signal(SIGKILL);
  monitor_.reset();
  if (joiner_->busy() || joiner_->cancelled() || exchange_.busy()) {
    // Interrupted during the rendezvous (or the no-progress exchange before it): its thread may
    // be blocked in a connect for minutes and no worker exists yet, so end the process now rather
    // than wait for it.
    discard_error_files();
    registration_.reset();  // interrupted in a restart's rendezvous: no destructor runs after _Exit
    console_.flush();
    std::cout.flush();
    std::_Exit(*exit_code_);
  }
  if (deps_.workers_done) deps_.workers_done();
  if (log_tally_.lines_lost > 0) {
    // The exit code stays the workers' own; the message says what the files miss.
    log::error("log files incomplete: {} line(s) not written to {} ({})", log_tally_.lines_lost, eff_.log_root,
               log_tally_.first_error);
  }
  if (recorder_) {  // prepare() made the listeners
    // The root cause as the last failed round's report made it; else (a round a signal ended)
    // the cause that stopped it.
    const std::optional<Outcome>& cause = status_.cause();
    const std::optional<RootCause> root = round_end_ ? round_end_->root : cause ? cause->root_cause : std::nullopt;
    const std::string root_text = round_end_ ? round_end_->root_text : cause ? cause->summary : "";
    events_.emit(JobEnded{view_, *exit_code_, report_, root, root_text});
  }
  if (exit_code_ == kExitOk) discard_error_files();
  const bool store_host = backend_->hosts_store(view_.group_rank);
  if (joiner_->job() && view_.nnodes() > 1 && status_.state() != RoundState::Joining && !lost_) {
    // After a success or a failure alike: the store's host ends it only once the others have read
    // the outcome and counted out, or a grace has passed (after a failure, the others may still
    // be stopping workers, which needs no store). Not after a lost node or store: the lost one
    // never counts out, and a store behind a cut link would hold the call.
    JobExitOptions exit;
    exit.nnodes = view_.nnodes();
    exit.is_host = store_host;
    exit.quiet = exit_code_ != kExitOk;
    exit.wait = exit_code_ == kExitOk
                    ? std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(5))
                    : std::clamp<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1),
                                                            std::chrono::seconds(10));
    leave_job(*joiner_->job(), key(""), exit);
  }
  if (joiner_->job()) {
    // A node that excluded itself (69) leaves an elastic job that goes on without it.
    const bool over = exit_code_ == kExitOk || exit_code_ == kExitNoProgress ||
                      (status_.cause() && view_.restarts >= c_.max_restarts && exit_code_ != kExitUnhealthy &&
                        exit_code_ != kExitUnkillable);
    backend_->end_job(*joiner_->job(), JobEnd{*exit_code_, over, view_.round + 1, store_host});
  }
  console_.flush();
  return *exit_code_;
}

int run_agent(const LaunchConfig& config, AgentDeps deps) {
  Agent agent(config, std::move(deps));
  return agent.run();
}

}  // namespace ddp::launcher
