// The one spelling of a round's key prefix in the job's store: "r<round>/". Every key of a round
// (its members, outcome, heartbeats, done records, the workers' store address) lives under it.
//
// Only the last kRoundsKept rounds' keys stay: as a round after the first forms, its former
// (node 0 of a static round, the host of an elastic one) deletes the keys of the rounds before
// first_round_kept (workers_keys.hpp), so that a job's store, and the work of each round that
// lists it, stays the same size however many restarts came before.
#pragma once

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>

namespace ddp::launcher {

// "r<round>/". Pure; thread-safe.
inline std::string round_prefix(int round) {
  return "r" + std::to_string(round) + "/";
}

// The rounds whose keys stay while a round forms: itself and the one before, which its nodes
// still read (the standby order's "active", the restart breaker's verdict) and which a node of it
// may still be stopping its workers in.
inline constexpr int kRoundsKept = 2;

// The first round whose keys stay while round `round` forms. Pure.
inline int first_round_kept(int round) {
  return std::max(0, round - kRoundsKept + 1);
}

// The job's key (an integer) that says the first round whose keys are still in the store; absent
// until a round's keys have gone. An elastic node that arrives for an earlier round joins there
// instead (job_round.cpp).
inline constexpr const char* kFirstRoundKeptKey = "first_round_kept";

// A round number written out ("12"): nullopt unless the whole text is a number >= 0. Pure.
inline std::optional<int> parse_round(std::string_view text) {
  int round = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), round);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || round < 0) return std::nullopt;
  return round;
}

// The round of a key of the job's view, "r<k>/..."; nullopt for a key of no round
// ("config/nnodes", "current_round", "first_round_kept"). Pure.
inline std::optional<int> round_of_key(std::string_view key) {
  const std::size_t slash = key.find('/');
  if (key.empty() || key[0] != 'r' || slash == std::string_view::npos) return std::nullopt;
  return parse_round(key.substr(1, slash - 1));
}

}  // namespace ddp::launcher
