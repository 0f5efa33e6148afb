// NodeHealth: the checks in order (log directory, program, GPUs, command), the first failure
// named in the reason the other nodes read, every check in this node's report with the
// command's output, and DDPLAUNCH_HEALTH_ROUND given to the command.
#include "launcher/health/node_health.hpp"

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

namespace {

using namespace ddp::launcher;
using namespace std::chrono_literals;

class NoGpus : public GpuDevices {
 public:
  std::string unavailable() override { return "fake: no library"; }
  int count() override { return 0; }
  GpuProbe probe(const std::string&) override { return {}; }
};

struct Node {
  LaunchConfig config;
  EffectiveConfig effective;
  NodeHealthOptions options;
  Node() {
    config.program = "/bin/true";
    config.no_python = true;
    config.node_rank = 1;
    std::string t = (std::filesystem::temp_directory_path() / "ddp_node_health_XXXXXX").string();
    effective.log_root = ::mkdtemp(t.data());
    options.gpus = [] { return std::make_unique<NoGpus>(); };
    options.env = {{"PATH", "/usr/bin:/bin"}};
    options.command_timeout = 10s;
  }
  ~Node() { std::filesystem::remove_all(effective.log_root); }
  std::optional<SelfExclusion> check(int round) { return NodeHealth(config, effective, options).check(round); }
};

}  // namespace

TEST_CASE("a healthy node runs the built-in checks in order and joins") {
  Node n;
  NodeHealth health(n.config, n.effective, n.options);
  const std::vector<CheckResult> results = health.run(0);
  REQUIRE(results.size() == 3);
  CHECK(results[0].name == "log directory");
  CHECK(results[1].name == "program");
  CHECK(results[2].summary == "no GPU: skipped (fake: no library)");
  CHECK_FALSE(health.check(0).has_value());
}

TEST_CASE("a failing site command keeps the node out, with its output in the report") {
  Node n;
  n.config.health_check = "echo \"round $DDPLAUNCH_HEALTH_ROUND node $DDPLAUNCH_NODE_RANK: ib0 down\"; exit 1";
  const auto sick = n.check(2);
  REQUIRE(sick.has_value());
  CHECK(sick->reason ==
        "health check command '" + n.config.health_check + "' failed: exited with 1: round 2 node 1: ib0 down");
  CHECK(sick->report.find("health checks before round 2 on this node:") == 0);
  CHECK(sick->report.find("  GPUs: skipped: no GPU: skipped") != std::string::npos);
  CHECK(sick->report.find("    | round 2 node 1: ib0 down") != std::string::npos);
}

TEST_CASE("a program gone since the start fails the program check") {
  Node n;
  n.config.program = "/nonexistent/train";
  const auto sick = n.check(1);
  REQUIRE(sick.has_value());
  CHECK(sick->reason.rfind("health check program failed: program '/nonexistent/train' does not exist", 0) == 0);
}

TEST_CASE("the dry run lists the checks, the command last") {
  LaunchConfig c;
  c.program = "./train";
  c.health_check = "nvidia-smi -q";
  const std::vector<std::string> lines = describe_health_checks(c, "/tmp");
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].rfind("log directory: a file can be written under /tmp", 0) == 0);
  CHECK(lines[2].find("GPUs:") == 0);
  CHECK(lines[3] == "command: /bin/sh -c 'nvidia-smi -q' exits 0 within 120 s");
}
