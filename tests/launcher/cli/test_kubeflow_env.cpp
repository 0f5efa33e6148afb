// The environments Kubeflow's operators give each pod for torchrun, fed exactly as they set them,
// and the configuration ddplaunch makes of them when the pod's command is `ddplaunch train.py`
// (docs/resilience.md#kubernetes has the tables):
//   - training-operator v1 PyTorchJob, static (a Master and Workers): pkg/controller.v1/pytorch
//     envvar.go and master.go;
//   - v1 PyTorchJob with an elasticPolicy (Workers only): elastic.go, c10d without a node rank,
//     which c10d_ranks.hpp turns into ranks by arrival with the endpoint's node as the store host;
//   - Trainer v2 TrainJob with the torch runtime: pkg/runtime/framework/plugins/torch/torch.go;
//   - Volcano's pytorch job plugin (volcano.hpp): WORLD_SIZE and RANK count pods.
#include "launcher/cli/c10d_ranks.hpp"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/backends.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/config/launch_config.hpp"

namespace {

using ddp::launcher::LaunchConfig;
using FakeEnv = std::map<std::string, std::string>;
using namespace std::chrono_literals;

// `ddplaunch train.py` in a pod with exactly `env`.
LaunchConfig launch_in_pod(const FakeEnv& env) {
  const char* argv[] = {"ddplaunch", "train.py", nullptr};
  const ddp::EnvLookup lookup = [env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  return ddp::launcher::parse_command_line(2, argv, lookup, ddp::launcher::rendezvous_backends()).config;
}

// What a static job's pod must become: these nodes, rank, workers and store, node ranks as given.
struct StaticJob {
  int nnodes;
  int node_rank;
  int nproc;
  std::string master_addr;
  int master_port;
};

void check_static_job(const LaunchConfig& c, const StaticJob& want) {
  CHECK(c.min_nodes == want.nnodes);
  CHECK(c.max_nodes == want.nnodes);
  CHECK(c.node_rank == want.node_rank);
  CHECK(c.nproc_per_node == want.nproc);
  CHECK(c.master_addr == want.master_addr);
  CHECK(c.master_port == want.master_port);
  CHECK(c.rdzv_backend == "static");
  CHECK_FALSE(c.rank_by_arrival);
}

std::string host_name() {
  char name[256] = {};
  REQUIRE(::gethostname(name, sizeof name - 1) == 0);
  return name;
}

}  // namespace

TEST_CASE("PyTorchJob v1, static: the worker pod of a Master + 1 Worker job", "[kubeflow]") {
  // PyTorchJob "mnist", nprocPerNode "2", the default port 23456; pod mnist-worker-0. WORLD_SIZE is
  // replicas x nprocPerNode and RANK the node rank: both for the pod, never the workers' own.
  const FakeEnv pod{{"PYTHONUNBUFFERED", "1"},
                    {"MASTER_PORT", "23456"},
                    {"PET_MASTER_PORT", "23456"},
                    {"MASTER_ADDR", "mnist-master-0"},
                    {"PET_MASTER_ADDR", "mnist-master-0"},
                    {"WORLD_SIZE", "4"},
                    {"RANK", "1"},
                    {"PET_NODE_RANK", "1"},
                    {"PET_NPROC_PER_NODE", "2"},
                    {"PET_NNODES", "2"}};
  const LaunchConfig c = launch_in_pod(pod);
  check_static_job(c, {2, 1, 2, "mnist-master-0", 23456});
  CHECK(c.max_restarts == 0);
  CHECK(c.program == "train.py");

  SECTION("the pod spec's own additions: restarts and the job secret") {
    FakeEnv more = pod;
    more["PET_MAX_RESTARTS"] = "1";
    more["DDPLAUNCH_RDZV_TOKEN"] = "0123456789abcdef0123456789abcdef";
    const LaunchConfig r = launch_in_pod(more);
    CHECK(r.max_restarts == 1);
    CHECK(r.rdzv_secret == "0123456789abcdef0123456789abcdef");
  }
}

TEST_CASE("PyTorchJob v1, elastic: c10d without a node rank ranks nodes by arrival", "[kubeflow]") {
  // PyTorchJob "elastic", Workers only, elasticPolicy minReplicas 2, maxReplicas 3, maxRestarts 3,
  // rdzvBackend c10d, nprocPerNode "1"; no PET_NODE_RANK, MASTER_*, WORLD_SIZE or RANK.
  FakeEnv pod{{"PYTHONUNBUFFERED", "1"},    {"PET_RDZV_ENDPOINT", "elastic-worker-0:23456"},
              {"PET_RDZV_BACKEND", "c10d"}, {"PET_NNODES", "2:3"},
              {"PET_MAX_RESTARTS", "3"},    {"PET_NPROC_PER_NODE", "1"}};
  SECTION("a pod the endpoint does not name joins the store there") {
    const LaunchConfig c = launch_in_pod(pod);
    CHECK((c.min_nodes == 2 && c.max_nodes == 3 && c.nproc_per_node == 1 && c.max_restarts == 3));
    CHECK(c.rdzv_backend == "c10d");
    CHECK(c.master_addr + ":" + std::to_string(c.master_port) == "elastic-worker-0:23456");
    CHECK(c.rank_by_arrival);
    CHECK(c.node_rank == 1);
  }
  SECTION("the pod the endpoint names (its host name) hosts the store") {
    pod["PET_RDZV_ENDPOINT"] = host_name() + ":23456";
    const LaunchConfig c = launch_in_pod(pod);
    CHECK(c.rank_by_arrival);
    CHECK(c.node_rank == 0);
  }
  SECTION("without min and max, PET_NNODES is the Worker count: a fixed size, still by arrival") {
    pod["PET_NNODES"] = "2";
    pod["PET_RDZV_ID"] = "elastic-job";
    const LaunchConfig c = launch_in_pod(pod);
    CHECK(c.min_nodes == 2);
    CHECK(c.max_nodes == 2);
    CHECK(c.rank_by_arrival);
    CHECK(c.run_id == "elastic-job");
  }
  SECTION("standalone: true sets PET_STANDALONE to an empty value, which turns the flag on") {
    FakeEnv single{{"PET_RDZV_ENDPOINT", "single-worker-0:23456"},
                   {"PET_RDZV_BACKEND", "c10d"},
                   {"PET_NNODES", "1"},
                   {"PET_STANDALONE", ""}};
    const LaunchConfig c = launch_in_pod(single);
    CHECK(c.standalone);
    CHECK(c.master_addr == "127.0.0.1");
  }
  SECTION("an explicit node rank keeps the static rendezvous (ddplaunch's c10d is its own store)") {
    pod["PET_NODE_RANK"] = "2";
    const LaunchConfig c = launch_in_pod(pod);
    CHECK_FALSE(c.rank_by_arrival);
    CHECK(c.node_rank == 2);
  }
}

TEST_CASE("Trainer v2, torch runtime: the second node of a TrainJob", "[kubeflow]") {
  // TrainJob "pytorch-ddp", numNodes 2, numProcPerNode 2; the JobSet pod pytorch-ddp-node-0-1.
  // PET_NODE_RANK comes from the Job's completion index; no MASTER_*, WORLD_SIZE or RANK.
  FakeEnv pod{{"PET_NNODES", "2"},
              {"PET_NPROC_PER_NODE", "2"},
              {"PET_NODE_RANK", "1"},
              {"PET_MASTER_ADDR", "pytorch-ddp-node-0-0.pytorch-ddp"},
              {"PET_MASTER_PORT", "29500"}};
  check_static_job(launch_in_pod(pod), {2, 1, 2, "pytorch-ddp-node-0-0.pytorch-ddp", 29500});

  SECTION("numProcPerNode unset on GPUs: auto") {
    pod["PET_NPROC_PER_NODE"] = "auto";
    CHECK(launch_in_pod(pod).nproc_per_node >= 1);
  }
}

TEST_CASE("names_this_machine knows this host's names and addresses", "[kubeflow]") {
  using ddp::launcher::names_this_machine;
  CHECK(names_this_machine("localhost"));
  CHECK(names_this_machine("127.0.0.1"));
  CHECK(names_this_machine(host_name()));
  CHECK_FALSE(names_this_machine("192.0.2.77"));                // TEST-NET-1: no host has it
  CHECK_FALSE(names_this_machine("elastic-worker-0.invalid"));  // does not resolve
}

TEST_CASE("Volcano's pytorch plugin: WORLD_SIZE and RANK count pods, and become nnodes and node_rank", "[volcano]") {
  // vcjob "mnist", tasks master (1 pod) and worker (2 pods), plugins pytorch (defaults) and svc;
  // the pod mnist-worker-1: RANK = its index + 1. No PET_*.
  FakeEnv pod{{"MASTER_ADDR", "mnist-master-0.mnist"},
              {"MASTER_PORT", "23456"},
              {"WORLD_SIZE", "3"},
              {"RANK", "2"},
              {"VC_MASTER_HOSTS", "mnist-master-0.mnist"},
              {"VC_MASTER_NUM", "1"},
              {"VC_WORKER_HOSTS", "mnist-worker-0.mnist,mnist-worker-1.mnist"},
              {"VC_WORKER_NUM", "2"}};
  check_static_job(launch_in_pod(pod), {3, 2, 1, "mnist-master-0.mnist", 23456});

  SECTION("the master pod is node 0 and hosts the store") {
    pod["RANK"] = "0";
    check_static_job(launch_in_pod(pod), {3, 0, 1, "mnist-master-0.mnist", 23456});
  }
  SECTION("with the env plugin's VK_TASK_INDEX instead of the svc plugin's variables (custom task names)") {
    for (const char* name : {"VC_MASTER_HOSTS", "VC_MASTER_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM"}) pod.erase(name);
    pod["VK_TASK_INDEX"] = "1";
    pod["VC_TASK_INDEX"] = "1";
    check_static_job(launch_in_pod(pod), {3, 2, 1, "mnist-master-0.mnist", 23456});
  }
  SECTION("flags on the command line win") {
    const char* argv[] = {"ddplaunch", "--nnodes=1", "train.py", nullptr};
    const ddp::EnvLookup lookup = ddp::map_env(ddp::Environment(pod.begin(), pod.end()));
    const LaunchConfig c =
        ddp::launcher::parse_command_line(3, argv, lookup, ddp::launcher::rendezvous_backends()).config;
    CHECK(c.max_nodes == 1);
  }
  SECTION("WORLD_SIZE and RANK without Volcano's marks (an outer launcher's) are not node values") {
    for (const char* name : {"VC_MASTER_HOSTS", "VC_MASTER_NUM", "VC_WORKER_HOSTS", "VC_WORKER_NUM"}) pod.erase(name);
    const LaunchConfig c = launch_in_pod(pod);
    CHECK(c.max_nodes == 1);
    CHECK(c.node_rank == 0);
  }
  SECTION("Kubeflow's PET_* win: a PyTorchJob also sets WORLD_SIZE and RANK") {
    pod["PET_NNODES"] = "3";
    pod["PET_NODE_RANK"] = "1";
    CHECK(launch_in_pod(pod).node_rank == 1);
  }
  SECTION("a RANK outside the pods is refused, naming both") {
    pod["RANK"] = "3";
    CHECK_THROWS_WITH(launch_in_pod(pod), Catch::Contains("WORLD_SIZE=3 and RANK=3") &&
                                              Catch::Contains("give --nnodes and --node_rank"));
  }
}
