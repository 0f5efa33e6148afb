// A StatusSnapshot (status_board.hpp) as the JSON document the status endpoint serves; every
// field is described in docs/json-output.md ("Live status"). Pure and thread-safe.
#pragma once

#include <string>

#include "launcher/status/status_board.hpp"

namespace ddp::launcher {

// One JSON object on one line, ending in "\n". Text that is not UTF-8 (a host name) is replaced,
// never thrown on. Never throws (but std::bad_alloc).
std::string status_json(const StatusSnapshot& snapshot);

}  // namespace ddp::launcher
