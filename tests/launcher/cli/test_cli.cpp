// parse_command_line(): torchrun's flags in both spellings, PET_* defaults, the program and its
// arguments passed through untouched, the nproc keywords, endpoints, stream selections, durations
// and --rdzv_conf, signals, legacy flags, --help/--version, and a table of bad
// inputs that must each be a UsageError naming the offending value (the rules on the finished
// config have their own suite, test_validate.cpp). The environment is a fake (a std::map) except
// where a test says otherwise.
#include "launcher/cli/cli.hpp"

#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/exit_codes.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/job_secret.hpp"
#include "tests/support/command_line.hpp"
#include "tests/support/fake_env.hpp"

namespace {

using ddp::launcher::LaunchConfig;
using ddp::testing::Args;
using ddp::testing::FakeEnv;
using ddp::testing::parse;
using ddp::testing::parse_full;
using ddp::testing::usage_error;

// Sets process environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const FakeEnv& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnv() {
    for (const auto& [name, old] : saved_) {
      if (old) {
        ::setenv(name.c_str(), old->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_CASE("defaults for a bare program", "[cli]") {
  const auto parsed = parse_full({"./train"});
  CHECK_FALSE(parsed.early_exit_text);
  const auto& c = parsed.config;
  CHECK(c.program == "./train");
  CHECK(c.program_args.empty());
  CHECK(c.min_nodes == 1);
  CHECK(c.max_nodes == 1);
  CHECK(c.nproc_per_node == 1);
  CHECK(c.node_rank == 0);
  CHECK(c.master_addr == "127.0.0.1");
  CHECK(c.master_port == 0);  // a free port: a single node with no port given (torchrun 2.15)
  CHECK(c.run_id != "none");
  CHECK_FALSE(c.standalone);
  CHECK(c.local_rank_arg == LaunchConfig::LocalRankArg::None);
  CHECK(c.signals_to_handle == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2});
}

TEST_CASE("both spellings of each flag are accepted", "[cli]") {
  const Args underscores{"--nproc_per_node=3",     "--nnodes=2",           "--node_rank=1",
                         "--master_addr=10.1.1.1", "--master_port=1234",   "--rdzv_id=j1",
                         "--max_restarts=2",       "--log_dir=/tmp/l",     "--local_addr=10.1.1.2",
                         "--monitor_interval=0.5", "--shutdown_timeout=7", "prog"};
  const Args dashes{"--nproc-per-node",   "3",        "--nnodes",           "2",      "--node-rank",  "1",
                    "--master-addr",      "10.1.1.1", "--master-port",      "1234",   "--rdzv-id",    "j1",
                    "--max-restarts",     "2",        "--log-dir",          "/tmp/l", "--local-addr", "10.1.1.2",
                    "--monitor-interval", "0.5",      "--shutdown-timeout", "7",      "prog"};
  for (const Args* args : {&underscores, &dashes}) {
    const auto c = parse(*args);
    CHECK(c.nproc_per_node == 3);
    CHECK(c.min_nodes == 2);
    CHECK(c.max_nodes == 2);
    CHECK(c.node_rank == 1);
    CHECK(c.master_addr == "10.1.1.1");
    CHECK(c.master_port == 1234);
    CHECK(c.run_id == "j1");
    CHECK(c.max_restarts == 2);
    CHECK(c.log_dir == "/tmp/l");
    CHECK(c.local_addr == "10.1.1.2");
    CHECK(c.monitor_interval == std::chrono::milliseconds(500));
    CHECK(c.shutdown_timeout == std::chrono::seconds(7));
    CHECK(c.program == "prog");
  }
  CHECK(parse({"--max_restarts=010", "prog"}).max_restarts == 10);  // decimal, never octal
  CHECK(parse({"--no-python", "prog"}).no_python);
  CHECK(parse({"--no_python", "prog"}).no_python);
  CHECK(parse({"--virtual-local-rank", "prog"}).virtual_local_rank);
  CHECK(parse({"--dry-run", "prog"}).dry_run);
  CHECK(parse({"--dry_run", "prog"}).dry_run);
}

// PET_* defaults. The variables are set both in the fake lookup and in the process environment
// (restored afterwards), so this holds whichever of the two the parser reads; see the report on
// CLI11's envname bypassing the EnvLookup.
TEST_CASE("straggler detection is on by default, its flags set the mode, window and thresholds", "[cli]") {
  using ddp::launcher::StragglerMode;
  const auto d = parse({"prog"});
  CHECK(d.stragglers == StragglerMode::Warn);
  CHECK(d.straggler_window == std::chrono::seconds(30));
  CHECK(d.straggler_min_ms == 20);
  CHECK(d.straggler_fraction == Approx(0.1));
  const auto c = parse({"--stragglers=replace", "--nnodes=2:3", "--straggler_window=12", "--straggler-min-ms=5",
                        "--straggler_fraction=0.25", "--straggler_replace_after=60", "prog"});
  CHECK(c.stragglers == StragglerMode::Replace);
  CHECK(c.straggler_window == std::chrono::seconds(12));
  CHECK(c.straggler_min_ms == 5);
  CHECK(c.straggler_fraction == Approx(0.25));
  CHECK(c.straggler_replace_after == std::chrono::seconds(60));
  CHECK(parse({"--stragglers", "off", "prog"}).stragglers == StragglerMode::Off);
}

TEST_CASE("a run without --log_dir makes its directory under $TMPDIR, else /tmp", "[cli]") {
  CHECK(parse({"prog"}, FakeEnv{}).temp_dir == "/tmp");
  CHECK(parse({"prog"}, FakeEnv{{"TMPDIR", "/scratch/tmp"}}).temp_dir == "/scratch/tmp");
  CHECK(parse({"prog"}, FakeEnv{{"TMPDIR", ""}}).temp_dir == "/tmp");
}

TEST_CASE("PET_* variables supply defaults and explicit flags beat them", "[cli]") {
  const FakeEnv pet{{"PET_NPROC_PER_NODE", "3"},
                    {"PET_NNODES", "2"},
                    {"PET_NODE_RANK", "1"},
                    {"PET_MASTER_ADDR", "10.9.9.9"},
                    {"PET_MASTER_PORT", "4321"}};
  const ScopedEnv scoped(pet);
  SECTION("defaults") {
    const auto c = parse({"prog"}, pet);
    CHECK(c.nproc_per_node == 3);
    CHECK(c.max_nodes == 2);
    CHECK(c.node_rank == 1);
    CHECK(c.master_addr == "10.9.9.9");
    CHECK(c.master_port == 4321);
  }
  SECTION("explicit flags win") {
    const auto c = parse(
        {"--nproc_per_node=1", "--nnodes=3", "--node_rank=2", "--master_addr=h", "--master_port=99", "prog"}, pet);
    CHECK(c.nproc_per_node == 1);
    CHECK(c.max_nodes == 3);
    CHECK(c.node_rank == 2);
    CHECK(c.master_addr == "h");
    CHECK(c.master_port == 99);
  }
}

TEST_CASE("nnodes takes N or MIN:MAX", "[cli]") {
  const auto n = parse({"--nnodes", "4", "prog"});
  CHECK(n.min_nodes == 4);
  CHECK(n.max_nodes == 4);
  const auto fixed = parse({"--nnodes", "2:2", "prog"});
  CHECK(fixed.min_nodes == 2);
  CHECK(fixed.max_nodes == 2);
}

// Elastic ranges (MIN < MAX) were rejected with a UsageError and are being enabled; either way
// the range must not be garbled.
TEST_CASE("an elastic nnodes range is either rejected by name or kept as given", "[cli]") {
  const std::string error = usage_error({"--nnodes", "1:4", "prog"});
  if (error == "<no exception>") {
    const auto c = parse({"--nnodes", "1:4", "prog"});
    CHECK(c.min_nodes == 1);
    CHECK(c.max_nodes == 4);
  } else {
    CHECK_THAT(error, Catch::Contains("1:4"));
    CHECK_THAT(error, !Catch::StartsWith("<"));
  }
}

TEST_CASE("nproc_per_node keywords cpu gpu auto", "[cli]") {
  const int cpus = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  SECTION("cpu") {
    const int n = parse({"--nproc_per_node=cpu", "prog"}).nproc_per_node;
    CHECK(n >= 1);
    CHECK(n == std::max(1, cpus));
  }
  SECTION("gpu counts CUDA_VISIBLE_DEVICES") {
    CHECK(parse({"--nproc_per_node=gpu", "prog"}, {{"CUDA_VISIBLE_DEVICES", "0,3"}}).nproc_per_node == 2);
  }
  SECTION("gpu without a visible GPU") {
    for (const char* none : {"", "-1"}) {
      const std::string msg = usage_error({"--nproc_per_node=gpu", "prog"}, {{"CUDA_VISIBLE_DEVICES", none}});
      CHECK_THAT(msg, Catch::Contains("--nproc_per_node=gpu"));
    }
  }
  SECTION("gpu named but no NVIDIA driver: one line, exit 2") {
    const std::string msg = usage_error({"--nproc_per_node=gpu", "prog"}, {{"CUDA_VISIBLE_DEVICES", "0,3"}},
                                        ddp::testing::no_nvidia_driver);
    CHECK_THAT(msg, Catch::Contains("CUDA_VISIBLE_DEVICES=0,3") && Catch::Contains("no NVIDIA driver"));
    CHECK(msg.find('\n') == std::string::npos);
    CHECK(
        parse_full({"--nproc_per_node=auto", "prog"}, {{"CUDA_VISIBLE_DEVICES", "0,3"}}, ddp::testing::no_nvidia_driver)
            .config.nproc_per_node == std::max(1, cpus));
  }
  SECTION("auto") {
    CHECK(parse({"--nproc_per_node=auto", "prog"}, {{"CUDA_VISIBLE_DEVICES", "0,3"}}).nproc_per_node == 2);
    CHECK(parse({"--nproc_per_node=auto", "prog"}, {{"CUDA_VISIBLE_DEVICES", ""}}).nproc_per_node == std::max(1, cpus));
  }
}

TEST_CASE("everything after the program is passed through untouched", "[cli]") {
  SECTION("flag-like arguments, including our own flags") {
    const auto c = parse({"prog", "--lr", "0.1", "--nnodes", "5"});
    CHECK(c.program == "prog");
    CHECK(c.program_args == Args{"--lr", "0.1", "--nnodes", "5"});
    CHECK(c.max_nodes == 1);
  }
  SECTION("after launcher options") {
    const auto c = parse({"--nproc_per_node=2", "train.py", "--nproc_per_node=7", "-m", "--help", "x"});
    CHECK(c.nproc_per_node == 2);
    CHECK_FALSE(c.module);
    CHECK(c.program == "train.py");
    CHECK(c.program_args == Args{"--nproc_per_node=7", "-m", "--help", "x"});
  }
  SECTION("a -- inside the program's arguments") {
    const auto c = parse({"prog", "a", "--", "--b"});
    CHECK(c.program == "prog");
    CHECK(c.program_args == Args{"a", "--", "--b"});
  }
  SECTION("-- separates launcher options from the program") {
    const auto c = parse({"--nproc_per_node=2", "--", "prog", "--x", "1"});
    CHECK(c.nproc_per_node == 2);
    CHECK(c.program == "prog");
    CHECK(c.program_args == Args{"--x", "1"});
  }
}

TEST_CASE("standalone picks a free port and a random run id", "[cli]") {
  const auto a = parse({"--standalone", "prog"});
  const auto b = parse({"--standalone", "prog"});
  CHECK(a.standalone);
  CHECK(a.master_port == 0);
  CHECK(a.max_nodes == 1);
  CHECK(a.node_rank == 0);
  CHECK_FALSE(a.run_id.empty());
  CHECK(a.run_id != "none");
  CHECK(a.run_id != b.run_id);
  CHECK(parse({"--standalone", "--nnodes=1", "--node_rank=0", "prog"}).standalone);
}

TEST_CASE("a single node with no port given takes a free port and a random run id", "[cli]") {
  const auto a = parse({"prog"});
  const auto b = parse({"prog"});
  CHECK(a.master_port == 0);
  CHECK(a.run_id != "none");
  CHECK(a.run_id != b.run_id);
  CHECK_FALSE(a.standalone);
  SECTION("a port given anywhere is kept") {
    CHECK(parse({"--master_port=29501", "prog"}).master_port == 29501);
    CHECK(parse({"--master_port=29501", "prog"}).run_id == "none");
    CHECK(parse({"prog"}, {{"PET_MASTER_PORT", "29502"}}).master_port == 29502);
    CHECK(parse({"prog"}, {{"MASTER_PORT", "29503"}}).master_port == 29503);
    CHECK(usage_error({"prog"}, {{"MASTER_PORT", "70000"}}).find("MASTER_PORT=70000") != std::string::npos);
  }
  SECTION("an explicit run id is kept") {
    CHECK(parse({"--rdzv_id=exp1", "prog"}).run_id == "exp1");
    CHECK(parse({"--rdzv_id=exp1", "prog"}).master_port == 0);
  }
  SECTION("multi-node and elastic jobs keep 29500") {
    CHECK(parse({"--nnodes=2", "prog"}).master_port == 29500);
    CHECK(parse({"--nnodes=2", "prog"}).run_id == "none");
    CHECK(parse({"--nnodes=1:2", "prog"}).master_port == 29500);
    CHECK(parse({"--rdzv_endpoint=node7", "prog"}).master_port == 29500);
  }
}

TEST_CASE("rdzv_endpoint sets the master address and port", "[cli]") {
  SECTION("host:port") {
    const auto c = parse({"--rdzv_endpoint", "node7:29600", "prog"});
    CHECK(c.master_addr == "node7");
    CHECK(c.master_port == 29600);
  }
  SECTION("bracketed IPv6") {
    const auto c = parse({"--rdzv-endpoint=[::1]:1234", "prog"});
    CHECK(c.master_addr == "::1");
    CHECK(c.master_port == 1234);
  }
  SECTION("host only keeps the port") {
    const auto c = parse({"--rdzv_endpoint", "node7.cluster", "prog"});
    CHECK(c.master_addr == "node7.cluster");
    CHECK(c.master_port == 29500);
  }
}

TEST_CASE("dump_stacks finds the job itself unless a flag or PET_* variable names one", "[cli]") {
  CHECK(parse({"--dump_stacks"}).find_job);
  CHECK(parse({"--dump-stacks", "--nproc_per_node=2"}).find_job);
  CHECK_FALSE(parse({"--nproc_per_node=2", "prog"}).find_job);
  for (const Args& named : {Args{"--master_port=41233"}, Args{"--master-addr=10.0.0.1"}, Args{"--rdzv_id=x"},
                            Args{"--rdzv_endpoint=node7:29600"}}) {
    Args args = named;
    args.push_back("--dump_stacks");
    CHECK_FALSE(parse(args).find_job);
  }
  CHECK_FALSE(parse({"--dump_stacks"}, {{"PET_MASTER_PORT", "41233"}}).find_job);
  CHECK_FALSE(parse({"--dump_stacks"}, {{"PET_RDZV_ID", "x"}}).find_job);
}

TEST_CASE("redirects and tee take a mask or a per-rank map", "[cli]") {
  const auto all = parse({"--redirects", "3", "prog"});
  CHECK(all.redirects.all == 3);
  CHECK(all.redirects.per_rank.empty());
  CHECK(all.tee.all == 0);

  const auto per_rank = parse({"-r", "0:1,1:2", "--tee", "2", "prog"});
  CHECK(per_rank.redirects.all == 0);
  CHECK(per_rank.redirects.per_rank == std::map<int, int>{{0, 1}, {1, 2}});
  CHECK(per_rank.redirects.for_rank(0) == 1);
  CHECK(per_rank.redirects.for_rank(1) == 2);
  CHECK(per_rank.redirects.for_rank(5) == 0);
  CHECK(per_rank.tee.all == 2);

  const auto tee_map = parse({"-t", "1:3", "prog"});
  CHECK(tee_map.tee.for_rank(1) == 3);
  CHECK(tee_map.tee.for_rank(0) == 0);
}

TEST_CASE("durations take seconds, and rdzv_conf keys override them", "[cli]") {
  using namespace std::chrono_literals;
  SECTION("flags") {
    const auto c = parse({"--heartbeat_timeout=2.5", "--rdzv_timeout", "1e3", "--shutdown-timeout", "0", "prog"});
    CHECK(c.heartbeat_timeout == 2500ms);
    CHECK(c.heartbeat_interval == 500ms);
    CHECK(c.rdzv_timeout == 1000s);
    CHECK(c.shutdown_timeout == 0ms);
  }
  SECTION("rdzv_conf: join_timeout wins over timeout and the flag, in any order") {
    const auto c = parse({"--rdzv_timeout=5", "--rdzv_conf", "join_timeout=7,timeout=6,heartbeat_timeout=20", "prog"});
    CHECK(c.rdzv_timeout == 7s);
    CHECK(c.heartbeat_timeout == 20s);
    CHECK(c.heartbeat_interval == 4s);
  }
  SECTION("rdzv_conf: other known keys are kept as given") {
    const auto c = parse({"--rdzv_conf=last_call_timeout=0.5,is_host=1,store_type=tcp", "prog"});
    CHECK(c.rdzv_conf ==
          std::map<std::string, std::string>{{"last_call_timeout", "0.5"}, {"is_host", "1"}, {"store_type", "tcp"}});
    CHECK(c.rdzv_timeout == 900s);
  }
  SECTION("rdzv_conf given twice: one list (torchrun keeps only the last flag)") {
    const auto c = parse({"--rdzv_conf", "timeout=6", "--rdzv-conf=heartbeat_timeout=20,is_host=1", "prog"});
    CHECK(c.rdzv_timeout == 6s);
    CHECK(c.heartbeat_timeout == 20s);
    CHECK(c.rdzv_conf.at("is_host") == "1");
  }
}

TEST_CASE("a failure budget sets the timeouts not given alone (--failure_budget)", "[cli]") {
  using namespace std::chrono_literals;
  SECTION("without it, the defaults") {
    const auto c = parse({"prog"});
    CHECK(c.failure_budget == 0ms);
    CHECK(c.hang_timeout == 0ms);
    CHECK(c.heartbeat_timeout == 10s);
    CHECK(c.shutdown_timeout == 30s);
    CHECK(c.unkillable_timeout == 30s);
  }
  SECTION("a budget, and values given alone that win over it") {
    const auto c = parse({"--failure_budget=300", "--hang_timeout=100", "--rdzv_conf=heartbeat_timeout=20", "prog"});
    CHECK(c.failure_budget == 300s);
    CHECK(c.hang_timeout == 100s);       // given alone
    CHECK(c.heartbeat_timeout == 20s);   // --rdzv_conf's key, given alone
    CHECK(c.shutdown_timeout == 30s);    // the budget's: B/10 within 1..30 s
    CHECK(c.unkillable_timeout == 30s);  // the budget's
  }
  SECTION("a short budget") {
    const auto c = parse({"--failure-budget", "60", "--unkillable_timeout=2", "prog"});
    CHECK(c.hang_timeout == 30s);
    CHECK(c.heartbeat_timeout == 6s);
    CHECK(c.shutdown_timeout == 6s);
    CHECK(c.unkillable_timeout == 2s);
  }
}

TEST_CASE("an empty value is the flag's, never the program's, and is refused by the flag's name", "[cli]") {
  // Before: CLI11 read --master_addr= as the flag alone and took ./train.sh as its value.
  CHECK(usage_error({"--master_addr=", "./train.sh"}) ==
        "--master_addr is empty; give --master_addr=HOST or leave the flag out (see ddplaunch --help)");
  CHECK(usage_error({"--master_addr", "", "./train.sh"}) == usage_error({"--master_addr=", "./train.sh"}));
  CHECK_THAT(usage_error({"--master-addr=", "./train.sh"}), Catch::StartsWith("--master_addr is empty"));
  CHECK_THAT(usage_error({"--master_addr", "h", "--nnodes=", "prog"}),
             Catch::StartsWith("--nnodes is empty; give --nnodes=N|MIN:MAX"));
  for (const char* flag :
       {"--nproc_per_node", "--node_rank", "--master_port", "--rdzv_id", "--rdzv_backend", "--rdzv_timeout",
        "--max_restarts", "--log_dir", "--summary_json", "--redirects", "--signals_to_handle", "--log_level"}) {
    INFO(flag);
    CHECK_THAT(usage_error({std::string(flag) + "=", "prog"}),
               Catch::StartsWith(std::string(flag) + " is empty; give "));
  }
  CHECK_THAT(usage_error({"-r", "", "prog"}), Catch::StartsWith("--redirects is empty"));
  SECTION("where empty means something, it is the value, and the program stays the program") {
    const auto c = parse({"--log_line_prefix_template=", "--rdzv_conf=", "--local_ranks_filter=", "prog", "x"});
    CHECK(c.line_prefix_template.empty());
    CHECK(c.rdzv_conf.empty());
    CHECK(c.local_ranks_filter.empty());
    CHECK(c.program == "prog");
    CHECK(c.program_args == Args{"x"});
  }
  SECTION("TorchX's dist.ddp passes --role \"\": an empty role, as torchrun takes it (ROLE_NAME=\"\")") {
    CHECK(parse({"--role", "", "--tee", "3", "train.py"}).role.empty());
    CHECK(parse({"--role=", "train.py"}).role.empty());
    CHECK(parse({"train.py"}).role == "default");
  }
  SECTION("the program's own arguments are untouched") {
    const auto c = parse({"--nproc_per_node", "2", "prog", "--master_addr=", "--log_dir="});
    CHECK(c.program == "prog");
    CHECK(c.program_args == Args{"--master_addr=", "--log_dir="});
  }
}

TEST_CASE("signals_to_handle takes names and numbers", "[cli]") {
  CHECK(parse({"--signals_to_handle", "SIGTERM,SIGUSR1,10", "prog"}).signals_to_handle ==
        std::vector<int>{SIGTERM, SIGUSR1, 10});
  CHECK(parse({"--signals-to-handle=term,Hup", "prog"}).signals_to_handle == std::vector<int>{SIGTERM, SIGHUP});
}

TEST_CASE("legacy flags ask for the local rank in the worker arguments", "[cli]") {
  using Arg = LaunchConfig::LocalRankArg;
  CHECK(parse({"--use_env=false", "prog"}).local_rank_arg == Arg::Underscore);
  CHECK(parse({"--use-env=False", "prog"}).local_rank_arg == Arg::Underscore);
  CHECK(parse({"--use_env=true", "prog"}).local_rank_arg == Arg::None);
  CHECK(parse({"--local_rank_arg", "prog"}).local_rank_arg == Arg::Underscore);
  CHECK(parse({"--local-rank-arg", "prog"}).local_rank_arg == Arg::Underscore);
  CHECK(parse({"--local_rank_arg=underscore", "prog"}).local_rank_arg == Arg::Underscore);
  CHECK(parse({"--local_rank_arg=dash", "prog"}).local_rank_arg == Arg::Dash);
  CHECK(parse({"--local-rank-arg=dash", "--use_env=false", "prog"}).local_rank_arg == Arg::Dash);
  CHECK(usage_error({"--local_rank_arg=hyphen", "prog"}).find("hyphen") != std::string::npos);
}

TEST_CASE("help and version exit early with text", "[cli]") {
  const auto help = parse_full({"--help"});
  REQUIRE(help.early_exit_text);
  CHECK_THAT(*help.early_exit_text, Catch::Contains("--nproc_per_node"));
  CHECK(parse_full({"-h"}).early_exit_text);

  const auto version = parse_full({"--version"});
  REQUIRE(version.early_exit_text);
  CHECK_THAT(*version.early_exit_text, Catch::StartsWith("ddplaunch "));
}

TEST_CASE("help's usage line names ddplaunch and the program, and no flag shows CLI11's markup", "[cli]") {
  const char* argv[] = {"/opt/venv/bin/ddplaunch", "--help", nullptr};
  const auto help =
      ddp::launcher::parse_command_line(2, argv, ddp::testing::lookup({}), ddp::launcher::rendezvous_backends())
          .early_exit_text;
  REQUIRE(help);
  CHECK_THAT(*help, Catch::Contains("\nUsage: ddplaunch [OPTIONS] PROGRAM [ARGS...]\n"));
  CHECK_THAT(*help, !Catch::Contains("/opt/venv/bin"));
  CHECK_THAT(*help, Catch::Contains("  --local_rank_arg,--local-rank-arg [=underscore|dash]\n"));
  CHECK_THAT(*help, !Catch::Contains("{underscore"));
}

TEST_CASE("help says what the code does: the port default, the interpreter, every exit code and rdzv_conf key",
          "[cli]") {
  const auto help = parse_full({"--help"}).early_exit_text;
  REQUIRE(help);
  CHECK_THAT(*help, Catch::Contains("a free port for a single node, 29500 for several"));
  CHECK_THAT(*help, Catch::Contains("$PYTHON_EXEC") && Catch::Contains("$VIRTUAL_ENV") &&
                        Catch::Contains("$CONDA_PREFIX") && Catch::Contains("python3 on PATH"));
  for (const ddp::ExitCodeMeaning& e : ddp::kExitCodeMeanings) {
    CHECK_THAT(*help, Catch::Contains(std::to_string(static_cast<int>(e.code)) + "  ") && Catch::Contains(e.meaning));
  }
  CHECK_THAT(*help, Catch::Contains("124") && Catch::Contains("a hang (--hang_timeout) or a desync in a collective"));
  for (const char* key : {"cacert=FILE", "cert=FILE", "key=FILE", "protocol=http|https", "token_file=PATH"}) {
    CHECK_THAT(*help, Catch::Contains(key));
  }
}

TEST_CASE("bad input is a UsageError naming the offending value", "[cli]") {
  struct Bad {
    Args args;
    std::string needle;
    FakeEnv env;
  };
  const std::vector<Bad> cases{
      {{"--bogus", "prog"}, "--bogus", {}},
      {{"--nproc_per_node=0", "prog"}, "--nproc_per_node=0", {}},
      {{"--nproc_per_node=abc", "prog"}, "abc", {}},
      {{"--nproc_per_node=gpu", "prog"}, "gpu", {{"CUDA_VISIBLE_DEVICES", ""}}},
      {{"--node_rank", "2", "--nnodes", "2", "prog"}, "--node_rank=2", {}},
      {{"--node_rank=x", "prog"}, "--node_rank=x", {}},
      {{"--nnodes", "0", "prog"}, "--nnodes=0", {}},
      {{"--nnodes", "3:1", "prog"}, "3:1", {}},
      {{"--nnodes", "a:b", "prog"}, "a:b", {}},
      {{"--master_port", "70000", "prog"}, "70000", {}},
      {{"--master_port=-1", "prog"}, "--master_port=-1", {}},
      {{"--nnodes", "2", "--master_port", "0", "prog"}, "--master_port=0", {}},
      {{"--max_restarts=-1", "prog"}, "--max_restarts=-1", {}},
      {{"--nproc_per_node=2"}, "no program", {}},
      {{}, "no program", {}},
      {{"--no_python", "-m", "prog"}, "--no_python", {}},
      {{"--rdzv_backend", "etcd", "prog"}, "etcd", {}},
      {{"--redirects", "7", "prog"}, "--redirects=7", {}},
      {{"--redirects", "0:5", "prog"}, "0:5", {}},
      {{"--tee", "x", "prog"}, "--tee=x", {}},
      {{"--redirects", "0:1,0:2", "prog"}, "--redirects=0:1,0:2 names local rank 0 twice", {}},
      {{"--nnodes=2:3", "--active_nodes=0", "prog"}, "--active_nodes=0 is outside --nnodes=2:3", {}},
      {{"--nnodes=2:3", "prog"}, "--active_nodes=0", {{"PET_ACTIVE_NODES", "0"}}},
      {{"--nproc_per_node=2", "--local_ranks_filter", "9", "prog"}, "9", {}},
      {{"--local_ranks_filter", "a", "prog"}, "--local_ranks_filter=a", {}},
      {{"--signals_to_handle", "SIGFOO", "prog"}, "SIGFOO", {}},
      {{"--monitor_interval", "0", "prog"}, "--monitor_interval", {}},
      {{"--shutdown_timeout=-1", "prog"}, "--shutdown_timeout", {}},
      {{"--rdzv_endpoint", "bad host!", "prog"}, "bad host!", {}},
      {{"--rdzv_endpoint", "node7:99999", "prog"}, "99999", {}},
      {{"--rdzv_conf", "novalue", "prog"}, "novalue", {}},
      {{"--rdzv_conf", "timeout=", "prog"}, "timeout=", {}},
      {{"--rdzv_conf", "timeout=abc", "prog"}, "timeout=abc", {}},
      {{"--rdzv_conf", "join_timeout=5,foo=1", "prog"}, "'foo'", {}},
      {{"--rdzv_conf", "timeout=5,timeout=6", "prog"}, "gives timeout twice", {}},
      {{"--rdzv_conf", "timeout=5", "--rdzv_conf", "timeout=6", "prog"}, "gives timeout twice", {}},
      {{"--rdzv_endpoint", "[::1]:x", "prog"}, "--rdzv_endpoint=[::1]:x is not host[:port]", {}},
      {{"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h1,:2379", "prog"}, "--rdzv_endpoint=:2379", {}},
      {{"--rdzv_timeout", "abc", "prog"}, "--rdzv_timeout: abc", {}},
      {{"--heartbeat_timeout", "inf", "prog"}, "--heartbeat_timeout: inf", {}},
      {{"--heartbeat_timeout", "0.05", "prog"}, "--heartbeat_timeout=0.05 s", {}},
      {{"--nproc_per_node=5000", "prog"}, "--nproc_per_node=5000", {}},
      {{"--max_restarts=5000", "prog"}, "--max_restarts=5000", {}},
      {{"--max_restarts=abc", "prog"}, "--max_restarts=abc", {}},
      {{"--standalone", "--nnodes", "2", "prog"}, "--nnodes=2", {}},
      {{"--signals_to_handle", "", "prog"}, "--signals_to_handle is empty", {}},
      {{"--signals_to_handle", "SIGKILL", "prog"}, "SIGKILL", {}},
      {{"--log_level", "loud", "prog"}, "loud", {}},
      {{"prog"}, "PET_MONITOR_INTERVAL=abc", {{"PET_MONITOR_INTERVAL", "abc"}}},
  };
  for (const auto& bad : cases) {
    std::string joined;
    for (const auto& a : bad.args) joined += "'" + a + "' ";
    INFO("args: " << joined);
    const std::string msg = usage_error(bad.args, bad.env);
    CHECK_THAT(msg, Catch::Contains(bad.needle));
    CHECK_THAT(msg, !Catch::StartsWith("<"));
  }
}

}  // namespace

TEST_CASE("the job secret comes from DDPLAUNCH_RDZV_TOKEN or a token file, never the command line", "[cli][secret]") {
  const std::string dir = "/tmp/ddplaunch-test-cli-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string file = dir + "/token";
  {
    std::ofstream out(file);
    out << "from-a-file-0123456789\n";
  }
  ::chmod(file.c_str(), 0600);

  SECTION("from the environment") {
    CHECK(parse({"prog"}, {{"DDPLAUNCH_RDZV_TOKEN", "env-secret-0123456789"}}).rdzv_secret == "env-secret-0123456789");
  }
  SECTION("from a file, the trailing newline removed") {
    CHECK(parse({"--rdzv_conf", "token_file=" + file, "prog"}).rdzv_secret == "from-a-file-0123456789");
  }
  SECTION("none") {
    CHECK(parse({"prog"}).rdzv_secret.empty());
  }
  SECTION("on the command line it is refused without echoing it") {
    const std::string e = usage_error({"--rdzv_conf", "token=hunter2hunter2hunter2", "prog"});
    CHECK_THAT(e, Catch::Contains("token_file") && Catch::Contains("DDPLAUNCH_RDZV_TOKEN"));
    CHECK_THAT(e, !Catch::Contains("hunter2"));
  }
  SECTION("both ways at once, too short, or an unreadable file") {
    CHECK_THAT(usage_error({"--rdzv_conf", "token_file=" + file, "prog"}, {{"DDPLAUNCH_RDZV_TOKEN", "x"}}),
               Catch::Contains("use one of them"));
    CHECK_THAT(usage_error({"prog"}, {{"DDPLAUNCH_RDZV_TOKEN", "short"}}),
               Catch::Contains("5 byte(s); use at least 16") && !Catch::Contains("short"));
    CHECK_THAT(usage_error({"--rdzv_conf", "token_file=" + dir + "/missing", "prog"}),
               Catch::Contains(dir + "/missing") && Catch::Contains("cannot be read"));
  }
  SECTION("only a regular file of at most 4 KiB: a device, a FIFO, a directory or a long file is refused unread") {
    // Before: /dev/zero was read until the OOM killer came, a FIFO hung, a directory gave "0 byte(s)".
    const std::string fifo = dir + "/fifo", big = dir + "/big";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    std::ofstream(big) << std::string(ddp::launcher::kMaxSecretFileBytes + 1, 'x');
    const std::vector<std::pair<std::string, std::string>> refused{{"/dev/zero", "a character device"},
                                                                   {"/dev/urandom", "a character device"},
                                                                   {fifo, "a FIFO"},
                                                                   {dir, "a directory"},
                                                                   {big, "longer than 4096 bytes"}};
    for (const auto& [path, why] : refused) {
      INFO(path);
      CHECK_THAT(usage_error({"--rdzv_conf", "token_file=" + path, "prog"}),
                 Catch::Contains("--rdzv_conf token_file=" + path) && Catch::Contains(why));
    }
    const std::string link = dir + "/link";
    std::filesystem::create_symlink(file, link);
    CHECK(parse({"--rdzv_conf", "token_file=" + link, "prog"}).rdzv_secret == "from-a-file-0123456789");
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("etcd-v3 takes its members from --rdzv_endpoint and its password never from the command line", "[cli]") {
  const auto c =
      parse({"--nnodes", "2", "--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "10.0.0.5,10.0.0.6:23790,[::1]", "prog"});
  CHECK_FALSE(c.rdzv_rules.node0_hosts_store);  // etcd-v3's rules (test_etcd_backend.cpp)
  CHECK(c.etcd_endpoints == std::vector<std::string>{"10.0.0.5:2379", "10.0.0.6:23790", "[::1]:2379"});
  CHECK(c.master_port == 0);            // the workers' store takes a free port on group rank 0
  CHECK(c.master_addr == "127.0.0.1");  // untouched: the endpoint names etcd, not the store
  CHECK(parse({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--master_port", "29600", "prog"}).master_port ==
        29600);
  const auto auth = parse({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf", "user=train", "prog"},
                          {{"DDPLAUNCH_ETCD_PASSWORD", "pw"}});
  CHECK(auth.etcd_user == "train");
  CHECK(auth.etcd_password == "pw");
  CHECK_THAT(usage_error({"--rdzv_backend", "etcd", "prog"}), Catch::Matchers::Contains("use --rdzv_backend etcd-v3"));
  CHECK_THAT(usage_error({"--rdzv_backend", "etcd-v3", "prog"}), Catch::Matchers::Contains("needs the etcd members"));
  const std::string shown =
      usage_error({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf", "password=hunter2", "prog"});
  CHECK_THAT(shown, Catch::Matchers::Contains("password_file"));
  CHECK_THAT(shown, !Catch::Matchers::Contains("hunter2"));
  CHECK_THAT(usage_error({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf", "user=u", "prog"}),
             Catch::Matchers::Contains("needs a password"));
  CHECK_THAT(usage_error({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf",
                          "user=u,password_file=/dev/zero", "prog"}),
             Catch::Matchers::Contains("password_file=/dev/zero is a character device"));
  CHECK_THAT(usage_error({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf", "cert=/c.pem", "prog"}),
             Catch::Matchers::Contains("go together"));
  const auto tls = parse({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf",
                          "cacert=/ca.pem,cert=/c.pem,key=/c.key", "prog"});
  CHECK(tls.etcd_tls);
  CHECK(tls.etcd_ca_file == "/ca.pem");
  CHECK(tls.etcd_key_file == "/c.key");
  CHECK(parse({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "--rdzv_conf", "protocol=https", "prog"}).etcd_tls);
  CHECK_FALSE(parse({"--rdzv_backend", "etcd-v3", "--rdzv_endpoint", "h", "prog"}).etcd_tls);
  CHECK_THAT(usage_error({"--rdzv_conf", "user=u", "prog"}), Catch::Matchers::Contains("etcd-v3 only"));
}
