// The lines under a dump of every rank's stack (stack_dump.hpp) that say, once per dump and not
// per rank, why stacks have no Python lines or could not be read, and what would give them:
//   note: no Python lines for ranks 0-1 (2 ranks): the job runs with --no_worker_server and
//     py-spy is not installed (not beside /venv/bin/python, nor on PATH); drop --no_worker_server,
//     or pip install py-spy into the workers' environment
//   note: ranks 0-1 (2 ranks) could not be read: eu-stack may not ptrace them: <cause>; <fix>
// Pure; never throws (but std::bad_alloc).
#pragma once

#include <map>
#include <string>

#include "launcher/watch/stack_dump.hpp"

namespace ddp::launcher {

// The notes for these ranks' readings (rank → reading), each line ending in '\n'; "" when every
// Python rank gave Python lines and every rank was read or refused for no ptrace reason.
std::string stack_notes(const std::map<int, StackReading>& by_rank, const StackDumpOptions& options);

}  // namespace ddp::launcher
