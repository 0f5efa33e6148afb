// Kubeflow Trainer's progress endpoint as its Progress plugin sets it (KEP-2779), and the JSON
// ddplaunch POSTs there: the shape Trainer's TrainJobTrainerStatus takes.
#include "launcher/kubeflow/trainer_status.hpp"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "ddplaunch/common/error.hpp"

using ddp::Environment;
using ddp::map_env;
using ddp::launcher::trainer_status_endpoint;
using ddp::launcher::trainer_status_json;
using ddp::launcher::TrainerProgress;

namespace {
const Environment kPod{
    {"KUBEFLOW_TRAINER_STATUS_URL",
     "https://kubeflow-trainer-controller-manager.kubeflow.svc:8082/apis/trainer.kubeflow.org/v1alpha1/namespaces/"
     "team-a/trainjobs/mnist/status"},
    {"KUBEFLOW_TRAINER_STATUS_CA_CERT", "/var/run/secrets/kubeflow/trainer/ca.crt"},
    {"KUBEFLOW_TRAINER_STATUS_TOKEN", "/var/run/secrets/kubeflow/trainer/token"}};
}  // namespace

TEST_CASE("trainer status: the endpoint from the Progress plugin's variables", "[kubeflow]") {
  const auto e = trainer_status_endpoint(map_env(kPod));
  REQUIRE(e);
  CHECK(e->host == "kubeflow-trainer-controller-manager.kubeflow.svc");
  CHECK(e->port == "8082");
  CHECK(e->path == "/apis/trainer.kubeflow.org/v1alpha1/namespaces/team-a/trainjobs/mnist/status");
  CHECK(e->ca_file == "/var/run/secrets/kubeflow/trainer/ca.crt");
  CHECK(e->token_file == "/var/run/secrets/kubeflow/trainer/token");
  CHECK_FALSE(trainer_status_endpoint(map_env({})));
  CHECK_FALSE(trainer_status_endpoint(map_env({{"KUBEFLOW_TRAINER_STATUS_URL", ""}})));

  SECTION("no port: 443") {
    Environment pod = kPod;
    pod["KUBEFLOW_TRAINER_STATUS_URL"] = "https://trainer.kubeflow/x";
    CHECK(trainer_status_endpoint(map_env(pod))->port == "443");
  }
  SECTION("plain http, or no path, is refused naming the variable") {
    Environment pod = kPod;
    pod["KUBEFLOW_TRAINER_STATUS_URL"] = "http://trainer:8082/x";
    CHECK_THROWS_WITH(trainer_status_endpoint(map_env(pod)),
                      Catch::Contains("KUBEFLOW_TRAINER_STATUS_URL=http://trainer:8082/x is not https://"));
    pod["KUBEFLOW_TRAINER_STATUS_URL"] = "https://trainer:8082";
    CHECK_THROWS_AS(trainer_status_endpoint(map_env(pod)), ddp::UsageError);
  }
  SECTION("a URL without its token file is refused naming the missing one") {
    Environment pod = kPod;
    pod.erase("KUBEFLOW_TRAINER_STATUS_TOKEN");
    CHECK_THROWS_WITH(trainer_status_endpoint(map_env(pod)),
                      Catch::Contains("KUBEFLOW_TRAINER_STATUS_TOKEN is not"));
  }
}

TEST_CASE("trainer status: the body is {trainerStatus: {metrics, lastUpdatedTime[, progressPercentage]}}",
          "[kubeflow]") {
  TrainerProgress p;
  p.state = "running";
  p.round = 2;
  p.restarts = 1;
  p.max_restarts = 3;
  p.root_cause = "rank 1 (pid 42) exited with code 3";
  p.iteration = 120;
  p.at = std::chrono::system_clock::from_time_t(1795941045);  // 2026-11-29T08:30:45Z
  const auto body = nlohmann::json::parse(trainer_status_json(p));
  REQUIRE(body.size() == 1);
  const auto& s = body.at("trainerStatus");
  CHECK(s.at("lastUpdatedTime") == "2026-11-29T08:30:45Z");
  CHECK_FALSE(s.contains("progressPercentage"));  // unknown while running
  const nlohmann::json want = nlohmann::json::parse(R"([
      {"name": "state", "value": "running"}, {"name": "round", "value": "2"},
      {"name": "restarts", "value": "1"}, {"name": "maxRestarts", "value": "3"},
      {"name": "lastRootCause", "value": "rank 1 (pid 42) exited with code 3"},
      {"name": "iteration", "value": "120"}])");
  CHECK(s.at("metrics") == want);

  p.percentage = 100;
  p.root_cause.clear();
  p.iteration.reset();
  const auto done = nlohmann::json::parse(trainer_status_json(p)).at("trainerStatus");
  CHECK(done.at("progressPercentage") == 100);
  CHECK(done.at("metrics").size() == 4);
}
