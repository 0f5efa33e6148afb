// How straggler detection's records cross nodes (docs/stragglers.md), through the job's store
// under the running round's prefix ("r3/"), in the launchers' key space (signed and hidden with a
// job secret, docs/security.md), as the no-progress verdict does (progress_exchange.hpp):
//   "<round>stragglers/entries/<node>"  each node's entry times of its last two scoring
//                                       intervals (rdzv/stragglers.hpp's wire form), on node 0's
//                                       clock; node 0 reads them every interval (twice each, so
//                                       one missed read loses nothing);
//   "<round>stragglers/scores"          node 0's scores; the other nodes read their ranks' from it;
//   "<round>stragglers/clock/<node>/<n>/ask", ".../reply": the clocks (below), and
//   "<round>stragglers/clock/<node>/current": the exchange number node 0 is at (a node that
//                                       missed an ask catches up from it).
// The clocks: entry times are CLOCK_REALTIME, compared between machines whose clocks may differ by
// more than the lateness sought. Each node's offset to node 0 is measured as NTP does, over the
// store: node 0 writes ".../ask" and notes t0; node k, parked in a WAIT on that key (no polling),
// answers with its clock t1; node 0 reads the answer at t2; the offset is t1 - (t0 + t2) / 2,
// wrong by at most (t2 - t0) / 2, the round trip through the store (a millisecond or so). The
// sample with the shortest round trip of the last eight is kept. The other way, durations
// (a straggler waits least in each collective), needs each collective's completion time, which
// gloo's Flight Recorder does not record (entry_reader.hpp).
// All functions block on the store (bounded by their timeouts) and throw what the store throws.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "ddplaunch/rendezvous/store.hpp"
#include "launcher/rdzv/stragglers.hpp"

namespace ddp::launcher {

std::string entries_key(const std::string& round_prefix, int node);
std::string scores_key(const std::string& round_prefix);

// Node 0: one measure of node `node`'s clock offset (its clock minus ours, ns) and the round trip
// it took, exchange number `n`; nullopt when node `node` did not answer within `timeout`.
struct ClockSample {
  std::int64_t offset_ns = 0;
  std::int64_t round_trip_ns = 0;
};
std::optional<ClockSample> measure_clock(rendezvous::Store& job, const std::string& round_prefix, int node, long long n,
                                         std::chrono::milliseconds timeout);

// Node k > 0: waits up to `timeout` for node 0's exchange number `n` and answers it with this
// node's clock. Returns the number of the next exchange to wait for: n + 1 when answered, node 0's
// current one when none came in time (it may have gone on without this node), else n.
long long answer_clock(rendezvous::Store& job, const std::string& round_prefix, int node, long long n,
                       std::chrono::milliseconds timeout);

// The entries a node publishes: `previous` and `latest` together (see above).
void publish_entries(rendezvous::Store& job, const std::string& round_prefix, const NodeEntries& entries);
// Node 0: node `node`'s published entries, if any (and readable).
std::optional<NodeEntries> read_entries(rendezvous::Store& job, const std::string& round_prefix, int node);

void publish_scores(rendezvous::Store& job, const std::string& round_prefix, const StragglerScores& scores);
std::optional<StragglerScores> read_scores(rendezvous::Store& job, const std::string& round_prefix);

}  // namespace ddp::launcher
