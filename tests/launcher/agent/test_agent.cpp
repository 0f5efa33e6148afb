// The agent's failure, teardown, restart and multi-node logic with fakes: an in-memory store
// shared by the "nodes" (agents on threads) and a fake process context whose workers exit as
// each test scripts, so no process is started.
#include "launcher/agent/agent.hpp"

#include <catch2/catch.hpp>

#include <array>
#include <csignal>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <type_traits>
#include <variant>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/exit_codes.hpp"
#include "ddplaunch/rendezvous/memory_store.hpp"
#include "ddplaunch/rendezvous/prefix_store.hpp"
#include "launcher/rdzv/job_store.hpp"
#include "launcher/rdzv/node_rendezvous.hpp"
#include "launcher/rdzv/outcome.hpp"

namespace {

using namespace ddp::launcher;
using namespace std::chrono_literals;
namespace asio = boost::asio;

// What a fake worker does: exit with `code` after `after`, unless signalled first; obeys SIGTERM
// unless `ignores_term`; outlives even SIGKILL when `unkillable` (a process the kernel holds).
struct Script {
  std::chrono::milliseconds after{10};
  int code = 0;
  bool runs_forever = false;
  bool ignores_term = false;
  bool unkillable = false;
};

struct Record {
  std::mutex mutex;
  std::vector<std::vector<WorkerSpec>> starts;  // every start() call
  std::vector<std::pair<int, int>> signals;     // (rank, signo)
  int live = 0;                                 // FakeProcesses alive now
  int most_live = 0;                            // and at most, over the run
};

class FakeProcesses final : public ProcessContext {
 public:
  FakeProcesses(asio::io_context& io, std::function<Script(const WorkerSpec&)> script, Record& record)
      : io_(io), script_(std::move(script)), record_(record) {
    std::lock_guard<std::mutex> lock(record_.mutex);
    record_.most_live = std::max(record_.most_live, ++record_.live);
  }
  ~FakeProcesses() override {
    std::lock_guard<std::mutex> lock(record_.mutex);
    --record_.live;
  }

  std::vector<int> start(const std::vector<WorkerSpec>& specs, ExitCallback on_exit) override {
    on_exit_ = std::move(on_exit);
    std::vector<int> pids;
    {
      std::lock_guard<std::mutex> lock(record_.mutex);
      record_.starts.push_back(specs);
    }
    for (const auto& spec : specs) {
      auto& w = workers_.emplace_back();
      w.spec = spec;
      w.script = script_(spec);
      pids.push_back(100000 + spec.rank);  // never a real process: nothing signals it
      if (!w.script.runs_forever) {
        w.timer = std::make_shared<asio::steady_timer>(io_, w.script.after);
        const std::size_t i = workers_.size() - 1;
        w.timer->async_wait([this, i](const boost::system::error_code& ec) {
          if (!ec) exit(i, workers_[i].script.code, 0);
        });
      }
    }
    return pids;
  }

  void signal(int signo) override {
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      auto& w = workers_[i];
      if (w.done) continue;
      {
        std::lock_guard<std::mutex> lock(record_.mutex);
        record_.signals.emplace_back(w.spec.rank, signo);
      }
      if (w.script.unkillable) continue;
      if (signo == SIGKILL || (signo == SIGTERM && !w.script.ignores_term) || signo == SIGINT) {
        ++posted_;
        asio::post(io_, [this, i, signo] {
          --posted_;
          exit(i, 128 + signo, signo);
        });
      }
    }
  }

  // Each fake worker is its own main process: the same as signal().
  void notify(int signo) override { signal(signo); }

  std::size_t running() const override {
    return static_cast<std::size_t>(
        std::count_if(workers_.begin(), workers_.end(), [](const auto& w) { return !w.done; }));
  }

  std::vector<int> abandon_running() override {
    std::vector<int> pids;
    for (auto& w : workers_) {
      if (w.done) continue;
      w.done = true;
      if (w.timer) w.timer->cancel();
      pids.push_back(100000 + w.spec.rank);
    }
    return pids;
  }

  // A cancelled timer's handler touches nothing; a posted exit does.
  bool settled() const override { return running() == 0 && posted_ == 0; }

 private:
  struct Worker {
    WorkerSpec spec;
    Script script;
    std::shared_ptr<asio::steady_timer> timer;
    bool done = false;
  };

  void exit(std::size_t i, int code, int signo) {
    auto& w = workers_[i];
    if (w.done) return;
    w.done = true;
    if (w.timer) w.timer->cancel();
    WorkerResult r;
    r.local_rank = w.spec.local_rank;
    r.rank = w.spec.rank;
    r.pid = 1000 + w.spec.rank;
    r.exit_code = code;
    r.term_signal = signo;
    r.stderr_tail = {"fake stderr of rank " + std::to_string(w.spec.rank)};
    on_exit_(r);
  }

  asio::io_context& io_;
  std::function<Script(const WorkerSpec&)> script_;
  Record& record_;
  std::vector<Worker> workers_;
  ExitCallback on_exit_;
  int posted_ = 0;
};

LaunchConfig config(int nnodes, int node_rank, int nproc) {
  LaunchConfig c;
  c.min_nodes = c.max_nodes = nnodes;
  c.node_rank = node_rank;
  c.nproc_per_node = nproc;
  c.program = "fake-worker";
  c.run_id = "test";
  c.shutdown_timeout = 200ms;
  c.rdzv_timeout = 10s;
  c.heartbeat_timeout = 400ms;
  c.heartbeat_interval = 50ms;
  c.signals_to_handle = {};
  return c;
}

AgentDeps fakes(std::shared_ptr<ddp::rendezvous::MemoryStore> store, std::function<Script(const WorkerSpec&)> script,
                Record& record) {
  AgentDeps d;
  d.host_store = false;
  d.preflight = false;
  d.connect_root = [store] { return store; };
  d.processes = [script, &record](asio::io_context& io, OutputPolicy) {
    return std::make_unique<FakeProcesses>(io, script, record);
  };
  return d;
}

int restart_count(const WorkerSpec& w) {
  return std::stoi(w.env.at("TORCHELASTIC_RESTART_COUNT"));
}

bool got_signal(Record& r, int rank, int signo) {
  std::lock_guard<std::mutex> lock(r.mutex);
  return std::find(r.signals.begin(), r.signals.end(), std::make_pair(rank, signo)) != r.signals.end();
}

// Runs node 1's agent on a thread and node 0's on this one, over the store their deps share;
// returns {node 0's exit code, node 1's}.
std::pair<int, int> run_two_nodes(const LaunchConfig& c0, AgentDeps d0, const LaunchConfig& c1, AgentDeps d1) {
  auto node1 = std::async(std::launch::async, [&c1, &d1] { return run_agent(c1, std::move(d1)); });
  const int code0 = run_agent(c0, std::move(d0));
  return {code0, node1.get()};
}

}  // namespace

TEST_CASE("all workers exiting 0 ends the job with 0") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  const auto c = config(1, 0, 3);
  CHECK(run_agent(c, fakes(
                         store, [](const WorkerSpec&) { return Script{}; }, rec)) == 0);
  REQUIRE(rec.starts.size() == 1);
  CHECK(rec.starts[0].size() == 3);
  CHECK(rec.signals.empty());
}

TEST_CASE("the first failure stops the siblings with SIGTERM and its code is the exit code") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  const auto c = config(1, 0, 2);
  const int code = run_agent(c, fakes(
                                    store,
                                    [](const WorkerSpec& w) {
                                      return w.rank == 1 ? Script{10ms, 3} : Script{0ms, 0, true};
                                    },
                                    rec));
  CHECK(code == 3);
  CHECK(got_signal(rec, 0, SIGTERM));
  CHECK_FALSE(got_signal(rec, 0, SIGKILL));
  const auto outcome = ddp::launcher::Outcome::decode(store->get("ddplaunch/test/r0/outcome", 1s));
  CHECK_FALSE(outcome.succeeded());
  CHECK(outcome.code == 3);
  CHECK(outcome.origin_node == 0);
  CHECK_THAT(outcome.summary, Catch::Contains("rank      : 1"));
}

TEST_CASE("a worker ignoring SIGTERM gets SIGKILL after the shutdown timeout") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  const auto c = config(1, 0, 2);
  const auto start = std::chrono::steady_clock::now();
  const int code = run_agent(c, fakes(
                                    store,
                                    [](const WorkerSpec& w) {
                                      return w.rank == 1 ? Script{10ms, 5} : Script{0ms, 0, true, true};
                                    },
                                    rec));
  CHECK(code == 5);
  CHECK(got_signal(rec, 0, SIGTERM));
  CHECK(got_signal(rec, 0, SIGKILL));
  CHECK(std::chrono::steady_clock::now() - start >= c.shutdown_timeout);
}

TEST_CASE("max_restarts restarts the job with a counted attempt and without it the failure stands") {
  const auto script = [](const WorkerSpec& w) {
    return (restart_count(w) == 0 && w.rank == 1) ? Script{10ms, 4} : Script{10ms, 0};
  };
  SECTION("with one restart") {
    auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
    Record rec;
    auto c = config(1, 0, 2);
    c.max_restarts = 1;
    CHECK(run_agent(c, fakes(store, script, rec)) == 0);
    REQUIRE(rec.starts.size() == 2);
    CHECK(restart_count(rec.starts[1][0]) == 1);
    CHECK(rec.starts[1][0].env.at("TORCHELASTIC_MAX_RESTARTS") == "1");
  }
  SECTION("without") {
    auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
    Record rec;
    CHECK(run_agent(config(1, 0, 2), fakes(store, script, rec)) == 4);
    CHECK(rec.starts.size() == 1);
  }
}

TEST_CASE("the process contexts of rounds gone are freed once settled: they do not pile up with the restarts") {
  // Every SIGCHLD woke every context kept, so each round cost more than the one before.
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  auto c = config(1, 0, 2);
  c.max_restarts = 30;
  const auto fails = [](const WorkerSpec& w) { return w.rank == 1 ? Script{1ms, 6} : Script{0ms, 0, true}; };
  CHECK(run_agent(c, fakes(store, fails, rec)) == 6);
  CHECK(rec.starts.size() == 31);
  CHECK(rec.most_live <= 3);  // the round's, the last round's, and one not settled yet
}

TEST_CASE("a failure on one node stops the workers on the other, and both exit with its code") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  const auto c0 = config(2, 0, 2);
  const auto c1 = config(2, 1, 1);
  const auto runs = [](const WorkerSpec&) { return Script{0ms, 0, true}; };
  const auto fails = [](const WorkerSpec&) { return Script{30ms, 7}; };
  const auto [code0, code1] = run_two_nodes(c0, fakes(store, runs, rec0), c1, fakes(store, fails, rec1));
  CHECK(code0 == 7);
  CHECK(code1 == 7);
  CHECK(got_signal(rec0, 0, SIGTERM));
  CHECK(got_signal(rec0, 1, SIGTERM));
  REQUIRE(rec1.starts.size() == 1);
  CHECK(rec1.starts[0][0].rank == 2);  // prefix sums: node 0 has ranks 0-1
  CHECK(rec1.starts[0][0].env.at("WORLD_SIZE") == "3");
}

TEST_CASE("two nodes that both succeed both exit 0") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  const auto quick = [](const WorkerSpec&) { return Script{5ms, 0}; };
  const auto slower = [](const WorkerSpec&) { return Script{20ms, 0}; };
  const auto [code0, code1] =
      run_two_nodes(config(2, 0, 2), fakes(store, quick, rec0), config(2, 1, 2), fakes(store, slower, rec1));
  CHECK(code0 == 0);
  CHECK(code1 == 0);
}

namespace {

// A process context whose workers cannot start, as when the program vanished after the checks.
class UnstartableProcesses final : public ProcessContext {
 public:
  std::vector<int> start(const std::vector<WorkerSpec>&, ExitCallback) override {
    throw ddp::UsageError("program 'fake-worker' was not found on PATH; give a path such as ./fake-worker");
  }
  void signal(int) override {}
  void notify(int) override {}
  std::size_t running() const override { return 0; }
  std::vector<int> abandon_running() override { return {}; }
  bool settled() const override { return true; }
};

}  // namespace

TEST_CASE("workers that cannot start end the job with 2, no restart, and the other nodes are told") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  auto c = config(1, 0, 2);
  c.max_restarts = 3;
  AgentDeps d = fakes(
      store, [](const WorkerSpec&) { return Script{}; }, rec);
  int starts = 0;
  d.processes = [&starts](asio::io_context&, OutputPolicy) {
    ++starts;
    return std::make_unique<UnstartableProcesses>();
  };
  CHECK(run_agent(c, std::move(d)) == 2);
  CHECK(starts == 1);
  const auto outcome = ddp::launcher::Outcome::decode(store->get("ddplaunch/test/r0/outcome", 1s));
  CHECK(outcome.code == 2);
  CHECK_THAT(outcome.summary, Catch::Contains("node 0 could not start its workers") && Catch::Contains("not found"));
}

TEST_CASE("a node that stops heartbeating is reported lost within the heartbeat timeout") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  // Node 1 joins the rendezvous and then goes silent (no agent, no heartbeats).
  auto silent = std::async(std::launch::async, [&] {
    const auto views = ddp::launcher::job_stores(store, "test", "");
    RendezvousOptions o;
    o.nnodes = 2;
    o.run_id = "test";
    o.timeout = 10s;
    join_round(*views.root, *views.job, NodeInfo{1, 1, "silent", "silent", 1, ""}, o);
  });
  const auto start = std::chrono::steady_clock::now();
  const int code = run_agent(config(2, 0, 1), fakes(
                                                  store,
                                                  [](const WorkerSpec&) {
                                                    return Script{0ms, 0, true};
                                                  },
                                                  rec));
  silent.get();
  CHECK(code == 1);
  CHECK(got_signal(rec, 0, SIGTERM));
  CHECK(std::chrono::steady_clock::now() - start < 5s);
}

TEST_CASE("a static job with a restart left waits for a lost node, and a launcher started again on its rank rejoins") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  auto c0 = config(2, 0, 1);
  auto c1 = config(2, 1, 1);
  c0.max_restarts = c1.max_restarts = 1;
  // Round 0 runs "forever"; after the restart the workers finish.
  const auto script = [](const WorkerSpec& w) {
    return restart_count(w) == 0 ? Script{0ms, 0, true} : Script{10ms, 0};
  };
  // Node 1's first launcher joins round 0 and is killed (no agent, no heartbeats).
  const auto views = ddp::launcher::job_stores(store, "test", "");
  auto killed = std::async(std::launch::async, [&] {
    RendezvousOptions o;
    o.nnodes = 2;
    o.run_id = "test";
    o.timeout = 10s;
    join_round(*views.root, *views.job, NodeInfo{1, 1, "pod1", "pod1", 1, ""}, o);
  });
  auto node0 = std::async(std::launch::async, [&] { return run_agent(c0, fakes(store, script, rec0)); });
  killed.get();
  // Started again at once: round 0 still holds the dead launcher's record, so it waits for the
  // round's end and joins round 1 with node 0.
  const int code1 = run_agent(c1, fakes(store, script, rec1));
  CHECK(node0.get() == 0);
  CHECK(code1 == 0);
  REQUIRE(rec0.starts.size() == 2);
  CHECK(restart_count(rec0.starts[1][0]) == 1);
  REQUIRE(rec1.starts.size() == 1);
  CHECK(restart_count(rec1.starts[0][0]) == 1);  // the rejoin counts as a restart, as on node 0
  CHECK(rec1.starts[0][0].rank == 1);
}

TEST_CASE("an elastic job starts with MIN nodes once the last call has passed") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  auto c = config(1, 0, 2);
  c.max_nodes = 3;
  c.last_call_timeout = 200ms;
  CHECK(run_agent(c, fakes(
                         store,
                         [](const WorkerSpec&) {
                           return Script{5ms, 0};
                         },
                         rec)) == 0);
  REQUIRE(rec.starts.size() == 1);
  CHECK(rec.starts[0][0].env.at("WORLD_SIZE") == "2");
  CHECK(rec.starts[0][0].env.at("GROUP_WORLD_SIZE") == "1");
}

namespace {

// Two nodes whose workers run until stopped; once both heartbeat (the monitors run), `write`
// puts `value` into round 0's outcome key as another program could. Returns both exit codes.
std::pair<int, int> run_with_foreign_outcome(const std::string& value) {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  const auto forever = [](const WorkerSpec&) { return Script{0ms, 0, true}; };
  auto node1 = std::async(std::launch::async, [&] { return run_agent(config(2, 1, 1), fakes(store, forever, rec1)); });
  auto stranger = std::async(std::launch::async, [&] {
    // Blocks until both nodes' heartbeat counters exist: the event that the workers run.
    store->wait({"ddplaunch/test/r0/hb/0", "ddplaunch/test/r0/hb/1"}, 10s);
    store->set("ddplaunch/test/r0/outcome", value);
  });
  const int code0 = run_agent(config(2, 0, 1), fakes(store, forever, rec0));
  stranger.get();
  return {code0, node1.get()};
}

}  // namespace

TEST_CASE("an outcome no node wrote (the old bare 'success') stops the job with 1, never 0") {
  const auto [code0, code1] = run_with_foreign_outcome("success");
  CHECK(code0 == 1);
  CHECK(code1 == 1);
}

TEST_CASE("a well-formed success while workers still run is refused: exit 1") {
  const auto [code0, code1] = run_with_foreign_outcome(ddp::launcher::Outcome::success(1).encode());
  CHECK(code0 == 1);
  CHECK(code1 == 1);
}

TEST_CASE("a malformed failure code cannot choose the exit code") {
  const auto [code0, code1] = run_with_foreign_outcome("ddplaunch-outcome 1 failure 999 1\n\x1b[2Jgotcha");
  CHECK(code0 == 1);
  CHECK(code1 == 1);
}

TEST_CASE("a node that fails its health gate at the restart ends a static job with 69 on both nodes") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  auto c0 = config(2, 0, 1);
  auto c1 = config(2, 1, 1);
  c0.max_restarts = c1.max_restarts = 1;
  const auto script = [](const WorkerSpec& w) {
    return restart_count(w) == 0 && w.rank == 0 ? Script{10ms, 4} : Script{10ms, 0};
  };
  AgentDeps d1 = fakes(store, script, rec1);
  std::vector<int> gated;
  d1.health = [&gated](int round, const ddp::CancelEvent&) -> std::optional<ddp::launcher::SelfExclusion> {
    gated.push_back(round);
    if (round == 0) return std::nullopt;
    return ddp::launcher::SelfExclusion{"health check command 'x' failed: exited with 1: nic down", "report"};
  };
  const auto [code0, code1] = run_two_nodes(c0, fakes(store, script, rec0), c1, std::move(d1));
  CHECK(code0 == ddp::kExitUnhealthy);
  CHECK(code1 == ddp::kExitUnhealthy);
  CHECK(gated == std::vector<int>{0, 1});
  CHECK(rec0.starts.size() == 1);  // no second round
}

TEST_CASE("with --active_nodes a standby starts no workers and ends with the job's success") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  std::array<Record, 3> rec;
  const auto node = [&](int rank) {
    auto c = config(2, rank, 1);
    c.max_nodes = 3;
    c.active_nodes = 2;
    c.last_call_timeout = 1s;
    return c;
  };
  const auto quick = [](const WorkerSpec&) { return Script{50ms, 0}; };
  auto node1 = std::async(std::launch::async, [&] { return run_agent(node(1), fakes(store, quick, rec[1])); });
  auto node2 = std::async(std::launch::async, [&] { return run_agent(node(2), fakes(store, quick, rec[2])); });
  CHECK(run_agent(node(0), fakes(store, quick, rec[0])) == 0);
  CHECK(node1.get() == 0);
  CHECK(node2.get() == 0);
  // Node 0 and one other ran workers, in a world of the active nodes only.
  REQUIRE(rec[0].starts.size() == 1);
  CHECK(rec[1].starts.size() + rec[2].starts.size() == 1);
  for (const Record& r : rec) {
    for (const auto& specs : r.starts) {
      CHECK(specs.at(0).env.at("WORLD_SIZE") == "2");
      CHECK(specs.at(0).env.at("GROUP_WORLD_SIZE") == "2");
    }
  }
}

namespace {

// A view the agent has never heard of: a listener added through AgentDeps, as a page or an
// exporter would be, that keeps every event's name and the job's root cause.
class EventTape final : public RoundListener {
 public:
  void on_event(const RoundEvent& event) override {
    std::visit(
        [this](const auto& e) {
          using E = std::decay_t<decltype(e)>;
          if constexpr (std::is_same_v<E, RoundJoining>) names.push_back("joining");
          if constexpr (std::is_same_v<E, RoundJoined>) names.push_back("joined");
          if constexpr (std::is_same_v<E, WorkersStarted>) names.push_back("started");
          if constexpr (std::is_same_v<E, WorkerExited>) names.push_back("exited");
          if constexpr (std::is_same_v<E, HangFound>) names.push_back("hang");
          if constexpr (std::is_same_v<E, RoundStopping>) names.push_back("stopping");
          if constexpr (std::is_same_v<E, RoundFailed>) {
            names.push_back("failed");
            short_causes.push_back(e.failed.cause());
          }
          if constexpr (std::is_same_v<E, JobRestarting>) names.push_back("restart");
          if constexpr (std::is_same_v<E, JobEnded>) {
            names.push_back("ended");
            exit_code = e.exit_code;
            root = e.root;
            group_rank = e.view.group_rank;
          }
        },
        event);
  }
  std::vector<std::string> names;
  std::vector<std::string> short_causes;
  std::optional<RootCause> root;
  int exit_code = -1;
  int group_rank = -1;
};

}  // namespace

TEST_CASE("a listener added through AgentDeps hears every event of a restarted job, in order") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  auto c = config(1, 0, 2);
  c.max_restarts = 1;
  EventTape tape;
  AgentDeps d = fakes(
      store,
      [](const WorkerSpec& w) {
        if (restart_count(w) > 0) return Script{10ms, 0};
        return w.rank == 1 ? Script{10ms, 4} : Script{0ms, 0, true};  // rank 0 runs until stopped
      },
      rec);
  d.listeners.push_back(&tape);
  CHECK(run_agent(c, std::move(d)) == 0);
  // Round 0: rank 1 fails, rank 0 is stopped; round 1: both succeed.
  CHECK(tape.names == std::vector<std::string>{"joining", "joined", "started", "exited", "stopping", "exited",
                                               "failed", "restart", "joining", "joined", "started", "exited",
                                               "exited", "ended"});
  REQUIRE(tape.short_causes.size() == 1);
  CHECK_THAT(tape.short_causes[0], Catch::StartsWith("rank 1 (local_rank: 1) on node 0 (") &&
                                       Catch::EndsWith("): exitcode 4: fake stderr of rank 1"));
  CHECK(tape.exit_code == 0);
  CHECK_FALSE(tape.root);  // the job succeeded
}

TEST_CASE("both nodes end with the same root cause as fields, whichever node it happened on") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  EventTape tape0, tape1;
  AgentDeps d0 = fakes(store, [](const WorkerSpec&) { return Script{0ms, 0, true}; }, rec0);
  AgentDeps d1 = fakes(
      store, [](const WorkerSpec& w) { return w.local_rank == 1 ? Script{30ms, 7} : Script{0ms, 0, true}; }, rec1);
  d0.listeners.push_back(&tape0);
  d1.listeners.push_back(&tape1);
  const auto [code0, code1] = run_two_nodes(config(2, 0, 2), std::move(d0), config(2, 1, 2), std::move(d1));
  CHECK(code0 == 7);
  CHECK(code1 == 7);
  REQUIRE(tape0.root);
  REQUIRE(tape1.root);
  for (const RootCause* r : {&*tape0.root, &*tape1.root}) {
    CHECK(r->kind == RootCause::Kind::Worker);
    CHECK(r->rank == 3);
    CHECK(r->local_rank == 1);
    CHECK(r->node == 1);
    CHECK(r->exit_code == 7);
    CHECK(r->stderr_tail == std::vector<std::string>{"fake stderr of rank 3"});
  }
  CHECK(tape0.root->time == tape1.root->time);  // node 0's copy is node 1's record, not its own reading
  CHECK(tape0.root->host == tape1.root->host);
}

TEST_CASE("a worker that outlives SIGKILL ends the job with 71 and no new round, though restarts are left") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec;
  auto c = config(1, 0, 2);
  c.max_restarts = 2;
  c.unkillable_timeout = 200ms;
  const auto script = [](const WorkerSpec& w) {
    Script s{10ms, 3};
    if (w.rank == 0) s = Script{0ms, 0, true, true, true};
    return s;
  };
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_agent(c, fakes(store, script, rec)) == ddp::kExitUnkillable);
  CHECK(std::chrono::steady_clock::now() - start >= c.shutdown_timeout + c.unkillable_timeout);
  CHECK(got_signal(rec, 0, SIGKILL));
  CHECK(rec.starts.size() == 1);
}

namespace {

// Two nodes with a restart left: round 0 fails on node 0 (exit 4) while node 1's worker outlives
// SIGKILL (the kernel holds it); every later worker exits 0. `elastic`: --nnodes=1:2.
std::pair<int, int> run_with_held_worker_on_node1(std::shared_ptr<ddp::rendezvous::MemoryStore> store, Record& rec0,
                                                  Record& rec1, bool elastic) {
  auto c0 = config(2, 0, 1);
  auto c1 = config(2, 1, 1);
  for (LaunchConfig* c : {&c0, &c1}) {
    c->max_restarts = 1;
    if (elastic) c->min_nodes = 1;
    c->last_call_timeout = 200ms;
  }
  c1.unkillable_timeout = 200ms;
  const auto script = [](const WorkerSpec& w) {
    Script s{10ms, 0};
    if (restart_count(w) == 0) s = w.rank == 0 ? Script{10ms, 4} : Script{0ms, 0, true, true, true};
    return s;
  };
  return run_two_nodes(c0, fakes(store, script, rec0), c1, fakes(store, script, rec1));
}

}  // namespace

TEST_CASE("a node whose worker the kernel holds tells the others in the next round, and a static job ends with 69") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  const auto [code0, code1] = run_with_held_worker_on_node1(store, rec0, rec1, false);
  CHECK(code0 == ddp::kExitUnhealthy);
  CHECK(code1 == ddp::kExitUnkillable);
  CHECK(rec0.starts.size() == 1);  // no second round on either node
  CHECK(rec1.starts.size() == 1);
  CHECK_THAT(store->get("ddplaunch/test/r1/ready", 1s),
             Catch::Contains("node 1 (") && Catch::Contains("outlived SIGKILL by 0.2 s, held by the kernel"));
}

TEST_CASE("an elastic job goes on without the node whose worker the kernel holds") {
  auto store = std::make_shared<ddp::rendezvous::MemoryStore>();
  Record rec0, rec1;
  const auto [code0, code1] = run_with_held_worker_on_node1(store, rec0, rec1, true);
  CHECK(code0 == 0);  // round 1 on node 0 alone
  CHECK(code1 == ddp::kExitUnkillable);
  REQUIRE(rec0.starts.size() == 2);
  CHECK(rec0.starts[1][0].env.at("WORLD_SIZE") == "1");
  CHECK(rec1.starts.size() == 1);
}
