// The status document with what the status exchange (status_exchange.hpp) adds to this
// launcher's own (status_json.hpp); the fields are in docs/json-output.md ("Live status").
// Pure and thread-safe; never throws (but std::bad_alloc).
#pragma once

#include <map>
#include <string>

namespace ddp::launcher {

// Group rank 0's: `own` with "other_nodes": one entry per other node of the round (group ranks 1
// to nnodes-1), {"group_rank": g, "status": its document as last read, or null when none was
// read or it is not a JSON object}.
std::string job_status_json(const std::string& own, const std::map<int, std::string>& others, int nnodes);

// Another node's: `own` with "job_page": node 0's page URL ("" -> null: not published yet).
std::string with_job_page(const std::string& own, const std::string& url);

}  // namespace ddp::launcher
