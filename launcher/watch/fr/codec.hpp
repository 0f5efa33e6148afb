// A node's RankFr list (analysis.hpp) as one JSON value, for its answer in the store when
// the ranks of every node are analysed together (stacks_request.hpp's way). Only what the
// analysis needs travels: per rank its groups, per group at most its 4 oldest uncompleted and 2
// newest completed collectives and its 2 oldest uncompleted and newest completed p2p ops, and the
// innermost user frames of its traceback: a few KB a rank, whatever the Flight Recorder's size.
// Pure; never throw (but std::bad_alloc); thread-safe. The JSON stays inside this file.
#pragma once

#include <string>
#include <vector>

#include "launcher/watch/fr/analysis.hpp"

namespace ddp::launcher {

std::string encode_rank_fr(const std::vector<RankFr>& ranks);

// The inverse; a value that is not one (a stranger's write, an older launcher) gives the ranks it
// could read, possibly none.
std::vector<RankFr> decode_rank_fr(const std::string& value);

}  // namespace ddp::launcher
