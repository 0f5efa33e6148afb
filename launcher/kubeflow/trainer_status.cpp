// See trainer_status.hpp.
#include "launcher/kubeflow/trainer_status.hpp"

#include <ctime>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/host_port.hpp"
#include "ddplaunch/common/error.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::launcher {
namespace {

constexpr const char* kUrl = "KUBEFLOW_TRAINER_STATUS_URL";

std::string required(const EnvLookup& env, const char* name) {
  const auto value = env(name);
  if (!value || value->empty()) {
    throw UsageError(fmt::format("{} is set but {} is not; Kubeflow Trainer's Progress plugin sets both (unset {} to "
                                 "report nothing)",
                                 kUrl, name, kUrl));
  }
  return *value;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  const std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  ::gmtime_r(&s, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

}  // namespace

std::optional<TrainerStatusEndpoint> trainer_status_endpoint(const EnvLookup& env) {
  const auto url = env(kUrl);
  if (!url || url->empty()) return std::nullopt;
  const std::string scheme = "https://";
  const std::size_t slash = url->find('/', scheme.size());
  if (url->rfind(scheme, 0) != 0 || slash == std::string::npos || slash == scheme.size()) {
    throw UsageError(fmt::format("{}={} is not https://HOST[:PORT]/PATH; it is Kubeflow Trainer's to set: unset it, "
                                 "or fix it",
                                 kUrl, *url));
  }
  TrainerStatusEndpoint e;
  e.url = *url;
  const auto hp = try_parse_host_port(url->substr(scheme.size(), slash - scheme.size()));
  if (!hp) throw UsageError(fmt::format("{}={} has no HOST[:PORT] after https://; fix it or unset it", kUrl, *url));
  e.host = rendezvous::unbracket_host(hp->host);
  e.port = hp->port ? std::to_string(*hp->port) : "443";
  e.path = url->substr(slash);
  e.ca_file = required(env, "KUBEFLOW_TRAINER_STATUS_CA_CERT");
  e.token_file = required(env, "KUBEFLOW_TRAINER_STATUS_TOKEN");
  return e;
}

std::string trainer_status_json(const TrainerProgress& p) {
  nlohmann::json metrics = nlohmann::json::array();
  const auto metric = [&metrics](const char* name, const std::string& value) {
    metrics.push_back({{"name", name}, {"value", value}});
  };
  metric("state", p.state);
  metric("round", std::to_string(p.round));
  metric("restarts", std::to_string(p.restarts));
  metric("maxRestarts", std::to_string(p.max_restarts));
  if (!p.root_cause.empty()) metric("lastRootCause", p.root_cause);
  if (p.iteration) metric("iteration", std::to_string(*p.iteration));
  nlohmann::json status{{"metrics", metrics}, {"lastUpdatedTime", rfc3339(p.at)}};
  if (p.percentage) status["progressPercentage"] = *p.percentage;
  return nlohmann::json{{"trainerStatus", status}}.dump();
}

}  // namespace ddp::launcher
