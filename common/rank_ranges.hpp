// Rank lists as people read them, written once for the launcher's reports and the runtime's
// timeout messages. Pure; never throw (but std::bad_alloc).
#pragma once

#include <string>
#include <vector>

namespace ddp {

// "0-3,5,7-8". `ranks` in any order, duplicates ignored.
std::string rank_ranges(std::vector<int> ranks);
// "rank 3" or "ranks 0-7 (8 ranks)".
std::string ranks_phrase(const std::vector<int>& ranks);

}  // namespace ddp
