// build_worker_specs(): each worker's argv and environment (torchrun's contract), python and
// module handling, ${local_rank} substitution, the legacy --local_rank argument,
// --virtual_local_rank device assignment, error-file paths, each worker's output routing
// (console prefix, console streams, log files), and that the launcher's own environment is left
// alone.
#include "launcher/workers/worker_spec.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <string>
#include <vector>

#include "common/host_name.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/rdzv/rank_map.hpp"

namespace {

using ddp::current_environment;
using ddp::Environment;
using ddp::launcher::build_worker_specs;
using ddp::launcher::LaunchConfig;
using ddp::launcher::NodeInfo;
using ddp::launcher::RankMap;
using ddp::launcher::substitute_local_rank;
using ddp::launcher::UsageError;
using ddp::launcher::WorkerSpec;
using ddp::launcher::WorkerSpecInputs;
using Args = std::vector<std::string>;

NodeInfo node(int rank, int nproc) {
  NodeInfo n;
  n.node_rank = rank;
  n.nproc = nproc;
  n.address = "10.0.0." + std::to_string(rank + 1);
  n.host = "host" + std::to_string(rank);
  return n;
}

LaunchConfig two_by_two() {
  LaunchConfig c;
  c.min_nodes = c.max_nodes = 2;
  c.nproc_per_node = 2;
  c.node_rank = 1;
  c.master_addr = "10.0.0.1";
  c.master_port = 29500;
  c.run_id = "job42";
  c.max_restarts = 3;
  c.role = "trainer";
  c.program = "./train";
  c.program_args = {"--lr", "0.1"};
  return c;
}

// Builds the specs for `config` on a map of nodes that all run config.nproc_per_node workers.
std::vector<WorkerSpec> build(const LaunchConfig& config, const Environment& base_env, int restart_count = 0,
                              const std::string& log_root = "", const std::string& python = "python3") {
  std::vector<NodeInfo> nodes;
  for (int r = 0; r < config.max_nodes; ++r) nodes.push_back(node(r, config.nproc_per_node));
  const RankMap ranks(nodes);
  WorkerSpecInputs in{config, ranks, config.node_rank, restart_count, "10.0.0.1", 29500, base_env, log_root};
  in.python = python;
  in.host = ddp::host_name();
  return build_worker_specs(in);
}

TEST_CASE("worker environment for node 1 of 2 nodes x 2 workers", "[worker_spec]") {
  const Environment base{{"PATH", "/usr/bin"}, {"HOME", "/home/u"}, {"CUDA_VISIBLE_DEVICES", "1,2"}};
  const auto specs = build(two_by_two(), base, 2);
  REQUIRE(specs.size() == 2);
  for (int lr = 0; lr < 2; ++lr) {
    const auto& w = specs[static_cast<std::size_t>(lr)];
    const auto& e = w.env;
    INFO("local rank " << lr);
    CHECK(w.local_rank == lr);
    CHECK(w.rank == 2 + lr);
    CHECK(e.at("RANK") == std::to_string(2 + lr));
    CHECK(e.at("LOCAL_RANK") == std::to_string(lr));
    CHECK(e.at("GROUP_RANK") == "1");
    CHECK(e.at("WORLD_SIZE") == "4");
    CHECK(e.at("LOCAL_WORLD_SIZE") == "2");
    CHECK(e.at("GROUP_WORLD_SIZE") == "2");
    CHECK(e.at("ROLE_NAME") == "trainer");
    CHECK(e.at("ROLE_RANK") == std::to_string(2 + lr));
    CHECK(e.at("ROLE_WORLD_SIZE") == "4");
    CHECK(e.at("MASTER_ADDR") == "10.0.0.1");
    CHECK(e.at("MASTER_PORT") == "29500");
    CHECK(e.at("TORCHELASTIC_RESTART_COUNT") == "2");
    CHECK(e.at("TORCHELASTIC_MAX_RESTARTS") == "3");
    CHECK(e.at("TORCHELASTIC_RUN_ID") == "job42");
    CHECK(e.at("TORCHELASTIC_USE_AGENT_STORE") == "True");
    CHECK(e.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
    CHECK(e.at("OMP_NUM_THREADS") == "1");
    CHECK(e.at("PATH") == "/usr/bin");
    CHECK(e.at("HOME") == "/home/u");
    CHECK(e.at("CUDA_VISIBLE_DEVICES") == "1,2");
    CHECK(w.argv == Args{"./train", "--lr", "0.1"});
  }
}

TEST_CASE("values already in the launcher's environment win for NCCL and OMP settings", "[worker_spec]") {
  const Environment base{{"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}, {"OMP_NUM_THREADS", "8"}};
  for (const auto& w : build(two_by_two(), base)) {
    CHECK(w.env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
    CHECK(w.env.at("OMP_NUM_THREADS") == "8");
  }
}

TEST_CASE("each worker gets the progress table and its own slot, unless the user turned it off", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.virtual_local_rank = false;
  std::vector<NodeInfo> nodes{node(0, 2), node(1, 2)};
  const RankMap ranks(nodes);
  const auto specs_with = [&](const Environment& base) {
    WorkerSpecInputs in{c, ranks, c.node_rank, 0, "10.0.0.1", 29500, base, ""};
    in.progress_fd = 7;
    return build_worker_specs(in);
  };
  const std::vector<WorkerSpec> on = specs_with({{"DDPLAUNCH_PROGRESS", "9:0"}});  // an outer launcher's: replaced
  REQUIRE(on.size() == 2);
  for (std::size_t i = 0; i < on.size(); ++i) {
    CHECK(on[i].env.at("DDPLAUNCH_PROGRESS") == "7:" + std::to_string(i));
    CHECK(on[i].keep_fds == std::vector<int>{7});
  }
  for (const WorkerSpec& w : specs_with({{"DDPLAUNCH_PROGRESS", "0"}})) {
    CHECK(w.env.at("DDPLAUNCH_PROGRESS") == "0");
    CHECK(w.keep_fds.empty());
  }
  for (const WorkerSpec& w : build(two_by_two(), {{"DDPLAUNCH_PROGRESS", "9:0"}}))
    CHECK(w.env.count("DDPLAUNCH_PROGRESS") == 0);
}

TEST_CASE("OMP_NUM_THREADS is set only for more than one worker", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.nproc_per_node = 1;
  const auto specs = build(c, {});
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].env.count("OMP_NUM_THREADS") == 0);
  CHECK(specs[0].env.count("CUDA_VISIBLE_DEVICES") == 0);
}

TEST_CASE("a .py program runs under python with unbuffered output", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.program = "prog.py";
  SECTION("default interpreter") {
    const auto specs = build(c, {});
    CHECK(specs[0].argv == Args{"python3", "-u", "prog.py", "--lr", "0.1"});
  }
  SECTION("the chosen interpreter (python_interpreter.hpp) is argv[0]") {
    const auto specs = build(c, {}, 0, "", "/opt/py/bin/python3.11");
    CHECK(specs[1].argv == Args{"/opt/py/bin/python3.11", "-u", "prog.py", "--lr", "0.1"});
  }
  SECTION("--no_python runs the file directly") {
    c.no_python = true;
    CHECK(build(c, {})[0].argv == Args{"prog.py", "--lr", "0.1"});
  }
}

TEST_CASE("module mode runs python -m and no_python runs the program directly", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  SECTION("module") {
    c.module = true;
    c.program = "mypkg.train";
    c.program_args = {"--epochs", "3"};
    CHECK(build(c, {})[0].argv == Args{"python3", "-u", "-m", "mypkg.train", "--epochs", "3"});
    CHECK(build(c, {}, 0, "", "py")[0].argv == Args{"py", "-u", "-m", "mypkg.train", "--epochs", "3"});
  }
  SECTION("no python") {
    c.no_python = true;
    c.program = "/bin/echo";
    CHECK(build(c, {})[0].argv == Args{"/bin/echo", "--lr", "0.1"});
  }
}

TEST_CASE("the local_rank macro is substituted in the program's arguments", "[worker_spec]") {
  CHECK(substitute_local_rank("--out=run_${local_rank}/${local_rank}.log", 3) == "--out=run_3/3.log");
  CHECK(substitute_local_rank("plain", 3) == "plain");
  LaunchConfig c = two_by_two();
  c.program_args = {"--device=cuda:${local_rank}", "x"};
  const auto specs = build(c, {});
  CHECK(specs[0].argv == Args{"./train", "--device=cuda:0", "x"});
  CHECK(specs[1].argv == Args{"./train", "--device=cuda:1", "x"});
}

TEST_CASE("the legacy --local_rank=i goes right after the program", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.local_rank_arg = LaunchConfig::LocalRankArg::Underscore;
  SECTION("binary") {
    const auto specs = build(c, {});
    CHECK(specs[0].argv == Args{"./train", "--local_rank=0", "--lr", "0.1"});
    CHECK(specs[1].argv == Args{"./train", "--local_rank=1", "--lr", "0.1"});
  }
  SECTION("python script") {
    c.program = "prog.py";
    CHECK(build(c, {})[1].argv == Args{"python3", "-u", "prog.py", "--local_rank=1", "--lr", "0.1"});
  }
  SECTION("torch 2.x spelling") {
    c.local_rank_arg = LaunchConfig::LocalRankArg::Dash;
    CHECK(build(c, {})[0].argv == Args{"./train", "--local-rank=0", "--lr", "0.1"});
  }
}

TEST_CASE("an IPv6 master address reaches workers without brackets, as torchrun passes it", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  std::vector<NodeInfo> nodes{node(0, 2), node(1, 2)};
  const RankMap ranks(nodes);
  for (const std::string addr : {"[::1]", "::1"}) {
    const WorkerSpecInputs in{c, ranks, 1, 0, addr, 29500, {}, ""};
    CHECK(build_worker_specs(in)[0].env.at("MASTER_ADDR") == "::1");
  }
}

TEST_CASE("virtual_local_rank gives each worker exactly one device as device 0", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.virtual_local_rank = true;
  SECTION("devices from CUDA_VISIBLE_DEVICES") {
    const auto specs = build(c, {{"CUDA_VISIBLE_DEVICES", "4,6"}});
    REQUIRE(specs.size() == 2);
    CHECK(specs[0].env.at("CUDA_VISIBLE_DEVICES") == "4");
    CHECK(specs[0].env.at("LOCAL_RANK") == "0");
    CHECK(specs[0].env.at("RANK") == "2");
    CHECK(specs[1].env.at("CUDA_VISIBLE_DEVICES") == "6");
    CHECK(specs[1].env.at("LOCAL_RANK") == "0");
    CHECK(specs[1].env.at("RANK") == "3");
  }
  SECTION("too few devices") {
    CHECK_THROWS_AS(build(c, {{"CUDA_VISIBLE_DEVICES", "4"}}), UsageError);
    CHECK_THROWS_WITH(build(c, {{"CUDA_VISIBLE_DEVICES", "4"}}), Catch::Contains("CUDA_VISIBLE_DEVICES"));
  }
}

TEST_CASE("TORCHELASTIC_ERROR_FILE follows the log root", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  SECTION("no log root") {
    for (const auto& w : build(c, {})) {
      CHECK(w.env.at("TORCHELASTIC_ERROR_FILE").empty());
      CHECK(w.error_file.empty());
      CHECK(w.log_dir.empty());
    }
  }
  SECTION("a log root") {
    const auto specs = build(c, {}, 1, "/tmp/logs");
    CHECK(specs[0].log_dir == "/tmp/logs/attempt_1/0");
    CHECK(specs[0].env.at("TORCHELASTIC_ERROR_FILE") == "/tmp/logs/attempt_1/0/error.json");
    CHECK(specs[1].env.at("TORCHELASTIC_ERROR_FILE") == "/tmp/logs/attempt_1/1/error.json");
    CHECK(specs[1].error_file == "/tmp/logs/attempt_1/1/error.json");  // what the reports read back
  }
  SECTION("the resolved log root is the only one: config.log_dir is not consulted again") {
    c.log_dir = "/tmp/logs";
    CHECK(build(c, {}, 0, "/var/run/x")[1].env.at("TORCHELASTIC_ERROR_FILE") == "/var/run/x/attempt_0/1/error.json");
    CHECK(build(c, {})[1].log_dir.empty());
  }
  SECTION("a root that holds only error files: flat, no directory per worker") {
    WorkerSpecInputs in{c, RankMap({node(0, 2), node(1, 2)}), 0, 3, "10.0.0.1", 29500, {}, "/tmp/r_x"};
    in.error_files_only = true;
    const auto specs = build_worker_specs(in);
    CHECK(specs[0].env.at("TORCHELASTIC_ERROR_FILE") == "/tmp/r_x/error_3_0.json");
    CHECK(specs[1].env.at("TORCHELASTIC_ERROR_FILE") == "/tmp/r_x/error_3_1.json");
    CHECK(specs[1].error_file == "/tmp/r_x/error_3_1.json");
    CHECK(specs[1].log_dir.empty());  // nothing to create per worker
  }
}

TEST_CASE("output routing: the console prefix comes from the template, per worker", "[worker_spec][routing]") {
  LaunchConfig c = two_by_two();
  SECTION("default template") {
    const auto specs = build(c, {});
    CHECK(specs[0].output.prefix == "[2]:");
    CHECK(specs[1].output.prefix == "[3]:");
  }
  SECTION("every variable, repeated") {
    c.line_prefix_template = "${role_name}/${rank}.${local_rank} ${rank}|";
    CHECK(build(c, {})[1].output.prefix == "trainer/3.1 3|");
  }
  SECTION("an empty template") {
    c.line_prefix_template = "";
    CHECK(build(c, {})[0].output.prefix.empty());
  }
  SECTION("a job of one worker has no prefix") {
    c.min_nodes = c.max_nodes = 1;
    c.node_rank = 0;
    c.nproc_per_node = 1;
    CHECK(build(c, {})[0].output.prefix.empty());
  }
}

TEST_CASE("output routing: by default both streams go to the console and no file", "[worker_spec][routing]") {
  for (const auto& w : build(two_by_two(), {}, 0, "/logs")) {
    CHECK(w.output.to_console_out);
    CHECK(w.output.to_console_err);
    CHECK(w.output.stdout_file.empty());
    CHECK(w.output.stderr_file.empty());
  }
}

TEST_CASE("output routing: --redirects moves streams to files, --tee copies them", "[worker_spec][routing]") {
  LaunchConfig c = two_by_two();
  SECTION("redirect both streams of every rank") {
    c.redirects.all = 3;
    for (const auto& w : build(c, {}, 2, "/logs")) {
      const std::string dir = "/logs/attempt_2/" + std::to_string(w.local_rank);
      CHECK_FALSE(w.output.to_console_out);
      CHECK_FALSE(w.output.to_console_err);
      CHECK(w.output.stdout_file == dir + "/stdout.log");
      CHECK(w.output.stderr_file == dir + "/stderr.log");
    }
  }
  SECTION("tee stdout: on the console and in its file") {
    c.tee.all = 1;
    const auto specs = build(c, {}, 0, "/logs");
    CHECK(specs[0].output.to_console_out);
    CHECK(specs[0].output.to_console_err);
    CHECK(specs[0].output.stdout_file == "/logs/attempt_0/0/stdout.log");
    CHECK(specs[0].output.stderr_file.empty());
  }
  SECTION("per local rank: only local rank 1's stderr is redirected") {
    c.redirects.per_rank = {{1, 2}};
    const auto specs = build(c, {}, 0, "/logs");
    CHECK(specs[0].output.to_console_err);
    CHECK(specs[0].output.stderr_file.empty());
    CHECK(specs[1].output.to_console_out);
    CHECK_FALSE(specs[1].output.to_console_err);
    CHECK(specs[1].output.stdout_file.empty());
    CHECK(specs[1].output.stderr_file == "/logs/attempt_0/1/stderr.log");
  }
}

TEST_CASE("output routing: --local_ranks_filter hides the other ranks' console lines only", "[worker_spec][routing]") {
  LaunchConfig c = two_by_two();
  c.local_ranks_filter = {1};
  c.tee.all = 3;
  const auto specs = build(c, {}, 0, "/logs");
  CHECK_FALSE(specs[0].output.to_console_out);
  CHECK_FALSE(specs[0].output.to_console_err);
  CHECK(specs[0].output.stdout_file == "/logs/attempt_0/0/stdout.log");  // files are kept
  CHECK(specs[1].output.to_console_out);
  CHECK(specs[1].output.to_console_err);
  CHECK(specs[1].output.stderr_file == "/logs/attempt_0/1/stderr.log");
}

TEST_CASE("building specs never changes the launcher's own environment", "[worker_spec]") {
  const Environment before = current_environment();
  LaunchConfig c = two_by_two();
  c.virtual_local_rank = true;
  c.log_dir = "/tmp/logs";
  Environment base = before;
  base["CUDA_VISIBLE_DEVICES"] = "4,6";
  const auto specs = build(c, base);
  REQUIRE(specs.size() == 2);
  CHECK(current_environment() == before);
  CHECK(specs[0].env.at("RANK") == "2");
}

}  // namespace

TEST_CASE("workers never see the job secret", "[worker_spec]") {
  const Environment base{{"PATH", "/usr/bin"}, {"DDPLAUNCH_RDZV_TOKEN", "s3cret-s3cret-s3cret"}};
  for (const auto& w : build(two_by_two(), base)) {
    CHECK(w.env.count("DDPLAUNCH_RDZV_TOKEN") == 0);
    CHECK(w.env.at("PATH") == "/usr/bin");
  }
}

TEST_CASE("run_path runs the script through runpy.run_path in python -u -c", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.program = "/abs/train.py";
  c.run_path = true;
  c.no_python = true;  // --run_path beats it, as in torchrun
  const auto specs = build(c, {}, 0, "", "/venv/bin/python");
  REQUIRE(specs[1].argv.size() == 7);
  CHECK(Args(specs[1].argv.begin(), specs[1].argv.begin() + 3) == Args{"/venv/bin/python", "-u", "-c"});
  CHECK(specs[1].argv[3].find("runpy.run_path(sys.argv[0],run_name='__main__')") != std::string::npos);
  CHECK(Args(specs[1].argv.begin() + 4, specs[1].argv.end()) == Args{"/abs/train.py", "--lr", "0.1"});
}

TEST_CASE("workers are told the signals the launcher forwards", "[worker_spec]") {
  LaunchConfig c = two_by_two();
  c.signals_to_handle = {SIGTERM, SIGUSR1};
  const Environment base{{"TORCHELASTIC_SIGNALS_TO_HANDLE", "SIGINT"}};
  CHECK(build(c, base)[0].env.at("TORCHELASTIC_SIGNALS_TO_HANDLE") == "SIGTERM,SIGUSR1");
}

TEST_CASE("${hostname} in the prefix is this machine's name", "[worker_spec][routing]") {
  LaunchConfig c = two_by_two();
  c.line_prefix_template = "${hostname}:${rank}: ";
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  CHECK(build(c, {})[1].output.prefix == std::string(name) + ":3: ");
}

TEST_CASE("duplicate filters route tee'd, shown streams to the attempt's filtered files", "[worker_spec][routing]") {
  LaunchConfig c = two_by_two();
  c.duplicate_stdout_filters = {"loss"};
  c.duplicate_stderr_filters = {"Error"};
  c.tee.per_rank = {{0, 3}, {1, 1}};
  const auto specs = build(c, {}, 2, "/tmp/r");
  CHECK(specs[0].output.filtered_stdout_file == "/tmp/r/attempt_2/filtered_stdout.log");
  CHECK(specs[0].output.filtered_stderr_file == "/tmp/r/attempt_2/filtered_stderr.log");
  CHECK(specs[0].output.stdout_filters == Args{"loss"});
  CHECK(specs[1].output.filtered_stdout_file == "/tmp/r/attempt_2/filtered_stdout.log");
  CHECK(specs[1].output.filtered_stderr_file.empty());  // its stderr is not tee'd
  c.local_ranks_filter = {1};
  CHECK(build(c, {}, 2, "/tmp/r")[0].output.filtered_stdout_file.empty());  // hidden, as torchrun's tail skips it
}
