// torchrun's last knobs on ddplaunch's command line (issue 27): argparse's abbreviations, --run_path,
// --nproc_per_node=xpu, ${hostname} and TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE, the duplicate
// filters with their ",," escape, --start_method, --event_log_handler, --logs_specs refused,
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT and LOGLEVEL. The environment is a fake (a std::map).
#include "launcher/cli/cli.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/cli/torchrun_env.hpp"
#include "launcher/config/flag_parsers.hpp"
#include "tests/support/command_line.hpp"

namespace {

using ddp::launcher::LaunchConfig;
using ddp::testing::Args;
using ddp::testing::FakeEnv;
using ddp::testing::lookup;
using ddp::testing::parse;
using ddp::testing::usage_error;

}  // namespace

TEST_CASE("an unambiguous prefix of a long flag stands for it, in either spelling", "[torchrun_knobs]") {
  const LaunchConfig c = parse({"--nnode", "1", "--nproc", "3", "--master_p", "29511", "./train", "--nnode", "9"});
  CHECK(c.nproc_per_node == 3);
  CHECK(c.master_port == 29511);
  CHECK(c.program_args == Args{"--nnode", "9"});  // the program's own arguments are never touched
  CHECK(parse({"--nproc-per=2", "./train"}).nproc_per_node == 2);
  CHECK(parse({"--max_rest=4", "./train"}).max_restarts == 4);
  CHECK(parse({"--run-p", "x.py"}).run_path);
}

TEST_CASE("an exact name wins over longer names it is a prefix of", "[torchrun_knobs]") {
  CHECK(parse({"--status"}).status);  // also a prefix of --status_port
}

TEST_CASE("an ambiguous prefix is one line naming every candidate", "[torchrun_knobs]") {
  const std::string e = usage_error({"--master", "x", "./train"});
  CHECK(e == "--master is ambiguous: --master_addr, --master_port; write the flag out (see ddplaunch --help)");
  const std::string rdzv = usage_error({"--rdzv_=1", "./train"});
  CHECK(rdzv.find("--rdzv_id, --rdzv_endpoint, --rdzv_backend, --rdzv_conf") != std::string::npos);
}

TEST_CASE("nothing after the program is expanded, even a flag's prefix", "[torchrun_knobs]") {
  const LaunchConfig c = parse({"--", "./train", "--master", "--nproc"});
  CHECK(c.program == "./train");
  CHECK(c.program_args == Args{"--master", "--nproc"});
}

TEST_CASE("xpu workers per node count ZE_AFFINITY_MASK, and says what is missing without one", "[torchrun_knobs]") {
  CHECK(parse({"--nproc_per_node=xpu", "./train"}, {{"ZE_AFFINITY_MASK", "0,1,2"}}).nproc_per_node == 3);
  CHECK(parse({"--nproc-per-node", "xpu", "./train"}, {{"ZE_AFFINITY_MASK", "0.0"}}).nproc_per_node == 1);
  const std::string e = usage_error({"--nproc_per_node=xpu", "./train"}, {{"ZE_AFFINITY_MASK", ""}});
  CHECK(e.rfind("--nproc_per_node=xpu but no Intel XPU is visible", 0) == 0);
  CHECK(e.find("give a number or use cpu/auto") != std::string::npos);
}

TEST_CASE("count_xpus reads Intel render nodes under a fake sysfs", "[torchrun_knobs]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("xpu_sysfs_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const auto card = [&](const std::string& name, const std::string& vendor, const std::string& driver) {
    fs::create_directories(root / name / "device");
    std::ofstream(root / name / "device" / "vendor") << vendor << "\n";
    fs::create_directories(root / "drivers" / driver);
    fs::create_directory_symlink(root / "drivers" / driver, root / name / "device" / "driver");
  };
  card("renderD128", "0x8086", "xe");
  card("renderD129", "0x8086", "i915");
  card("renderD130", "0x10de", "nvidia");
  card("card0", "0x8086", "xe");  // not a render node
  CHECK(ddp::launcher::count_xpus(lookup({}), root.string()) == 2);
  fs::remove_all(root);
}

TEST_CASE("the duplicate filters split at commas, ,, being a comma, as torchrun's", "[torchrun_knobs]") {
  using ddp::launcher::parse_line_filters;
  CHECK(parse_line_filters("apple,orange") == Args{"apple", "orange"});
  CHECK(parse_line_filters("a,,b") == Args{"a,b"});
  CHECK(parse_line_filters("a,,,b") == Args{"a,", "b"});
  CHECK(parse_line_filters("loss,") == Args{"loss", ""});
  const LaunchConfig c = parse({"--tee=3", "--duplicate-stdout-filters", "loss,,x,acc", "./train"},
                               {{"PET_DUPLICATE_STDERR_FILTERS", "Error"}});
  CHECK(c.duplicate_stdout_filters == Args{"loss,x", "acc"});
  CHECK(c.duplicate_stderr_filters == Args{"Error"});
}

TEST_CASE("${hostname} is a prefix variable, and the flag beats TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE",
          "[torchrun_knobs]") {
  CHECK(parse({"--log_line_prefix_template=${hostname}:${rank}: ", "./train"}).line_prefix_template ==
        "${hostname}:${rank}: ");
  const FakeEnv env{{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}${local_rank}]:"}};
  CHECK(parse({"./train"}, env).line_prefix_template == "[${role_name}${local_rank}]:");
  CHECK(parse({"--log_line_prefix_template=<${rank}>", "./train"}, env).line_prefix_template == "<${rank}>");
  CHECK(parse({"--log_line_prefix_template=", "./train"}, env).line_prefix_template.empty());
  CHECK(parse({"./train"}).line_prefix_template == "[${rank}]:");
  CHECK(usage_error({"./train"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${host}"}})
            .find("uses an unknown variable") != std::string::npos);
}

TEST_CASE("the start method and the event log handler take torchrun's values", "[torchrun_knobs]") {
  CHECK(parse({"--start_method=fork", "./train"}).event_log.empty());
  CHECK(parse({"--start-method", "forkserver", "./train"}).program == "./train");
  CHECK(usage_error({"--start_method=thread", "./train"}).find("thread") != std::string::npos);
  CHECK(parse({"--event_log_handler=console", "./train"}).event_log == "/dev/stderr");
  CHECK(parse({"--event-log-handler=console", "--event_log=/tmp/e.jsonl", "./train"}).event_log == "/tmp/e.jsonl");
  CHECK(parse({"--event_log_handler=null", "./train"}).event_log.empty());
  CHECK(usage_error({"--event_log_handler=kafka", "./train"}).find("kafka") != std::string::npos);
}

TEST_CASE("a LogsSpecs plugin is refused, saying what to use instead", "[torchrun_knobs]") {
  const std::string e = usage_error({"--logs-specs=mine", "./train"});
  CHECK(e.rfind("--logs_specs=mine names a Python LogsSpecs plugin", 0) == 0);
  CHECK(e.find("--log_dir") != std::string::npos);
  CHECK(e.find("--tee") != std::string::npos);
}

TEST_CASE("TORCH_ELASTIC_SHUTDOWN_TIMEOUT sets the grace unless the flag does", "[torchrun_knobs]") {
  using std::chrono::seconds;
  const FakeEnv env{{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}};
  CHECK(parse({"./train"}, env).shutdown_timeout == seconds(7));
  CHECK(parse({"--shutdown_timeout=3", "./train"}, env).shutdown_timeout == seconds(3));
  CHECK(parse({"./train"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}, {"PET_SHUTDOWN_TIMEOUT", "4"}}).shutdown_timeout ==
        seconds(4));
  CHECK(parse({"./train"}).shutdown_timeout == seconds(30));
  CHECK(usage_error({"./train"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "soon"}})
            .rfind("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=soon is not a number of seconds", 0) == 0);
}

TEST_CASE("LOGLEVEL sets the launcher's level below --log_level and DDPLAUNCH_LOG_LEVEL", "[torchrun_knobs]") {
  CHECK(parse({"./train"}, {{"LOGLEVEL", "WARNING"}}).log_level == "warning");
  CHECK(parse({"./train"}, {{"LOGLEVEL", "critical"}}).log_level == "error");
  CHECK(parse({"./train"}, {{"LOGLEVEL", "DEBUG"}}).log_level == "debug");
  CHECK(parse({"--log_level=info", "./train"}, {{"LOGLEVEL", "ERROR"}}).log_level == "info");
  CHECK(parse({"./train"}, {{"LOGLEVEL", "ERROR"}, {"DDPLAUNCH_LOG_LEVEL", "debug"}}).log_level.empty());
  CHECK(usage_error({"./train"}, {{"LOGLEVEL", "loud"}}).rfind("LOGLEVEL=loud is not a level torchrun knows", 0) == 0);
}

TEST_CASE("a completion script lists every flag, for the shells torchrun offers", "[torchrun_knobs]") {
  std::vector<const char*> argv{"ddplaunch", "--print-completion", "bash"};
  const auto parsed =
      ddp::launcher::parse_command_line(3, argv.data(), lookup({}), ddp::launcher::rendezvous_backends());
  REQUIRE(parsed.early_exit_text);
  CHECK(parsed.early_exit_text->find(" --nproc_per_node --nproc-per-node ") != std::string::npos);
  CHECK(parsed.early_exit_text->find("complete -o default -F _ddplaunch ddplaunch") != std::string::npos);
  CHECK(usage_error({"--print_completion=fish"}).find("fish not in {bash,zsh,tcsh}") != std::string::npos);
}

TEST_CASE("run_path beats --no_python and -m, as in torchrun", "[torchrun_knobs]") {
  const LaunchConfig c = parse({"--run_path", "--no_python", "-m", "/abs/train.py"});
  CHECK(c.run_path);
  CHECK(parse({"./train"}, {{"PET_RUN_PATH", "1"}}).run_path);
}
