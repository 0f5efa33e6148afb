// See straggler_exchange.hpp.
#include "launcher/agent/straggler_exchange.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "common/collective_progress.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {
namespace {

constexpr std::chrono::seconds kGetTimeout{5};

std::string clock_key(const std::string& prefix, int node, long long n, const char* what) {
  return fmt::format("{}stragglers/clock/{}/{}/{}", prefix, node, n, what);
}

// The number of node `node`'s latest clock exchange (measure_clock writes it, answer_clock reads it).
std::string current_key(const std::string& prefix, int node) {
  return fmt::format("{}stragglers/clock/{}/current", prefix, node);
}

}  // namespace

std::string entries_key(const std::string& prefix, int node) {
  return fmt::format("{}stragglers/entries/{}", prefix, node);
}

std::string scores_key(const std::string& prefix) {
  return prefix + "stragglers/scores";
}

std::optional<ClockSample> measure_clock(rendezvous::Store& job, const std::string& prefix, int node, long long n,
                                         std::chrono::milliseconds timeout) {
  const std::string ask = clock_key(prefix, node, n, "ask");
  const std::string reply = clock_key(prefix, node, n, "reply");
  job.set(current_key(prefix, node), std::to_string(n));
  const std::int64_t t0 = realtime_ns();
  job.set(ask, "");
  std::optional<ClockSample> out;
  try {
    job.wait({reply}, timeout);
    const std::int64_t t2 = realtime_ns();
    const std::int64_t t1 = std::stoll(job.get(reply, kGetTimeout));
    out = ClockSample{t1 - (t0 + t2) / 2, t2 - t0};
  } catch (const rendezvous::TimeoutError&) {
    // Node `node` is busy or gone: no sample this time.
  } catch (const std::logic_error&) {
    // std::stoll: not what answer_clock writes; no sample.
  }
  job.delete_key(ask);
  job.delete_key(reply);
  return out;
}

long long answer_clock(rendezvous::Store& job, const std::string& prefix, int node, long long n,
                       std::chrono::milliseconds timeout) {
  try {
    job.wait({clock_key(prefix, node, n, "ask")}, timeout);
  } catch (const rendezvous::TimeoutError&) {
    const std::string current = current_key(prefix, node);
    if (!job.check({current})) return n;
    try {
      return std::max(n, std::stoll(job.get(current, kGetTimeout)));
    } catch (const std::logic_error&) {
      return n;  // std::stoll: not what measure_clock writes
    }
  }
  job.set(clock_key(prefix, node, n, "reply"), std::to_string(realtime_ns()));
  return n + 1;
}

void publish_entries(rendezvous::Store& job, const std::string& prefix, const NodeEntries& entries) {
  job.set(entries_key(prefix, entries.node), encode_entries(entries));
}

std::optional<NodeEntries> read_entries(rendezvous::Store& job, const std::string& prefix, int node) {
  const std::string key = entries_key(prefix, node);
  if (!job.check({key})) return std::nullopt;
  return decode_entries(job.get(key, kGetTimeout));
}

void publish_scores(rendezvous::Store& job, const std::string& prefix, const StragglerScores& scores) {
  job.set(scores_key(prefix), encode_scores(scores));
}

std::optional<StragglerScores> read_scores(rendezvous::Store& job, const std::string& prefix) {
  const std::string key = scores_key(prefix);
  if (!job.check({key})) return std::nullopt;
  return decode_scores(job.get(key, kGetTimeout));
}

}  // namespace ddp::launcher
