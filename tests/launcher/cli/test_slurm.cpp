// Launching under srun (launcher/cli/slurm.hpp): nodes, node rank, master address, port and run id
// from SLURM_*, through the command line (what a flag given keeps) and through
// apply_slurm_environment itself (the older variable names, each missing or malformed variable
// refused by name).
#include "launcher/cli/slurm.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "ddplaunch/common/error.hpp"
#include "tests/support/command_line.hpp"

using Catch::Matchers::Contains;
using ddp::Environment;
using ddp::map_env;
using ddp::launcher::apply_slurm_environment;
using ddp::launcher::LaunchConfig;
using ddp::testing::FakeEnv;
using ddp::testing::parse;
using ddp::testing::usage_error;

TEST_CASE("Slurm variables fill in nodes and rank and address and port and run id", "[cli][slurm]") {
  const FakeEnv slurm{
      {"SLURM_JOB_ID", "1234"}, {"SLURM_NNODES", "2"}, {"SLURM_NODEID", "1"}, {"SLURM_JOB_NODELIST", "gpu[01-02]"}};
  SECTION("defaults from Slurm") {
    const auto c = parse({"--nproc_per_node=2", "prog"}, slurm);
    CHECK(c.min_nodes == 2);
    CHECK(c.max_nodes == 2);
    CHECK(c.node_rank == 1);
    CHECK(c.master_addr == "gpu01");
    CHECK(c.master_port == 15000 + 1234);
    CHECK(c.run_id == "slurm-1234");
  }
  SECTION("MASTER_PORT overrides the per-job port") {
    FakeEnv env = slurm;
    env["MASTER_PORT"] = "4000";
    CHECK(parse({"prog"}, env).master_port == 4000);
  }
  SECTION("an explicit --master_port is kept") {
    CHECK(parse({"--master_port=4100", "prog"}, slurm).master_port == 4100);
  }
  SECTION("an explicit --rdzv_id is kept") {
    CHECK(parse({"--rdzv_id=mine", "prog"}, slurm).run_id == "mine");
  }
  SECTION("an explicit --nnodes turns the Slurm defaults off") {
    const auto c = parse({"--nnodes=1", "prog"}, slurm);
    CHECK(c.max_nodes == 1);
    CHECK(c.node_rank == 0);
    CHECK(c.master_addr == "127.0.0.1");
    CHECK(c.master_port == 0);  // a single node's free port, as without Slurm
    CHECK(c.run_id != "slurm-1234");
  }
  SECTION("SLURM_NODEID missing") {
    FakeEnv env = slurm;
    env.erase("SLURM_NODEID");
    CHECK_THAT(usage_error({"prog"}, env), Catch::Contains("SLURM_NODEID"));
  }
}

namespace {

const Environment kJob{
    {"SLURM_JOB_ID", "4242"}, {"SLURM_NNODES", "3"}, {"SLURM_NODEID", "2"}, {"SLURM_JOB_NODELIST", "gpu[07-09]"}};

LaunchConfig applied(const Environment& env) {
  LaunchConfig c;
  apply_slurm_environment(map_env(env), false, c);
  return c;
}

}  // namespace

TEST_CASE("slurm: the older variable names SLURM_JOB_NUM_NODES and SLURM_NODELIST", "[cli][slurm]") {
  Environment env = kJob;
  env.erase("SLURM_NNODES");
  env.erase("SLURM_JOB_NODELIST");
  env["SLURM_JOB_NUM_NODES"] = "2";
  env["SLURM_NODELIST"] = "a1,b2";
  const LaunchConfig c = applied(env);
  CHECK(c.min_nodes == 2);
  CHECK(c.max_nodes == 2);
  CHECK(c.master_addr == "a1");
}

TEST_CASE("slurm: each missing or malformed variable is a usage error that names it", "[cli][slurm]") {
  for (const char* name : {"SLURM_NNODES", "SLURM_NODEID", "SLURM_JOB_NODELIST"}) {
    INFO(name);
    Environment env = kJob;
    env.erase(name);
    try {
      applied(env);
      FAIL("applied without " << name);
    } catch (const ddp::UsageError& e) {
      CHECK_THAT(std::string(e.what()), Contains(name) && Contains("srun"));
    }
  }
  Environment env = kJob;
  env["SLURM_NODEID"] = "two";
  CHECK_THROWS_WITH(applied(env), Contains("SLURM_NODEID=two") && Contains("not numbers"));
  env = kJob;
  env["SLURM_JOB_NODELIST"] = "";
  CHECK_THROWS_WITH(applied(env), Contains("names no host"));
}
