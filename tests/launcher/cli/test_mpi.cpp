// Launching under mpirun (launcher/cli/mpi.hpp): nodes, node rank, run id, master address and port
// from an MPI launcher's variables (each flavour's are read in tests/common/test_mpi_env.cpp),
// through the command line (what a flag given keeps, Slurm first under srun) and through
// apply_mpi_environment itself (MASTER_ADDR and MASTER_PORT, a job without an id).
#include "launcher/cli/mpi.hpp"

#include <catch2/catch.hpp>

#include <string>

#include "tests/support/command_line.hpp"

using ddp::Environment;
using ddp::map_env;
using ddp::launcher::apply_mpi_environment;
using ddp::launcher::LaunchConfig;
using ddp::testing::FakeEnv;
using ddp::testing::parse;
using ddp::testing::usage_error;

TEST_CASE("MPI variables fill in nodes and rank and address and port and run id", "[cli][mpi]") {
  const FakeEnv mpi{{"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "1"},
                    {"OMPI_MCA_ess_base_jobid", "777"},  {"OMPI_MCA_orte_hnp_uri", "776.0;tcp://10.0.0.9:4000"}};
  SECTION("defaults from mpirun") {
    const auto c = parse({"--nproc_per_node=4", "prog"}, mpi);
    CHECK(c.min_nodes == 2);
    CHECK(c.max_nodes == 2);
    CHECK(c.node_rank == 1);
    CHECK(c.master_addr == "10.0.0.9");
    CHECK(c.master_port == 15000 + 777);
    CHECK(c.run_id == "mpi-777");
  }
  SECTION("explicit flags are kept") {
    const auto c = parse({"--master_addr=head", "--master_port=29555", "--rdzv_id=x", "prog"}, mpi);
    CHECK(c.master_addr == "head");
    CHECK(c.master_port == 29555);
    CHECK(c.run_id == "x");
    CHECK(c.node_rank == 1);
  }
  SECTION("an explicit --nnodes turns the MPI defaults off") {
    CHECK(parse({"--nnodes=1", "prog"}, mpi).node_rank == 0);
  }
  SECTION("Slurm wins when both are present (srun --mpi=pmix)") {
    FakeEnv env = mpi;
    env.insert(
        {{"SLURM_JOB_ID", "1234"}, {"SLURM_NNODES", "3"}, {"SLURM_NODEID", "2"}, {"SLURM_JOB_NODELIST", "n[1-3]"}});
    CHECK(parse({"prog"}, env).max_nodes == 3);
  }
  SECTION("a malformed variable is a usage error naming it") {
    FakeEnv env = mpi;
    env["OMPI_COMM_WORLD_SIZE"] = "x";
    CHECK(usage_error({"prog"}, env).find("OMPI_COMM_WORLD_SIZE=x") != std::string::npos);
  }
}

TEST_CASE("mpi: MASTER_ADDR and MASTER_PORT win over mpirun's address and the job's port", "[cli][mpi]") {
  const Environment env{{"OMPI_COMM_WORLD_RANK", "1"},
                        {"OMPI_COMM_WORLD_SIZE", "4"},
                        {"OMPI_MCA_ess_base_jobid", "1234"},
                        {"OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1,192.168.1.1:40000"},
                        {"MASTER_ADDR", "head"},
                        {"MASTER_PORT", "29444"}};
  LaunchConfig c;
  apply_mpi_environment(map_env(env), false, false, c);
  CHECK(c.master_addr == "head");
  CHECK(c.master_port == 29444);
  CHECK(c.run_id == "mpi-1234");
}

TEST_CASE("mpi: a job the MPI launcher names no id or address for keeps the defaults", "[cli][mpi]") {
  LaunchConfig c;
  const std::string addr = c.master_addr;
  apply_mpi_environment(map_env(Environment{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}}), false, false, c);  // MPICH
  CHECK(c.min_nodes == 2);
  CHECK(c.node_rank == 0);
  CHECK(c.master_port == 29500);
  CHECK(c.run_id == "none");
  CHECK(c.master_addr == addr);  // --master_addr's default stands
}
