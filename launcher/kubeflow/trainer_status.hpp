// Kubeflow Trainer v2's progress API (KEP-2779, kubeflow/trainer): what its "Progress" plugin gives
// every trainer container, and the JSON a pod POSTs there.
//   KUBEFLOW_TRAINER_STATUS_URL      https://<svc>.<ns>.svc:<port>/apis/trainer.kubeflow.org/v1alpha1/
//                                    namespaces/{ns}/trainjobs/{name}/status
//   KUBEFLOW_TRAINER_STATUS_CA_CERT  the CA of that endpoint (/var/run/secrets/kubeflow/trainer/ca.crt)
//   KUBEFLOW_TRAINER_STATUS_TOKEN    a file holding a projected service-account token (audience
//                                    trainer.kubeflow.org, rotated: read again for each POST)
// The body: {"trainerStatus": {"progressPercentage": 0..100 (optional), "estimatedRemainingSeconds"
// (optional, not sent), "metrics": [{"name": ..., "value": "<a string>"}], "lastUpdatedTime":
// RFC 3339}}, with "Authorization: Bearer <token>". It shows in `kubectl get trainjob`.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "ddplaunch/common/env_lookup.hpp"

namespace ddp::launcher {

// The endpoint, from the variables above. `host`, `port` and `path` split from the URL.
struct TrainerStatusEndpoint {
  std::string url;
  std::string host;  // as in the URL (IPv6 without brackets)
  std::string port;  // "443" when the URL has none
  std::string path;  // "/apis/..."
  std::string ca_file;
  std::string token_file;
};

// nullopt when KUBEFLOW_TRAINER_STATUS_URL is unset or empty. Throws UsageError naming the
// variable for a URL that is not https://HOST[:PORT]/PATH, or a missing CA or token variable. Pure.
std::optional<TrainerStatusEndpoint> trainer_status_endpoint(const EnvLookup& env);

// What ddplaunch reports of the job: its state, the round and restarts, the last round's root
// cause, and the iteration --progress_file holds (watch/progress_file.hpp).
struct TrainerProgress {
  std::string state;  // "joining", "running", "restarting", "succeeded", "failed"
  int round = 0;
  int restarts = 0;
  int max_restarts = 0;
  std::string root_cause;              // the last failed round's ("" with none)
  std::optional<long long> iteration;  // --progress_file's, when it holds one
  std::optional<int> percentage;       // 100 once the job succeeded; else unknown
  std::chrono::system_clock::time_point at;
};

// The POST's body for `progress` (metrics: state, round, restarts, maxRestarts, lastRootCause when
// there is one, iteration when known). Pure.
std::string trainer_status_json(const TrainerProgress& progress);

}  // namespace ddp::launcher
