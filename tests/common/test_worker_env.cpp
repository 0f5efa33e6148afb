// The torchrun worker-environment contract: what worker_env::apply() sets, and that it leaves
// the user's choices alone where it only provides defaults.
#include "common/worker_env.hpp"

#include <catch2/catch.hpp>

namespace {

namespace we = ddp::worker_env;

we::WorkerEnv worker() {
  we::WorkerEnv w;
  w.rank = 5;
  w.local_rank = 1;
  w.world_size = 8;
  w.local_world_size = 4;
  w.group_rank = 1;
  w.group_world_size = 2;
  w.role_name = "trainer";
  w.master_addr = "10.0.0.1";
  w.master_port = 29555;
  w.restart_count = 2;
  w.max_restarts = 3;
  w.run_id = "job7";
  w.error_file = "/tmp/x/error.json";
  return w;
}

TEST_CASE("apply sets every variable of the contract", "[worker_env]") {
  ddp::Environment env{{"PATH", "/bin"}, {"RANK", "stale"}};
  we::apply(env, worker());
  const ddp::Environment expected{{"PATH", "/bin"},
                                  {"RANK", "5"},
                                  {"LOCAL_RANK", "1"},
                                  {"WORLD_SIZE", "8"},
                                  {"LOCAL_WORLD_SIZE", "4"},
                                  {"GROUP_RANK", "1"},
                                  {"GROUP_WORLD_SIZE", "2"},
                                  {"ROLE_RANK", "5"},
                                  {"ROLE_NAME", "trainer"},
                                  {"ROLE_WORLD_SIZE", "8"},
                                  {"MASTER_ADDR", "10.0.0.1"},
                                  {"MASTER_PORT", "29555"},
                                  {"TORCHELASTIC_RESTART_COUNT", "2"},
                                  {"TORCHELASTIC_MAX_RESTARTS", "3"},
                                  {"TORCHELASTIC_RUN_ID", "job7"},
                                  {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                  {"TORCHELASTIC_ERROR_FILE", "/tmp/x/error.json"},
                                  {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
                                  {"OMP_NUM_THREADS", "1"}};
  CHECK(env == expected);
}

TEST_CASE("apply keeps the user's OMP_NUM_THREADS and NCCL setting", "[worker_env]") {
  ddp::Environment env{{"OMP_NUM_THREADS", "4"}, {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"}};
  we::apply(env, worker());
  CHECK(env.at("OMP_NUM_THREADS") == "4");
  CHECK(env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
}

TEST_CASE("apply sets no OMP_NUM_THREADS for a single local worker", "[worker_env]") {
  ddp::Environment env;
  auto w = worker();
  w.local_world_size = 1;
  we::apply(env, w);
  CHECK(env.count("OMP_NUM_THREADS") == 0);
}

}  // namespace
