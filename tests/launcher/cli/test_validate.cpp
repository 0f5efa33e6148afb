// validate(): every rule on a finished LaunchConfig, on configs built directly (no argv). Each
// broken rule must be a UsageError whose message names the offending value; the limits
// themselves (4096 workers, 1000 restarts, port 0 on one node, ...) must pass.
#include "launcher/cli/validate.hpp"

#include <catch2/catch.hpp>

#include <csignal>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/etcd/etcd_backend.hpp"
#include "tests/support/usage_error_of.hpp"

namespace {

using ddp::launcher::kMaxNodes;
using ddp::launcher::kMaxProcPerNode;
using ddp::launcher::kMaxRestarts;
using ddp::launcher::LaunchConfig;
using ddp::launcher::validate;
using namespace std::chrono_literals;
using Change = std::function<void(LaunchConfig&)>;

// The defaults plus a program: valid.
LaunchConfig valid() {
  LaunchConfig c;
  c.program = "prog";
  return c;
}

LaunchConfig changed(const Change& change) {
  LaunchConfig c = valid();
  change(c);
  return c;
}

// The UsageError message for `c`, or a marker saying what happened instead.
std::string usage_error(const LaunchConfig& c) {
  return ddp::testing::usage_error_of([&] { validate(c); });
}

TEST_CASE("the defaults with a program are valid", "[validate]") {
  CHECK_NOTHROW(validate(valid()));
}

TEST_CASE("values at the limits are valid", "[validate]") {
  const std::vector<std::pair<std::string, Change>> cases{
      {"most workers", [](LaunchConfig& c) { c.nproc_per_node = kMaxProcPerNode; }},
      {"most nodes, last rank",
       [](LaunchConfig& c) {
         c.min_nodes = c.max_nodes = kMaxNodes;
         c.node_rank = kMaxNodes - 1;
       }},
      {"elastic range", [](LaunchConfig& c) { c.max_nodes = 4; }},
      {"most restarts", [](LaunchConfig& c) { c.max_restarts = kMaxRestarts; }},
      {"port 0 on one node", [](LaunchConfig& c) { c.master_port = 0; }},
      {"port 65535", [](LaunchConfig& c) { c.master_port = 65535; }},
      {"no grace before SIGKILL", [](LaunchConfig& c) { c.shutdown_timeout = 0ms; }},
      {"shortest heartbeat timeout",
       [](LaunchConfig& c) {
         c.heartbeat_timeout = 100ms;
         c.heartbeat_interval = 50ms;
       }},
      {"standalone", [](LaunchConfig& c) { c.standalone = true; }},
      {"every prefix variable", [](LaunchConfig& c) { c.line_prefix_template = "${role_name}${rank}/${local_rank}:"; }},
      {"no prefix", [](LaunchConfig& c) { c.line_prefix_template = ""; }},
      {"last local rank shown",
       [](LaunchConfig& c) {
         c.nproc_per_node = 2;
         c.local_ranks_filter = {1};
       }},
      {"real-time signal",
       [](LaunchConfig& c) {
         c.signals_to_handle = {SIGUSR1, SIGRTMIN + 3};
       }},
      {"log level in any case", [](LaunchConfig& c) { c.log_level = "WARN"; }},
  };
  for (const auto& [name, change] : cases) {
    INFO(name);
    CHECK(usage_error(changed(change)) == "<no exception>");
  }
}

TEST_CASE("each broken rule is a UsageError naming the value", "[validate]") {
  struct Bad {
    Change change;
    std::vector<std::string> needles;  // each must be in the message
  };
  const std::vector<Bad> cases{
      {[](LaunchConfig& c) { c.program.clear(); }, {"no program"}},
      {[](LaunchConfig& c) { c.straggler_window = 500ms; }, {"--straggler_window=0.5 s", "at least 1 s"}},
      {[](LaunchConfig& c) { c.stragglers = ddp::launcher::StragglerMode::Exclude; },
       {"--stragglers=exclude", "--nnodes=MIN:MAX", "--stragglers=warn"}},
      {[](LaunchConfig& c) {
         c.stragglers = ddp::launcher::StragglerMode::Replace;
         c.min_nodes = c.max_nodes = 3;
       },
       {"--stragglers=replace", "a node to spare"}},
      {[](LaunchConfig& c) { c.no_python = c.module = true; }, {"--no_python", "--module"}},
      {[](LaunchConfig& c) { c.min_nodes = c.max_nodes = 0; }, {"--nnodes=0 "}},
      {[](LaunchConfig& c) { c.min_nodes = 3; }, {"--nnodes=3:1"}},
      {[](LaunchConfig& c) { c.max_nodes = kMaxNodes + 1; }, {"--nnodes=1:65537", "65536"}},
      {[](LaunchConfig& c) { c.nproc_per_node = 0; }, {"--nproc_per_node=0"}},
      {[](LaunchConfig& c) { c.nproc_per_node = kMaxProcPerNode + 1; }, {"--nproc_per_node=4097", "4096"}},
      {[](LaunchConfig& c) {
         c.standalone = true;
         c.min_nodes = c.max_nodes = 2;
       },
       {"--standalone", "--nnodes=2"}},
      {[](LaunchConfig& c) {
         c.standalone = true;
         c.node_rank = 1;
       },
       {"--standalone", "--node_rank=1"}},
      {[](LaunchConfig& c) { c.node_rank = -1; }, {"--node_rank=-1"}},
      {[](LaunchConfig& c) {
         c.min_nodes = c.max_nodes = 2;
         c.node_rank = 2;
       },
       {"--node_rank=2", "0..1"}},
      {[](LaunchConfig& c) { c.master_addr.clear(); }, {"--master_addr is empty"}},
      {[](LaunchConfig& c) { c.master_port = -1; }, {"--master_port=-1"}},
      {[](LaunchConfig& c) { c.master_port = 65536; }, {"--master_port=65536"}},
      {[](LaunchConfig& c) {
         c.min_nodes = c.max_nodes = 2;
         c.master_port = 0;
       },
       {"--master_port=0", "single node"}},
      {[](LaunchConfig& c) { c.run_id.clear(); }, {"--rdzv_id is empty"}},
      {[](LaunchConfig& c) { c.max_restarts = -1; }, {"--max_restarts=-1"}},
      {[](LaunchConfig& c) { c.max_restarts = kMaxRestarts + 1; }, {"--max_restarts=1001", "0..1000"}},
      {[](LaunchConfig& c) { c.shutdown_timeout = -1500ms; }, {"--shutdown_timeout=-1.5 s"}},
      {[](LaunchConfig& c) { c.exit_barrier_timeout = -1s; }, {"--exit_barrier_timeout=-1 s", "default 300"}},
      {[](LaunchConfig& c) { c.monitor_interval = 0ms; }, {"--monitor_interval=0 s"}},
      {[](LaunchConfig& c) { c.unkillable_timeout = 0ms; }, {"--unkillable_timeout=0 s", "more than 0"}},
      {[](LaunchConfig& c) { c.rdzv_timeout = 0ms; }, {"--rdzv_timeout=0 s"}},
      {[](LaunchConfig& c) { c.heartbeat_timeout = 50ms; }, {"--heartbeat_timeout=0.05 s", "0.1 s"}},
      {[](LaunchConfig& c) { c.heartbeat_interval = 0ms; }, {"heartbeat interval 0 s"}},
      // Seconds print as "100", never "100." or "100.000000".
      {[](LaunchConfig& c) { c.heartbeat_interval = c.heartbeat_timeout = 100s; },
       {"heartbeat interval 100 s", "--heartbeat_timeout=100 s"}},
      {[](LaunchConfig& c) {
         c.local_ranks_filter = {0, 1};
       },
       {"--local_ranks_filter", "local rank 1", "0..0"}},
      {[](LaunchConfig& c) { c.local_ranks_filter = {-1}; }, {"local rank -1"}},
      {[](LaunchConfig& c) {
         c.signals_to_handle = {SIGTERM, SIGKILL};
       },
       {"--signals_to_handle", "SIGKILL"}},
      {[](LaunchConfig& c) { c.signals_to_handle = {SIGSTOP}; }, {"SIGSTOP"}},
      {[](LaunchConfig& c) { c.signals_to_handle = {0}; }, {"signal 0"}},
      {[](LaunchConfig& c) { c.signals_to_handle = {NSIG}; }, {"signal " + std::to_string(NSIG)}},
      {[](LaunchConfig& c) { c.line_prefix_template = "[${rank}] ${host}"; },
       {"--log_line_prefix_template='[${rank}] ${host}'"}},
      {[](LaunchConfig& c) { c.log_level = "loud"; }, {"--log_level=loud"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string msg = usage_error(changed(cases[i].change));
    INFO("case " << i << ": " << msg);
    CHECK_THAT(msg, !Catch::StartsWith("<"));
    CHECK(msg.find('\n') == std::string::npos);
    for (const auto& needle : cases[i].needles) CHECK_THAT(msg, Catch::Contains(needle));
  }
}

TEST_CASE("standby nodes: --active_nodes takes N in MIN..MAX of an elastic range with the built-in store",
          "[validate]") {
  const auto with = [](int min, int max, std::optional<int> active, const std::string& backend = "static") {
    return changed([=](LaunchConfig& c) {
      c.min_nodes = min;
      c.max_nodes = max;
      c.active_nodes = active;
      c.rdzv_backend = backend;
      if (backend == "etcd-v3") {
        c.rdzv_endpoint = "etcd:2379";
        c.rdzv_rules = ddp::launcher::etcd_backend_kind().rules;
      }
    });
  };
  CHECK(usage_error(with(2, 3, 2)) == "<no exception>");
  CHECK(usage_error(with(2, 3, 3)) == "<no exception>");
  CHECK(usage_error(with(2, 2, std::nullopt)) == "<no exception>");
  CHECK(usage_error(with(2, 3, std::nullopt)) == "<no exception>");
  const std::vector<std::pair<LaunchConfig, std::vector<std::string>>> bad{
      {with(2, 2, 2), {"--active_nodes=2 needs an elastic", "--nnodes=2", "--nnodes=2:3"}},
      {with(2, 4, 1), {"--active_nodes=1 is outside --nnodes=2:4", "2 <= N <= 4"}},
      {with(2, 4, 5), {"--active_nodes=5 is outside --nnodes=2:4"}},
      // A given 0 was taken for "unset" before.
      {with(2, 3, 0), {"--active_nodes=0 is outside --nnodes=2:3; pick N with 2 <= N <= 3"}},
      {with(2, 2, 0), {"--active_nodes=0 is not a number of nodes; drop --active_nodes"}},
      {with(2, 3, 2, "etcd-v3"), {"--active_nodes", "etcd-v3", "drop --active_nodes"}},
  };
  for (const auto& [config, needles] : bad) {
    const std::string message = usage_error(config);
    for (const std::string& needle : needles) CHECK_THAT(message, Catch::Contains(needle));
  }
}

}  // namespace
