// See progress_exchange.hpp.
#include "launcher/agent/progress_exchange.hpp"

#include <optional>
#include <vector>

#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {
namespace {

std::string measure_key(const std::string& prefix, int node) {
  return prefix + "progress/" + std::to_string(node);
}

std::string verdict_key(const std::string& prefix) {
  return prefix + "progress_verdict";
}

}  // namespace

ProgressVerdict exchange_progress(rendezvous::Store& job, const ProgressExchange& x, const NodeProgress& mine) {
  job.set(measure_key(x.round_prefix, x.node), encode_node_progress(mine));
  std::vector<std::string> keys;
  for (int n = 0; n < x.nnodes; ++n) keys.push_back(measure_key(x.round_prefix, n));
  try {
    job.wait(keys, x.wait);
  } catch (const rendezvous::TimeoutError&) {
    // A node lost, or still stopping its workers: judged with what is there (it counts as unknown).
  }
  std::vector<std::optional<NodeProgress>> measures;
  for (const std::string& key : keys) {
    measures.push_back(job.check({key}) ? decode_node_progress(job.get(key, x.wait)) : std::nullopt);
  }
  int previous_streak = 0;
  if (!x.previous_round_prefix.empty() && job.check({verdict_key(x.previous_round_prefix)})) {
    const auto previous = decode_verdict(job.get(verdict_key(x.previous_round_prefix), x.wait));
    if (previous) previous_streak = previous->streak;
  }
  const ProgressVerdict mine_verdict = judge_round(measures, x.is_restart, previous_streak);
  const std::string stored = job.compare_set(verdict_key(x.round_prefix), "", encode_verdict(mine_verdict));
  return decode_verdict(stored).value_or(ProgressVerdict{});
}

}  // namespace ddp::launcher
