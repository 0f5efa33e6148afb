// mpi_process(), mpi_master_port(), mpi_run_id(): the OpenMPI, PMIx and MPICH variables, mpirun's
// address from the HNP URI, MASTER_ADDR/MASTER_PORT beating them, and errors naming the variable.
#include "common/mpi_env.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "ddplaunch/common/error.hpp"

namespace {

using Env = std::map<std::string, std::string>;

ddp::EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

// As OpenMPI 4.1's mpirun sets them (rank 1 of 4, two per node).
const Env kOpenMpi{{"OMPI_COMM_WORLD_RANK", "1"},
                   {"OMPI_COMM_WORLD_SIZE", "4"},
                   {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                   {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                   {"OMPI_MCA_ess_base_jobid", "1456472065"},
                   {"OMPI_MCA_orte_hnp_uri", "1456472064.0;tcp://192.0.2.2,10.1.1.1:47219;tcp6://[fd00::2]:41479"},
                   {"PMIX_RANK", "1"},
                   {"PMIX_NAMESPACE", "1456472065"}};

std::string usage_error(const Env& env) {
  try {
    ddp::mpi_process(lookup(env));
  } catch (const ddp::UsageError& e) {
    return e.what();
  }
  return "<no UsageError>";
}

}  // namespace

TEST_CASE("no MPI variables: not an MPI process", "[mpi]") {
  CHECK_FALSE(ddp::under_mpi(lookup({})));
  CHECK_FALSE(ddp::mpi_process(lookup({{"SLURM_PROCID", "0"}})));
}

TEST_CASE("OpenMPI's variables", "[mpi]") {
  REQUIRE(ddp::under_mpi(lookup(kOpenMpi)));
  const auto p = ddp::mpi_process(lookup(kOpenMpi));
  REQUIRE(p);
  CHECK(std::string(p->flavour) == "OpenMPI");
  CHECK(p->rank == 1);
  CHECK(p->size == 4);
  CHECK(p->local_rank == 1);
  CHECK(p->local_size == 2);
  CHECK(p->job_id == "1456472065");
  CHECK(p->master_addr == "192.0.2.2");  // mpirun's first IPv4 address
  CHECK(ddp::mpi_run_id(*p) == "mpi-1456472065");
  CHECK(ddp::mpi_master_port(lookup(kOpenMpi), *p) == 15000 + 1456472065 % 20000);

  SECTION("MASTER_ADDR and MASTER_PORT beat mpirun's address and the job's port") {
    Env env = kOpenMpi;
    env["MASTER_ADDR"] = "node7";
    env["MASTER_PORT"] = "29600";
    const auto q = ddp::mpi_process(lookup(env));
    CHECK(q->master_addr == "node7");
    CHECK(ddp::mpi_master_port(lookup(env), *q) == 29600);
  }
  SECTION("without the HNP URI there is no address to guess") {
    Env env = kOpenMpi;
    env.erase("OMPI_MCA_orte_hnp_uri");
    CHECK_FALSE(ddp::mpi_process(lookup(env))->master_addr);
  }
}

TEST_CASE("PMIx namespaces and MPICH's Hydra", "[mpi]") {
  SECTION("a PMIx namespace is hashed into the port range and cleaned for the run id") {
    const Env env{{"PMIX_RANK", "0"}, {"OMPI_COMM_WORLD_SIZE", "2"}, {"PMIX_NAMESPACE", "prterun-vm-123@1"}};
    const auto p = ddp::mpi_process(lookup(env));
    REQUIRE(p);
    CHECK(std::string(p->flavour) == "PMIx");
    CHECK(p->size == 2);
    CHECK(ddp::mpi_run_id(*p) == "mpi-prterun-vm-123_1");
    const int port = ddp::mpi_master_port(lookup(env), *p);
    CHECK(port >= 15000);
    CHECK(port < 35000);
  }
  SECTION("Hydra") {
    const Env env{{"PMI_RANK", "3"}, {"PMI_SIZE", "4"}, {"MPI_LOCALRANKID", "1"}, {"MPI_LOCALNRANKS", "2"}};
    const auto p = ddp::mpi_process(lookup(env));
    REQUIRE(p);
    CHECK(std::string(p->flavour) == "MPICH");
    CHECK(p->rank == 3);
    CHECK(p->local_rank == 1);
    CHECK(p->local_size == 2);
    CHECK(ddp::mpi_run_id(*p) == "none");
    CHECK(ddp::mpi_master_port(lookup(env), *p) == 29500);
  }
}

TEST_CASE("malformed MPI variables name themselves", "[mpi]") {
  Env env = kOpenMpi;
  env["OMPI_COMM_WORLD_SIZE"] = "four";
  CHECK_THAT(usage_error(env), Catch::Matchers::Contains("OMPI_COMM_WORLD_SIZE=four"));
  env = kOpenMpi;
  env.erase("OMPI_COMM_WORLD_SIZE");
  CHECK_THAT(usage_error(env), Catch::Matchers::Contains("OMPI_COMM_WORLD_SIZE is not set"));
  env = kOpenMpi;
  env["OMPI_COMM_WORLD_RANK"] = "4";
  CHECK_THAT(usage_error(env), Catch::Matchers::Contains("rank 4 of 4"));
  env = kOpenMpi;
  env["MASTER_PORT"] = "0";
  const auto p = ddp::mpi_process(lookup(env));
  CHECK_THROWS_WITH(ddp::mpi_master_port(lookup(env), *p), Catch::Matchers::Contains("MASTER_PORT=0"));
}
