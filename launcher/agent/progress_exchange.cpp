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

// Step 2: the judgement from the measures there now; compare-set, so the first one written stays.
void judge_and_offer(rendezvous::Store& job, const ProgressExchange& x) {
  std::vector<std::optional<NodeProgress>> measures;
  for (int n = 0; n < x.nnodes; ++n) {
    const std::string key = measure_key(x.round_prefix, n);
    measures.push_back(job.check({key}) ? decode_node_progress(job.get(key, x.wait)) : std::nullopt);
  }
  int previous_streak = 0;
  if (!x.previous_round_prefix.empty() && job.check({verdict_key(x.previous_round_prefix)})) {
    const auto previous = decode_verdict(job.get(verdict_key(x.previous_round_prefix), x.wait));
    if (previous) previous_streak = previous->streak;
  }
  job.compare_set(verdict_key(x.round_prefix), "",
                  encode_verdict(judge_round(measures, x.is_restart, previous_streak)));
}

}  // namespace

ProgressVerdict exchange_progress(rendezvous::Store& job, const ProgressExchange& x, const NodeProgress& mine) {
  job.set(measure_key(x.round_prefix, x.node), encode_node_progress(mine));
  std::vector<std::string> keys;
  for (int n = 0; n < x.nnodes; ++n) keys.push_back(measure_key(x.round_prefix, n));
  if (x.node_lost || job.check(keys)) judge_and_offer(job, x);
  try {
    job.wait({verdict_key(x.round_prefix)}, x.wait);
  } catch (const rendezvous::TimeoutError&) {
    // A node lost unseen, or still stopping its workers: judged without its measure.
    judge_and_offer(job, x);
  }
  return decode_verdict(job.get(verdict_key(x.round_prefix), x.wait)).value_or(ProgressVerdict{});
}

}  // namespace ddp::launcher
