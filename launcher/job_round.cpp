// See job_round.hpp.
#include "launcher/job_round.hpp"

#include <unistd.h>

#include "common/log.hpp"
#include "ddplaunch/rendezvous/endpoint.hpp"

namespace ddp::launcher {

JoinedRound join_job_round(rendezvous::Store& root, rendezvous::Store& job, const LaunchConfig& c,
                           const EffectiveConfig& eff, int round, const std::atomic<bool>* cancelled,
                           const std::function<void(const std::string&)>& status) {
  const NodeInfo self{c.node_rank, c.nproc_per_node, c.local_addr.empty() ? eff.host : c.local_addr, eff.host,
                      static_cast<int>(::getpid())};
  RendezvousOptions o;
  o.nnodes = c.max_nodes;
  o.round = round;
  o.run_id = c.run_id;
  o.timeout = c.rdzv_timeout;
  o.endpoint = rendezvous::format_endpoint(c.master_addr, static_cast<std::uint16_t>(eff.port));
  o.status = status;
  o.cancelled = cancelled;
  if (c.min_nodes == c.max_nodes) return JoinedRound{join_round(root, job, self, o), c.node_rank, round, 0};
  ElasticOptions e;
  e.base = o;
  e.min_nodes = c.min_nodes;
  e.is_host = c.node_rank == 0;
  if (const auto it = c.rdzv_conf.find("last_call_timeout"); it != c.rdzv_conf.end()) {
    e.last_call = std::chrono::milliseconds(static_cast<long long>(std::stod(it->second) * 1000));
  }
  for (int late = 0;; ++late) {
    try {
      ElasticRound r = join_elastic_round(root, job, self, e);
      return JoinedRound{std::move(r.ranks), r.group_rank, e.base.round, late};
    } catch (const LateArrival& arrival) {
      status(arrival.what());
      ++e.base.round;
    }
  }
}

void leave_job(rendezvous::Store& job, const std::string& round_prefix, int nnodes, bool is_host,
               std::chrono::milliseconds wait) {
  try {
    if (job.add(round_prefix + "left", 1) == nnodes) job.set(round_prefix + "all_left", "1");
    if (is_host) job.wait({round_prefix + "all_left"}, wait);
  } catch (const Error& e) {
    log::warning("exit barrier: {}", e.what());
  }
}

}  // namespace ddp::launcher
