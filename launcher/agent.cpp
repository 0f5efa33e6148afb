// The agent's event loop; the threading model is described in agent.hpp.
#include "launcher/agent.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include "launcher/node_rendezvous.hpp"
#include "launcher/worker_process.hpp"
#include "rendezvous/blocking_socket.hpp"
#include "rendezvous/exit_codes.hpp"
#include "rendezvous/prefix_store.hpp"
#include "rendezvous/tcp_store_client.hpp"
#include "rendezvous/tcp_store_server.hpp"

namespace ddp::launcher {

namespace asio = boost::asio;
using rendezvous::PrefixStore;
using rendezvous::TcpStoreClient;
using rendezvous::TcpStoreClientOptions;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::chrono::hours kLongWait{24 * 365};

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  return buf;
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", std::localtime(&t));
  return buf;
}

std::string expand_prefix(std::string tpl, const WorkerSpec& w, const std::string& role) {
  const std::map<std::string, std::string> vars = {
      {"${rank}", std::to_string(w.rank)}, {"${local_rank}", std::to_string(w.local_rank)}, {"${role_name}", role}};
  for (const auto& [k, v] : vars) {
    for (auto p = tpl.find(k); p != std::string::npos; p = tpl.find(k, p)) tpl.replace(p, k.size(), v);
  }
  return tpl;
}

void say(const std::string& line) { std::cerr << "ddplaunch: " << line << std::endl; }

// Resolves a host name or address once up front, so a typo fails in milliseconds with exit 2
// instead of after the rendezvous timeout.
void check_resolvable(const std::string& host, const char* flag) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const std::string bare = rendezvous::unbracket_host(host);
  const int rc = ::getaddrinfo(bare.c_str(), nullptr, &hints, &result);
  if (rc != 0 || bare.empty()) {
    throw UsageError(std::string(flag) + "=" + host + " cannot be resolved (" + (bare.empty() ? "empty" : gai_strerror(rc)) +
                     "); use an IP address or a host name this machine resolves (IPv6 in brackets: [::1])");
  }
  ::freeaddrinfo(result);
}

// A thread that can be stopped early: its waits are on a condition variable.
class StopFlag {
 public:
  void stop() {
    {
      std::lock_guard<std::mutex> l(m_);
      stopped_ = true;
    }
    cv_.notify_all();
  }
  // Sleeps up to `d`; returns true when stopped.
  bool wait_for(std::chrono::milliseconds d) {
    std::unique_lock<std::mutex> l(m_);
    return cv_.wait_for(l, d, [&] { return stopped_; });
  }
  bool stopped() {
    std::lock_guard<std::mutex> l(m_);
    return stopped_;
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  bool stopped_ = false;
};

class Agent {
 public:
  explicit Agent(const LaunchConfig& c)
      : c_(c), signals_(io_), sigchld_(io_, SIGCHLD), kill_timer_(io_), host_(host_name()) {}

  int run();

 private:
  TcpStoreClientOptions client_options() const {
    TcpStoreClientOptions o;
    o.host = c_.master_addr;
    o.port = static_cast<std::uint16_t>(port_);
    o.connect_timeout = c_.rdzv_timeout;
    // Replies on a healthy network take milliseconds; a cut link must not stall the teardown
    // for longer than the heartbeat allows.
    o.timeout = std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(1));
    return o;
  }
  std::string key(const std::string& name) const { return "r" + std::to_string(round_) + "/" + name; }
  std::unique_ptr<PrefixStore> job_view(std::shared_ptr<TcpStoreClient> client) const {
    return std::make_unique<PrefixStore>("ddplaunch/" + c_.run_id, std::move(client));
  }

  void on_signal(int signo);
  void on_sigchld();
  void start_round();
  void spawn_workers(const RankMap& ranks);
  void on_worker_exit(WorkerProcess& w);
  void on_outcome(const std::string& value);
  // A peer launcher (or the store) is gone. Fatal, unless the job is elastic, enough nodes
  // remain, restarts remain and the store itself is still there.
  void on_lost(const std::string& message, bool store_lost);
  void begin_stop(int signo);
  void maybe_round_ended();
  void finish(int code);
  void start_threads();
  void stop_threads();
  void publish_failure(int code, const std::string& text);
  std::string describe_failure(const WorkerProcess& w) const;

  const LaunchConfig& c_;
  ConsoleWriter console_;
  std::string log_root_;  // <log_dir> or a fresh temporary directory when streams go to files
  asio::io_context io_;
  asio::signal_set signals_;
  asio::signal_set sigchld_;
  asio::steady_timer kill_timer_;
  std::string host_;
  int port_ = 0;
  int round_ = 0;
  int restart_count_ = 0;
  std::unique_ptr<rendezvous::TcpStoreServer> server_;
  std::shared_ptr<TcpStoreClient> client_;
  std::unique_ptr<PrefixStore> job_;
  std::atomic<bool> cancelled_{false};
  std::thread rdzv_thread_;
  std::thread watcher_thread_;
  std::thread heartbeat_thread_;
  std::shared_ptr<StopFlag> threads_stop_;
  std::mutex watcher_mutex_;
  std::shared_ptr<TcpStoreClient> watcher_client_;
  std::vector<std::unique_ptr<WorkerProcess>> workers_;
  std::vector<std::unique_ptr<WorkerProcess>> retired_;
  int nnodes_ = 1;
  int group_rank_ = 0;  // this node's rank in the current round (= --node_rank unless elastic)
  bool stopping_ = false;
  bool success_reported_ = false;
  int interrupted_by_ = 0;
  bool lost_peer_ = false;
  int failure_code_ = 0;     // exit code of the root cause (0: none)
  std::string failure_text_;  // the summary printed at the end
  std::optional<int> exit_code_;
};

void Agent::on_signal(int signo) {
  if (!interrupted_by_) interrupted_by_ = signo;
  cancelled_ = true;
  if (workers_.empty()) {
    // Still in rendezvous (or between rounds): no worker to stop, so stop right away.
    if (rdzv_thread_.joinable()) say("interrupted by " + signal_name(signo) + " while waiting for nodes");
    finish(signo == SIGINT ? kExitInterrupted : 128 + signo);
  } else {
    say("received " + signal_name(signo) + ", forwarding it to the workers");
    if (!stopping_) publish_failure(signo == SIGINT ? kExitInterrupted : 128 + signo,
                                    "the launcher on node " + std::to_string(group_rank_) + " (" + host_ +
                                        ") received " + signal_name(signo));
    if (signo == SIGINT || signo == SIGTERM || signo == SIGHUP || signo == SIGQUIT) {
      begin_stop(signo);
    } else {
      for (auto& w : workers_) w->signal(signo);
      interrupted_by_ = 0;
      cancelled_ = false;
    }
  }
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (!ec) on_signal(s);
  });
}

void Agent::on_sigchld() {
  int status = 0;
  std::vector<WorkerProcess*> exited;
  for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
    for (auto& w : workers_) {
      if (w->pid() == pid) {
        w->set_exited(status);
        exited.push_back(w.get());
      }
    }
  }
  // Handled after the loop: a handler may end the round and retire workers_.
  for (WorkerProcess* w : exited) {
    const bool current = std::any_of(workers_.begin(), workers_.end(), [w](const auto& p) { return p.get() == w; });
    if (current) on_worker_exit(*w);
  }
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) on_sigchld();
  });
}

std::string Agent::describe_failure(const WorkerProcess& w) const {
  std::ostringstream out;
  const std::string bar(60, '=');
  out << bar << "\n" << c_.program << " FAILED\n" << std::string(60, '-') << "\n";
  out << "  time      : " << now_text() << "\n";
  out << "  host      : " << host_ << "\n";
  out << "  node rank : " << group_rank_ << "\n";
  out << "  rank      : " << w.spec().rank << " (local_rank: " << w.spec().local_rank << ")\n";
  if (w.term_signal()) {
    out << "  exitcode  : " << w.exit_code() << " (died of " << signal_name(w.term_signal()) << ") (pid: " << w.pid() << ")\n";
  } else {
    out << "  exitcode  : " << w.exit_code() << " (pid: " << w.pid() << ")\n";
  }
  const auto& env = w.spec().env;
  const auto ef = env.find("TORCHELASTIC_ERROR_FILE");
  std::string error_file = "<N/A>";
  if (ef != env.end() && !ef->second.empty()) {
    std::ifstream in(ef->second);
    if (in) {
      std::stringstream content;
      content << in.rdbuf();
      error_file = ef->second + "\n" + content.str();
    }
  }
  out << "  error_file: " << error_file << "\n";
  if (!w.stderr_tail().empty()) {
    out << "  last stderr lines:\n";
    for (const auto& line : w.stderr_tail()) out << "    " << line << "\n";
  }
  out << bar;
  return out.str();
}

void Agent::publish_failure(int code, const std::string& text) {
  if (!job_) return;
  try {
    job_->compare_set(key("outcome"), "", "failure " + std::to_string(code) + "\n" + text);
  } catch (const rendezvous::Error& e) {
    // The store may be gone with node 0; the local teardown goes on regardless.
    say("could not tell the other nodes about the failure: " + std::string(e.what()));
  }
}

void Agent::on_worker_exit(WorkerProcess& w) {
  if (w.exit_code() != 0 && !stopping_) {
    failure_code_ = w.exit_code();
    failure_text_ = describe_failure(w);
    publish_failure(failure_code_, failure_text_);
    begin_stop(SIGTERM);
    return;
  }
  maybe_round_ended();
}

void Agent::maybe_round_ended() {
  for (auto& w : workers_) {
    if (!w->exited() || !w->output_done()) return;
  }
  if (!stopping_) {
    // Every local worker succeeded: count this node; the last node declares success.
    if (!success_reported_) {
      success_reported_ = true;
      try {
        if (job_->add(key("succeeded"), 1) == nnodes_) job_->compare_set(key("outcome"), "", "success");
      } catch (const rendezvous::Error& e) {
        on_lost("the store became unreachable: " + std::string(e.what()), true);
      }
    }
    return;  // the outcome watcher delivers the job's result
  }
  kill_timer_.cancel();
  stop_threads();
  // Retired, not destroyed: their pipe handlers may still be queued on the loop.
  for (auto& w : workers_) retired_.push_back(std::move(w));
  workers_.clear();
  if (interrupted_by_) return finish(interrupted_by_ == SIGINT ? kExitInterrupted : 128 + interrupted_by_);
  if (!lost_peer_ && restart_count_ < c_.max_restarts) {
    ++restart_count_;
    ++round_;
    say("restarting the job (restart " + std::to_string(restart_count_) + " of " + std::to_string(c_.max_restarts) + ")");
    stopping_ = false;
    success_reported_ = false;
    failure_code_ = 0;
    failure_text_.clear();
    return start_round();
  }
  console_.flush();
  if (!failure_text_.empty()) std::cerr << failure_text_ << std::endl;
  finish(lost_peer_ ? kExitFailure : (failure_code_ ? failure_code_ : kExitFailure));
}

void Agent::on_outcome(const std::string& value) {
  if (value == "success") {
    stop_threads();
    return finish(kExitOk);
  }
  if (stopping_) return;
  const auto nl = value.find('\n');
  const std::string head = value.substr(0, nl);
  failure_code_ = std::atoi(head.c_str() + std::string("failure ").size());
  if (failure_code_ == 0) failure_code_ = kExitFailure;
  failure_text_ = "ddplaunch: stopping: the job failed on another node:\n" + (nl == std::string::npos ? "" : value.substr(nl + 1));
  begin_stop(SIGTERM);
}

void Agent::on_lost(const std::string& message, bool store_lost) {
  if (lost_peer_) return;
  // Elastic jobs carry on without a lost node (other than the store's host) if enough remain.
  const bool elastic_recovery = !store_lost && c_.min_nodes < c_.max_nodes && nnodes_ - 1 >= c_.min_nodes &&
                                restart_count_ < c_.max_restarts;
  lost_peer_ = !elastic_recovery;
  failure_code_ = kExitFailure;
  failure_text_ = "ddplaunch: " + message + "; stopping the workers on this node";
  say(message + (elastic_recovery ? "; continuing with the remaining nodes in a new round" : ""));
  if (elastic_recovery) publish_failure(kExitFailure, message);
  if (workers_.empty()) return finish(kExitFailure);
  if (!stopping_) begin_stop(SIGTERM);
}

void Agent::begin_stop(int signo) {
  if (stopping_) return;
  stopping_ = true;
  for (auto& w : workers_) w->signal(signo);
  kill_timer_.expires_after(c_.shutdown_timeout);
  kill_timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    for (auto& w : workers_) {
      if (!w->exited()) {
        say("worker rank " + std::to_string(w->spec().rank) + " (pid " + std::to_string(w->pid()) + ") ignored " +
            "SIGTERM for " + std::to_string(c_.shutdown_timeout.count() / 1000.0).substr(0, 4) + " s; sending SIGKILL");
        w->signal(SIGKILL);
      }
    }
  });
  maybe_round_ended();
}

void Agent::finish(int code) {
  if (exit_code_) return;
  exit_code_ = code;
  io_.stop();
}

void Agent::start_round() {
  cancelled_ = interrupted_by_ != 0;
  auto result = std::make_shared<std::pair<std::optional<RankMap>, std::exception_ptr>>();
  rdzv_thread_ = std::thread([this, result] {
    try {
      if (!client_) {
        client_ = std::make_shared<TcpStoreClient>(client_options());
        job_ = job_view(client_);
      }
      NodeInfo self{c_.node_rank, c_.nproc_per_node, c_.local_addr.empty() ? host_ : c_.local_addr, host_,
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
        result->first = join_round(*client_, *job_, self, o);
        group_rank_ = c_.node_rank;
      } else {
        ElasticOptions e;
        e.base = o;
        e.min_nodes = c_.min_nodes;
        e.is_host = c_.node_rank == 0;
        if (c_.rdzv_conf.count("last_call_timeout")) {
          e.last_call = std::chrono::milliseconds(static_cast<long long>(std::stod(c_.rdzv_conf.at("last_call_timeout")) * 1000));
        }
        for (;;) {
          try {
            ElasticRound r = join_elastic_round(*client_, *job_, self, e);
            group_rank_ = r.group_rank;
            result->first = std::move(r.ranks);
            break;
          } catch (const LateArrival& late) {
            say(std::string(late.what()));
            e.base.round = ++round_;
            ++restart_count_;  // the job's restart count, as the members will see it
          }
        }
      }
    } catch (...) {
      result->second = std::current_exception();
    }
    asio::post(io_, [this, result] {
      rdzv_thread_.join();
      if (interrupted_by_) return finish(interrupted_by_ == SIGINT ? kExitInterrupted : 128 + interrupted_by_);
      if (result->second) {
        try {
          std::rethrow_exception(result->second);
        } catch (const UsageError& e) {
          say(e.what());
          return finish(kExitUsage);
        } catch (const std::exception& e) {
          say(e.what());
          return finish(kExitFailure);
        }
      }
      try {
        spawn_workers(*result->first);
      } catch (const UsageError& e) {
        say(e.what());
        publish_failure(kExitUsage, e.what());
        for (auto& w : workers_) w->signal(SIGKILL);
        stopping_ = true;
        interrupted_by_ = 0;
        failure_code_ = kExitUsage;
        lost_peer_ = true;  // no restart for a program that cannot start
        maybe_round_ended();
      }
    });
  });
}

void Agent::spawn_workers(const RankMap& ranks) {
  nnodes_ = ranks.num_nodes();
  if (group_rank_ == 0) std::cerr << "ddplaunch: " << ranks.describe() << std::flush;
  WorkerSpecInputs in{c_, ranks, group_rank_, restart_count_, c_.master_addr, port_, current_environment(), ""};
  in.log_root = log_root_;
  if (!in.base_env.count("OMP_NUM_THREADS") && c_.nproc_per_node > 1 && round_ == 0) {
    say("setting OMP_NUM_THREADS=1 for each worker (it was unset and nproc_per_node > 1); set it to tune");
  }
  for (const auto& spec : build_worker_specs(in)) {
    OutputOptions out;
    out.console = &console_;
    if (ranks.world_size() > 1) out.prefix = expand_prefix(c_.line_prefix_template, spec, c_.role);
    const int redirect = c_.redirects.for_rank(spec.local_rank);
    const int tee = c_.tee.for_rank(spec.local_rank);
    const bool shown = c_.local_ranks_filter.empty() ||
                       std::find(c_.local_ranks_filter.begin(), c_.local_ranks_filter.end(), spec.local_rank) != c_.local_ranks_filter.end();
    out.to_console_out = shown && !(redirect & 1);
    out.to_console_err = shown && !(redirect & 2);
    // As in torchrun: a stream goes to its file when redirected or tee'd; a tee keeps it on the
    // console as well.
    if (!spec.log_dir.empty() && ((redirect | tee) & 1)) out.stdout_file = spec.log_dir + "/stdout.log";
    if (!spec.log_dir.empty() && ((redirect | tee) & 2)) out.stderr_file = spec.log_dir + "/stderr.log";
    workers_.push_back(std::make_unique<WorkerProcess>(io_, spec, out));
    workers_.back()->on_output_done([this] { asio::post(io_, [this] { maybe_round_ended(); }); });
  }
  start_threads();
}

void Agent::start_threads() {
  threads_stop_ = std::make_shared<StopFlag>();
  auto stop = threads_stop_;
  const std::string outcome_key = key("outcome");
  const auto options = client_options();
  // Events from this round's threads carry the round, so a late one cannot hit the next round.
  const int gen = round_;
  const auto post = [this, gen](std::function<void()> event) {
    asio::post(io_, [this, gen, event = std::move(event)] {
      if (gen == round_ && !workers_.empty()) event();
    });
  };
  const std::string run_id = c_.run_id;
  watcher_client_.reset();
  watcher_thread_ = std::thread([this, stop, outcome_key, options, run_id, post] {
    try {
      auto client = std::make_shared<TcpStoreClient>(options);
      {
        std::lock_guard<std::mutex> lock(watcher_mutex_);
        watcher_client_ = client;
      }
      if (stop->stopped()) return;
      PrefixStore job("ddplaunch/" + run_id, client);
      // Parked on the server until some node publishes the outcome: no polling.
      while (!stop->stopped()) {
        try {
          job.wait({outcome_key}, std::chrono::duration_cast<std::chrono::milliseconds>(kLongWait));
          break;
        } catch (const rendezvous::TimeoutError&) {
          // A year passed; wait again.
        }
      }
      if (stop->stopped()) return;
      const std::string value = job.get(outcome_key, std::chrono::seconds(10));
      post([this, value] { on_outcome(value); });
    } catch (const rendezvous::Error& e) {
      if (stop->stopped()) return;
      post([this, msg = std::string(e.what())] { on_lost("lost the store on node 0 (" + msg + ")", true); });
    }
  });
  if (nnodes_ <= 1) return;
  const int me = group_rank_;
  const std::string hb_prefix = key("hb/");
  const int nnodes = nnodes_;
  const auto interval = c_.heartbeat_interval;
  const auto timeout = c_.heartbeat_timeout;
  heartbeat_thread_ = std::thread([this, stop, options, run_id, me, nnodes, interval, timeout, hb_prefix, post] {
    std::map<int, std::pair<std::int64_t, Clock::time_point>> seen;
    try {
      auto client = std::make_shared<TcpStoreClient>(options);
      PrefixStore job("ddplaunch/" + run_id, client);
      // Heartbeats are inherently periodic: there is no event for "a peer went silent".
      do {
        job.add(hb_prefix + std::to_string(me), 1);
        const auto now = Clock::now();
        for (int n = 0; n < nnodes; ++n) {
          if (n == me) continue;
          const std::int64_t beat = job.add(hb_prefix + std::to_string(n), 0);
          auto& s = seen[n];
          if (s.second == Clock::time_point{} || beat != s.first) {
            s = {beat, now};
          } else if (now - s.second > timeout) {
            post([this, n, timeout] {
              on_lost("lost node " + std::to_string(n) + ": no heartbeat for " + std::to_string(timeout.count() / 1000) + " s",
                      n == 0);
            });
            return;
          }
        }
      } while (!stop->wait_for(interval));
    } catch (const rendezvous::Error& e) {
      if (stop->stopped()) return;
      post([this, msg = std::string(e.what())] { on_lost("lost node 0, which hosts the store (" + msg + ")", true); });
    }
  });
}

void Agent::stop_threads() {
  if (!threads_stop_) return;
  threads_stop_->stop();
  // Wake the watcher if nobody published an outcome (e.g. this node was interrupted first).
  if (job_) {
    try {
      job_->compare_set(key("outcome"), "", "failure 1\nstopped");
    } catch (const rendezvous::Error&) {
      // Store gone: the watcher's own connection fails too, which also ends it.
    }
  }
  {
    // The watcher may be parked on a connection that a cut link left silent: break it.
    std::lock_guard<std::mutex> lock(watcher_mutex_);
    if (watcher_client_) watcher_client_->interrupt();
  }
  if (watcher_thread_.joinable()) watcher_thread_.join();
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  threads_stop_.reset();
}

int Agent::run() {
  for (int s : c_.signals_to_handle) signals_.add(s);
  signals_.async_wait([this](const boost::system::error_code& ec, int s) {
    if (!ec) on_signal(s);
  });
  sigchld_.async_wait([this](const boost::system::error_code& ec, int) {
    if (!ec) on_sigchld();
  });
  port_ = c_.master_port;
  log_root_ = c_.log_dir;
  try {
    check_program(c_, current_environment());
    check_resolvable(c_.master_addr, "--master_addr");
    if (!c_.local_addr.empty()) check_resolvable(c_.local_addr, "--local_addr");
  } catch (const UsageError& e) {
    say(e.what());
    return kExitUsage;
  }
  const auto any_streams = [](const StreamSelection& sel) {
    return sel.all != 0 || std::any_of(sel.per_rank.begin(), sel.per_rank.end(), [](const auto& kv) { return kv.second != 0; });
  };
  if (log_root_.empty() && (any_streams(c_.redirects) || any_streams(c_.tee))) {
    // torchrun's behaviour: redirected streams need files, so without --log_dir make a directory.
    char tmpl[] = "/tmp/ddplaunch_XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) {
      say("cannot create a log directory under /tmp for --redirects/--tee; pass --log_dir");
      return kExitFailure;
    }
    log_root_ = tmpl;
    say("worker logs go to " + log_root_ + " (pass --log_dir to choose)");
  }
  if (c_.node_rank == 0) {
    rendezvous::TcpStoreServerOptions so;
    so.port = static_cast<std::uint16_t>(c_.master_port);
    so.log = [](std::string_view line) { std::cerr << "ddplaunch: store: " << line << std::endl; };
    try {
      server_ = std::make_unique<rendezvous::TcpStoreServer>(so);
    } catch (const rendezvous::BindError& e) {
      say(e.what());
      return kExitUsage;
    }
    port_ = server_->port();
    server_->start();
  }
  start_round();
  io_.run();
  if (rdzv_thread_.joinable()) {
    // Interrupted during the rendezvous: its thread may be blocked in a connect for minutes and
    // no worker exists yet, so end the process now rather than join it.
    std::cout.flush();
    std::cerr.flush();
    std::_Exit(exit_code_.value_or(kExitFailure));
  }
  for (auto& w : workers_) w->signal(SIGKILL);
  stop_threads();
  if (job_ && exit_code_ == kExitOk && nnodes_ > 1) {
    // Exit barrier: the store's host stays up until every node has read the outcome, so no
    // node mistakes a finished job for a lost store.
    try {
      if (job_->add(key("left"), 1) == nnodes_) job_->set(key("all_left"), "1");
      if (server_) job_->wait({key("all_left")}, std::max<std::chrono::milliseconds>(c_.heartbeat_timeout, std::chrono::seconds(5)));
    } catch (const rendezvous::Error& e) {
      // Another node went away after the job succeeded: nothing is lost, say so and go on.
      say("exit barrier: " + std::string(e.what()));
    }
  }
  return exit_code_.value_or(kExitFailure);
}

}  // namespace

int run_agent(const LaunchConfig& config) {
  Agent agent(config);
  return agent.run();
}

int print_dry_run(const LaunchConfig& c) {
  std::vector<NodeInfo> nodes;
  for (int n = 0; n < c.max_nodes; ++n) nodes.push_back({n, c.nproc_per_node, n == c.node_rank ? host_name() : "?", n == c.node_rank ? host_name() : "?", 0});
  const RankMap ranks(nodes);
  std::cout << ranks.describe();
  WorkerSpecInputs in{c, ranks, c.node_rank, 0, c.master_addr, c.master_port, current_environment(), ""};
  const auto base = in.base_env;
  for (const auto& w : build_worker_specs(in)) {
    std::cout << "worker local_rank " << w.local_rank << " rank " << w.rank << ":\n  command:";
    for (const auto& a : w.argv) std::cout << " " << a;
    std::cout << "\n  environment (set or changed by ddplaunch):\n";
    for (const auto& [k, v] : w.env) {
      const auto it = base.find(k);
      if (it == base.end() || it->second != v) std::cout << "    " << k << "=" << v << "\n";
    }
  }
  return kExitOk;
}

}  // namespace ddp::launcher
