// TorchFT's layout from one command (--replica_groups N): N replica groups, each its own
// ddplaunch agent and restart domain on its own store port, beside a lighthouse the layout's
// launcher supervises (launcher/replicas/, docs/orchestrators/torchft.md). Plain data.
#pragma once

#include <string>

namespace ddp::launcher {

// The lighthouse torchft's own recipe starts next to its torchruns (torchft/torchx.py's comment,
// its README): one replica is a quorum, a 100 ms tick, 10 s for stragglers to join. ddplaunch
// adds `--bind 127.0.0.1:<--lighthouse_port>`: every group runs on this node, and the lighthouse
// has no authentication, so it listens on loopback only (torchft's own default is [::]).
inline constexpr const char* kDefaultLighthouse =
    "torchft_lighthouse --min_replicas 1 --quorum_tick_ms 100 --join_timeout_ms 10000";
// torchft_lighthouse's own default port (its --bind [::]:29510) and TORCHFT_LIGHTHOUSE's.
inline constexpr int kDefaultLighthousePort = 29510;
// Each group's restart budget when --max_restarts is not given: torchft/torchx.py's hsdp().
inline constexpr int kDefaultReplicaGroupRestarts = 10;
// The most groups one command starts (each is a launcher and its workers on this machine).
inline constexpr int kMaxReplicaGroups = 256;
// Set by the layout's launcher in each group's launcher: the group's index. A launcher reads it,
// its workers never see it (private_env.hpp).
inline constexpr const char* kReplicaGroupEnv = "DDPLAUNCH_REPLICA_GROUP";

struct ReplicaGroups {
  int count = 0;   // --replica_groups: 0 = off (one launcher, one restart domain)
  int index = -1;  // this launcher's group (kReplicaGroupEnv); -1: the layout's launcher, or no layout
  std::string lighthouse = kDefaultLighthouse;  // --lighthouse: the command, or "none" (started elsewhere)
  int lighthouse_port = kDefaultLighthousePort;  // --lighthouse_port

  bool supervises() const { return count > 0 && index < 0; }  // the layout's launcher
  bool starts_lighthouse() const { return lighthouse != "none"; }
};

}  // namespace ddp::launcher
