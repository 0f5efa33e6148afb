// The agent's event loop and per-round state machine; the protocol is in agent.hpp.
#include "launcher/agent.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <iostream>
#include <optional>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "common/open_file_limit.hpp"
#include "common/signals.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "ddplaunch/rendezvous/tcp_store_client.hpp"
#include "ddplaunch/rendezvous/tcp_store_server.hpp"
#include "launcher/failure_summary.hpp"
#include "launcher/node_rendezvous.hpp"

namespace ddp::launcher {

namespace asio = boost::asio;
using rendezvous::PrefixStore;
using rendezvous::Store;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

void say(const std::string& line) {
  log::info("{}", line);
}

// Resolves a host name or address once up front, so a typo fails in milliseconds with exit 2
// instead of after the rendezvous timeout.
void check_resolvable(const std::string& host, const char* flag) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string bare = rendezvous::unbracket_host(host);
  const int rc = bare.empty() ? EAI_NONAME : ::getaddrinfo(bare.c_str(), nullptr, &hints, &result);
  if (rc != 0) {
    throw UsageError(std::string(flag) + "=" + host + " cannot be resolved (" + gai_strerror(rc) +
                     "); use an IP address or a host name this machine resolves (IPv6 in brackets: [::1])");
  }
  ::freeaddrinfo(result);
}

class Agent {
 public:
  Agent(const LaunchConfig& c, AgentDeps deps)
      : c_(c), deps_(std::move(deps)), signals_(io_), kill_timer_(io_), host_(host_name()) {
    // Every launcher line goes through the console writer, in order with the workers' lines.
    log::set_sink([this](log::Level, std::string line) { console_.write(2, std::move(line)); });
  }
  ~Agent() {
    console_.flush();
    log::set_sink(nullptr);
  }
  int run();

 private:
  std::string key(const std::string& name) const { return "r" + std::to_string(round_) + "/" + name; }
  std::shared_ptr<Store> connect_job() {
    return std::make_shared<PrefixStore>("ddplaunch/" + c_.run_id, deps_.connect_root());
  }
  // Posts an event from a helper thread; it is dropped if the round it belongs to is over.
  void post_for_round(int round, std::function<void()> event) {
    asio::post(io_, [this, round, event = std::move(event)] {
      if (round == round_ && procs_ && !round_over_) event();
    });
  }

  bool prepare();
  void wait_signals();
  void on_signal(int signo);
  void start_round();
  // Runs on the rendezvous thread: connects (first round) and joins the round.
  void join_in_thread(std::optional<RankMap>& ranks, std::exception_ptr& error);
  void on_joined(const RankMap& ranks);
  void on_worker_exit(const WorkerResult& w);
  void on_outcome(const std::string& value);
  void on_lost(const std::string& message, bool store_lost);
  void begin_stop(int signo);
  void end_round_if_done();
  // Compare-sets the round's outcome; returns the outcome now in the store ("" if unreachable).
  std::string publish_outcome(const std::string& value);
  void finish(int code);

  const LaunchConfig& c_;
  AgentDeps deps_;
  ConsoleWriter console_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::steady_timer kill_timer_;
  std::string host_;
  std::string log_root_;  // --log_dir, or a fresh temporary directory when streams go to files
  int port_ = 0;
  long long open_files_limit_ = -1;  // before hosting the store raised it; workers get it back
  std::unique_ptr<rendezvous::TcpStoreServer> server_;
  std::shared_ptr<Store> root_;
  std::shared_ptr<Store> job_;
  std::thread rdzv_thread_;
  std::atomic<bool> cancelled_{false};

  // The current round.
  int round_ = 0;
  int restart_count_ = 0;
  int group_rank_ = 0;  // this node's rank in the round (= --node_rank unless elastic)
  int nnodes_ = 1;
  std::unique_ptr<ProcessContext> procs_;
  std::vector<std::unique_ptr<ProcessContext>> retired_;  // their handlers may still be queued
  std::unique_ptr<JobMonitor> monitor_;
  bool stopping_ = false;
  bool round_over_ = false;
  bool all_succeeded_reported_ = false;
  int interrupted_by_ = 0;
  bool fatal_ = false;        // no restart: the store or a static peer is gone, or a start failed
  int failure_code_ = 0;      // exit code of the root cause
  std::string failure_text_;  // printed at the end
  std::optional<int> exit_code_;
};

bool Agent::prepare() {
  port_ = c_.master_port;
  log_root_ = c_.log_dir;
  try {
    if (deps_.preflight) {
      check_program(c_, current_environment());
      check_resolvable(c_.master_addr, "--master_addr");
      if (!c_.local_addr.empty()) check_resolvable(c_.local_addr, "--local_addr");
    }
  } catch (const UsageError& e) {
    say(e.what());
    exit_code_ = kExitUsage;
    return false;
  }
  const auto any_streams = [](const StreamSelection& sel) {
    return sel.all != 0 ||
           std::any_of(sel.per_rank.begin(), sel.per_rank.end(), [](const auto& kv) { return kv.second != 0; });
  };
  if (log_root_.empty() && (any_streams(c_.redirects) || any_streams(c_.tee))) {
    // torchrun's behaviour: redirected streams need files, so without --log_dir make a directory.
    char tmpl[] = "/tmp/ddplaunch_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      say("cannot create a log directory under /tmp for --redirects/--tee; pass --log_dir");
      exit_code_ = kExitFailure;
      return false;
    }
    log_root_ = tmpl;
    say("worker logs go to " + log_root_ + " (pass --log_dir to choose)");
  }
  if (deps_.host_store && c_.node_rank == 0) {
    // Every worker of the job (all nodes) holds a connection to this store.
    open_files_limit_ = raise_open_file_limit();
    rendezvous::TcpStoreServerOptions so;
    so.port = static_cast<std::uint16_t>(c_.master_port);
    so.log = [](std::string_view line) { log::info("store: {}", line); };
    try {
      server_ = std::make_unique<rendezvous::TcpStoreServer>(so);
    } catch (const rendezvous::BindError& e) {
      say(e.what());
      exit_code_ = kExitUsage;
      return false;
    }
    port_ = server_->port();
    server_->start();
  }
  if (!deps_.processes) deps_.processes = make_posix_process_context;
  if (!deps_.connect_root) {
    deps_.connect_root = [this] {
      rendezvous::TcpStoreClientOptions o;
      o.host = c_.master_addr;
      o.port = static_cast<std::uint16_t>(port_);
      o.connect_timeout = c_.rdzv_timeout;
      // Replies on a healthy network take milliseconds; a cut link must not stall the teardown
      // for longer than the heartbeat allows.
      o.timeout = std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1));
      return std::make_shared<rendezvous::TcpStoreClient>(o);
    };
  }
  return true;
}

void Agent::wait_signals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (ec) return;
    on_signal(s);
    wait_signals();
  });
}

void Agent::on_signal(int signo) {
  const bool stopping_signal = signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT;
  if (!procs_) {
    // Still in rendezvous (or between rounds): no worker to stop, so stop right away.
    say("interrupted by " + signal_name(signo) + " while waiting for nodes");
    cancelled_ = true;
    return finish(exit_code_for_signal(signo));
  }
  say("received " + signal_name(signo) + ", forwarding it to the workers");
  if (!stopping_signal) return procs_->signal(signo);  // e.g. SIGUSR1 for a checkpoint
  if (!interrupted_by_) interrupted_by_ = signo;
  if (!stopping_) {
    publish_outcome("failure " + std::to_string(exit_code_for_signal(signo)) + "\nthe launcher on node " +
                    std::to_string(group_rank_) + " (" + host_ + ") received " + signal_name(signo));
  }
  begin_stop(signo);
}

void Agent::start_round() {
  round_over_ = false;
  stopping_ = false;
  all_succeeded_reported_ = false;
  failure_code_ = 0;
  failure_text_.clear();
  auto ranks = std::make_shared<std::optional<RankMap>>();
  auto error = std::make_shared<std::exception_ptr>();
  rdzv_thread_ = std::thread([this, ranks, error] {
    join_in_thread(*ranks, *error);
    // The join's result goes back to the loop, which joins this (finished) thread.
    asio::post(io_, [this, ranks, error] {
      rdzv_thread_.join();
      if (exit_code_) return;  // interrupted meanwhile
      if (*error) {
        try {
          std::rethrow_exception(*error);
        } catch (const UsageError& e) {
          say(e.what());
          return finish(kExitUsage);
        } catch (const std::exception& e) {
          say(e.what());
          return finish(kExitFailure);
        }
      }
      on_joined(**ranks);
    });
  });
}

void Agent::join_in_thread(std::optional<RankMap>& ranks, std::exception_ptr& error) {
  try {
    if (!root_) {
      root_ = deps_.connect_root();
      job_ = std::make_shared<PrefixStore>("ddplaunch/" + c_.run_id, root_);
    }
    const NodeInfo self{c_.node_rank, c_.nproc_per_node, c_.local_addr.empty() ? host_ : c_.local_addr, host_,
                        static_cast<int>(::getpid())};
    RendezvousOptions o;
    o.nnodes = c_.max_nodes;
    o.round = round_;
    o.run_id = c_.run_id;
    o.timeout = c_.rdzv_timeout;
    o.endpoint = rendezvous::format_endpoint(c_.master_addr, static_cast<std::uint16_t>(port_));
    o.status = [](const std::string& s) { say(s); };
    o.cancelled = &cancelled_;
    if (c_.min_nodes == c_.max_nodes) {
      ranks = join_round(*root_, *job_, self, o);
      group_rank_ = c_.node_rank;
      return;
    }
    ElasticOptions e;
    e.base = o;
    e.min_nodes = c_.min_nodes;
    e.is_host = c_.node_rank == 0;
    if (c_.rdzv_conf.count("last_call_timeout")) {
      e.last_call =
          std::chrono::milliseconds(static_cast<long long>(std::stod(c_.rdzv_conf.at("last_call_timeout")) * 1000));
    }
    for (;;) {
      try {
        ElasticRound r = join_elastic_round(*root_, *job_, self, e);
        group_rank_ = r.group_rank;
        ranks = std::move(r.ranks);
        return;
      } catch (const LateArrival& late) {
        say(late.what());
        e.base.round = ++round_;
        ++restart_count_;  // the job's restart count, as the members will see it
      }
    }
  } catch (...) {
    error = std::current_exception();
  }
}

void Agent::on_joined(const RankMap& ranks) {
  nnodes_ = ranks.num_nodes();
  if (group_rank_ == 0) log::info("{}", ranks.describe());
  WorkerSpecInputs in{c_, ranks, group_rank_, restart_count_, c_.master_addr, port_, current_environment(), log_root_};
  in.open_files_limit = open_files_limit_;
  if (!in.base_env.count("OMP_NUM_THREADS") && c_.nproc_per_node > 1 && round_ == 0) {
    say("setting OMP_NUM_THREADS=1 for each worker (it was unset and nproc_per_node > 1); set it to tune");
  }
  OutputPolicy policy{&c_, &console_, ranks.world_size() > 1};
  procs_ = deps_.processes(io_, policy);
  try {
    procs_->start(build_worker_specs(in), [this](const WorkerResult& w) { on_worker_exit(w); });
  } catch (const UsageError& e) {
    say(e.what());
    publish_outcome("failure " + std::to_string(kExitUsage) + "\nnode " + std::to_string(group_rank_) +
                    " could not start its workers: " + e.what());
    fatal_ = true;
    failure_code_ = kExitUsage;
    stopping_ = true;
    return end_round_if_done();
  }
  // A static single-node job needs no watcher: every outcome is this agent's own (it publishes
  // failures and success itself) and the store lives in this process. Skipping it saves a thread
  // and a store connection per launch.
  if (c_.max_nodes == 1) return;
  JobMonitorOptions mo;
  mo.outcome_key = key("outcome");
  mo.heartbeat_prefix = key("hb/");
  mo.node = group_rank_;
  mo.nnodes = nnodes_;
  mo.interval = c_.heartbeat_interval;
  mo.timeout = c_.heartbeat_timeout;
  const int round = round_;
  monitor_ = std::make_unique<JobMonitor>(
      [this] { return connect_job(); }, mo,
      [this, round](const std::string& value) { post_for_round(round, [this, value] { on_outcome(value); }); },
      [this, round](const std::string& message, bool store_lost) {
        post_for_round(round, [this, message, store_lost] { on_lost(message, store_lost); });
      });
}

std::string Agent::publish_outcome(const std::string& value) {
  if (!job_) return "";
  try {
    return job_->compare_set(key("outcome"), "", value);
  } catch (const ddp::Error& e) {
    // The store may be gone with node 0; the local teardown goes on regardless.
    say("could not tell the other nodes: " + std::string(e.what()));
    return "";
  }
}

void Agent::on_worker_exit(const WorkerResult& w) {
  if (w.exit_code != 0 && !stopping_) {
    failure_code_ = w.exit_code;
    failure_text_ = describe_failure(w, FailureContext{c_.program, host_, group_rank_});
    publish_outcome("failure " + std::to_string(failure_code_) + "\n" + failure_text_);
    begin_stop(SIGTERM);
    return;
  }
  end_round_if_done();
}

void Agent::on_outcome(const std::string& value) {
  if (value == "success") return finish(kExitOk);
  if (stopping_) return;
  const auto nl = value.find('\n');
  failure_code_ = std::atoi(value.c_str() + std::string("failure ").size());
  if (failure_code_ == 0) failure_code_ = kExitFailure;
  failure_text_ = "ddplaunch: stopping: the job failed on another node:\n" +
                  (nl == std::string::npos ? std::string() : value.substr(nl + 1));
  begin_stop(SIGTERM);
}

void Agent::on_lost(const std::string& message, bool store_lost) {
  if (stopping_) return;
  // Elastic jobs carry on without a lost node (other than the store's host) if enough remain.
  const bool recover =
      !store_lost && c_.min_nodes < c_.max_nodes && nnodes_ - 1 >= c_.min_nodes && restart_count_ < c_.max_restarts;
  fatal_ = !recover;
  failure_code_ = kExitFailure;
  failure_text_ = "ddplaunch: " + message + "; stopped the workers on this node";
  say(message + (recover ? "; continuing with the remaining nodes in a new round" : ""));
  if (!store_lost) publish_outcome("failure " + std::to_string(kExitFailure) + "\n" + message);
  begin_stop(SIGTERM);
}

void Agent::begin_stop(int signo) {
  if (stopping_) return end_round_if_done();
  stopping_ = true;
  procs_->signal(signo);
  kill_timer_.expires_after(c_.shutdown_timeout);
  kill_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !procs_ || procs_->running() == 0) return;
    log::info("{} worker(s) still running {:g} s after SIGTERM; sending SIGKILL", procs_->running(),
              c_.shutdown_timeout.count() / 1000.0);
    procs_->signal(SIGKILL);
  });
  end_round_if_done();
}

void Agent::end_round_if_done() {
  if (!procs_ || procs_->running() > 0 || round_over_) return;
  if (!stopping_) {
    // Every local worker succeeded: count this node; the last node declares success, and the
    // outcome watcher delivers it.
    if (all_succeeded_reported_) return;
    all_succeeded_reported_ = true;
    try {
      // The last node declares success; when that is us, act on it now rather than after the
      // outcome watcher has read it back (a round trip and a thread hop per launch).
      if (job_->add(key("succeeded"), 1) == nnodes_ && publish_outcome("success") == "success")
        return on_outcome("success");
    } catch (const ddp::Error& e) {
      on_lost("the store became unreachable: " + std::string(e.what()), true);
    }
    return;
  }
  round_over_ = true;
  kill_timer_.cancel();
  // Wake our own watcher if no node published an outcome, then stop the monitor.
  publish_outcome("failure 1\nstopped");
  monitor_.reset();
  retired_.push_back(std::move(procs_));
  if (interrupted_by_) return finish(exit_code_for_signal(interrupted_by_));
  if (!fatal_ && restart_count_ < c_.max_restarts) {
    ++restart_count_;
    ++round_;
    say("restarting the job (restart " + std::to_string(restart_count_) + " of " + std::to_string(c_.max_restarts) +
        ")");
    return start_round();
  }
  console_.flush();
  if (!failure_text_.empty()) console_.write(2, failure_text_ + "\n");
  finish(failure_code_ ? failure_code_ : kExitFailure);
}

void Agent::finish(int code) {
  if (exit_code_) return;
  exit_code_ = code;
  io_.stop();
}

int Agent::run() {
  for (int s : c_.signals_to_handle) signals_.add(s);
  wait_signals();
  if (!prepare()) return *exit_code_;
  start_round();
  io_.run();
  if (!procs_ && !exit_code_) exit_code_ = kExitFailure;
  if (procs_ && procs_->running() > 0) procs_->signal(SIGKILL);
  monitor_.reset();
  if (rdzv_thread_.joinable() || cancelled_) {
    // Interrupted during the rendezvous: its thread may be blocked in a connect for minutes and
    // no worker exists yet, so end the process now rather than wait for it.
    console_.flush();
    std::cout.flush();
    std::_Exit(*exit_code_);
  }
  if (job_ && exit_code_ == kExitOk && nnodes_ > 1) {
    // Exit barrier: the store's host stays up until every node has read the outcome, so no
    // node mistakes a finished job for a lost store.
    try {
      if (job_->add(key("left"), 1) == nnodes_) job_->set(key("all_left"), "1");
      if (server_)
        job_->wait({key("all_left")},
                   std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(5)));
    } catch (const ddp::Error& e) {
      // Another node went away after the job succeeded: nothing is lost, say so and go on.
      say("exit barrier: " + std::string(e.what()));
    }
  }
  console_.flush();
  return *exit_code_;
}

}  // namespace

int run_agent(const LaunchConfig& config, AgentDeps deps) {
  Agent agent(config, std::move(deps));
  return agent.run();
}

}  // namespace ddp::launcher
