// `ddplaunch --dry-run` (launcher/dry_run.hpp): the rank map, where the store will be, each
// worker's command and the environment ddplaunch sets, for node 0 and for another node, and no run
// directory created. (The binary's flag and that no worker starts: test_e2e.py.)
#include "launcher/dry_run.hpp"

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <string>

#include "tests/support/temp_dir.hpp"

using Catch::Matchers::Contains;
using ddp::launcher::LaunchConfig;

namespace {

// What print_dry_run writes on stdout; std::cout is restored also when it throws.
std::string printed(const LaunchConfig& c) {
  std::ostringstream out;
  struct Restore {
    std::streambuf* old;
    ~Restore() { std::cout.rdbuf(old); }
  } restore{std::cout.rdbuf(out.rdbuf())};
  CHECK(ddp::launcher::print_dry_run(c) == 0);
  return out.str();
}

LaunchConfig two_workers(const std::string& temp_dir) {
  LaunchConfig c;
  c.nproc_per_node = 2;
  c.no_python = true;
  c.program = "/bin/echo";
  c.program_args = {"hello"};
  c.master_port = 29511;
  c.temp_dir = temp_dir;
  return c;
}

}  // namespace

TEST_CASE("dry run: node 0's workers, its store and their environment, and nothing created", "[dry_run]") {
  ddp::testing::TempDir tmp("dry_run");
  const std::string out = printed(two_workers(tmp.path.string()));
  CHECK_THAT(out, Contains("store: on 127.0.0.1:29511, hosted by this launcher"));
  CHECK_THAT(out, Contains("worker local_rank 0 rank 0:\n  command: /bin/echo hello\n"));
  CHECK_THAT(out, Contains("worker local_rank 1 rank 1:\n  command: /bin/echo hello\n"));
  CHECK_THAT(out, Contains("    RANK=1\n") && Contains("    LOCAL_RANK=1\n") && Contains("    WORLD_SIZE=2\n"));
  CHECK_THAT(out, Contains("    MASTER_PORT=29511\n"));
  CHECK_THAT(out, Contains("health checks before every round"));
  CHECK(std::filesystem::is_empty(tmp.path));  // the run directory is only named
}

TEST_CASE("dry run: another node's ranks follow node 0's, its store is node 0's", "[dry_run]") {
  ddp::testing::TempDir tmp("dry_run");
  LaunchConfig c = two_workers(tmp.path.string());
  c.min_nodes = c.max_nodes = 2;
  c.node_rank = 1;
  c.master_addr = "10.0.0.1";
  const std::string out = printed(c);
  CHECK_THAT(out, Contains("store: node 0's, at 10.0.0.1:29511"));
  CHECK_THAT(out, Contains("worker local_rank 0 rank 2:"));
  CHECK_THAT(out, Contains("worker local_rank 1 rank 3:"));
  CHECK_THAT(out, Contains("    WORLD_SIZE=4\n") && Contains("    GROUP_RANK=1\n"));
  CHECK(std::filesystem::is_empty(tmp.path));
}

TEST_CASE("dry run: the timeouts in force, the worst case per failure and a warning when they do not nest",
          "[dry_run]") {
  ddp::testing::TempDir tmp("dry_run");
  LaunchConfig c = two_workers(tmp.path.string());
  c.hang_timeout = std::chrono::seconds(900);
  const std::string out = printed(c);
  CHECK_THAT(out, Contains("timeouts in force:\n  collective timeout     600 s    torch's default for NCCL"));
  CHECK_THAT(out, Contains("\n  --hang_timeout         900 s\n"));
  CHECK_THAT(out, Contains("\n  hang                   630 s    the collective timeout (the workers' watchdog aborts)"));
  CHECK_THAT(out, Contains("\nwarning: timeouts do not nest: --hang_timeout=900 s is not shorter than the collective "
                           "timeout (600 s, torch's default)"));
}

TEST_CASE("dry run: --failure_budget gives the workers NCCL's heartbeat, unless their environment has one",
          "[dry_run]") {
  ddp::testing::TempDir tmp("dry_run");
  LaunchConfig c = two_workers(tmp.path.string());
  c.failure_budget = std::chrono::seconds(300);
  const std::string out = printed(c);
  CHECK_THAT(out, Contains("timeouts in force (--failure_budget=300 s):"));
  if (std::getenv("TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC") == nullptr) {
    CHECK_THAT(out, Contains("    TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=300\n"));
    CHECK_THAT(out, Contains("  NCCL heartbeat         300 s    TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC=300\n"));
  }
}
