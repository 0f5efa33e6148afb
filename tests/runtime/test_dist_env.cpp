// DistEnv: the torchrun, legacy --local_rank, Slurm and MPI init paths, their precedence, and the
// messages for missing or inconsistent variables; plus the Slurm hostlist expander.
#include "ddplaunch/dist_env.hpp"

#include <map>

#include <catch2/catch.hpp>

using Catch::Matchers::Contains;
using ddp::runtime::DistEnv;
using ddp::runtime::EnvError;
using ddp::runtime::EnvSource;
using ddp::runtime::resolve_dist_env;

namespace {

using Env = std::map<std::string, std::string>;

DistEnv resolve(const Env& env, std::vector<std::string> argv = {"train"}) {
  return resolve_dist_env(
      [&](const std::string& k) -> std::optional<std::string> {
        auto it = env.find(k);
        if (it == env.end()) return std::nullopt;
        return it->second;
      },
      argv);
}

std::string error_of(const Env& env, std::vector<std::string> argv = {"train"}) {
  try {
    resolve(env, std::move(argv));
  } catch (const EnvError& e) {
    return e.what();
  }
  return "no error";
}

const Env kTorchrun{{"RANK", "5"},
                    {"WORLD_SIZE", "8"},
                    {"LOCAL_RANK", "1"},
                    {"LOCAL_WORLD_SIZE", "4"},
                    {"MASTER_ADDR", "10.0.0.1"},
                    {"MASTER_PORT", "29500"}};

}  // namespace

TEST_CASE("torchrun environment") {
  const DistEnv e = resolve(kTorchrun);
  CHECK(e.source == EnvSource::Torchrun);
  CHECK(e.rank == 5);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.master_addr == "10.0.0.1");
  CHECK(e.master_port == 29500);
  // A matching --local_rank is accepted; torchrun wins over Slurm variables.
  Env with_slurm = kTorchrun;
  with_slurm["SLURM_PROCID"] = "0";
  CHECK(resolve(with_slurm, {"train", "--local_rank=1"}).source == EnvSource::Torchrun);
}

TEST_CASE("torchrun environment errors name the variables") {
  Env env = kTorchrun;
  env.erase("MASTER_PORT");
  env.erase("WORLD_SIZE");
  const std::string missing = error_of(env);
  CHECK_THAT(missing, Contains("MASTER_PORT") && Contains("WORLD_SIZE") && Contains("missing"));

  env = kTorchrun;
  env["RANK"] = "abc";
  CHECK_THAT(error_of(env), Contains("RANK='abc'"));
  env = kTorchrun;
  env["RANK"] = "8";
  CHECK_THAT(error_of(env), Contains("RANK=8") && Contains("WORLD_SIZE=8"));
  env = kTorchrun;
  env["LOCAL_RANK"] = "4";
  CHECK_THAT(error_of(env), Contains("LOCAL_RANK=4") && Contains("LOCAL_WORLD_SIZE=4"));
  env = kTorchrun;
  env["MASTER_PORT"] = "70000";
  CHECK_THAT(error_of(env), Contains("MASTER_PORT='70000'"));
  CHECK_THAT(error_of(kTorchrun, {"train", "--local_rank=2"}), Contains("--local_rank=2") && Contains("LOCAL_RANK=1"));
}

TEST_CASE("legacy --local_rank in every spelling") {
  const Env env{{"RANK", "3"}, {"WORLD_SIZE", "4"}, {"MASTER_ADDR", "host0"}, {"MASTER_PORT", "1234"}};
  for (const auto& argv : std::vector<std::vector<std::string>>{
           {"train", "--local_rank=1"}, {"train", "--lr", "0.1", "--local-rank=1"}, {"train", "--local_rank", "1"}}) {
    const DistEnv e = resolve(env, argv);
    CHECK(e.source == EnvSource::LegacyLocalRank);
    CHECK(e.rank == 3);
    CHECK(e.world_size == 4);
    CHECK(e.local_rank == 1);
    CHECK(e.local_world_size == 0);
    CHECK(e.master_addr == "host0");
    CHECK(e.master_port == 1234);
  }
  Env with_lws = env;
  with_lws["LOCAL_WORLD_SIZE"] = "2";
  CHECK(resolve(with_lws, {"train", "--local_rank=1"}).local_world_size == 2);
}

TEST_CASE("legacy --local_rank errors") {
  CHECK_THAT(error_of({{"RANK", "0"}}, {"train", "--local_rank=0"}),
             Contains("WORLD_SIZE") && Contains("MASTER_ADDR") && Contains("MASTER_PORT"));
  CHECK_THAT(error_of({}, {"train", "--local_rank"}), Contains("--local_rank"));
  const Env env{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}};
  CHECK_THAT(error_of(env, {"train", "--local_rank=x"}), Contains("--local_rank='x'"));
  CHECK_THAT(error_of(env, {"train", "--local_rank=1"}), Contains("--local_rank=1") && Contains("RANK=0"));
}

TEST_CASE("slurm task environment") {
  const Env env{{"SLURM_PROCID", "5"},          {"SLURM_NTASKS", "8"},      {"SLURM_LOCALID", "1"},
                {"SLURM_NTASKS_PER_NODE", "4"}, {"SLURM_JOB_ID", "123456"}, {"SLURM_JOB_NODELIST", "gpu[07-08],cpu1"}};
  DistEnv e = resolve(env);
  CHECK(e.source == EnvSource::Slurm);
  CHECK(e.rank == 5);
  CHECK(e.world_size == 8);
  CHECK(e.local_rank == 1);
  CHECK(e.local_world_size == 4);
  CHECK(e.master_addr == "gpu07");
  CHECK(e.master_port == 15000 + 123456 % 20000);

  SECTION("MASTER_ADDR and MASTER_PORT override") {
    Env o = env;
    o["MASTER_ADDR"] = "10.1.1.1";
    o["MASTER_PORT"] = "29400";
    e = resolve(o);
    CHECK(e.master_addr == "10.1.1.1");
    CHECK(e.master_port == 29400);
  }
  SECTION("tasks per node from SLURM_TASKS_PER_NODE at SLURM_NODEID") {
    Env o = env;
    o.erase("SLURM_NTASKS_PER_NODE");
    o["SLURM_TASKS_PER_NODE"] = "3(x2),2";
    o["SLURM_NODEID"] = "2";
    o["SLURM_NTASKS"] = "8";
    o["SLURM_PROCID"] = "7";
    CHECK(resolve(o).local_world_size == 2);
    o["SLURM_NODEID"] = "1";
    o["SLURM_PROCID"] = "4";
    CHECK(resolve(o).local_world_size == 3);
  }
  SECTION("tasks per node from SLURM_NTASKS / SLURM_JOB_NUM_NODES") {
    Env o = env;
    o.erase("SLURM_NTASKS_PER_NODE");
    o["SLURM_JOB_NUM_NODES"] = "2";
    CHECK(resolve(o).local_world_size == 4);
    o["SLURM_JOB_NUM_NODES"] = "3";
    CHECK_THAT(error_of(o), Contains("SLURM_NTASKS_PER_NODE"));
  }
  SECTION("errors") {
    Env o = env;
    o.erase("SLURM_JOB_NODELIST");
    o.erase("SLURM_JOB_ID");
    CHECK_THAT(error_of(o), Contains("SLURM_JOB_NODELIST") && Contains("SLURM_JOB_ID"));
    o = env;
    o["SLURM_PROCID"] = "9";
    CHECK_THAT(error_of(o), Contains("SLURM_PROCID=9") && Contains("SLURM_NTASKS=8"));
    o = env;
    o["SLURM_JOB_NODELIST"] = "gpu[07-";
    CHECK_THAT(error_of(o), Contains("gpu[07-"));
  }
}

TEST_CASE("mpirun without a launcher") {
  const Env env{{"OMPI_COMM_WORLD_RANK", "2"},       {"OMPI_COMM_WORLD_SIZE", "4"},
                {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                {"OMPI_MCA_ess_base_jobid", "4242"}, {"OMPI_MCA_orte_hnp_uri", "4241.0;tcp://10.0.0.5:1234"}};
  DistEnv e = resolve(env);
  CHECK(e.source == EnvSource::Mpi);
  CHECK(e.rank == 2);
  CHECK(e.world_size == 4);
  CHECK(e.local_rank == 0);
  CHECK(e.local_world_size == 2);
  CHECK(e.master_addr == "10.0.0.5");
  CHECK(e.master_port == 15000 + 4242);
  CHECK_FALSE(e.host_store);
  SECTION("rank 0 hosts the store") {
    Env o = env;
    o["OMPI_COMM_WORLD_RANK"] = "0";
    CHECK(resolve(o).host_store);
  }
  SECTION("Hydra's variables, the loopback default without mpirun's address") {
    e = resolve({{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MPI_LOCALRANKID", "0"}, {"MPI_LOCALNRANKS", "2"}});
    CHECK(e.master_addr == "127.0.0.1");
    CHECK(e.master_port == 29500);
    CHECK(e.host_store);
  }
  SECTION("under ddplaunch under mpirun, the launcher's variables win") {
    Env o = kTorchrun;
    o.insert(env.begin(), env.end());
    CHECK(resolve(o).source == EnvSource::Torchrun);
  }
  SECTION("errors name the variable") {
    Env o = env;
    o["OMPI_COMM_WORLD_SIZE"] = "2";
    CHECK_THAT(error_of(o), Contains("rank 2 of 2"));
  }
}

TEST_CASE("no launch environment names what to set") {
  CHECK_THAT(error_of({}), Contains("RANK") && Contains("--local_rank") && Contains("SLURM_PROCID"));
}
