// A static job's node coming back; the steps are in static_rejoin.hpp.
#include "launcher/rdzv/static_rejoin.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/format_duration.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/outcome.hpp"
#include "launcher/rdzv/rank_map.hpp"
#include "launcher/rdzv/round_keys.hpp"

namespace ddp::launcher {

namespace {
const std::string kCurrentRound = "current_round";
}  // namespace

int current_round(rendezvous::Store& job) {
  if (!job.check({kCurrentRound})) return 0;
  std::string text;
  try {
    // The key exists: the bound is for the round trip (and a SignedStore waiting past a value it
    // rejects, which then counts as none).
    text = job.get(kCurrentRound, std::chrono::seconds(10));
  } catch (const rendezvous::TimeoutError&) {
    return 0;
  }
  try {
    return std::max(0, std::stoi(text));
  } catch (const std::exception&) {
    // Not ours (another program on the same keys without a job secret): start at round 0, where
    // the node records are checked as always.
    return 0;
  }
}

void record_current_round(rendezvous::Store& job, int round) {
  job.set(kCurrentRound, std::to_string(round));
}

std::chrono::milliseconds rank_holder_bound(std::chrono::milliseconds heartbeat_timeout) {
  return 2 * heartbeat_timeout + std::chrono::seconds(1);
}

void await_round_end(rendezvous::Store& job, int round, int node_rank, const RankHeld& held,
                     std::chrono::milliseconds bound) {
  const NodeInfo holder = NodeInfo::parse(held.holder());
  std::string value;
  try {
    value = job.get(round_prefix(round) + "outcome", bound);
  } catch (const rendezvous::TimeoutError&) {
    throw UsageError(
        fmt::format("--node_rank={} is held in round {} by {} (pid {}), which is still alive after {} (the others "
                    "would have lost it by now); give every node a distinct --node_rank",
                    node_rank, round, holder.host, holder.pid, format_seconds(bound)));
  }
  Outcome outcome;
  try {
    outcome = Outcome::decode(value);
  } catch (const OutcomeError&) {
    return;  // not a success: the next round decides
  }
  if (outcome.succeeded()) {
    throw UsageError(fmt::format("the job ended in round {} with success before this node (--node_rank={}) came back",
                                 round, node_rank));
  }
}

}  // namespace ddp::launcher
