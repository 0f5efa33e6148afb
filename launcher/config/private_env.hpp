// The launcher's own variables in the environment (its secrets, and the replica group a layout's
// launcher gives each group's launcher): variables a launcher reads that its workers must never see (worker_spec.cpp removes every one of them from the workers' environment). Listed in
// one place so that a new secret cannot be forgotten there.
#pragma once

#include <array>

#include "launcher/config/replica_groups.hpp"

namespace ddp::launcher {

// The job secret (rdzv/job_secret.hpp), when it is not in --rdzv_conf token_file.
inline constexpr const char* kSecretEnv = "DDPLAUNCH_RDZV_TOKEN";
// The etcd user's password (etcd/etcd_config.hpp), when it is not in --rdzv_conf password_file.
inline constexpr const char* kEtcdPasswordEnv = "DDPLAUNCH_ETCD_PASSWORD";

// Every variable above, and kReplicaGroupEnv (replica_groups.hpp): the launchers' alone.
inline constexpr std::array<const char*, 3> kPrivateEnv{kSecretEnv, kEtcdPasswordEnv, kReplicaGroupEnv};

}  // namespace ddp::launcher
