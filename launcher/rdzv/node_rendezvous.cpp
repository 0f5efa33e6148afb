// Rendezvous rounds; the steps are in node_rendezvous.hpp.
#include "launcher/rdzv/node_rendezvous.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/exit_codes.hpp"
#include "common/format_duration.hpp"
#include "common/log.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/round_keys.hpp"
#include "launcher/rdzv/self_exclusion.hpp"
#include "launcher/rdzv/standby_members.hpp"
#include "launcher/rdzv/static_rejoin.hpp"

namespace ddp::launcher {

using rendezvous::Store;
using rendezvous::TimeoutError;

namespace {
// Marks the round failed unless it already completed (then only this node fails: the others
// have their ranks and must not see the verdict change under them).
[[noreturn]] void fail_round(Store& job, const std::string& ready_key, const std::string& message) {
  job.compare_set(ready_key, "", round_error(kExitUsage, message));
  throw UsageError(message);
}
}  // namespace

namespace {

// Nodes with different job secrets never see each other's keys: the timeout says so.
std::string secret_hint(const RendezvousOptions& o) {
  return o.with_secret ? std::string(", and that ") + kSameSecretHint : "";
}

// Checks that this node runs the same job (run id) with the same node count as the others.
void check_job(Store& root, Store& job, const NodeInfo& self, const RendezvousOptions& o, const std::string& ready_key,
               const std::string& nnodes_text) {
  const std::string other_run = root.compare_set("run_id", "", o.run_id);
  if (other_run != o.run_id) {
    const std::string message = "node " + std::to_string(self.node_rank) + " (" + self.host +
                                ") has --rdzv_id=" + o.run_id + " but the store at " + o.endpoint + " runs job '" +
                                other_run + "'; use the same --rdzv_id on every node";
    root.set(other_run + "/" + ready_key, round_error(kExitUsage, message));
    throw UsageError(message);
  }
  const std::string agreed = job.compare_set("config/nnodes", "", nnodes_text);
  if (agreed != nnodes_text) {
    fail_round(job, ready_key,
               "node " + std::to_string(self.node_rank) + " (" + self.host + ") has --nnodes=" + nnodes_text +
                   " but the other nodes have --nnodes=" + agreed + "; start every node with the same --nnodes");
  }
}

// Waits for `key` in one-second slices (to report progress and notice cancellation; the
// wake-up itself is the store's event). `progress` returns the status line and whether it
// changed; `on_deadline` throws the timeout error.
void wait_reporting(Store& job, const std::string& key, std::chrono::milliseconds timeout, const RendezvousOptions& o,
                    const std::function<std::string()>& progress, const std::function<void()>& on_deadline) {
  const auto start = std::chrono::steady_clock::now();
  std::string reported;
  for (;;) {
    const auto left =
        timeout - std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
    try {
      job.wait({key}, std::clamp(left, std::chrono::milliseconds(1), std::chrono::milliseconds(1000)));
      return;
    } catch (const TimeoutError&) {
      // Not there yet: fall through to report and check the deadline.
    } catch (const rendezvous::ConnectionError& e) {
      // Node 0 gave up first (its own timeout, or a failure): say where to look.
      throw rendezvous::ConnectionError(std::string(e.what()) +
                                        "; the store's host (node 0's launcher) ended while this node waited for the "
                                        "others: see its output");
    }
    if (o.cancelled && o.cancelled->load()) throw ddp::Error("interrupted while waiting for nodes");
    const std::string line = progress();
    if (line != reported && o.status) o.status(line);
    reported = line;
    if (left.count() <= 1000) on_deadline();
  }
}

// Runs the options' clear_old_keys in a round after the first and records the first round whose
// keys stay; a failure is said, not fatal: the workers may cope (PyTorch's fail with the stale
// keys, and say so), and the rounds' keys go at the next round.
void clear_old_keys(Store& job, const RendezvousOptions& o) {
  if (o.round == 0 || !o.clear_old_keys) return;
  const int kept = first_round_kept(o.round);
  try {
    o.clear_old_keys(kept);
    job.set(kFirstRoundKeptKey, std::to_string(kept));
  } catch (const Error& e) {
    log::warning(
        "round {}: could not delete the workers' keys of the round before from the store ({}); PyTorch "
        "workers may read them as their own and fail",
        o.round, e.what());
  }
}

// Step 5 of join_round: node 0 clears, the others wait until it has.
void clear_or_await_clearing(Store& job, const NodeInfo& self, const RendezvousOptions& o) {
  if (o.round == 0) return;
  const std::string cleared_key = round_prefix(o.round) + "cleared";
  if (self.node_rank == 0) {
    clear_old_keys(job, o);
    job.set(cleared_key, "1");
    return;
  }
  const auto progress = [&] { return std::string("waiting for node 0 to delete the last round's worker keys"); };
  const auto deadline = [&] {
    throw TimeoutError(fmt::format(
        "timed out after {} waiting for node 0 to delete the workers' keys of round {} at {}; see node 0's output",
        format_seconds(o.timeout), o.round - 1, o.endpoint));
  };
  wait_reporting(job, cleared_key, o.timeout, o, progress, deadline);
}

// The members of a closed round, in arrival order (arrival index i at [i-1]).
std::vector<NodeInfo> read_members(Store& job, const RendezvousOptions& o, int members) {
  std::vector<NodeInfo> arrived;
  for (int i = 1; i <= members; ++i) {
    arrived.push_back(NodeInfo::parse(job.get(round_prefix(o.round) + "member/" + std::to_string(i), o.timeout)));
  }
  return arrived;
}

// The host, closing a round with --active_nodes: orders its `members` (standby_members.hpp) and
// records the order and the active nodes before the round is seen closed.
void write_standby_order(Store& job, const RendezvousOptions& o, int members) {
  const std::vector<NodeInfo> arrived = read_members(job, o, members);
  std::vector<std::string> previous;
  const std::string previous_key = round_prefix(o.round - 1) + "active";
  if (o.round > 0 && job.check({previous_key})) previous = parse_active(job.get(previous_key, o.timeout));
  job.set(round_prefix(o.round) + "order", format_order(order_members(arrived, previous)));
}

// A member's view of a closed round with --active_nodes: the host's order, active and standby.
ElasticRound read_standby_round(Store& job, const RendezvousOptions& o, int members, std::size_t mine,
                                int active_nodes) {
  const std::vector<NodeInfo> arrived = read_members(job, o, members);
  const std::string round = round_prefix(o.round);
  const std::vector<std::size_t> order =
      parse_order(job.get(round + "order", o.timeout), static_cast<std::size_t>(members));
  RankMap ranks = standby_rank_map(arrived, order, active_nodes);
  if (members < active_nodes) {
    log::warning(
        "round {}: only {} of --active_nodes={} nodes joined and no spare is left: all {} run workers, world size "
        "{} (smaller than asked) until a restart finds {} nodes again",
        o.round, members, active_nodes, members, ranks.world_size(), active_nodes);
  }
  // Any member may write it: every one computes the same value from the same keys.
  job.set(round + "active", format_active(ranks));
  const int group_rank = static_cast<int>(std::find(order.begin(), order.end(), mine) - order.begin());
  return ElasticRound{std::move(ranks), group_rank};
}

}  // namespace

RankMap join_round(Store& root, Store& job, const NodeInfo& self, const RendezvousOptions& o) {
  const std::string round = round_prefix(o.round);
  const std::string ready_key = round + "ready";
  check_job(root, job, self, o, ready_key, std::to_string(o.nnodes));

  const std::string record = self.serialize();
  const std::string node_key = round + "node/" + std::to_string(self.node_rank);
  const std::string holder = job.compare_set(node_key, "", record);
  if (holder != record) {
    const NodeInfo other = NodeInfo::parse(holder);
    // A round that formed already keeps its members: a launcher started again on a lost node's
    // rank waits for the round's end instead of failing it (static_rejoin.hpp).
    if (job.check({ready_key})) {
      throw RankHeld(fmt::format("round {} formed with --node_rank={} on {} (pid {})", o.round, self.node_rank,
                                 other.host, other.pid),
                     holder);
    }
    fail_round(job, ready_key,
               "--node_rank=" + std::to_string(self.node_rank) + " is used twice: by " + other.host + " (pid " +
                   std::to_string(other.pid) + ") and by " + self.host + " (pid " + std::to_string(self.pid) +
                   "); give every node a distinct --node_rank");
  }
  if (job.add(round + "joined", 1) == o.nnodes) job.set(ready_key, "ok");

  const auto progress = [&] {
    return "waiting for nodes: " + std::to_string(job.add(round + "joined", 0)) + "/" + std::to_string(o.nnodes) +
           " joined (node_rank " + std::to_string(self.node_rank) + ")";
  };
  const auto deadline = [&] {
    std::string missing;
    int count = 0;
    for (int r = 0; r < o.nnodes; ++r) {
      if (!job.check({round + "node/" + std::to_string(r)})) {
        missing += (missing.empty() ? "" : ",") + std::to_string(r);
        ++count;
      }
    }
    throw TimeoutError(fmt::format(
        "timed out after {} waiting for {} of {} nodes (node_rank {}) at {}; check --nnodes and --master_addr "
        "on every node{}",
        format_seconds(o.timeout), count, o.nnodes, missing, o.endpoint, secret_hint(o)));
  };
  wait_reporting(job, ready_key, o.timeout, o, progress, deadline);
  const std::string ready = job.get(ready_key, o.timeout);
  if (is_round_error(ready)) fail_on_round_error(job, round, ready);
  clear_or_await_clearing(job, self, o);
  std::vector<NodeInfo> nodes;
  for (int r = 0; r < o.nnodes; ++r)
    nodes.push_back(NodeInfo::parse(job.get(round + "node/" + std::to_string(r), o.timeout)));
  return RankMap(std::move(nodes));
}

ElasticRound join_elastic_round(Store& root, Store& job, const NodeInfo& self, const ElasticOptions& e) {
  const RendezvousOptions& o = e.base;
  const std::string round = round_prefix(o.round);
  const std::string closed_key = round + "closed";
  check_job(root, job, self, o, closed_key, std::to_string(e.min_nodes) + ":" + std::to_string(o.nnodes));
  const std::string active = std::to_string(e.active_nodes);
  if (const std::string agreed = job.compare_set("config/active_nodes", "", active); agreed != active) {
    const auto text = [](const std::string& n) { return n == "0" ? std::string("none") : n; };
    fail_round(job, closed_key,
               "node " + std::to_string(self.node_rank) + " (" + self.host + ") has --active_nodes=" + text(active) +
                   " but the other nodes have --active_nodes=" + text(agreed) +
                   "; start every node with the same --active_nodes");
  }

  const std::int64_t index = job.add(round + "joined", 1);
  job.set(round + "member/" + std::to_string(index), self.serialize());
  job.set(round + "arrived/" + std::to_string(index), "1");
  mark_present(job, round);  // nodes that excluded themselves count too (self_exclusion.hpp)

  const auto joined_line = [&] {
    const std::string wanted = e.min_nodes == o.nnodes ? std::to_string(o.nnodes)
                                                       : std::to_string(e.min_nodes) + ".." + std::to_string(o.nnodes);
    return "waiting for nodes: " + std::to_string(job.add(round + "joined", 0)) + "/" + wanted + " joined" +
           (e.by_arrival ? "" : " (node_rank " + std::to_string(self.node_rank) + ")");
  };
  const auto too_few = [&] {
    throw TimeoutError(fmt::format(
        "timed out after {}: {} of at least {} nodes joined at {}; start more nodes or lower MIN in --nnodes{}",
        format_seconds(o.timeout), job.add(round + "joined", 0), e.min_nodes, o.endpoint, secret_hint(o)));
  };
  if (e.is_host) {
    wait_reporting(job, round + "arrived/" + std::to_string(e.min_nodes), o.timeout, o, joined_line, too_few);
    try {
      // The last call: more nodes may join, up to MAX, for this long.
      job.wait({present_key(round, o.nnodes)}, e.last_call);
    } catch (const TimeoutError&) {
      // MAX not reached: close with whoever is there.
    }
    const std::int64_t n = std::min<std::int64_t>(job.add(round + "joined", 0), o.nnodes);
    if (e.active_nodes > 0) write_standby_order(job, o, static_cast<int>(n));
    clear_old_keys(job, o);
    job.compare_set(closed_key, "", std::to_string(n));
  } else {
    wait_reporting(job, closed_key, o.timeout, o, joined_line, too_few);
  }
  const std::string closed = job.get(closed_key, o.timeout);
  if (is_round_error(closed)) fail_on_round_error(job, round, closed);
  const int members = std::stoi(closed);
  if (index > members) {
    throw LateArrival("round " + std::to_string(o.round) + " closed with " + std::to_string(members) +
                      " nodes before this node arrived; it joins at the next restart");
  }
  if (e.active_nodes > 0)
    return read_standby_round(job, o, members, static_cast<std::size_t>(index - 1), e.active_nodes);
  // The host is group rank 0; the others follow in arrival order.
  std::vector<std::pair<NodeInfo, std::int64_t>> nodes;
  for (int i = 1; i <= members; ++i) {
    nodes.emplace_back(NodeInfo::parse(job.get(round + "member/" + std::to_string(i), o.timeout)), i);
  }
  if (!e.by_arrival) {
    std::stable_sort(nodes.begin(), nodes.end(),
                     [](const auto& a, const auto& b) { return (a.first.node_rank == 0) > (b.first.node_rank == 0); });
  }
  std::vector<NodeInfo> ranked;
  int mine = -1;
  for (std::size_t g = 0; g < nodes.size(); ++g) {
    NodeInfo n = nodes[g].first;
    n.node_rank = static_cast<int>(g);
    if (nodes[g].second == index) mine = static_cast<int>(g);
    ranked.push_back(n);
  }
  return ElasticRound{RankMap(std::move(ranked)), mine};
}

}  // namespace ddp::launcher
