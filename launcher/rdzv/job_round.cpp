// See job_round.hpp.
#include "launcher/rdzv/job_round.hpp"

#include <unistd.h>

#include <algorithm>
#include <optional>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"
#include "ddplaunch/rendezvous/error.hpp"
#include "launcher/rdzv/round_keys.hpp"
#include "launcher/rdzv/static_rejoin.hpp"

namespace ddp::launcher {
namespace {

// A static job's round: the one asked for, or where the job is when this launcher just started
// and the others are further on (a node coming back; static_rejoin.hpp). Each round this node
// skips counts as a restart, as it did for the others.
JoinedRound join_static_round(rendezvous::Store& root, rendezvous::Store& job, const NodeInfo& self,
                              RendezvousOptions o, std::chrono::milliseconds heartbeat_timeout) {
  const int asked = o.round;
  if (asked == 0 && o.nnodes > 1) o.round = current_round(job);
  if (o.round > asked) log::info("the job is in round {}: this node joins it there", o.round);
  for (;;) {
    if (o.nnodes > 1) record_current_round(job, o.round);
    try {
      return JoinedRound{join_round(root, job, self, o), self.node_rank, o.round, o.round - asked, "", 0};
    } catch (const RankHeld& held) {
      if (o.status)
        o.status(std::string(held.what()) + "; waiting for the others to lose it, then joining the next round");
      await_round_end(job, o.round, self.node_rank, held, rank_holder_bound(heartbeat_timeout));
      ++o.round;
    }
  }
}

// The first round whose keys are still in the store (round_keys.hpp), or `round` while none have
// gone. A node that stopped its workers for longer than two rounds took comes for a round whose
// keys went: it joins the first one kept instead of waiting in an empty round until the timeout.
int first_kept_round(rendezvous::Store& job, int round) {
  if (round == 0 || !job.check({kFirstRoundKeptKey})) return round;
  const std::string value = job.get(kFirstRoundKeptKey, std::chrono::seconds(30));
  const std::optional<int> kept = parse_round(value);
  return kept ? std::max(*kept, round) : round;  // not a number: not ours to trust, so not skipped
}

}  // namespace

JoinedRound join_job_round(rendezvous::Store& root, rendezvous::Store& job, const LaunchConfig& c,
                           const EffectiveConfig& eff, int round, const std::atomic<bool>* cancelled,
                           const std::function<void(const std::string&)>& status,
                           std::function<void(int)> clear_old_keys) {
  const NodeInfo self{c.node_rank,
                      c.nproc_per_node,
                      c.local_addr.empty() ? eff.host : c.local_addr,
                      eff.host,
                      static_cast<int>(::getpid()),
                      root.local_address()};
  RendezvousOptions o;
  o.nnodes = c.max_nodes;
  o.round = round;
  o.run_id = c.run_id;
  o.timeout = c.rdzv_timeout;
  const BackendRules& rules = c.rdzv_rules;
  o.endpoint = rules.node0_hosts_store
                   ? rendezvous::format_endpoint(c.master_addr, static_cast<std::uint16_t>(eff.port))
                   : std::string(rules.meeting_place) + " " + c.rdzv_endpoint;
  o.status = status;
  o.with_secret = !c.rdzv_secret.empty();
  o.cancelled = cancelled;
  o.clear_old_keys = std::move(clear_old_keys);
  if (c.min_nodes == c.max_nodes && !rules.always_elastic && !c.rank_by_arrival)
    return join_static_round(root, job, self, o, c.heartbeat_timeout);
  // A backend without a store host (etcd) ranks by arrival, and lets every node that comes to a
  // round with the job (its start or a restart) close it; the compare-set makes that happen once.
  // A node that arrived late waits for them: closing the next round alone would start a second
  // job beside the running one.
  ElasticOptions e;
  e.base = o;
  e.min_nodes = c.min_nodes;
  e.is_host = c.node_rank == 0 || rules.any_node_closes;
  e.by_arrival = rules.ranks_by_arrival;
  e.active_nodes = c.active_nodes.value_or(0);
  e.last_call = c.last_call_timeout;
  for (int late = 0;; ++late) {
    const int kept = first_kept_round(job, e.base.round);
    if (kept > e.base.round) {
      log::info("the keys of round {} are gone (the job is in round {} or later): this node joins there", e.base.round,
                kept);
      late += kept - e.base.round;
      e.base.round = kept;
    }
    try {
      ElasticRound r = join_elastic_round(root, job, self, e);
      return JoinedRound{std::move(r.ranks), r.group_rank, e.base.round, late, "", 0};
    } catch (const LateArrival& arrival) {
      status(arrival.what());
      ++e.base.round;
      if (rules.any_node_closes) e.is_host = false;
    }
  }
}

std::string done_key(const std::string& round_prefix, int node) {
  return round_prefix + "done/" + std::to_string(node);
}

bool count_in(rendezvous::Store& job, const std::string& round_prefix, int node, int nnodes) {
  if (nnodes == 1 && node == 0) return true;  // a standby (node >= nnodes) never declares it alone
  job.set(done_key(round_prefix, node), "1");
  for (int n = 0; n < nnodes; ++n) {
    const std::string key = done_key(round_prefix, n);
    if (!job.check({key})) return false;
    try {
      // The key exists: the bound is for the round trip over a slow link (a 1 s bound there
      // made every node count "not finished" and the job never ended), and for a SignedStore
      // waiting past a value it rejects.
      if (job.get(key, std::chrono::seconds(30)) != "1") return false;
    } catch (const rendezvous::TimeoutError&) {
      return false;  // only a value a SignedStore rejects: that node has not finished
    }
  }
  return true;
}

bool turn_away_late_nodes(rendezvous::Store& job, int next_round, const std::string& why) {
  const std::string round = round_prefix(next_round);
  try {
    job.compare_set(round + "closed", "", "error: " + why);
    return job.add(round + "joined", 0) > 0;
  } catch (const Error& e) {
    log::warning("could not tell nodes waiting for round {} that the job ended: {}", next_round, e.what());
    return false;
  }
}

void leave_job(rendezvous::Store& job, const std::string& round_prefix, const JobExitOptions& o) {
  try {
    if (job.add(round_prefix + "left", 1) == o.nnodes) job.set(round_prefix + "all_left", "1");
    if (o.is_host) job.get(round_prefix + "all_left", o.wait);  // a get: a SignedStore checks the value
  } catch (const Error& e) {
    if (o.quiet) {
      log::debug("exit barrier: {}", e.what());
    } else {
      log::warning("exit barrier: {}", e.what());
    }
  }
}

}  // namespace ddp::launcher
