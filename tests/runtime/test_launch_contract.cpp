// The contract between the launcher and the runtime, checked end to end in one process: what
// the launcher's worker specs write is what the runtime's dist_env reads back, and under Slurm
// both find the same master port for any job id (one rule, common/hostlist.hpp).
#include "ddplaunch/dist_env.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "launcher/cli/slurm.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "launcher/workers/worker_spec.hpp"

namespace {

namespace launcher = ddp::launcher;
namespace runtime = ddp::runtime;

TEST_CASE("every worker the launcher specifies resolves to its own rank in the runtime", "[contract]") {
  launcher::LaunchConfig c;
  c.min_nodes = c.max_nodes = 2;
  c.nproc_per_node = 3;
  c.node_rank = 1;
  c.program = "./train";
  const launcher::RankMap ranks({{0, 2, "a", "a", 1, ""}, {1, 3, "b", "b", 2, ""}});
  launcher::WorkerSpecInputs in{c, ranks, 1, 0, "10.0.0.1", 29555, {{"PATH", "/bin"}}, ""};
  const auto specs = launcher::build_worker_specs(in);
  REQUIRE(specs.size() == 3);
  for (const auto& w : specs) {
    const runtime::DistEnv e = runtime::resolve_dist_env(ddp::map_env(w.env), w.argv);
    CHECK(e.source == runtime::EnvSource::Torchrun);
    CHECK(e.rank == w.rank);
    CHECK(e.local_rank == w.local_rank);
    CHECK(e.world_size == 5);
    CHECK(e.local_world_size == 3);
    CHECK(e.master_addr == "10.0.0.1");
    CHECK(e.master_port == 29555);
  }
}

TEST_CASE("under Slurm, ddplaunch and srun-started workers agree on the port for any job id", "[contract]") {
  const std::string job_id =
      GENERATE(as<std::string>{}, "1", "19999", "20000", "123456", "1000000006", "1000000007", "1000000008",
               "2000000014", "4294967296", "9223372036854775807", "100000000000000012345");
  ddp::Environment slurm{{"SLURM_JOB_ID", job_id},         {"SLURM_NNODES", "2"},         {"SLURM_NODEID", "0"},
                         {"SLURM_JOB_NODELIST", "n[1-2]"}, {"SLURM_PROCID", "0"},         {"SLURM_NTASKS", "2"},
                         {"SLURM_LOCALID", "0"},           {"SLURM_NTASKS_PER_NODE", "1"}};
  launcher::LaunchConfig c;
  launcher::apply_slurm_environment(ddp::map_env(slurm), false, c);
  const runtime::DistEnv e = runtime::resolve_dist_env(ddp::map_env(slurm), {"train"});
  INFO("SLURM_JOB_ID=" << job_id);
  CHECK(c.master_port == e.master_port);
  CHECK(c.master_addr == e.master_addr);
  CHECK(c.master_port >= 15000);
  CHECK(c.master_port < 35000);
}

}  // namespace
