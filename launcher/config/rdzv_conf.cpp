// The --rdzv_conf key table and its parser; see rdzv_conf.hpp.
#include "launcher/config/rdzv_conf.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "launcher/config/flag_parsers.hpp"

namespace ddp::launcher {
namespace {

// Which backend reads a key: kAny, the --rdzv_backend name of the one backend that does, or
// kUnused: torchrun's keys that ddplaunch has no use for, accepted (and kept) so that a torchrun
// command line runs unchanged.
constexpr std::string_view kAny = "";
constexpr std::string_view kUnused = "-";
constexpr std::string_view kEtcdV3 = "etcd-v3";

// The form of a value that must be a number of seconds; any other form is free text.
constexpr std::string_view kSeconds = "SECONDS";
// The form of a value that must be a size in bytes (parse_bytes).
constexpr std::string_view kSize = "SIZE";
// The smallest store budget TcpStoreServer takes (rendezvous/memory_budget.hpp, kMinLimit).
constexpr std::size_t kMinStoreMemory = std::size_t{1} << 20;

struct RdzvConfKey {
  std::string_view name;
  std::string_view value;  // its form, for --help; kSeconds is checked as a number of seconds
  std::string_view backend;
  std::string_view meaning = {};                            // for --help (none for Unused)
  std::chrono::milliseconds LaunchConfig::*sets = nullptr;  // the duration the key overrides
};

// Durations are applied in table order, so join_timeout overrides timeout.
constexpr RdzvConfKey kKeys[] = {
    {"timeout", kSeconds, kAny, "wait for all nodes (as --rdzv_timeout)", &LaunchConfig::rdzv_timeout},
    {"join_timeout", kSeconds, kAny, "the same; wins over timeout", &LaunchConfig::rdzv_timeout},
    {"last_call_timeout", kSeconds, kAny, "once MIN nodes have joined, wait this long for more (default 3)",
     &LaunchConfig::last_call_timeout},
    {"heartbeat_timeout", kSeconds, kAny, "as --heartbeat_timeout", &LaunchConfig::heartbeat_timeout},
    // ddplaunch's own: the job secret's file (rdzv/job_secret.hpp) and the store's bind address.
    {"token_file", "PATH", kAny, "the job secret, the same on every node (mode 600)"},
    {"bind", "ADDR", kAny, "where node 0's store listens (* for every interface)"},
    {"store_memory", kSize, kAny, "node 0's store memory budget, e.g. 512MiB (default 1GiB, at least 1MiB)"},
    // etcd-v3 (etcd/etcd_config.hpp): authentication, and TLS through ddplaunch-etcd-tls.
    {"user", "NAME", kEtcdV3, "the etcd user"},
    {"password_file", "PATH", kEtcdV3, "its password (mode 600; or DDPLAUNCH_ETCD_PASSWORD)"},
    {"protocol", "http|https", kEtcdV3, "https: TLS to etcd"},
    {"cacert", "FILE", kEtcdV3, "the CA of the members' certificates (PEM)"},
    {"cert", "FILE", kEtcdV3, "the client certificate (PEM), with key"},
    {"key", "FILE", kEtcdV3, "its private key (PEM)"},
    // torchrun's, of no use to ddplaunch (kUnused).
    {"read_timeout", kSeconds, kUnused},
    {"close_timeout", kSeconds, kUnused},
    {"is_host", "TEXT", kUnused},
    {"store_type", "TEXT", kUnused},
    {"heartbeat", "TEXT", kUnused},
    {"keep_alive_interval", "TEXT", kUnused},
    {"keep_alive_max_attempt", "TEXT", kUnused},
    {"use_libuv", "TEXT", kUnused},
};

const RdzvConfKey* find_key(std::string_view name) {
  const auto it =
      std::find_if(std::begin(kKeys), std::end(kKeys), [&](const RdzvConfKey& k) { return k.name == name; });
  return it == std::end(kKeys) ? nullptr : it;
}

const RdzvConfKey& known_key(const std::string& name) {
  if (const RdzvConfKey* key = find_key(name)) return *key;
  std::vector<std::string_view> known;
  for (const RdzvConfKey& k : kKeys) known.push_back(k.name);
  throw UsageError(fmt::format("--rdzv_conf key '{}' is unknown; use {}", name, fmt::join(known, ", ")));
}

// Secrets are refused by name, and their values never echoed: `ps` shows a command line to
// every user of the machine.
void refuse_secret(const std::string& key) {
  if (key == "token") {
    throw UsageError(
        "--rdzv_conf token=... would show the job secret to every user of this machine (ps); put it in a file "
        "(--rdzv_conf token_file=PATH, mode 600) or in DDPLAUNCH_RDZV_TOKEN");
  }
  if (key == "password") {
    throw UsageError(
        "--rdzv_conf password=... would show the etcd password to every user of this machine (ps); put it in a "
        "file (--rdzv_conf password_file=PATH, mode 600) or in DDPLAUNCH_ETCD_PASSWORD");
  }
}

}  // namespace

void apply_rdzv_conf(const std::vector<std::string>& flags, LaunchConfig& c) {
  std::array<std::optional<std::chrono::milliseconds>, std::size(kKeys)> durations;  // by table index
  std::map<std::string, std::string> given;
  std::vector<std::string> items;
  for (const std::string& text : flags) {
    for (std::string& item : split_list(text)) items.push_back(std::move(item));
  }
  for (const std::string& item : items) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UsageError(fmt::format("--rdzv_conf item '{}' is not key=value (e.g. join_timeout=600)", item));
    }
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    refuse_secret(key);
    const RdzvConfKey& known = known_key(key);
    const auto seconds = parse_seconds(value);
    if (known.value == kSeconds && !seconds) {
      throw UsageError(fmt::format("--rdzv_conf {}={} is not {}", key, value, kSecondsExpected));
    }
    if (known.value == kSize && parse_bytes(value).value_or(0) < kMinStoreMemory) {
      throw UsageError(fmt::format("--rdzv_conf {}={} is not {}, at least 1MiB", key, value, kBytesExpected));
    }
    if (!given.emplace(key, value).second) {
      throw UsageError(
          fmt::format("--rdzv_conf gives {} twice ({}={} and {}); give it once", key, key, given[key], item));
    }
    if (known.sets) durations[&known - kKeys] = seconds;
  }
  for (auto& [key, value] : given) c.rdzv_conf[key] = std::move(value);
  for (std::size_t i = 0; i < durations.size(); ++i) {
    if (durations[i]) c.*kKeys[i].sets = *durations[i];
  }
}

void check_rdzv_conf_backend(const LaunchConfig& c) {
  for (const RdzvConfKey& k : kKeys) {
    if (k.backend == kAny || k.backend == kUnused || k.backend == c.rdzv_backend) continue;
    if (c.rdzv_conf.count(std::string(k.name))) {
      throw UsageError(fmt::format("--rdzv_conf {} applies to --rdzv_backend {} only (this job uses {})", k.name,
                                   k.backend, c.rdzv_backend));
    }
  }
}

std::string rdzv_conf_help() {
  std::string out = "KEY=VALUE,... (each key once):";
  std::vector<std::string_view> groups;  // in table order, which lists kAny's keys first
  for (const RdzvConfKey& k : kKeys) {
    if (k.backend != kUnused && std::find(groups.begin(), groups.end(), k.backend) == groups.end()) {
      groups.push_back(k.backend);
    }
  }
  for (const std::string_view backend : groups) {
    if (backend != kAny) out += fmt::format("\nwith --rdzv_backend {}:", backend);
    for (const RdzvConfKey& k : kKeys) {
      if (k.backend == backend) out += fmt::format("\n  {:<26} {}", fmt::format("{}={}", k.name, k.value), k.meaning);
    }
  }
  std::vector<std::string_view> unused;
  for (const RdzvConfKey& k : kKeys) {
    if (k.backend == kUnused) unused.push_back(k.name);
  }
  out += fmt::format("\ntorchrun's {}: accepted, unused", fmt::join(unused, ", "));
  return out;
}

}  // namespace ddp::launcher
