// The one spelling of a round's key prefix in the job's store: "r<round>/". Every key of a round
// (its members, outcome, heartbeats, done records, the workers' store address) lives under it.
#pragma once

#include <string>

namespace ddp::launcher {

// "r<round>/". Pure; thread-safe.
inline std::string round_prefix(int round) {
  return "r" + std::to_string(round) + "/";
}

}  // namespace ddp::launcher
