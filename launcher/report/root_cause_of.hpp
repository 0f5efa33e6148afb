// The round's root cause as a record (rdzv/root_cause.hpp), built from what this node saw: a
// worker's end (round_report.hpp) or a failure of no rank's (a hang, a lost node, a signal to the
// launcher, workers that could not start, a store value ddplaunch did not write). The words said
// about it are failure_summary.hpp's; the JSON of it run_recorder.hpp's. Pure (the builders of a
// failure of no rank's read the clock); never throw (but std::bad_alloc).
#pragma once

#include <string>

#include "launcher/rdzv/root_cause.hpp"
#include "launcher/report/round_report.hpp"

namespace ddp::launcher {

// Rank `rank`'s failure on node `node` (group rank) of host `host`, at its own time (failed_at()).
RootCause worker_root_cause(const RankOutcome& rank, int node, const std::string& host);

// A failure of no rank's on node `node` (-1: none to blame), now; `reason` is its one line.
RootCause node_root_cause(RootCause::Kind kind, int node, const std::string& host, std::string reason);

}  // namespace ddp::launcher
