// The round's root cause as a record (rdzv/root_cause.hpp), built from what this node saw: a
// worker's end (round_report.hpp) or a failure of no rank's (a hang, a lost node, a signal to the
// launcher, workers that could not start, a store value ddplaunch did not write). The words said
// about it are failure_summary.hpp's; the JSON of it run_recorder.hpp's. Pure (the builders of a
// failure of no rank's read the clock); never throw (but std::bad_alloc).
#pragma once

#include <chrono>
#include <string>

#include "launcher/rdzv/root_cause.hpp"
#include "launcher/report/round_report.hpp"

namespace ddp::launcher {

// Rank `rank`'s failure on node `node` (group rank) of host `host`, at its own time (failed_at()).
RootCause worker_root_cause(const RankOutcome& rank, int node, const std::string& host);
// The root rank of `report` (it has one) so, with, when it timed out in a collective, the
// collective this node's Flight Recorders showed (RoundReport::collective_record()).
RootCause worker_root_cause(const RoundReport& report, int node, const std::string& host);

// A failure of no rank's on node `node` (-1: none to blame), now; `reason` is its one line.
RootCause node_root_cause(RootCause::Kind kind, int node, const std::string& host, std::string reason);

// The ordering rule between a round's stop and its ranks' failures: `stop`, the record of what
// stopped the round (the outcome's), came before a rank's failure at `failed_at` when it is a
// failure of no rank's (a lost node, a hang, a signal to a launcher, workers that could not start,
// a store value ddplaunch did not write) that began before it. A lost node began when it went
// silent (`silent_since`, when known), not when it was found lost: a rank that fails after a peer
// stopped answering (its connections closed, its collective timed out) fails of that. A worker's
// record is ordered by the nodes' failure records instead, and a "reported" one has no time of its
// own: neither comes before. Pure.
bool began_before(const RootCause& stop, std::chrono::system_clock::time_point failed_at);
// When `cause` began: `silent_since` for a lost node whose silence is known, else its time. Pure.
std::chrono::system_clock::time_point began_at(const RootCause& cause);

}  // namespace ddp::launcher
