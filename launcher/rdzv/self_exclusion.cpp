// See self_exclusion.hpp.
#include "launcher/rdzv/self_exclusion.hpp"

#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"

namespace ddp::launcher {

using rendezvous::Store;

namespace {
const std::string kErrorPrefix = "error: ";

// Waits up to `timeout` for `key`; whether it came.
bool wait_quietly(Store& job, const std::string& key, std::chrono::milliseconds timeout) {
  if (timeout.count() <= 0) return false;
  try {
    job.wait({key}, timeout);
    return true;
  } catch (const rendezvous::TimeoutError&) {
    return false;  // those nodes never came: they find no store, as after any end of node 0
  }
}
}  // namespace

std::string round_error(int code, const std::string& message) {
  return code == kExitUsage ? kErrorPrefix + message : fmt::format("{}[exit {}] {}", kErrorPrefix, code, message);
}

bool is_round_error(const std::string& verdict) {
  return verdict.rfind(kErrorPrefix, 0) == 0;
}

void fail_on_round_error(Store& job, const std::string& round_prefix, const std::string& verdict) {
  try {
    const std::int64_t k = job.add(round_prefix + "verdict_read", 1);
    job.set(round_prefix + "verdict_read/" + std::to_string(k), "1");
  } catch (const Error& e) {
    // The store's host may have ended already: this node fails with the verdict regardless.
    log::debug("could not count this node as having read the verdict: {}", e.what());
  }
  std::string message = verdict.substr(kErrorPrefix.size());
  const std::string unhealthy = fmt::format("[exit {}] ", static_cast<int>(kExitUnhealthy));
  if (message.rfind(unhealthy, 0) == 0) throw NodeUnhealthy(message.substr(unhealthy.size()));
  throw UsageError(message);
}

void mark_present(Store& job, const std::string& round_prefix) {
  const std::int64_t p = job.add(round_prefix + "present", 1);
  job.set(present_key(round_prefix, static_cast<int>(p)), "1");
}

std::string present_key(const std::string& round_prefix, int n) {
  return round_prefix + "present/" + std::to_string(n);
}

std::vector<std::string> excluded_nodes(Store& job, const std::string& round_prefix) {
  std::vector<std::string> lines;
  const std::int64_t count = job.add(round_prefix + "unhealthy", 0);
  for (std::int64_t u = 1; u <= count; ++u) {
    lines.push_back(job.get(round_prefix + "unhealthy/" + std::to_string(u), std::chrono::seconds(30)));
  }
  return lines;
}

void exclude_self(Store& job, const ExclusionPlace& p, const SelfExclusion& sick) {
  const std::string line = fmt::format("node {} ({}) excluded itself: {}", p.node_rank, p.host, sick.reason);
  if (p.elastic && !p.holds_store) {
    // Recorded before it counts as present: a host that closes the round on seeing every node
    // present finds the line there for the members to print.
    const std::int64_t u = job.add(p.round_prefix + "unhealthy", 1);
    job.set(p.round_prefix + "unhealthy/" + std::to_string(u), line);
    mark_present(job, p.round_prefix);
    throw NodeUnhealthy(sick.report + "\n" + line + "; the other nodes go on without it");
  }
  const std::string why =
      p.elastic ? "this node hosts the store the others meet in" : fmt::format("--nnodes={} is static", p.max_nodes);
  const std::string told = p.max_nodes == 1 ? line : fmt::format("{}; the job cannot run without it ({})", line, why);
  job.compare_set(p.round_prefix + (p.elastic ? "closed" : "ready"), "", round_error(kExitUnhealthy, told));
  if (p.holds_store && p.max_nodes > 1) {
    // The others learn the verdict from this process's store: keep it up until they read it.
    const std::string read = p.round_prefix + "verdict_read/";
    log::info("{}; keeping the store up until the other nodes have read it", told);
    if (p.min_nodes <= 1 || wait_quietly(job, read + std::to_string(p.min_nodes - 1), p.wait_first)) {
      wait_quietly(job, read + std::to_string(p.max_nodes - 1),
                   p.min_nodes == p.max_nodes ? p.wait_first : p.last_call);
    }
  }
  throw NodeUnhealthy(sick.report + "\n" + told);
}

}  // namespace ddp::launcher
