// The --rdzv_conf key table and its parser; see rdzv_conf.hpp.
#include "launcher/config/rdzv_conf.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {
namespace {

enum class ValueKind { Seconds, Text };

struct RdzvConfKey {
  std::string_view name;
  ValueKind kind;
  std::chrono::milliseconds LaunchConfig::*sets;  // the duration the key overrides, or nullptr
};

// The keys torchrun's rendezvous backends accept. Those ddplaunch has no use for are accepted
// (and kept) so that a torchrun command line runs unchanged. Durations are applied in table
// order, so join_timeout overrides timeout.
constexpr RdzvConfKey kKeys[] = {
    {"timeout", ValueKind::Seconds, &LaunchConfig::rdzv_timeout},
    {"join_timeout", ValueKind::Seconds, &LaunchConfig::rdzv_timeout},
    {"last_call_timeout", ValueKind::Seconds, nullptr},
    {"heartbeat_timeout", ValueKind::Seconds, &LaunchConfig::heartbeat_timeout},
    {"read_timeout", ValueKind::Seconds, nullptr},
    {"close_timeout", ValueKind::Seconds, nullptr},
    {"is_host", ValueKind::Text, nullptr},
    {"store_type", ValueKind::Text, nullptr},
    {"heartbeat", ValueKind::Text, nullptr},
    {"keep_alive_interval", ValueKind::Text, nullptr},
    {"keep_alive_max_attempt", ValueKind::Text, nullptr},
    {"use_libuv", ValueKind::Text, nullptr},
    // ddplaunch's own: the job secret's file (job_secret.hpp) and the store's bind address.
    {"token_file", ValueKind::Text, nullptr},
    {"bind", ValueKind::Text, nullptr},
    // etcd-v3 (etcd_config.hpp): authentication, and torchrun's etcd TLS keys (refused there).
    {"user", ValueKind::Text, nullptr},
    {"password_file", ValueKind::Text, nullptr},
    {"protocol", ValueKind::Text, nullptr},
    {"cacert", ValueKind::Text, nullptr},
    {"cert", ValueKind::Text, nullptr},
    {"key", ValueKind::Text, nullptr},
};

const RdzvConfKey& find_key(const std::string& name) {
  const auto it =
      std::find_if(std::begin(kKeys), std::end(kKeys), [&](const RdzvConfKey& k) { return k.name == name; });
  if (it == std::end(kKeys)) {
    std::vector<std::string_view> known;
    for (const RdzvConfKey& k : kKeys) known.push_back(k.name);
    throw UsageError(fmt::format("--rdzv_conf key '{}' is unknown; use {}", name, fmt::join(known, ", ")));
  }
  return *it;
}

}  // namespace

void apply_rdzv_conf(const std::string& text, LaunchConfig& c) {
  std::array<std::optional<std::chrono::milliseconds>, std::size(kKeys)> durations;  // by table index
  for (const std::string& item : split_list(text)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UsageError(fmt::format("--rdzv_conf item '{}' is not key=value (e.g. join_timeout=600)", item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    if (key == "token") {
      // Not echoed: the value is the secret.
      throw UsageError(
          "--rdzv_conf token=... would show the job secret to every user of this machine (ps); put it in a file "
          "(--rdzv_conf token_file=PATH, mode 600) or in DDPLAUNCH_RDZV_TOKEN");
    }
    if (key == "password") {
      throw UsageError(
          "--rdzv_conf password=... would show the etcd password to every user of this machine (ps); put it in a "
          "file (--rdzv_conf password_file=PATH, mode 600) or in DDPLAUNCH_ETCD_PASSWORD");
    }
    const RdzvConfKey& known = find_key(key);
    const auto seconds = parse_seconds(value);
    if (known.kind == ValueKind::Seconds && !seconds) {
      throw UsageError(fmt::format("--rdzv_conf {}={} is not {}", key, value, kSecondsExpected));
    }
    if (known.sets) durations[&known - kKeys] = seconds;
    c.rdzv_conf[key] = value;
  }
  for (std::size_t i = 0; i < durations.size(); ++i) {
    if (durations[i]) c.*kKeys[i].sets = *durations[i];
  }
}

}  // namespace ddp::launcher
