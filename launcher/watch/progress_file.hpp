// --progress_file: the iteration the training says it has reached, read from a file it updates
// (Megatron-LM's latest_checkpointed_iteration.txt, or any file holding one integer). The
// no-progress breaker (agent/progress_tracker.hpp) reads it once before the first round and once
// at the end of every round. What the file may hold, and what each case means:
//   - one non-negative decimal integer, blanks and newlines around it allowed: that iteration;
//   - no file: nothing known on this node (no checkpoint yet, or the file lives on another node);
//   - a file that cannot be read, is not a regular file (a FIFO, a device: config/file_flag.hpp),
//     or holds anything else ("release", "12abc", empty): nothing known either, with the
//     problem said once in the log.
// A node that knows nothing never counts as "no progress" (progress_tracker.hpp).
#pragma once

#include <string>

namespace ddp::launcher {

struct ProgressFileReading {
  enum class State { Iteration, Missing, Unusable };
  State state = State::Missing;
  long long iteration = 0;  // when State::Iteration
  std::string problem;      // when State::Unusable: why, with the path and what it holds
  bool known() const { return state == State::Iteration; }
};

// Reads `path` (at most 4 KiB of it). Blocks on the file system only; never throws.
ProgressFileReading read_progress_file(const std::string& path);

}  // namespace ddp::launcher
