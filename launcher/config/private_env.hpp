// The launcher's own secrets in the environment: variables a launcher reads that its workers must
// never see (worker_spec.cpp removes every one of them from the workers' environment). Listed in
// one place so that a new secret cannot be forgotten there.
#pragma once

#include <array>

namespace ddp::launcher {

// The job secret (rdzv/job_secret.hpp), when it is not in --rdzv_conf token_file.
inline constexpr const char* kSecretEnv = "DDPLAUNCH_RDZV_TOKEN";
// The etcd user's password (etcd/etcd_config.hpp), when it is not in --rdzv_conf password_file.
inline constexpr const char* kEtcdPasswordEnv = "DDPLAUNCH_ETCD_PASSWORD";

// Every variable above: the launchers' alone.
inline constexpr std::array<const char*, 2> kPrivateEnv{kSecretEnv, kEtcdPasswordEnv};

}  // namespace ddp::launcher
